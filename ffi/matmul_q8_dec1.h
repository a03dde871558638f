/* libhb's int4g decode tile (one row of x, gs = 64), written once for two instruction sets: included (no include
 * guard) by matmul_q8_i4g_avx2.c (maddubs, 16-bit reductions) and matmul_q8_i4g_gemm_avxvnni.c (vpdpbusd), each
 * defining DEC1_TGT (the target attribute), DEC1_NAME(x) (suffixes the names) and, before the include,
 * DEC1_NAME(gsum8)(w, rb, xe, xd): lane j = the exact sum of the products of row j's group (32 bytes at w + j·rb)
 * against (xe, xd), its correction left out. 8 weight rows a tile, one group of each a step: the correction added
 * once for the 8 rows, one convert and FMA per group (matmul_q8.h's fused chain: the same bits as the scalar
 * reference). Prefetch in address order HB_PF_AHEAD bytes ahead (4 lines per group's 256 bytes: raw prefetches while
 * the tile's cursor range stays inside the matrix, else pf), every 8 groups the scales of the tile two on. What it
 * measured, and what was tried: the two files' headers. Holds no state. */

/* y[o..o+7] against the one row of x; cg: the group corrections. Not inlined: GCC's registers. */
DEC1_TGT __attribute__((noinline)) static void DEC1_NAME(dec1)(const hb_q8 *m, int o, const int32_t *cg) {
  const size_t rb = m->rowb;
  const int ng = m->ng, nfull = m->I / 64, tailb = (int)(rb - (size_t)nfull * 32);
  const uint8_t *r0 = hb_q8_row(m, o);
  const int8_t *x = m->qx;
  const float *sg[8];
  for (int j = 0; j < 8; j++) sg[j] = m->sc + (size_t)(o + j) * ng;
  const uint8_t *pp = r0 + Q8_PF;
  const int pfast = pp + (size_t)ng * 256 <= m->Wend;
  __m256i st[8];
  __m256 acc = _mm256_setzero_ps();
#define STEP_(PF) for (; g < ge; g++) {                                                                            \
    for (int i = 0; i < 4; i++) PF;                                                                                \
    pp += 256;                                                                                                     \
    const int8_t *xb = x + 128 * (size_t)(g >> 1) + 32 * (size_t)(g & 1);                                           \
    const __m256i G = DEC1_NAME(gsum8)(r0 + 32 * (size_t)g, rb, _mm256_loadu_si256((const __m256i *)xb),           \
                                       _mm256_loadu_si256((const __m256i *)(xb + 64)));                            \
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(G, _mm256_set1_epi32(cg[g]))),                        \
                          _mm256_castsi256_ps(st[g - g0]), acc);                                                   \
  }
  for (int g0 = 0; g0 < ng; g0 += 8) {
    hb_scales8(sg, ng, g0, st);
    for (int j = 0; j < 8; j++) _mm_prefetch((const char *)(sg[j] + 16 * (size_t)ng + g0), _MM_HINT_T0);
    int g = g0;
    const int ge = g0 + 8 < nfull ? g0 + 8 : nfull;
    if (pfast) STEP_(_mm_prefetch((const char *)pp + 64 * i, _MM_HINT_T0))
    else STEP_(pf(m, pp + 64 * i))
    if (g == nfull && g < ng && g < g0 + 8) {   /* the partial last group, through zeroed copies */
      uint8_t tail[8][32];
      for (int j = 0; j < 8; j++) { memset(tail[j], 0, 32); memcpy(tail[j], r0 + j * rb + 32 * (size_t)nfull, (size_t)tailb); }
      const int8_t *xb = x + 128 * (size_t)(g >> 1) + 32 * (size_t)(g & 1);
      const __m256i G = DEC1_NAME(gsum8)(tail[0], 32, _mm256_loadu_si256((const __m256i *)xb), _mm256_loadu_si256((const __m256i *)(xb + 64)));
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(G, _mm256_set1_epi32(cg[g]))), _mm256_castsi256_ps(st[g - g0]), acc);
    }
  }
#undef STEP_
  _mm256_storeu_ps(m->y + o, _mm256_mul_ps(acc, _mm256_set1_ps(m->dx[0])));
}

/* one row of x, gs = 64: rows [lo, hi) in whole tiles of 8, cg [ng] the group corrections' room; returns the first row
 * left undone */
DEC1_TGT static int DEC1_NAME(dec1_rows)(const hb_q8 *m, int lo, int hi, int32_t *cg) {
  hb_i4g_group_corr(m, cg);
  for (; lo + 8 <= hi; lo += 8) DEC1_NAME(dec1)(m, lo, cg);
  return lo;
}
