/* libhb row helpers: gather the rows routed to one expert, add its gated outputs back, strided per-head
 * copies (the naive MLA form's keys) and the MLA cache rows of every segment of a batch in one call. Copies
 * of decode size run on the caller, prefill-sized ones on the pool. hb_scatter_axpy is hb_axpy per row
 * (y += g·ye as a multiply then an add: -std=c11, no contraction), so it equals its serial counterpart bit
 * for bit.
 * Holds no state. */
#include "hb.h"
#include <string.h>

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

/* Segment g (desc[3g..3g+2] = address of its cache row pos0, r0, n): cache row r = [lat[r0+r] (kvr) ‖
 * kpe[(r0+r)·kpeRow .. + dr]] for r < n, cache rows kvr + dr wide; f16: the cache holds IEEE halves (hb_to_f16). */
void hb_kv_write(int nseg, const double *desc, const float *lat, int kvr, const float *kpe, int kpeRow, int dr, int f16) {
  if (nseg <= 0 || !desc || !lat || !kpe || kvr < 0 || dr < 0) return;
  const size_t W = (size_t)kvr + (size_t)dr;
  for (int g = 0; g < nseg; g++) {
    void *dst = (void *)(uintptr_t)desc[3 * g];
    const int r0 = (int)desc[3 * g + 1], n = (int)desc[3 * g + 2];
    if (!dst || r0 < 0) continue;
    for (int r = 0; r < n; r++) {
      const float *a = lat + (size_t)(r0 + r) * kvr, *b = kpe + (size_t)(r0 + r) * kpeRow;
      if (f16) {
        uint16_t *d = (uint16_t *)dst + (size_t)r * W;
        hb_to_f16(a, d, kvr);
        hb_to_f16(b, d + kvr, dr);
      } else {
        float *d = (float *)dst + (size_t)r * W;
        memcpy(d, a, (size_t)kvr * sizeof(float));
        memcpy(d + kvr, b, (size_t)dr * sizeof(float));
      }
    }
  }
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

/* y[rows[j], i] += gates[j] · ye[j, i] for j < n (in order), i < D. Serial: split by columns on the pool it
 * measured ~1.8x slower (the rows of y, warm in this core's cache, then move between cores on every call). */
void hb_scatter_axpy(float *y, int D, const int32_t *rows, const float *gates, const float *ye, int n) {
  if (!y || !rows || !gates || !ye || D <= 0) return;
  for (int j = 0; j < n; j++) {
    float *yr = y + (size_t)rows[j] * D;
    const float *xr = ye + (size_t)j * D, a = gates[j];
    for (int i = 0; i < D; i++) yr[i] += a * xr[i];
  }
}
