/* libhb row helpers: gather the rows routed to one expert, add its gated outputs back, strided per-head
 * copies (the naive MLA form's keys), the MLA cache rows of every segment of a batch in one call, and a MoE
 * layer's resident routed experts in two calls from a per-layer table (hb_moe_up / hb_moe_down), or with its router
 * in one (hb_moe_layer). Copies of
 * decode size run on the caller, prefill-sized ones on the pool. hb_scatter_axpy is hb_axpy per row (y += g·ye
 * as a multiply then an add: -std=c11, no contraction), so it equals its serial counterpart bit for bit.
 * State: the calling thread's descriptor buffer of hb_moe_up / hb_moe_down (grown as needed). */
#include "hb.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

/* Large copies (prefill) split on the pool by rows. */
#define PAR_MIN 65536          /* floats moved before a call goes to the pool */

typedef struct { float *dst; const float *src; int dRow, dHead, sRow, sHead, H, n; } copy_job;
static void copy_task(void *c, int lo, int hi) {
  const copy_job *j = c;
  for (int s = lo; s < hi; s++)
    for (int h = 0; h < j->H; h++)
      memcpy(j->dst + (size_t)s * j->dRow + (size_t)h * j->dHead, j->src + (size_t)s * j->sRow + (size_t)h * j->sHead,
             (size_t)j->n * sizeof(float));
}
/* dst[s·dRow + h·dHead + i] = src[s·sRow + h·sHead + i] for s < S, h < H, i < n (sHead 0: every head gets
 * the same source; MLA's naive form assembles [k_nope_h ‖ k_pe] keys with it) */
void hb_copy_heads(float *dst, int dRow, int dHead, const float *src, int sRow, int sHead, int S, int H, int n) {
  if (!dst || !src || S <= 0 || H <= 0 || n <= 0) return;
  copy_job j = { dst, src, dRow, dHead, sRow, sHead, H, n };
  const size_t per = (size_t)H * n;
  if ((size_t)S * per >= PAR_MIN) hb_parallel_for(S, 1 + (int)(16384 / per), copy_task, &j);
  else copy_task(&j, 0, S);
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
/* hb_f32_to_f16 eight at a time: clamp (NaN kept: it is max/min's second operand), then vcvtps2ph to nearest even */
__attribute__((target("avx2,f16c"))) static void to_f16_f16c(const float *s, uint16_t *d, int64_t n) {
  const __m256 lo = _mm256_set1_ps(-65504.0f), hi = _mm256_set1_ps(65504.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_loadu_ps(s + i))),
                                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; i++) d[i] = hb_f32_to_f16(s[i]);
}
#endif

void hb_to_f16(const float *src, uint16_t *dst, int64_t n) {
  if (!src || !dst || n <= 0) return;
#if defined(__x86_64__) || defined(__i386__)
  if (hb_simd_level() >= HB_AVX2) { to_f16_f16c(src, dst, n); return; }
#endif
  for (int64_t i = 0; i < n; i++) dst[i] = hb_f32_to_f16(src[i]);
}

/* q8 row: blocks of HB_KV_Q8_BLOCK values, q = rint(x·127/amax) (half to even), scale amax/127 (0 for a zero block),
 * the bytes then the scales (plain scalar code: the same bits at every level) */
static void kv_q8_row(const float *x, int W, uint8_t *row) {
  int8_t *q = (int8_t *)row;
  for (int b0 = 0, k = 0; b0 < W; b0 += HB_KV_Q8_BLOCK, k++) {
    const int e = b0 + HB_KV_Q8_BLOCK < W ? b0 + HB_KV_Q8_BLOCK : W;
    float amax = 0.0f;
    for (int i = b0; i < e; i++) { const float a = fabsf(x[i]); if (a > amax || a != a) amax = a; }
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int i = b0; i < e; i++) q[i] = (int8_t)nearbyintf(x[i] * inv);
    const float d = amax / 127.0f;
    memcpy(row + W + 4 * (size_t)k, &d, 4);     /* (rows need not be 4-aligned) */
  }
}

