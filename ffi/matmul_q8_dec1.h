/* libhb's int4g decode tile (1-4 rows of x, gs = 64), written once for two instruction sets: included (no include
 * guard) by matmul_q8_i4g_avx2.c (maddubs, 16-bit reductions) and matmul_q8_i4g_gemm_avxvnni.c (vpdpbusd), each
 * defining DEC1_TGT (the target attribute), DEC1_NAME(x) (suffixes the names) and, before the include,
 * DEC1_NAME(gsum8)(w, rb, xe, xd): lane j = the exact sum of the products of row j's group (32 bytes at w + j·rb)
 * against (xe, xd), its correction left out (one row of x), and for 2-4 rows of x (gsumn) DEC1_XDOT, tadd32, tadd64
 * and DEC1_WIDEN (below). 8 weight rows a tile, one group of each a step: the correction added once for the 8 rows
 * (per row of x), one convert and FMA per group and row of x (matmul_q8.h's fused chain: the same bits as the scalar
 * reference); with 2-4 rows of x each weight row loaded and split into nibbles once for all of them. Prefetch in
 * address order HB_PF_AHEAD bytes ahead, or a tile ahead for tiles of 9 KiB and more (4 lines per group's 256 bytes:
 * raw prefetches while the tile's cursor range stays inside the matrix, else pf), every 8 groups the scales of the
 * tile two on. What it measured, and what was tried: the two files' headers. Holds no state. */

/* G[k] = gsum8 against x row k (32 bytes at xb + k·Ip, xb + k·Ip + 64), each weight row loaded and split once for
 * the ns rows of x: DEC1_XDOT(lo, hi, xb) a split row's products against an x row (from memory operands), in lanes
 * tadd32 and tadd64 sum as gsum8's tree does, DEC1_WIDEN(u) 4 rows' tree into 32-bit lanes */
DEC1_TGT static inline __attribute__((always_inline)) void DEC1_NAME(gsumn)(const int ns, const uint8_t *w, size_t rb,
                                                                              const int8_t *xb, size_t Ip, __m256i *G) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  __m256i a[4], t[4];
  for (int h = 0; h < 2; h++) {   /* rows 4h..4h+3 */
    for (int pr = 0; pr < 2; pr++) {
      const uint8_t *wr = w + (size_t)(4 * h + 2 * pr) * rb;
      const __m256i v0 = _mm256_loadu_si256((const __m256i *)wr), v1 = _mm256_loadu_si256((const __m256i *)(wr + rb));
      const __m256i lo0 = _mm256_and_si256(v0, m4), hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), m4);
      const __m256i lo1 = _mm256_and_si256(v1, m4), hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), m4);
      for (int k = 0; k < ns; k++) {
        const __m256i q = tadd32(DEC1_XDOT(lo0, hi0, xb + k * Ip), DEC1_XDOT(lo1, hi1, xb + k * Ip));
        t[k] = pr ? tadd64(t[k], q) : q;
      }
    }
    for (int k = 0; k < ns; k++) {   /* the 128-bit halves added */
      const __m256i u = DEC1_WIDEN(t[k]);
      if (h) G[k] = hb_add_halves(a[k], u);
      else a[k] = u;
    }
  }
}

