/* libhb attention micro-kernels for x86 (see attn.h for their contracts): AVX-512 (F+BW+VL) and
 * AVX2+FMA, chosen by hb_attn_kern_for in attn.c. Holds no state. Per (query, key) pair one accumulator
 * over 16- (AVX-512, last chunk masked) or 8-wide chunks (AVX2, then a scalar fmaf tail); every output
 * element of wsum is one FMA chain over keys in list order. */
#include "attn.h"
#include <math.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include "reduce_x86.h"

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
#define T256 __attribute__((target("avx2,fma")))
#define INL static inline __attribute__((always_inline))

/* ---- AVX-512: per pair, one acc over 16-wide chunks, last partial chunk masked, then reduce ---- */
#define LDU(p) _mm512_loadu_ps((p) + i)
#define LDM(p) _mm512_maskz_loadu_ps(m, (p) + i)
INL __mmask16 tailmask(int r) { return r >= 16 ? (__mmask16)0xFFFF : r > 0 ? (__mmask16)((1u << r) - 1u) : 0; }

/* 4 queries × 4 keys: 16 accumulators, each query and key chunk loaded once per chunk (8 loads per 16 FMAs; the
 * 4 × 2 kernel it replaced loaded 6 per 8: ~14% off a decode-shaped hb_attn_segs call, one thread) */
T512 static void dot4x4_avx512(const float *const a[4], const float *const b[4], int n, float out[16]) {
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *b0 = b[0], *b1 = b[1], *b2 = b[2], *b3 = b[3];
  const __m512 z = _mm512_setzero_ps();
  __m512 c00 = z, c01 = z, c02 = z, c03 = z, c10 = z, c11 = z, c12 = z, c13 = z;
  __m512 c20 = z, c21 = z, c22 = z, c23 = z, c30 = z, c31 = z, c32 = z, c33 = z;
  int i = 0;
#define ROW4(q, r0, r1, r2, r3) { const __m512 y = q; r0 = _mm512_fmadd_ps(y, x0, r0); r1 = _mm512_fmadd_ps(y, x1, r1); \
                                  r2 = _mm512_fmadd_ps(y, x2, r2); r3 = _mm512_fmadd_ps(y, x3, r3); }
#define BODY44(LD) { const __m512 x0 = LD(b0), x1 = LD(b1), x2 = LD(b2), x3 = LD(b3);                              \
    ROW4(LD(a0), c00, c01, c02, c03) ROW4(LD(a1), c10, c11, c12, c13) ROW4(LD(a2), c20, c21, c22, c23)               \
    ROW4(LD(a3), c30, c31, c32, c33) }
  for (; i + 16 <= n; i += 16) BODY44(LDU)
  if (i < n) { __mmask16 m = tailmask(n - i); BODY44(LDM) } /* tail */
#undef BODY44
#undef ROW4
  _mm_storeu_ps(out, hb_tree16x4(c00, c01, c02, c03));      /* = _mm512_reduce_add_ps of each, bit for bit */
  _mm_storeu_ps(out + 4, hb_tree16x4(c10, c11, c12, c13));
  _mm_storeu_ps(out + 8, hb_tree16x4(c20, c21, c22, c23));
  _mm_storeu_ps(out + 12, hb_tree16x4(c30, c31, c32, c33));
}
T512 static void dot1x4_avx512(const float *a, const float *const b[4], int n, float out[4]) {
  const float *b0 = b[0], *b1 = b[1], *b2 = b[2], *b3 = b[3];
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
  int i = 0;
#define BODY4(LD) { __m512 y = LD(a); c0 = _mm512_fmadd_ps(y, LD(b0), c0); c1 = _mm512_fmadd_ps(y, LD(b1), c1); \
                    c2 = _mm512_fmadd_ps(y, LD(b2), c2); c3 = _mm512_fmadd_ps(y, LD(b3), c3); }
  for (; i + 16 <= n; i += 16) BODY4(LDU)
  if (i < n) { __mmask16 m = tailmask(n - i); BODY4(LDM) } /* tail */