void hb_kv_widen(int fmt, const void *row, int W, float *dst) {
  if (fmt == HB_KV_F16) { hb_f16_widen(row, dst, W); return; }
  if (fmt == HB_KV_Q8) {
    const int8_t *q = row;
    for (int b0 = 0, k = 0; b0 < W; b0 += HB_KV_Q8_BLOCK, k++) {   /* block by block (x86: the loop vectorizes) */
      const int e = b0 + HB_KV_Q8_BLOCK < W ? b0 + HB_KV_Q8_BLOCK : W;
      float d;
      memcpy(&d, (const uint8_t *)row + W + 4 * (size_t)k, 4);
      int i = b0;
#if defined(__aarch64__)
      if (hb_simd_level() == HB_NEON) /* the same exact convert and one rounded multiply per value */
        for (; i + 16 <= e; i += 16) {
          const int8x16_t v = vld1q_s8(q + i);
          const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_high_s8(v);
          vst1q_f32(dst + i, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), d));
          vst1q_f32(dst + i + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), d));
          vst1q_f32(dst + i + 8, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), d));
          vst1q_f32(dst + i + 12, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(hi)), d));
        }
#endif
      for (; i < e; i++) dst[i] = (float)q[i] * d;
    }
    return;
  }
  memcpy(dst, row, (size_t)W * sizeof(float));
}

/* Segment g (desc[3g..3g+2] = address of its cache row pos0, r0, n): cache row r = [lat[r0+r] (kvr) ‖
 * kpe[(r0+r)·kpeRow .. + dr]] for r < n, rows of kvr + dr values in fmt (HB_KV_*: f16 rounds to nearest even,
 * saturated, hb_to_f16; q8 quantizes blocks of 32, kv_q8_row). */
void hb_kv_write(int nseg, const double *desc, const float *lat, int kvr, const float *kpe, int kpeRow, int dr, int fmt) {
  if (nseg <= 0 || !desc || !lat || !kpe || kvr < 0 || dr < 0) return;
  const int W = kvr + dr;
  const size_t rb = hb_kv_row_bytes(fmt, W);
  float *tmp = fmt == HB_KV_Q8 ? malloc(sizeof(float) * (size_t)W) : NULL;
  if (fmt == HB_KV_Q8 && !tmp) return;
  for (int g = 0; g < nseg; g++) {
    uint8_t *dst = (uint8_t *)(uintptr_t)desc[3 * g];
    const int r0 = (int)desc[3 * g + 1], n = (int)desc[3 * g + 2];
    if (!dst || r0 < 0) continue;
    for (int r = 0; r < n; r++) {
      const float *a = lat + (size_t)(r0 + r) * kvr, *b = kpe + (size_t)(r0 + r) * kpeRow;
      uint8_t *d = dst + (size_t)r * rb;
      if (fmt == HB_KV_F16) {
        hb_to_f16(a, (uint16_t *)d, kvr);
        hb_to_f16(b, (uint16_t *)d + kvr, dr);
      } else if (fmt == HB_KV_Q8) {
        memcpy(tmp, a, (size_t)kvr * sizeof(float));
        memcpy(tmp + kvr, b, (size_t)dr * sizeof(float));
        kv_q8_row(tmp, W, d);
      } else {
        memcpy(d, a, (size_t)kvr * sizeof(float));
        memcpy(d + 4 * (size_t)kvr, b, (size_t)dr * sizeof(float));
      }
    }
  }
  free(tmp);
}

/* MLA's new cache rows from a = W_kva h [S, kvr + dr] in one call: lat [S, kvr] = a's latents copied then RMS-normed
 * (hb_rmsnorm, weights normw, eps), a's last dr of each row roped in place at pos [S] (hb_rope), then hb_kv_write of
 * the segments (desc as its). With ikdesc, the indexer's too (DSA full layers): kI [S, hd] <- LayerNorm(kI; lnw, lnb,
 * lneps), its first dr of each row roped at pos, then row r0 + r of segment g (ikdesc[3g..3g+2]: address of its cache
 * row pos0 (f32 rows of hd), r0, n) copied there, r < n. The same calls as made one by one: the same bits. */
void hb_mla_kv(int exact, int npre, const double *pre, int preI, int nseg, const double *desc, float *a, int S, int kvr,
               int dr, float *lat, const float *normw, float eps, const int32_t *pos, double theta, int fmt,
               const double *ikdesc, float *kI, int hd, const float *lnw, const float *lnb, float lneps) {
  if (!a || !lat || !normw || !pos || S <= 0 || kvr <= 0 || dr < 0 || (npre > 0 && !pre)) return;
  if (npre > 0) hb_matmul_many(exact, npre, pre, preI);
  const int W = kvr + dr;
  hb_copy_heads(lat, kvr, 0, a, W, 0, S, 1, kvr);
  hb_rmsnorm(lat, normw, lat, S, kvr, eps);
  hb_rope(a + kvr, S, W, 1, 0, dr, pos, theta);
  hb_kv_write(nseg, desc, lat, kvr, a + kvr, W, dr, fmt);
  if (!ikdesc || !kI || !lnw || !lnb || hd <= 0 || dr > hd) return;
  hb_layernorm(kI, lnw, lnb, kI, S, hd, lneps);
  hb_rope(kI, S, hd, 1, 0, dr, pos, theta);
  hb_kv_write(nseg, ikdesc, kI, hd, kI, hd, 0, HB_KV_F32);
}

