/* libhb lightning-indexer kernels for x86 (numerics and contract: dsa.h): keys in lanes. A block of 16
 * (AVX-512) or 8 (AVX2) keys is transposed on the stack to kt [hd][lanes] (keys past the block's end are
 * zero and never stored), then for every row and every group of 8 heads, 8 accumulators run the FMA chain
 * over i with the query element broadcast; ReLU and the heads' FMA chain follow, and the row's scores of
 * the block are stored under a mask (t < nk[s]). AVX-512 takes the blocks in pairs (32 keys, 16 accumulators):
 * one broadcast feeds two FMAs, which the broadcasts had capped (2.3x at 8k-32k keys, 2026-12-06). Fast mode
 * (AVX-512 VNNI): keys already int8 in blocks of 16 (dsa.h), so a block is 16 keys in the lanes of hd/4 vectors
 * as stored: vpdpbusd with 4 query bytes broadcast, eight heads at a time over a pair of blocks. Holds no state. */
#include "dsa.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
#define T256 __attribute__((target("avx2,fma")))
#define INL static inline __attribute__((always_inline))

/* the key rows [t, t + n) ∩ [0, maxn) toward the cache while the current block computes (they are streamed) */
INL void prefetch_keys(const idx_ctx *c, int t, int n) {
  if (t >= c->maxn) return;
  if (t + n > c->maxn) n = c->maxn - t;
  const char *p = (const char *)(c->kI + (ptrdiff_t)t * c->hd), *e = (const char *)(c->kI + (ptrdiff_t)(t + n) * c->hd);
  for (; p < e; p += 64) _mm_prefetch(p, _MM_HINT_T0);
}

/* ================================ AVX-512: 16 keys per block ================================ */
#define PD(x) _mm512_castps_pd(x)
#define PS(x) _mm512_castpd_ps(x)
T512 INL void tr16(__m512 r[16]) {   /* r[j][i] -> r[i][j] */
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) { t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]); t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]); }
  for (int i = 0; i < 16; i += 4) {
    r[i] = PS(_mm512_unpacklo_pd(PD(t[i]), PD(t[i + 2]))); r[i + 1] = PS(_mm512_unpackhi_pd(PD(t[i]), PD(t[i + 2])));
    r[i + 2] = PS(_mm512_unpacklo_pd(PD(t[i + 1]), PD(t[i + 3]))); r[i + 3] = PS(_mm512_unpackhi_pd(PD(t[i + 1]), PD(t[i + 3])));
  }
  for (int i = 0; i < 4; i++) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88); t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88); t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; i++) { r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88); r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd); }
}

/* kt [hd][16] = keys t0..t0+n-1 (n ≤ 16) transposed, zero past n */
T512 static void kt16(const idx_ctx *c, int t0, int n, float *kt) {
  const int hd = c->hd;
  for (int i0 = 0; i0 < hd; i0 += 16) {
    const int left = hd - i0;
    const __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
    __m512 r[16];
    for (int j = 0; j < 16; j++) r[j] = j < n ? _mm512_maskz_loadu_ps(m, c->kI + (ptrdiff_t)(t0 + j) * hd + i0) : _mm512_setzero_ps();
    tr16(r);
    for (int i = 0; i < 16 && i < left; i++) _mm512_store_ps(kt + 16 * (i0 + i), r[i]);
  }
}

/* one row against the block(s) of 16 keys transposed at kt0 (and kt1 when two): 8 heads at a time, each query
 * element broadcast once for both blocks (AVX-512 runs one FMA per broadcast with one block, two with two) */