/* y[k, o..o+7] for the ns = S ≤ 4 rows of x; cg: their group corrections (ng a row) */
DEC1_TGT static inline __attribute__((always_inline)) void DEC1_NAME(decn)(const int ns, const hb_q8 *m, int o, const int32_t *cg) {
  const size_t rb = m->rowb, Ip = (size_t)m->Ip;
  const int ng = m->ng, nfull = m->I / 64, tailb = (int)(rb - (size_t)nfull * 32);
  const uint8_t *r0 = hb_q8_row(m, o);
  const int8_t *x = m->qx;
  const float *sg[8];
  for (int j = 0; j < 8; j++) sg[j] = m->sc + (size_t)(o + j) * ng;
  /* the stream runs one tile ahead once a tile passes 1.5 × HB_PF_AHEAD: at Q8_PF its cursor reached the tile's last
   * rows only as they were read (GLM-5's gate / up, 3 KiB rows: 24 KiB tiles). bench/README.md, 2026-12-07 */
  const size_t pfd = 8 * rb >= Q8_PF + Q8_PF / 2 ? 8 * rb : Q8_PF;
  const uint8_t *pp = r0 + pfd;
  const int pfast = pp + (size_t)ng * 256 <= m->Wend;
  __m256i st[8];
  __m256 acc[4];
  for (int k = 0; k < ns; k++) acc[k] = _mm256_setzero_ps();
#define GRP_(W, RB) {                                                                                              \
    const int8_t *xb = x + 128 * (size_t)(g >> 1) + 32 * (size_t)(g & 1);                                          \
    __m256i G[4];                                                                                                  \
    if (ns == 1) G[0] = DEC1_NAME(gsum8)(W, RB, _mm256_loadu_si256((const __m256i *)xb),                            \
                                         _mm256_loadu_si256((const __m256i *)(xb + 64)));                          \
    else DEC1_NAME(gsumn)(ns, W, RB, xb, Ip, G);                                                                   \
    for (int k = 0; k < ns; k++)                                                                                   \
      acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(G[k], _mm256_set1_epi32(cg[(size_t)k * ng + g]))), \
                               _mm256_castsi256_ps(st[g - g0]), acc[k]);                                           \
  }
#define STEP_(PF) for (; g < ge; g++) {                                                                            \
    for (int i = 0; i < 4; i++) PF;                                                                                \
    pp += 256;                                                                                                     \
    GRP_(r0 + 32 * (size_t)g, rb)                                                                                  \
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
      GRP_(tail[0], 32)
    }
  }
#undef STEP_
#undef GRP_
  for (int k = 0; k < ns; k++)
    _mm256_storeu_ps(m->y + (size_t)k * m->O + o, _mm256_mul_ps(acc[k], _mm256_set1_ps(m->dx[k])));
}
/* the counts a constant in each; not inlined: GCC's registers */
DEC1_TGT __attribute__((noinline)) static void DEC1_NAME(dec1)(const hb_q8 *m, int o, const int32_t *cg) { DEC1_NAME(decn)(1, m, o, cg); }
DEC1_TGT __attribute__((noinline)) static void DEC1_NAME(dec2)(const hb_q8 *m, int o, const int32_t *cg) { DEC1_NAME(decn)(2, m, o, cg); }
DEC1_TGT __attribute__((noinline)) static void DEC1_NAME(dec3)(const hb_q8 *m, int o, const int32_t *cg) { DEC1_NAME(decn)(3, m, o, cg); }
DEC1_TGT __attribute__((noinline)) static void DEC1_NAME(dec4)(const hb_q8 *m, int o, const int32_t *cg) { DEC1_NAME(decn)(4, m, o, cg); }

/* S ≤ 4 rows of x, gs = 64: rows [lo, hi) in whole tiles of 8, cg [S·ng] the group corrections' room; returns the first
 * row left undone */
DEC1_TGT static int DEC1_NAME(dec1_rows)(const hb_q8 *m, int lo, int hi, int32_t *cg) {
  hb_i4g_group_corr(m, cg);
  switch (m->S) {
  case 1: for (; lo + 8 <= hi; lo += 8) DEC1_NAME(dec1)(m, lo, cg); break;
  case 2: for (; lo + 8 <= hi; lo += 8) DEC1_NAME(dec2)(m, lo, cg); break;
  case 3: for (; lo + 8 <= hi; lo += 8) DEC1_NAME(dec3)(m, lo, cg); break;
  default: for (; lo + 8 <= hi; lo += 8) DEC1_NAME(dec4)(m, lo, cg); break;
  }
  return lo;
}