typedef struct { const float *x; const int32_t *rows; float *out; int D; } gather_job;
static void gather_task(void *c, int lo, int hi) {
  const gather_job *j = c;
  for (int r = lo; r < hi; r++) memcpy(j->out + (size_t)r * j->D, j->x + (size_t)j->rows[r] * j->D, (size_t)j->D * sizeof(float));
}
/* out[j, :] = x[rows[j], :] for j < n; rows of D floats */
void hb_gather_rows(const float *x, int D, const int32_t *rows, int n, float *out) {
  if (!x || !rows || !out || D <= 0 || n <= 0) return;
  gather_job j = { x, rows, out, D };
  if ((size_t)n * D >= PAR_MIN) hb_parallel_for(n, 1 + 16384 / D, gather_task, &j);
  else gather_task(&j, 0, n);
}

typedef struct { float *y; const int32_t *start, *list; const float *gates, *ye; int D; } scatter_job;
static void scatter_task(void *c, int lo, int hi) {
  const scatter_job *s = c;
  for (int r = lo; r < hi; r++) {
    float *yr = s->y + (size_t)r * s->D;
    for (int k = s->start[r]; k < s->start[r + 1]; k++) {
      const int j = s->list[k];
      const float *xr = s->ye + (size_t)j * s->D, a = s->gates[j];
      for (int i = 0; i < s->D; i++) yr[i] += a * xr[i];
    }
  }
}
/* y[rows[j], i] += gates[j] · ye[j, i] for j < n (in order), i < D. Large calls (a prefill's experts) go to the
 * pool by rows of y: each row's terms in ascending j, as the serial loop adds them (the same bits). Split by
 * columns it measured ~1.8x slower than serial (the rows of y then move between cores on every call). */
void hb_scatter_axpy(float *y, int D, const int32_t *rows, const float *gates, const float *ye, int n) {
  if (!y || !rows || !gates || !ye || D <= 0 || n <= 0) return;
  int R = 0;
  for (int j = 0; j < n; j++) if (rows[j] >= R) R = rows[j] + 1;
  int32_t *start = (size_t)n * D >= PAR_MIN ? malloc(((size_t)R + 1 + n) * sizeof(int32_t)) : NULL;
  if (!start) { /* small (decode) or out of memory: serial */
    for (int j = 0; j < n; j++) {
      float *yr = y + (size_t)rows[j] * D;
      const float *xr = ye + (size_t)j * D, a = gates[j];
      for (int i = 0; i < D; i++) yr[i] += a * xr[i];
    }
    return;
  }
  int32_t *list = start + R + 1; /* counting sort of j by destination row, j ascending within a row */
  memset(start, 0, ((size_t)R + 1) * sizeof(int32_t));
  for (int j = 0; j < n; j++) start[rows[j] + 1]++;
  for (int r = 0; r < R; r++) start[r + 1] += start[r];
  for (int j = 0; j < n; j++) list[start[rows[j]]++] = j;
  for (int r = R; r > 0; r--) start[r] = start[r - 1];
  start[0] = 0;
  scatter_job job = { y, start, list, gates, ye, D };
  hb_parallel_for(R, 1 + 16384 / (D * (n / R + 1)), scatter_task, &job);
  free(start);
}

/* ---- a MoE layer's routed experts from a per-expert table (moe.ts `resident`: every expert of the union in memory) ----
 * tab [E, HB_MOE_TAB]: expert e's gate, up and down as hb.ts packMat writes them (HB_MOE_W doubles each: fmt, gs, O,
 * W, scales), then down's I. Both calls build hb_matmul_many's descriptor here, in the order moe.ts's ManyBuilder
 * adds did (so the same bits): per expert of uni (ascending) its gate then its up on its rows of x (by index), then
 * every down, the shared expert's last. */

static double *moe_desc(int n) {
  static _Thread_local void *buf;
  static _Thread_local size_t cap;
  return hb_grow(&buf, &cap, (size_t)n * HB_MANY_DESC * sizeof(double));
}

static void moe_put(double *d, const double *w, const void *y, const void *x, int S, const void *rows) {
  for (int i = 0; i < HB_MOE_W; i++) d[i] = w[i];
  d[5] = (double)(uintptr_t)y; d[6] = (double)(uintptr_t)x; d[7] = S; d[8] = (double)(uintptr_t)rows; d[9] = 0;
}