T512 INL void row16(const idx_ctx *c, int s, const float *kt0, const float *kt1, int two, __m512 *o0, __m512 *o1) {
  const int nh = c->nh, hd = c->hd;
  const __m512 sc = _mm512_set1_ps(c->scale), zero = _mm512_setzero_ps();
  const float *q = c->qI + (ptrdiff_t)s * nh * hd, *w = c->w + (ptrdiff_t)s * nh;
  __m512 score0 = zero, score1 = zero;
  for (int h0 = 0; h0 < nh; h0 += 8) {
    const int m = nh - h0 < 8 ? nh - h0 : 8;
    const float *qh[8];
    for (int j = 0; j < 8; j++) qh[j] = q + (ptrdiff_t)(h0 + (j < m ? j : 0)) * hd; /* spare lanes redo head h0 */
    __m512 a0 = zero, a1 = zero, a2 = zero, a3 = zero, a4 = zero, a5 = zero, a6 = zero, a7 = zero;
    __m512 b0 = zero, b1 = zero, b2 = zero, b3 = zero, b4 = zero, b5 = zero, b6 = zero, b7 = zero;
#define STEP(j) { const __m512 x = _mm512_set1_ps(qh[j][i]); a##j = _mm512_fmadd_ps(x, k, a##j); if (two) b##j = _mm512_fmadd_ps(x, l, b##j); }
    for (int i = 0; i < hd; i++) {
      const __m512 k = _mm512_load_ps(kt0 + 16 * i), l = two ? _mm512_load_ps(kt1 + 16 * i) : zero;
      STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7)
    }
#undef STEP
    const __m512 a[8] = { a0, a1, a2, a3, a4, a5, a6, a7 }, b[8] = { b0, b1, b2, b3, b4, b5, b6, b7 };
    for (int j = 0; j < m; j++) {  /* max(x, +0): +0 for x ≤ 0 or NaN, as the reference's x > 0 ? x : 0 */
      const __m512 wj = _mm512_set1_ps(w[h0 + j]);
      score0 = _mm512_fmadd_ps(wj, _mm512_max_ps(_mm512_mul_ps(a[j], sc), zero), score0);
      if (two) score1 = _mm512_fmadd_ps(wj, _mm512_max_ps(_mm512_mul_ps(b[j], sc), zero), score1);
    }
  }
  *o0 = score0;
  *o1 = score1;
}
T512 static void row16_one(const idx_ctx *c, int s, const float *kt0, __m512 *o) { __m512 u; row16(c, s, kt0, kt0, 0, o, &u); }
T512 static void row16_two(const idx_ctx *c, int s, const float *kt0, const float *kt1, __m512 *o0, __m512 *o1) { row16(c, s, kt0, kt1, 1, o0, o1); }

/* keys in pairs of blocks of 16 (t0 is a multiple of 32: IDX_TB); a row that reaches into the second block
 * runs both at once, one that ends in the first runs it alone */
T512 void hb_idx_block_avx512(const idx_ctx *c, int t0, int t1, int s0, int s1) {
  float kt[2 * IDX_MAXHD * 16] __attribute__((aligned(64)));
  float *kt1 = kt + IDX_MAXHD * 16;
  for (int tb = t0; tb < t1; tb += 32) {
    const int nb = t1 - tb < 32 ? t1 - tb : 32;
    kt16(c, tb, nb < 16 ? nb : 16, kt);
    if (nb > 16) kt16(c, tb + 16, nb - 16, kt1);
    prefetch_keys(c, tb + 32, 32);
    for (int s = s0; s < s1; s++) {
      int n = (c->nk[s] < t1 ? c->nk[s] : t1) - tb;
      if (n <= 0) continue;
      if (n > 32) n = 32;
      float *o = c->out + (ptrdiff_t)s * c->outRow + tb;
      __m512 x, y;
      if (n > 16) {
        row16_two(c, s, kt, kt1, &x, &y);
        _mm512_storeu_ps(o, x);
        _mm512_mask_storeu_ps(o + 16, (__mmask16)((1u << (n - 16)) - 1u), y);
      } else {
        row16_one(c, s, kt, &x);
        _mm512_mask_storeu_ps(o, (__mmask16)((1u << n) - 1u), x);
      }
    }
  }
}

