/* libhb x86 horizontal sums of several accumulators at once, shared by the fast matmul (matmul_q8_x86.c,
 * matmul_q8_tile256.h) and attention (attn_x86.c) kernels: the same adds in the same order as one accumulator
 * at a time. Holds no state. */
#ifndef HB_REDUCE_X86_H
#define HB_REDUCE_X86_H
#include <immintrin.h>

/* The 16-lane tree of four accumulators at once: lane k of the result = ((a[j] + a[j+8]) + (a[j+4] + a[j+12]))
 * summed as t2[0] + t2[1] for accumulator k — the adds and order of hb_q8_tree16 and of
 * _mm512_reduce_add_ps (float adds commute bit for bit), so it replaces four of those exactly. */
static inline __attribute__((always_inline, target("avx512f"))) __m128 hb_tree16x4(__m512 A, __m512 B, __m512 C, __m512 D) {
  const __m512 xab = _mm512_add_ps(_mm512_shuffle_f32x4(A, B, 0x44), _mm512_shuffle_f32x4(A, B, 0xEE));
  const __m512 xcd = _mm512_add_ps(_mm512_shuffle_f32x4(C, D, 0x44), _mm512_shuffle_f32x4(C, D, 0xEE));
  const __m512 y = _mm512_add_ps(_mm512_shuffle_f32x4(xab, xcd, 0x88), _mm512_shuffle_f32x4(xab, xcd, 0xDD));
  const __m512 z = _mm512_add_ps(y, _mm512_permute_ps(y, 0xEE));
  const __m512 r = _mm512_add_ps(z, _mm512_permute_ps(z, 0x55));
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), r));
}

/* hsum of four 8-lane accumulators at once: lane k = (a[j] + a[j+4]) then (s[0] + s[2], s[1] + s[3]) then t[0] + t[1]
 * for accumulator k — the adds and order of a 128-bit fold, movehl fold and movehdup add. */
static inline __attribute__((always_inline, target("avx2,fma"))) __m128 hb_hsum8x4(__m256 A, __m256 B, __m256 C, __m256 D) {
  const __m256 p = _mm256_add_ps(_mm256_permute2f128_ps(A, B, 0x20), _mm256_permute2f128_ps(A, B, 0x31)); /* [sA | sB] */
  const __m256 q = _mm256_add_ps(_mm256_permute2f128_ps(C, D, 0x20), _mm256_permute2f128_ps(C, D, 0x31)); /* [sC | sD] */
  const __m256 t = _mm256_add_ps(_mm256_shuffle_ps(p, q, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(p, q, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(t, t, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(t, t, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm_unpacklo_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));            /* [rA, rB, rC, rD] */
}

/* the integer twins: lane totals of four int32 accumulators at once, [ΣA, ΣB, ΣC, ΣD] (wrapping adds: exact
 * whenever each true total fits in int32) */
static inline __attribute__((always_inline, target("avx512f"))) __m128i hb_hsum16x4_i32(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
  const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}
static inline __attribute__((always_inline, target("avx2"))) __m128i hb_hsum8x4_i32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}
#endif