/* hg / hu [n, F] rows off[e].. = W_gate,e / W_up,e · x[rows[off[e]..off[e+1])] [*, D] for each e of uni [nu] */
void hb_moe_up(int exact, int nu, const int32_t *uni, const int32_t *off, const int32_t *rows, const double *tab,
               int D, int F, const float *x, float *hg, float *hu) {
  if (nu <= 0 || !uni || !off || !rows || !tab || !x || !hg || !hu || D <= 0 || F <= 0) return;
  double *d = moe_desc(2 * nu);
  if (!d) return;
  for (int u = 0; u < nu; u++) {
    const int e = uni[u], r0 = off[e], k = off[e + 1] - r0;
    const double *w = tab + (size_t)e * HB_MOE_TAB;
    moe_put(d + HB_MANY_DESC * (2 * u), w, hg + (size_t)r0 * F, x, k, rows + r0);
    moe_put(d + HB_MANY_DESC * (2 * u + 1), w + HB_MOE_W, hu + (size_t)r0 * F, x, k, rows + r0);
  }
  hb_matmul_many(exact, 2 * nu, d, D);
}

/* hg <- silu(hg) ⊙ hu [n, F]; ye [n, D] = W_down,e · hg rows of e; with shd (the shared expert's down packed, its
 * I = F): sg <- silu(sg) ⊙ su [S, F] and sy [S, D] = W_down,shared · sg in the same call; then y [S, D] = 0,
 * y[rows[j]] += gates[j] · ye[j] (j < n, in order), and with shd y += sy. n = off[E] rows in all. */
void hb_moe_down(int exact, int nu, const int32_t *uni, const int32_t *off, const int32_t *rows, const float *gates,
                 const double *tab, int D, int F, int n, float *hg, const float *hu, float *ye, int S, float *y,
                 const double *shd, float *sg, const float *su, float *sy) {
  if (nu <= 0 || !uni || !off || !rows || !gates || !tab || !hg || !hu || !ye || !y || D <= 0 || F <= 0 || n <= 0 || S <= 0) return;
  if (shd && (!sg || !su || !sy)) return;
  double *d = moe_desc(nu + 1);
  if (!d) return;
  hb_swiglu(hg, hu, hg, n * F);
  if (shd) hb_swiglu(sg, su, sg, S * F);
  for (int u = 0; u < nu; u++) {
    const int e = uni[u], r0 = off[e], k = off[e + 1] - r0;
    moe_put(d + HB_MANY_DESC * u, tab + (size_t)e * HB_MOE_TAB + 2 * HB_MOE_W, ye + (size_t)r0 * D, hg + (size_t)r0 * F, k, NULL);
  }
  if (shd) moe_put(d + HB_MANY_DESC * nu, shd, sy, sg, S, NULL);
  hb_matmul_many(exact, nu + (shd ? 1 : 0), d, F);
  memset(y, 0, (size_t)S * D * sizeof(float));
  hb_scatter_axpy(y, D, rows, gates, ye, n);
  if (shd) hb_add(y, sy, S * D);
}

/* (the router's call,) route, then (every chosen expert live) up and down: the same calls as moe.ts makes one by one,
 * so the same bits */
int hb_moe_layer(int exact, int npre, const double *pre, int preI, int S, const double *p, const float *z,
                 const float *bias, int32_t *experts, float *gates, int32_t *off, int32_t *rows, float *rgates,
                 int32_t *uni, int32_t *cnt, const int32_t *ver, const int32_t *row, const double *tab, const float *x,
                 float *hg, float *hu, float *ye, float *y, const double *shd, float *sg, const float *su, float *sy) {
  if (!p || !off || !ver || !row || (npre > 0 && !pre)) return -1;
  if (npre > 0) hb_matmul_many(exact, npre, pre, preI);
  const int E = (int)p[0], K = (int)p[1], D = (int)p[6], F = (int)p[7];
  const int nu = hb_moe_route(S, E, K, z, bias, (int)p[2], (int)p[3], (int)p[4], p[5], experts, gates, off, rows, rgates, uni, cnt);
  if (nu <= 0) return nu;
  for (int u = 0; u < nu; u++)
    if (ver[uni[u]] == 0 || row[uni[u]] != ver[uni[u]]) return -2 - nu;
  hb_moe_up(exact, nu, uni, off, rows, tab, D, F, x, hg, hu);
  hb_moe_down(exact, nu, uni, off, rows, rgates, tab, D, F, off[E], hg, hu, ye, S, y, shd, sg, su, sy);
  return nu;
}
