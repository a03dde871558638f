/* libhb DSA family (spec §3.3): the lightning-indexer scores (hb_index_scores: the scalar reference and
 * the dispatch; numerics in dsa.h, vector kernels in dsa_x86.c), their fast-mode twin over int8 keys
 * (hb_ik_quant, hb_index_scores_q8) and the top-k key selection with the spec's tie rule (hb_dsa_select).
 * State: the calling thread's scratch for quantized queries; select needs only a stack histogram. */
#include "dsa.h"
#include "matmul_q8.h"   /* hb_q8_quant: keys and queries are quantized as the fast matmuls' activations */
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- hb_index_scores (numerics: dsa.h) ---------------- */
/* Work item = (block of IDX_RB rows, block of IDX_TB keys): the vector kernels transpose each key block once
 * for all the rows of the item; items no row of the block reaches (causal prefill) are skipped. */
#define IDX_RB 32
#define IDX_TB 64
#define IDX_INLINE_MACS (1u << 18)   /* below this a job runs on the caller (~2 us of compute; a pool round trip costs ~1-2) */

/* the scalar reference: one (row, key) at a time in the order of dsa.h */
static void idx_block_ref(const idx_ctx *c, int t0, int t1, int s0, int s1) {
  for (int s = s0; s < s1; s++) {
    const float *q = c->qI + (ptrdiff_t)s * c->nh * c->hd, *w = c->w + (ptrdiff_t)s * c->nh;
    const int te = t1 < c->nk[s] ? t1 : c->nk[s];
    for (int t = t0; t < te; t++) {
      const float *k = c->kI + (ptrdiff_t)t * c->hd;
      float score = 0.0f;
      for (int h = 0; h < c->nh; h++) {
        float a = 0.0f;
        for (int i = 0; i < c->hd; i++) a = fmaf(q[(ptrdiff_t)h * c->hd + i], k[i], a);
        const float x = a * c->scale;
        score = fmaf(w[h], x > 0.0f ? x : 0.0f, score);
      }
      c->out[(ptrdiff_t)s * c->outRow + t] = score;
    }
  }
}

typedef struct { idx_ctx c; int nkb; idx_block_fn fn; } idx_job;

static void idx_task(void *ctx, int lo, int hi) {
  const idx_job *j = ctx;
  for (int it = lo; it < hi; it++) {
    const int s0 = (it / j->nkb) * IDX_RB, t0 = (it % j->nkb) * IDX_TB;
    const int s1 = s0 + IDX_RB < j->c.S ? s0 + IDX_RB : j->c.S, t1 = t0 + IDX_TB < j->c.maxn ? t0 + IDX_TB : j->c.maxn;
    int reach = 0;
    for (int s = s0; s < s1; s++) if (j->c.nk[s] > reach) reach = j->c.nk[s];
    if (reach > t0) j->fn(&j->c, t0, t1 < reach ? t1 : reach, s0, s1);
  }
}

/* fast mode's scalar reference: one (row, key) at a time in the order of dsa.h */
static inline int k8_at(const idx_ctx *c, int t, int i) {
  return (int)c->k8[(size_t)(t >> 4) * 16 * (size_t)c->hd + (size_t)(i >> 2) * 64 + (size_t)(t & 15) * 4 + (size_t)(i & 3)] - 128;
}
static void idx_block_q8_ref(const idx_ctx *c, int t0, int t1, int s0, int s1) {
  for (int s = s0; s < s1; s++) {
    const int te = t1 < c->nk[s] ? t1 : c->nk[s];
    for (int t = t0; t < te; t++) {
      float score = 0.0f;
      for (int h = 0; h < c->nh; h++) {
        const int8_t *q = c->q8 + ((ptrdiff_t)s * c->nh + h) * c->hd;
        int32_t dot = 0;
        for (int i = 0; i < c->hd; i++) dot += q[i] * k8_at(c, t, i);
        const float x = ((float)dot * c->cq[(ptrdiff_t)s * c->nh + h]) * c->dk[t];
        score = fmaf(c->w[(ptrdiff_t)s * c->nh + h], x > 0.0f ? x : 0.0f, score);
      }
      c->out[(ptrdiff_t)s * c->outRow + t] = score;
    }
  }
}

static idx_block_fn idx_block_for(int level, int hd) {
#if defined(__x86_64__) || defined(__i386__)
  if (hd <= IDX_MAXHD && level >= HB_AVX512) return hb_idx_block_avx512;
  if (hd <= IDX_MAXHD && level >= HB_AVX2) return hb_idx_block_avx2;
#elif defined(__aarch64__)
  if (hd <= IDX_MAXHD && level == HB_NEON) return hb_idx_block_neon;
#endif
  (void)level; (void)hd;
  return idx_block_ref;
}

static int max_nk(int S, const int32_t *nk) {
  int m = 0;
  for (int s = 0; s < S; s++) if (nk[s] > m) m = nk[s];
  return m;
}