/* ================ AVX-512: hb_dsa_select's scans (the same keys and order as dsa.c's scalar loops) ================ */
T512 INL __m512i fkey16(__m512 v) {   /* dsa.c fkey: -0 as +0, then the order-preserving flip */
  __m512i u = _mm512_castps_si512(v);
  u = _mm512_mask_mov_epi32(u, _mm512_cmpeq_epi32_mask(u, _mm512_set1_epi32((int)0x80000000u)), _mm512_setzero_si512());
  return _mm512_xor_si512(u, _mm512_or_si512(_mm512_srai_epi32(u, 31), _mm512_set1_epi32((int)0x80000000u)));
}
T512 INL __mmask16 valid16(int t, int n) { return n - t >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - t)) - 1u); }

T512 int hb_sel_hist_avx512(const float *x, int n, uint32_t prefix, int hs, int sh, int nb, uint32_t *hist, int *lo, int *hi) {
  const __m128i cnt = _mm_cvtsi32_si128(hs);
  const __m512i want = _mm512_set1_epi32((int)(prefix >> hs));
  int total = 0;
  for (int t = 0; t < n; t += 16) {
    const __mmask16 v = valid16(t, n);
    const __m512i k = fkey16(_mm512_maskz_loadu_ps(v, x + t));
    unsigned m = _mm512_mask_cmpeq_epi32_mask(v, _mm512_srl_epi32(k, cnt), want);
    if (!m) continue;
    uint32_t kk[16];
    _mm512_storeu_si512((void *)kk, k);
    for (; m; m &= m - 1) {
      const int d = (int)((kk[__builtin_ctz(m)] >> sh) & (uint32_t)(nb - 1));
      hist[d]++;
      total++;
      if (d < *lo) *lo = d;
      if (d > *hi) *hi = d;
    }
  }
  return total;
}

/* every key > thr and the first `need` keys == thr, ascending; returns how many */
T512 int hb_sel_collect_avx512(const float *x, int n, uint32_t thr, int need, int32_t *sel) {
  const __m512i P = _mm512_set1_epi32((int)thr), iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int m = 0;
  for (int t = 0; t < n; t += 16) {
    const __mmask16 v = valid16(t, n);
    const __m512i k = fkey16(_mm512_maskz_loadu_ps(v, x + t));
    unsigned take = _mm512_mask_cmpgt_epu32_mask(v, k, P);
    unsigned eq = need > 0 ? _mm512_mask_cmpeq_epi32_mask(v, k, P) : 0;
    for (; eq && need > 0; eq &= eq - 1, need--) take |= eq & -eq;   /* the lowest `need` ties */
    if (!take) continue;
    const int c = __builtin_popcount(take);
    _mm512_mask_storeu_epi32(sel + m, (__mmask16)((1u << c) - 1u), _mm512_maskz_compress_epi32((__mmask16)take, _mm512_add_epi32(iota, _mm512_set1_epi32(t))));
    m += c;
  }
  return m;
}

/* ======================== AVX-512 VNNI: fast mode over int8 keys ======================== */
#define TV __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))
TV INL __m512i bq(const int8_t *q, int i4) {   /* query elements 4·i4 .. 4·i4+3 in every lane */
  int32_t d;
  memcpy(&d, q + 4 * i4, 4);
  return _mm512_set1_epi32(d);
}
/* one row against one or two blocks of 16 int8 keys (kb, kb + 16·hd), eight heads at a time: each broadcast of 4
 * query bytes feeds one vpdpbusd per block (the integer dots are exact, so their order is free); then per head,
 * ascending, the scaling, ReLU and the heads' FMA chain of dsa.h */
