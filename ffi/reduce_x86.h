/* libhb AVX-512 horizontal sums shared by the fast matmul (matmul_q8_x86.c) and attention (attn_x86.c)
 * kernels. Holds no state. */
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
#endif