/* every (row block, key block) item of j on the pool; jobs under inline_macs run on the caller */
static void idx_run(idx_job *j, size_t inline_macs) {
  const idx_ctx *c = &j->c;
  j->nkb = (c->maxn + IDX_TB - 1) / IDX_TB;
  const int items = ((c->S + IDX_RB - 1) / IDX_RB) * j->nkb;
  size_t macs = 0;
  for (int s = 0; s < c->S; s++) macs += (size_t)(c->nk[s] > 0 ? c->nk[s] : 0) * (size_t)c->nh * (size_t)c->hd;
  hb_parallel_for(items, macs < inline_macs ? items : 1, idx_task, j);   /* small jobs: no pool round trip */
}

/* qI [S, nh*hd], w [S, nh], kI [T, hd] -> out[s*outRow + t] = Σ_h w[s,h]·ReLU(scale·qI[s,h]·kI[t]), t < nk[s] */
void hb_index_scores(int S, int nh, int hd, const float *qI, const float *w, const float *kI, const int32_t *nk,
                     float *out, int outRow, float scale) {
  if (S <= 0 || nh <= 0 || hd < 0 || !qI || !w || !kI || !nk || !out) return;
  const int maxn = max_nk(S, nk);
  if (maxn == 0) return;
  idx_job j = { { S, nh, hd, maxn, qI, w, kI, nk, out, outRow, scale }, 0, idx_block_for(hb_simd_level(), hd) };
  idx_run(&j, IDX_INLINE_MACS);
}

/* ---------------- fast mode: int8 keys (numerics: dsa.h) ---------------- */
/* keys kI [*, hd] rows [t0, t1) -> k8 (blocks of 16 keys, dsa.h) and dk */
void hb_ik_quant(const float *kI, int hd, int t0, int t1, uint8_t *k8, float *dk) {
  if (!kI || !k8 || !dk || hd <= 0 || hd % 4 || hd > IDX_MAXHD || t0 < 0) return;
  int8_t q[IDX_MAXHD];
  for (int t = t0; t < t1; t++) {
    dk[t] = hb_q8_quant(kI + (ptrdiff_t)t * hd, hd, q);
    uint8_t *b = k8 + (size_t)(t >> 4) * 16 * (size_t)hd + (size_t)(t & 15) * 4;
    for (int i = 0; i < hd; i++) b[(size_t)(i >> 2) * 64 + (size_t)(i & 3)] = (uint8_t)(q[i] + 128);
  }
}

/* 1 when the fast indexer has its kernel at this SIMD level (elsewhere the f32 kernels are faster) */
int hb_index_q8_ok(int hd) {
#if defined(__x86_64__) || defined(__i386__)
  return hd > 0 && hd % 4 == 0 && hd <= IDX_MAXHD && hb_simd_level() >= HB_AVX512VNNI;
#else
  (void)hd;
  return 0;
#endif
}

/* hb_index_scores over keys quantized by hb_ik_quant (k8, dk): the queries are quantized here, per head;
 * ref: the scalar reference whatever the SIMD level */
static void index_q8(int ref, int S, int nh, int hd, const float *qI, const float *w, const uint8_t *k8, const float *dk,
                     const int32_t *nk, float *out, int outRow, float scale) {
  if (S <= 0 || nh <= 0 || hd <= 0 || hd % 4 || hd > IDX_MAXHD || !qI || !w || !k8 || !dk || !nk || !out) return;
  const int maxn = max_nk(S, nk);
  if (maxn == 0) return;
  static _Thread_local int8_t *buf;
  static _Thread_local size_t cap;
  const size_t rows = (size_t)S * nh, need = rows * (size_t)hd + rows * 8;
  if (need > cap) {
    free(buf);
    buf = malloc(need);
    cap = buf ? need : 0;
    if (!buf) return;
  }
  float *cq = (float *)(void *)buf;
  int32_t *qs = (int32_t *)(cq + rows);
  int8_t *q8 = (int8_t *)(qs + rows);
  for (size_t r = 0; r < rows; r++) {
    int8_t *q = q8 + r * (size_t)hd;
    cq[r] = hb_q8_quant(qI + r * (size_t)hd, hd, q) * scale;
    int32_t sum = 0;
    for (int i = 0; i < hd; i++) sum += q[i];
    qs[r] = 128 * sum;
  }
  idx_job j = { { S, nh, hd, maxn, qI, w, NULL, nk, out, outRow, scale, k8, dk, q8, cq, qs }, 0,
#if defined(__x86_64__) || defined(__i386__)
                !ref && hb_index_q8_ok(hd) ? hb_idx_block_q8_vnni : idx_block_q8_ref };
#else
                idx_block_q8_ref };
  (void)ref;