TV INL void row_q8(const idx_ctx *c, int s, const uint8_t *kb, int two, __m512 dk0, __m512 dk1, __m512 *o0, __m512 *o1) {
  const int nh = c->nh, hd = c->hd, nq = hd / 4;
  const uint8_t *lb = kb + 16 * (size_t)hd;
  const __m512 zero = _mm512_setzero_ps();
  const int8_t *q = c->q8 + (ptrdiff_t)s * nh * hd;
  const ptrdiff_t r = (ptrdiff_t)s * nh;
  __m512 score0 = zero, score1 = zero;
  for (int h0 = 0; h0 < nh; h0 += 8) {
    const int m = nh - h0 < 8 ? nh - h0 : 8;
    const int8_t *qh[8];
    for (int j = 0; j < 8; j++) qh[j] = q + (ptrdiff_t)(h0 + (j < m ? j : 0)) * hd;   /* spare heads redo head h0 */
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    __m512i b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0, b6 = a0, b7 = a0;
#define STEP(j) { const __m512i x = bq(qh[j], i4); a##j = _mm512_dpbusd_epi32(a##j, k, x); if (two) b##j = _mm512_dpbusd_epi32(b##j, l, x); }
    for (int i4 = 0; i4 < nq; i4++) {
      const __m512i k = _mm512_loadu_si512((const void *)(kb + 64 * (size_t)i4));
      const __m512i l = two ? _mm512_loadu_si512((const void *)(lb + 64 * (size_t)i4)) : k;
      STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7)
    }
#undef STEP
    const __m512i a[8] = { a0, a1, a2, a3, a4, a5, a6, a7 }, b[8] = { b0, b1, b2, b3, b4, b5, b6, b7 };
    for (int j = 0; j < m; j++) {   /* max(x, +0): +0 for x ≤ 0 or NaN, as the reference's x > 0 ? x : 0 */
      const __m512i qs = _mm512_set1_epi32(c->qs[r + h0 + j]);
      const __m512 cq = _mm512_set1_ps(c->cq[r + h0 + j]), w = _mm512_set1_ps(c->w[r + h0 + j]);
      const __m512 x = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a[j], qs)), cq), dk0);
      score0 = _mm512_fmadd_ps(w, _mm512_max_ps(x, zero), score0);
      if (two) {
        const __m512 y = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(b[j], qs)), cq), dk1);
        score1 = _mm512_fmadd_ps(w, _mm512_max_ps(y, zero), score1);
      }
    }
  }
  *o0 = score0;
  *o1 = score1;
}
TV static void row_q8_one(const idx_ctx *c, int s, const uint8_t *kb, __m512 dk, __m512 *o) { __m512 u; row_q8(c, s, kb, 0, dk, dk, o, &u); }
TV static void row_q8_two(const idx_ctx *c, int s, const uint8_t *kb, __m512 dk0, __m512 dk1, __m512 *o0, __m512 *o1) {
  row_q8(c, s, kb, 1, dk0, dk1, o0, o1);
}

/* keys in pairs of blocks of 16 (t0 is a multiple of 32: IDX_TB), as hb_idx_block_avx512 */
TV void hb_idx_block_q8_vnni(const idx_ctx *c, int t0, int t1, int s0, int s1) {
  const size_t bstride = 16 * (size_t)c->hd;
  for (int tb = t0; tb < t1; tb += 32) {
    const uint8_t *kb = c->k8 + (size_t)(tb >> 4) * bstride;
    const int nb = t1 - tb < 32 ? t1 - tb : 32;
    if (tb + 32 < c->maxn) for (size_t p = 0; p < 2 * bstride; p += 64) _mm_prefetch((const char *)(kb + 2 * bstride + p), _MM_HINT_T0);
    const __m512 dk0 = _mm512_maskz_loadu_ps((__mmask16)((1u << (nb < 16 ? nb : 16)) - 1u), c->dk + tb);
    const __m512 dk1 = nb > 16 ? _mm512_maskz_loadu_ps((__mmask16)((1u << (nb - 16)) - 1u), c->dk + tb + 16) : dk0;
    for (int s = s0; s < s1; s++) {
      int n = (c->nk[s] < t1 ? c->nk[s] : t1) - tb;
      if (n <= 0) continue;
      if (n > 32) n = 32;
      float *o = c->out + (ptrdiff_t)s * c->outRow + tb;
      __m512 x, y;
      if (n > 16) {
        row_q8_two(c, s, kb, dk0, dk1, &x, &y);
        _mm512_storeu_ps(o, x);
        _mm512_mask_storeu_ps(o + 16, (__mmask16)((1u << (n - 16)) - 1u), y);
      } else {
        row_q8_one(c, s, kb, dk0, &x);
        _mm512_mask_storeu_ps(o, (__mmask16)((1u << n) - 1u), x);
      }
    }
  }
}