#undef BODY4
#undef LDU
#undef LDM
  _mm_storeu_ps(out, hb_tree16x4(c0, c1, c2, c3));
}
/* 64 output elements × 4 heads in 16 accumulators; one FMA chain per element over j. */
T512 static void wsum_avx512(const float *const p[4], const float *const vb[4], int shared, ptrdiff_t vRow,
                             const int32_t *keys, int n, int dv, float *const o[4]) {
  for (int e0 = 0; e0 < dv; e0 += 64) {
    const __mmask16 m0 = tailmask(dv - e0), m1 = tailmask(dv - e0 - 16), m2 = tailmask(dv - e0 - 32),
                    m3 = tailmask(dv - e0 - 48);
    __m512 z = _mm512_setzero_ps(), a00 = z, a01 = z, a02 = z, a03 = z, a10 = z, a11 = z, a12 = z, a13 = z,
           a20 = z, a21 = z, a22 = z, a23 = z, a30 = z, a31 = z, a32 = z, a33 = z;
#define HEAD(g, L0, L1, L2, L3)                                                                              \
  do {                                                                                                       \
    __m512 pb = _mm512_set1_ps(p[g][j]);                                                                     \
    a##g##0 = _mm512_fmadd_ps(pb, L0, a##g##0); a##g##1 = _mm512_fmadd_ps(pb, L1, a##g##1);                   \
    a##g##2 = _mm512_fmadd_ps(pb, L2, a##g##2); a##g##3 = _mm512_fmadd_ps(pb, L3, a##g##3);                   \
  } while (0)
#define LD(g, q, m) _mm512_maskz_loadu_ps(m, vb[g] + off + 16 * q)
    if (shared)
      for (int j = 0; j < n; j++) {
        const ptrdiff_t off = (ptrdiff_t)(keys ? keys[j] : j) * vRow + e0;
        const __m512 v0 = LD(0, 0, m0), v1 = LD(0, 1, m1), v2 = LD(0, 2, m2), v3 = LD(0, 3, m3);
        HEAD(0, v0, v1, v2, v3); HEAD(1, v0, v1, v2, v3); HEAD(2, v0, v1, v2, v3); HEAD(3, v0, v1, v2, v3);
      }
    else
      for (int j = 0; j < n; j++) {
        const ptrdiff_t off = (ptrdiff_t)(keys ? keys[j] : j) * vRow + e0;
        HEAD(0, LD(0, 0, m0), LD(0, 1, m1), LD(0, 2, m2), LD(0, 3, m3));
        HEAD(1, LD(1, 0, m0), LD(1, 1, m1), LD(1, 2, m2), LD(1, 3, m3));
        HEAD(2, LD(2, 0, m0), LD(2, 1, m1), LD(2, 2, m2), LD(2, 3, m3));
        HEAD(3, LD(3, 0, m0), LD(3, 1, m1), LD(3, 2, m2), LD(3, 3, m3));
      }
#undef LD
#undef HEAD
#define STORE(g)                                                                                             \
  do {                                                                                                       \
    _mm512_mask_storeu_ps(o[g] + e0, m0, a##g##0); _mm512_mask_storeu_ps(o[g] + e0 + 16, m1, a##g##1);      \
    _mm512_mask_storeu_ps(o[g] + e0 + 32, m2, a##g##2); _mm512_mask_storeu_ps(o[g] + e0 + 48, m3, a##g##3);  \
  } while (0)
    STORE(0); STORE(1); STORE(2); STORE(3);
#undef STORE
  }
}

/* ---- AVX2: per pair, acc over 8-wide chunks, horizontal sum, then the scalar tail with fmaf ---- */
T256 static void dot4x2_avx2(const float *const a[4], const float *const b[2], int n, float out[8]) {
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *b0 = b[0], *b1 = b[1];
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x0 = _mm256_loadu_ps(b0 + i), x1 = _mm256_loadu_ps(b1 + i), y;
    y = _mm256_loadu_ps(a0 + i); c00 = _mm256_fmadd_ps(y, x0, c00); c01 = _mm256_fmadd_ps(y, x1, c01);
    y = _mm256_loadu_ps(a1 + i); c10 = _mm256_fmadd_ps(y, x0, c10); c11 = _mm256_fmadd_ps(y, x1, c11);
    y = _mm256_loadu_ps(a2 + i); c20 = _mm256_fmadd_ps(y, x0, c20); c21 = _mm256_fmadd_ps(y, x1, c21);
    y = _mm256_loadu_ps(a3 + i); c30 = _mm256_fmadd_ps(y, x0, c30); c31 = _mm256_fmadd_ps(y, x1, c31);
  }
  _mm_storeu_ps(out, hb_hsum8x4(c00, c01, c10, c11));       /* = hsum256 of each, bit for bit */
  _mm_storeu_ps(out + 4, hb_hsum8x4(c20, c21, c30, c31));
  for (; i < n; i++) /* tail */
    for (int r = 0; r < 4; r++) { out[2 * r] = fmaf(a[r][i], b0[i], out[2 * r]); out[2 * r + 1] = fmaf(a[r][i], b1[i], out[2 * r + 1]); }
}
T256 static void dot1x4_avx2(const float *a, const float *const b[4], int n, float out[4]) {
  const float *b0 = b[0], *b1 = b[1], *b2 = b[2], *b3 = b[3];
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 y = _mm256_loadu_ps(a + i);
    c0 = _mm256_fmadd_ps(y, _mm256_loadu_ps(b0 + i), c0);
    c1 = _mm256_fmadd_ps(y, _mm256_loadu_ps(b1 + i), c1);
    c2 = _mm256_fmadd_ps(y, _mm256_loadu_ps(b2 + i), c2);
    c3 = _mm256_fmadd_ps(y, _mm256_loadu_ps(b3 + i), c3);
  }
  _mm_storeu_ps(out, hb_hsum8x4(c0, c1, c2, c3));
  for (; i < n; i++) for (int j = 0; j < 4; j++) out[j] = fmaf(a[i], b[j][i], out[j]); /* tail */
}
/* 16 output elements × 4 heads in 8 accumulators, then 8-wide, then a scalar fmaf tail. */
T256 static void wsum_avx2(const float *const p[4], const float *const vb[4], int shared, ptrdiff_t vRow,
                           const int32_t *keys, int n, int dv, float *const o[4]) {
  int e0 = 0;
  for (; e0 + 16 <= dv; e0 += 16) {
    __m256 z = _mm256_setzero_ps(), a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z;
#define HEAD(g, L0, L1)                                                                                      \
  do {                                                                                                       \
    __m256 pb = _mm256_set1_ps(p[g][j]);                                                                     \
    a##g##0 = _mm256_fmadd_ps(pb, L0, a##g##0); a##g##1 = _mm256_fmadd_ps(pb, L1, a##g##1);                   \
  } while (0)
    if (shared)
      for (int j = 0; j < n; j++) {
        const float *vv = vb[0] + (ptrdiff_t)(keys ? keys[j] : j) * vRow + e0;
        const __m256 v0 = _mm256_loadu_ps(vv), v1 = _mm256_loadu_ps(vv + 8);
        HEAD(0, v0, v1); HEAD(1, v0, v1); HEAD(2, v0, v1); HEAD(3, v0, v1);
      }
    else
      for (int j = 0; j < n; j++) {
        const ptrdiff_t off = (ptrdiff_t)(keys ? keys[j] : j) * vRow + e0;
        HEAD(0, _mm256_loadu_ps(vb[0] + off), _mm256_loadu_ps(vb[0] + off + 8));
        HEAD(1, _mm256_loadu_ps(vb[1] + off), _mm256_loadu_ps(vb[1] + off + 8));
        HEAD(2, _mm256_loadu_ps(vb[2] + off), _mm256_loadu_ps(vb[2] + off + 8));
        HEAD(3, _mm256_loadu_ps(vb[3] + off), _mm256_loadu_ps(vb[3] + off + 8));
      }
#undef HEAD
    _mm256_storeu_ps(o[0] + e0, a00); _mm256_storeu_ps(o[0] + e0 + 8, a01);
    _mm256_storeu_ps(o[1] + e0, a10); _mm256_storeu_ps(o[1] + e0 + 8, a11);
    _mm256_storeu_ps(o[2] + e0, a20); _mm256_storeu_ps(o[2] + e0 + 8, a21);
    _mm256_storeu_ps(o[3] + e0, a30); _mm256_storeu_ps(o[3] + e0 + 8, a31);
  }
  for (; e0 + 8 <= dv; e0 += 8) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int j = 0; j < n; j++) {
      const ptrdiff_t off = (ptrdiff_t)(keys ? keys[j] : j) * vRow + e0;
      a0 = _mm256_fmadd_ps(_mm256_set1_ps(p[0][j]), _mm256_loadu_ps(vb[0] + off), a0);
      a1 = _mm256_fmadd_ps(_mm256_set1_ps(p[1][j]), _mm256_loadu_ps(vb[1] + off), a1);
      a2 = _mm256_fmadd_ps(_mm256_set1_ps(p[2][j]), _mm256_loadu_ps(vb[2] + off), a2);
      a3 = _mm256_fmadd_ps(_mm256_set1_ps(p[3][j]), _mm256_loadu_ps(vb[3] + off), a3);
    }
    _mm256_storeu_ps(o[0] + e0, a0); _mm256_storeu_ps(o[1] + e0, a1);
    _mm256_storeu_ps(o[2] + e0, a2); _mm256_storeu_ps(o[3] + e0, a3);
  }
  for (; e0 < dv; e0++) /* tail */
    for (int g = 0; g < 4; g++) {
      float acc = 0.0f;
      for (int j = 0; j < n; j++) acc = fmaf(p[g][j], vb[g][(ptrdiff_t)(keys ? keys[j] : j) * vRow + e0], acc);
      o[g][e0] = acc;
    }
}