#endif
  idx_run(&j, 4 * IDX_INLINE_MACS);   /* ~4x the f32 kernel's rate */
}

void hb_index_scores_q8(int S, int nh, int hd, const float *qI, const float *w, const uint8_t *k8, const float *dk,
                        const int32_t *nk, float *out, int outRow, float scale) {
  index_q8(0, S, nh, hd, qI, w, k8, dk, nk, out, outRow, scale);
}
/* the same with the scalar reference whatever the SIMD level (tests) */
void hb_index_scores_q8_ref(int S, int nh, int hd, const float *qI, const float *w, const uint8_t *k8, const float *dk,
                            const int32_t *nk, float *out, int outRow, float scale) {
  index_q8(1, S, nh, hd, qI, w, k8, dk, nk, out, outRow, scale);
}

/* ---------------- hb_dsa_select ---------------- */
/* Order-preserving float -> uint32 key (-0 mapped to +0 so key equality == float equality, NaN aside). */
static inline uint32_t fkey(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Radix select of the topk-th largest key in 3 passes (11+11+10 bits), each scanning only the buckets its
 * keys fell in (from the top, or from the bottom when the rank is in the lower half: rows of few more keys
 * than topk), then one ascending collection pass: every key > thr, and the first `need` keys == thr, so rows
 * come out sorted and the tie rule is exact. */
static void select_row(const float *x, int n, int topk, int32_t *sel, int32_t *nsel, int simd) {
  if (n <= topk) {
    for (int t = 0; t < n; t++) sel[t] = t;
    *nsel = n;
    return;
  }
  static const int shift[3] = { 21, 10, 0 }, width[3] = { 11, 11, 10 };
  uint32_t prefix = 0, hist[2048];
  int need = topk; /* rank of thr among the keys that share `prefix` (1 = largest) */
  for (int pass = 0; pass < 3; pass++) {
    const int sh = shift[pass], nb = 1 << width[pass], hs = sh + width[pass]; /* bits >= hs already fixed */
    memset(hist, 0, sizeof(uint32_t) * (size_t)nb);
    int lo = nb - 1, hi = 0, total = 0;
#if defined(__x86_64__) || defined(__i386__)
    if (simd && pass > 0) total = hb_sel_hist_avx512(x, n, prefix, hs, sh, nb, hist, &lo, &hi);
    else
#endif
    for (int t = 0; t < n; t++) {
      uint32_t kk = fkey(x[t]);
      if (hs == 32 || (kk >> hs) == (prefix >> hs)) {
        const int d = (int)((kk >> sh) & (uint32_t)(nb - 1));
        hist[d]++;
        total++;
        if (d < lo) lo = d;
        if (d > hi) hi = d;
      }
    }
    int b;
    if (2 * need <= total) { /* from the top: rank need among the largest */
      for (b = hi; b > lo; b--) { if ((int)hist[b] >= need) break; need -= (int)hist[b]; }
    } else {                  /* from the bottom: the same key is rank total - need + 1 among the smallest */
      int r = total - need + 1;
      for (b = lo; b < hi; b++) { if ((int)hist[b] >= r) break; r -= (int)hist[b]; }
      need = (int)hist[b] - r + 1;
    }
    prefix |= (uint32_t)b << sh;
  }
  int m = 0;
#if defined(__x86_64__) || defined(__i386__)
  if (simd) m = hb_sel_collect_avx512(x, n, prefix, need, sel);
  else
#endif
  for (int t = 0; t < n && m < topk; t++) {
    uint32_t kk = fkey(x[t]);
    if (kk > prefix) sel[m++] = t;
    else if (kk == prefix && need > 0) { sel[m++] = t; need--; }
  }
  *nsel = m;
}

typedef struct { const float *scores; int scoreRow; const int32_t *nk; int topk; int32_t *sel, *nsel; int simd; } sel_ctx;

static void sel_task(void *ctx, int lo, int hi) {
  const sel_ctx *c = ctx;
  for (int s = lo; s < hi; s++)
    select_row(c->scores + (ptrdiff_t)s * c->scoreRow, c->nk[s] > 0 ? c->nk[s] : 0, c->topk,
               c->sel + (ptrdiff_t)s * c->topk, c->nsel + s, c->simd);
}

/* scores [S, scoreRow], nk [S] -> sel [S, topk] ascending, nsel [S] = min(nk, topk); spec §3.3 tie rule */
void hb_dsa_select(int S, const float *scores, int scoreRow, const int32_t *nk, int topk, int32_t *sel,
                   int32_t *nsel) {
  if (S <= 0 || !scores || !nk || !sel || !nsel) return;
  if (topk <= 0) { for (int s = 0; s < S; s++) nsel[s] = 0; return; }
  sel_ctx c = { scores, scoreRow, nk, topk, sel, nsel, hb_simd_level() >= HB_AVX512 };
  hb_parallel_for(S, 1, sel_task, &c);
}