/* ================================ AVX2: 8 keys per block ================================ */
T256 INL void tr8(__m256 r[8]) {   /* r[j][i] -> r[i][j] */
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) { t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]); t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]); }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44); u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44); u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; i++) { r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20); r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31); }
}

T256 static void kt8(const idx_ctx *c, int t0, int n, float *kt) {
  const int hd = c->hd;
  for (int i0 = 0; i0 < hd; i0 += 8) {
    const int left = hd - i0;
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 r[8];
    for (int j = 0; j < 8; j++) r[j] = j < n ? _mm256_maskload_ps(c->kI + (ptrdiff_t)(t0 + j) * hd + i0, m) : _mm256_setzero_ps();
    tr8(r);
    for (int i = 0; i < 8 && i < left; i++) _mm256_store_ps(kt + 8 * (i0 + i), r[i]);
  }
}

T256 void hb_idx_block_avx2(const idx_ctx *c, int t0, int t1, int s0, int s1) {
  float kt[IDX_MAXHD * 8] __attribute__((aligned(32)));
  const int nh = c->nh, hd = c->hd;
  const __m256 sc = _mm256_set1_ps(c->scale), zero = _mm256_setzero_ps();
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int tb = t0; tb < t1; tb += 8) {
    kt8(c, tb, t1 - tb < 8 ? t1 - tb : 8, kt);
    prefetch_keys(c, tb + 8, 8);
    for (int s = s0; s < s1; s++) {
      int n = (c->nk[s] < t1 ? c->nk[s] : t1) - tb;
      if (n <= 0) continue;
      if (n > 8) n = 8;
      const float *q = c->qI + (ptrdiff_t)s * nh * hd, *w = c->w + (ptrdiff_t)s * nh;
      __m256 score = zero;
      for (int h0 = 0; h0 < nh; h0 += 8) {
        const int m = nh - h0 < 8 ? nh - h0 : 8;
        const float *qh[8];
        for (int j = 0; j < 8; j++) qh[j] = q + (ptrdiff_t)(h0 + (j < m ? j : 0)) * hd;
        __m256 a0 = zero, a1 = zero, a2 = zero, a3 = zero, a4 = zero, a5 = zero, a6 = zero, a7 = zero;
        for (int i = 0; i < hd; i++) {
          const __m256 k = _mm256_load_ps(kt + 8 * i);
          a0 = _mm256_fmadd_ps(_mm256_set1_ps(qh[0][i]), k, a0); a1 = _mm256_fmadd_ps(_mm256_set1_ps(qh[1][i]), k, a1);
          a2 = _mm256_fmadd_ps(_mm256_set1_ps(qh[2][i]), k, a2); a3 = _mm256_fmadd_ps(_mm256_set1_ps(qh[3][i]), k, a3);
          a4 = _mm256_fmadd_ps(_mm256_set1_ps(qh[4][i]), k, a4); a5 = _mm256_fmadd_ps(_mm256_set1_ps(qh[5][i]), k, a5);
          a6 = _mm256_fmadd_ps(_mm256_set1_ps(qh[6][i]), k, a6); a7 = _mm256_fmadd_ps(_mm256_set1_ps(qh[7][i]), k, a7);
        }
        const __m256 a[8] = { a0, a1, a2, a3, a4, a5, a6, a7 };
        for (int j = 0; j < m; j++)
          score = _mm256_fmadd_ps(_mm256_set1_ps(w[h0 + j]), _mm256_max_ps(_mm256_mul_ps(a[j], sc), zero), score);
      }
      _mm256_maskstore_ps(c->out + (ptrdiff_t)s * c->outRow + tb, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane), score);
    }
  }
}
#endif
