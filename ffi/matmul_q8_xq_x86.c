/* libhb fast-mode matmul: the SIMD parts of quantizing x (AVX2, AVX-512), bit-identical to the scalar
 * quantizer in matmul_q8.c (numerics and layouts: matmul_q8.h): absmax with the non-finite check,
 * rounding half to even, and the repacking of whole 128-element blocks into the int4 layout with the
 * per-segment corrections. Holds no state. */
#include "matmul_q8.h"
#if defined(__x86_64__) || defined(__i386__)
#include "matmul_q8_x86.h"

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
#define FLT_BIG 3.40282347e38f

T256 float hb_q8_amax_avx2(const float *x, int n, int *bad) {
  const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), big = _mm256_set1_ps(FLT_BIG);
  __m256 a = _mm256_setzero_ps(), nb = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_and_ps(_mm256_loadu_ps(x + i), abs);
    nb = _mm256_or_ps(nb, _mm256_cmp_ps(v, big, _CMP_NLE_UQ));
    a = _mm256_max_ps(a, v);
  }
  float t[8], r = 0.0f;
  _mm256_storeu_ps(t, a);
  for (int k = 0; k < 8; k++) r = t[k] > r ? t[k] : r;
  if (_mm256_movemask_ps(nb)) *bad = 1;
  for (; i < n; i++) {
    const float v = x[i] < 0 ? -x[i] : x[i];
    if (!(v <= FLT_BIG)) *bad = 1;
    else if (v > r) r = v;
  }
  return r;
}
T256 void hb_q8_round_avx2(const float *x, int n, float id, int8_t *q) {
  if (id == 0.0f) { memset(q, 0, (size_t)n); return; }
  const __m256 vid = _mm256_set1_ps(id), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vid);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    const __m256i k = _mm256_cvtps_epi32(v);   /* MXCSR: round to nearest even */
    const __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(k), _mm256_extracti128_si256(k, 1));
    _mm_storel_epi64((__m128i *)(q + i), _mm_packs_epi16(p, p));
  }
  for (; i < n; i++) {
    float v = x[i] * id;
    v = (v + 12582912.0f) - 12582912.0f;
    v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
    q[i] = (int8_t)(int)v;
  }
}
T512 float hb_q8_amax_avx512(const float *x, int n, int *bad) {
  const __m512 big = _mm512_set1_ps(FLT_BIG);
  __m512 a = _mm512_setzero_ps();
  __mmask16 nb = 0;
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_abs_ps(_mm512_loadu_ps(x + i));
    nb |= _mm512_cmp_ps_mask(v, big, _CMP_NLE_UQ);
    a = _mm512_max_ps(a, v);
  }
  if (i < n) {
    const __mmask16 mk = (__mmask16)((1u << (n - i)) - 1);
    const __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(mk, x + i));
    nb |= _mm512_mask_cmp_ps_mask(mk, v, big, _CMP_NLE_UQ);
    a = _mm512_max_ps(a, v);
  }
  if (nb) *bad = 1;
  return _mm512_reduce_max_ps(a);
}
T512 void hb_q8_round_avx512(const float *x, int n, float id, int8_t *q) {
  if (id == 0.0f) { memset(q, 0, (size_t)n); return; }
  const __m512 vid = _mm512_set1_ps(id), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), vid);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v)));
  }
  if (i < n) {
    const __mmask16 mk = (__mmask16)((1u << (n - i)) - 1);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + i), vid);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    _mm_mask_storeu_epi8(q + i, mk, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v)));
  }
}

/* nb whole 128-element blocks of a natural int8 row -> q in the layout (NAT or P4), corr (P4: −8·Σ per
 * 8-element segment), returns Σ tmp. Segment sums come from psadbw on the sign-flipped bytes (+128 each). */
T512 int64_t hb_q8_pack_avx512(const int8_t *tmp, int nb, int layout, int8_t *q, int32_t *corr) {
  const __m512i flip = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
  /* within each 16-byte lane: the 8 even bytes, then the 8 odd ones */
  const __m512i deint = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
  const __m512i ev = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), od = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
  __m512i tot = zero;
  for (int b = 0; b < nb; b++) {
    const int8_t *t = tmp + 128 * (size_t)b;
    const __m512i A = _mm512_loadu_si512((const void *)t), B = _mm512_loadu_si512((const void *)(t + 64));
    const __m512i sa = _mm512_sad_epu8(_mm512_xor_si512(A, flip), zero);   /* Σ(q+128) per 8 bytes */
    const __m512i sb = _mm512_sad_epu8(_mm512_xor_si512(B, flip), zero);
    tot = _mm512_add_epi64(tot, _mm512_add_epi64(sa, sb));
    int8_t *d = q + 128 * (size_t)b;
    if (layout == HB_Q8_P4) {
      const __m512i a2 = _mm512_shuffle_epi8(A, deint), b2 = _mm512_shuffle_epi8(B, deint);
      _mm512_storeu_si512((void *)d, _mm512_permutex2var_epi64(a2, ev, b2));
      _mm512_storeu_si512((void *)(d + 64), _mm512_permutex2var_epi64(a2, od, b2));
      const __m512i seg = _mm512_sub_epi32(_mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(sa)),
                                                              _mm512_cvtepi64_epi32(sb), 1), _mm512_set1_epi32(1024));
      _mm512_storeu_si512((void *)(corr + 16 * (size_t)b), _mm512_sub_epi32(zero, _mm512_slli_epi32(seg, 3)));
    } else {
      _mm512_storeu_si512((void *)d, A);
      _mm512_storeu_si512((void *)(d + 64), B);
    }
  }
  return _mm512_reduce_add_epi64(tot) - 128 * 128 * (int64_t)nb;
}
#endif