/* AVX2 has 16 registers: 4 × 4 as two 4 × 2 calls */
T256 static void dot4x4_avx2(const float *const a[4], const float *const b[4], int n, float out[16]) {
  float d[8];
  for (int h = 0; h < 2; h++) {
    dot4x2_avx2(a, b + 2 * h, n, d);
    for (int i = 0; i < 4; i++) { out[4 * i + 2 * h] = d[2 * i]; out[4 * i + 2 * h + 1] = d[2 * i + 1]; }
  }
}
T512 static void wcont_avx512(const float *p, const float *v, ptrdiff_t vRow, int n, int dv, float *o) {
  for (int e0 = 0; e0 < dv; e0 += 16) {
    const __mmask16 m = tailmask(dv - e0);
    __m512 a = _mm512_maskz_loadu_ps(m, o + e0);
    for (int j = 0; j < n; j++) a = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_maskz_loadu_ps(m, v + j * vRow + e0), a);
    _mm512_mask_storeu_ps(o + e0, m, a);
  }
}
T256 static void wcont_avx2(const float *p, const float *v, ptrdiff_t vRow, int n, int dv, float *o) {
  int e0 = 0;
  for (; e0 + 8 <= dv; e0 += 8) {
    __m256 a = _mm256_loadu_ps(o + e0);
    for (int j = 0; j < n; j++) a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(v + j * vRow + e0), a);
    _mm256_storeu_ps(o + e0, a);
  }
  for (; e0 < dv; e0++) for (int j = 0; j < n; j++) o[e0] = fmaf(p[j], v[j * vRow + e0], o[e0]); /* tail */
}
const hb_attn_kern hb_attn_kern_avx512 = { dot4x4_avx512, dot1x4_avx512, wsum_avx512, wcont_avx512 };
const hb_attn_kern hb_attn_kern_avx2 = { dot4x4_avx2, dot1x4_avx2, wsum_avx2, wcont_avx2 };
#endif
