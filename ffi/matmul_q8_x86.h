/* libhb x86 fast-mode helpers shared by the AVX2 / AVX-512 kernels (matmul_q8_x86.c) and the AVX-VNNI ones
 * (matmul_q8_avxvnni.c): weight-stream prefetch and the 256-bit int4g scale / reduction steps, whose
 * order is the one matmul_q8.h defines. Holds no state. */
#ifndef HB_MATMUL_Q8_X86_H
#define HB_MATMUL_Q8_X86_H
#include "matmul_q8.h"
#include <immintrin.h>
#include "reduce_x86.h"

#define T256 __attribute__((target("avx2,fma")))
#define INL static inline __attribute__((always_inline))

/* software prefetch distance along the weight stream (rows are contiguous, so it runs into the
 * next rows): the hardware prefetcher alone leaves DRAM bandwidth unused (measured +15-25% at 2 threads) */
#define Q8_PF HB_PF_AHEAD
/* prefetch p unless it lies past the matrix (decode runs many small matrices: lines past the end are waste) */
INL void pf(const hb_q8 *m, const uint8_t *p) {
  if (p < m->Wend) _mm_prefetch((const char *)p, _MM_HINT_T0);
}
/* scales of chunk c (64 elements: lane j = element 64c + 8j) of an int4g row; groups past the row get 0 */
T256 INL __m256 scales8(const float *sg, int ng, int sh, int c, __m256i sidx) {
  if (sh >= 6) return _mm256_set1_ps(sg[(c << 6) >> sh]);
  const int g0 = (c << 6) >> sh, per = 64 >> sh, left = ng - g0, cnt = left < per ? left : per;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 s = _mm256_maskload_ps(sg + g0, _mm256_cmpgt_epi32(_mm256_set1_epi32(cnt), lane));
  return _mm256_permutevar8x32_ps(s, sidx);
}
T256 INL int64_t hsum64_8(__m256i v) {
  int32_t t[8];
  _mm256_storeu_si256((__m256i *)t, v);
  int64_t s = 0;
  for (int k = 0; k < 8; k++) s += t[k];
  return s;
}
T256 INL float tree8x2(__m256 a, __m256 b, float d) {
  const __m256 t8 = _mm256_add_ps(a, b);
  const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
  const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
  const float r = _mm_cvtss_f32(_mm_add_ss(t2, _mm_movehdup_ps(t2)));
  return r * d;
}

/* rows of W handled per pass over a block of ≤ 4 activation rows: ~16 KiB of packed weights */
static inline int hb_q8_subrows(size_t rowb) {
  const size_t r = 16384 / (rowb ? rowb : 1);
  return r < 1 ? 1 : (int)r;
}

#endif
