/* libhb lightning-indexer kernels for x86 (numerics and contract: dsa.h): keys in lanes. A block of 16
 * (AVX-512) or 8 (AVX2) keys is transposed on the stack to kt [hd][lanes] (keys past the block's end are
 * zero and never stored), then for every row and every group of 8 heads, 8 accumulators run the FMA chain
 * over i with the query element broadcast; ReLU and the heads' FMA chain follow, and the row's scores of
 * the block are stored under a mask (t < nk[s]). Holds no state. */
#include "dsa.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

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

T512 void hb_idx_block_avx512(const idx_ctx *c, int t0, int t1, int s0, int s1) {
  float kt[IDX_MAXHD * 16] __attribute__((aligned(64)));
  const int nh = c->nh, hd = c->hd;
  const __m512 sc = _mm512_set1_ps(c->scale), zero = _mm512_setzero_ps();
  for (int tb = t0; tb < t1; tb += 16) {
    kt16(c, tb, t1 - tb < 16 ? t1 - tb : 16, kt);
    prefetch_keys(c, tb + 16, 16);
    for (int s = s0; s < s1; s++) {
      int n = (c->nk[s] < t1 ? c->nk[s] : t1) - tb;
      if (n <= 0) continue;
      if (n > 16) n = 16;
      const float *q = c->qI + (ptrdiff_t)s * nh * hd, *w = c->w + (ptrdiff_t)s * nh;
      __m512 score = zero;
      for (int h0 = 0; h0 < nh; h0 += 8) {
        const int m = nh - h0 < 8 ? nh - h0 : 8;
        const float *qh[8];
        for (int j = 0; j < 8; j++) qh[j] = q + (ptrdiff_t)(h0 + (j < m ? j : 0)) * hd; /* spare lanes redo head h0 */
        __m512 a0 = zero, a1 = zero, a2 = zero, a3 = zero, a4 = zero, a5 = zero, a6 = zero, a7 = zero;
        for (int i = 0; i < hd; i++) {
          const __m512 k = _mm512_load_ps(kt + 16 * i);
          a0 = _mm512_fmadd_ps(_mm512_set1_ps(qh[0][i]), k, a0); a1 = _mm512_fmadd_ps(_mm512_set1_ps(qh[1][i]), k, a1);
          a2 = _mm512_fmadd_ps(_mm512_set1_ps(qh[2][i]), k, a2); a3 = _mm512_fmadd_ps(_mm512_set1_ps(qh[3][i]), k, a3);
          a4 = _mm512_fmadd_ps(_mm512_set1_ps(qh[4][i]), k, a4); a5 = _mm512_fmadd_ps(_mm512_set1_ps(qh[5][i]), k, a5);
          a6 = _mm512_fmadd_ps(_mm512_set1_ps(qh[6][i]), k, a6); a7 = _mm512_fmadd_ps(_mm512_set1_ps(qh[7][i]), k, a7);
        }
        const __m512 a[8] = { a0, a1, a2, a3, a4, a5, a6, a7 };
        for (int j = 0; j < m; j++)  /* max(x, +0): +0 for x ≤ 0 or NaN, as the reference's x > 0 ? x : 0 */
          score = _mm512_fmadd_ps(_mm512_set1_ps(w[h0 + j]), _mm512_max_ps(_mm512_mul_ps(a[j], sc), zero), score);
      }
      _mm512_mask_storeu_ps(c->out + (ptrdiff_t)s * c->outRow + tb, (__mmask16)((1u << n) - 1u), score);
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
