/* libhb 256-bit fast-mode row kernels, written once for two instruction sets: included (no include guard)
 * by matmul_q8_x86.c with TILE_VNNI 0 (AVX2: maddubs + madd) and by matmul_q8_avxvnni.c with TILE_VNNI 1
 * (AVX-VNNI: vpdpbusd), each defining TILE_TGT (the target attribute) and TILE_NAME(x) (suffixes the
 * names). 32 weight bytes per chunk; per int4g row, lane j of chunk c holds the segment of elements
 * 64c + 8j..+7 and its fused float step goes to accumulator c mod 2 (the 16 lanes of matmul_q8.h), so
 * both instantiations equal the scalar reference bit for bit: their integer sums are exact either way.
 *  - int8: AVX2 multiplies |w| by x·sign(w) (no pair sum can saturate); VNNI multiplies w + 128 (sign bit
 *    flipped: unsigned) by x and takes 128·Σq_x off at the end;
 *  - int4 / int4g / int2: unsigned fields as is, the −8 / −2 offsets per segment (corr) or per row (xsum).
 * Register tiles share the weight unpacking across x rows and the x loads across weight rows: 4 weight
 * rows × 1 x row (decode), 2 × up to 4 (batches), then single rows; int4g (two accumulators per pair)
 * 2 × 1, 2 × 2, 1 × 3, 1 × 4. The last partial chunk is read through
 * a zeroed copy (padded activations are zero). Holds no state. */
#if TILE_VNNI
#define DP1(acc, a, x) _mm256_dpbusd_avx_epi32(acc, a, x)
#define DP2(acc, a, x, b, y) _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(acc, a, x), b, y)
#else
#define DP1(acc, a, x) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, x), _mm256_set1_epi16(1)))
#define DP2(acc, a, x, b, y)                                                                              \
  _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(a, x), _mm256_maddubs_epi16(b, y)), \
                                          _mm256_set1_epi16(1)))
#endif

/* one chunk c (parity par = c mod 2, a constant) of weight rows w[j] (j < nr) against x rows k < ns: the
 * integer sums into v[j][k], int4g's fused float steps into acc[j][k][par] */
TILE_TGT INL void TILE_NAME(chunk)(const int fmt, const int nr, const int ns, const int par, const hb_q8 *m, const __m256i *w,
                                    const int8_t *q, const int32_t *cr, const float *sg, int gsh, __m256i sidx, int c,
                                    __m256i v[4][4], __m256 acc[4][4][2]) {
  const int Ip = m->Ip;
  const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3);
  if (fmt == HB_INT8) {
    __m256i wu[4];
    for (int j = 0; j < nr; j++) wu[j] = TILE_VNNI ? _mm256_xor_si256(w[j], _mm256_set1_epi8((char)0x80)) : _mm256_abs_epi8(w[j]);
    for (int k = 0; k < ns; k++) {
      const __m256i x = _mm256_loadu_si256((const __m256i *)(q + (size_t)k * Ip + 32 * (size_t)c));
      for (int j = 0; j < nr; j++) v[j][k] = DP1(v[j][k], wu[j], TILE_VNNI ? x : _mm256_sign_epi8(x, w[j]));
    }
  } else if (fmt == HB_INT2) {
    const size_t xo = 256 * (size_t)(c >> 1) + 32 * (size_t)par;
    for (int k = 0; k < ns; k++) {
      const int8_t *xb = q + (size_t)k * Ip + xo;
      const __m256i x0 = _mm256_loadu_si256((const __m256i *)xb), x1 = _mm256_loadu_si256((const __m256i *)(xb + 64));
      const __m256i x2 = _mm256_loadu_si256((const __m256i *)(xb + 128)), x3 = _mm256_loadu_si256((const __m256i *)(xb + 192));
      for (int j = 0; j < nr; j++) {
        const __m256i f0 = _mm256_and_si256(w[j], m3), f1 = _mm256_and_si256(_mm256_srli_epi16(w[j], 2), m3);
        const __m256i f2 = _mm256_and_si256(_mm256_srli_epi16(w[j], 4), m3), f3 = _mm256_and_si256(_mm256_srli_epi16(w[j], 6), m3);
#if TILE_VNNI
        v[j][k] = DP2(DP2(v[j][k], f0, x0, f1, x1), f2, x2, f3, x3);
#else   /* the four 16-bit pair sums first (≤ 4·762: no saturation), then one widening */
        const __m256i t = _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(f0, x0), _mm256_maddubs_epi16(f1, x1)),
                                           _mm256_add_epi16(_mm256_maddubs_epi16(f2, x2), _mm256_maddubs_epi16(f3, x3)));
        v[j][k] = _mm256_add_epi32(v[j][k], _mm256_madd_epi16(t, _mm256_set1_epi16(1)));
#endif
      }
    }
  } else {
    const size_t xo = 128 * (size_t)(c >> 1) + 32 * (size_t)par;
    __m256i lo[4], hi[4];
    __m256 sv[4];
    for (int j = 0; j < nr; j++) {
      lo[j] = _mm256_and_si256(w[j], m4);
      hi[j] = _mm256_and_si256(_mm256_srli_epi16(w[j], 4), m4);
      if (fmt == HB_INT4G) sv[j] = scales8(sg + (size_t)j * m->ng, m->ng, gsh, c, sidx);
    }
    for (int k = 0; k < ns; k++) {
      const int8_t *xb = q + (size_t)k * Ip + xo;
      const __m256i xe = _mm256_loadu_si256((const __m256i *)xb), xd = _mm256_loadu_si256((const __m256i *)(xb + 64));
      if (fmt == HB_INT4G) {
        const __m256i c0 = _mm256_loadu_si256((const __m256i *)(cr + (size_t)k * (Ip / 8) + 8 * (size_t)c));
        for (int j = 0; j < nr; j++)
          acc[j][k][par] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DP2(c0, lo[j], xe, hi[j], xd)), sv[j], acc[j][k][par]);
      } else
        for (int j = 0; j < nr; j++) v[j][k] = DP2(v[j][k], lo[j], xe, hi[j], xd);
    }
  }
}

/* weight rows o..o+nr-1 × x rows s0..s0+ns-1 (nr ≤ 4, ns ≤ 4: constants after inlining) -> y[s0+k, o+j].
 * Chunks go in pairs so that the int4g accumulator of each chunk is known at compile time (registers). */
TILE_TGT INL void TILE_NAME(tile)(const int fmt, const int nr, const int ns, const hb_q8 *m, int o, int s0) {
  const size_t rb = m->rowb;
  const uint8_t *r = hb_q8_row(m, o);
  const int I = m->I, Ip = m->Ip, epc = fmt == HB_INT8 ? 32 : fmt == HB_INT2 ? 128 : 64;
  const int nfull = I / epc;
  const int tailb = (int)(rb - (size_t)nfull * 32);
  __m256i v[4][4], w[4];
  __m256 acc[4][4][2];
  for (int j = 0; j < nr; j++)
    for (int k = 0; k < ns; k++) { v[j][k] = _mm256_setzero_si256(); acc[j][k][0] = acc[j][k][1] = _mm256_setzero_ps(); }
  const int8_t *q = m->qx + (size_t)s0 * Ip;
  const int32_t *cr = fmt == HB_INT4G ? m->corr + (size_t)s0 * (Ip / 8) : NULL;
  const float *sg = fmt == HB_INT4G ? m->sc + (size_t)o * m->ng : NULL;
  __m256i sidx = _mm256_setzero_si256();
  const int gsh = fmt == HB_INT4G ? __builtin_ctz((unsigned)m->gs) : 0;
  if (fmt == HB_INT4G && m->gs < 64)
    sidx = _mm256_srli_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), (int)(__builtin_ctz((unsigned)m->gs) - 3));
#define LOADW_(c) for (int j = 0; j < nr; j++) {                                                              \
    w[j] = _mm256_loadu_si256((const __m256i *)(r + j * rb + 32 * (size_t)(c)));                                 \
    if (!((c) & 1)) pf(m, r + j * rb + 32 * (size_t)(c) + Q8_PF);                                             \
  }
  int c = 0;
  for (; c + 2 <= nfull; c += 2) {
    LOADW_(c);
    TILE_NAME(chunk)(fmt, nr, ns, 0, m, w, q, cr, sg, gsh, sidx, c, v, acc);
    LOADW_(c + 1);
    TILE_NAME(chunk)(fmt, nr, ns, 1, m, w, q, cr, sg, gsh, sidx, c + 1, v, acc);
  }
  if (c < nfull) {                       /* an even chunk left */
    LOADW_(c);
    TILE_NAME(chunk)(fmt, nr, ns, 0, m, w, q, cr, sg, gsh, sidx, c, v, acc);
    c++;
  }
#undef LOADW_
  if (tailb > 0) {                       /* the partial chunk c = nfull, through zeroed copies */
    uint8_t tail[4][32];
    for (int j = 0; j < nr; j++) {
      memset(tail[j], 0, 32);
      memcpy(tail[j], r + j * rb + 32 * (size_t)c, (size_t)tailb);
      w[j] = _mm256_loadu_si256((const __m256i *)tail[j]);
    }
    if (c & 1) TILE_NAME(chunk)(fmt, nr, ns, 1, m, w, q, cr, sg, gsh, sidx, c, v, acc);
    else TILE_NAME(chunk)(fmt, nr, ns, 0, m, w, q, cr, sg, gsh, sidx, c, v, acc);
  }
  const int O = m->O, off8 = fmt == HB_INT8 ? (TILE_VNNI ? 128 : 0) : fmt == HB_INT4 ? 8 : 2;
  float *y = m->y + (size_t)s0 * O + o;
  if (fmt == HB_INT4G || m->I > 32768) {   /* int4g's tree; or lane sums that could pass 2^31 (64-bit totals) */
    for (int k = 0; k < ns; k++)
      for (int j = 0; j < nr; j++)
        y[(size_t)k * O + j] = fmt == HB_INT4G ? tree8x2(acc[j][k][0], acc[j][k][1], m->dx[s0 + k])
          : hb_q8_rowfmt_out(hsum64_8(v[j][k]) - off8 * m->xsum[s0 + k], m->sc[o + j], m->dx[s0 + k]);
    return;
  }
  /* integer formats, four totals at once (exact in int32 here), then the conversion and products of
   * hb_q8_rowfmt_out: decode tiles (4 weight rows, one x row) store their four outputs in one go */
  if (nr == 4 && ns == 1) {
    const __m128i t = _mm_sub_epi32(hb_hsum8x4_i32(v[0][0], v[1][0], v[2][0], v[3][0]), _mm_set1_epi32(off8 * (int32_t)m->xsum[s0]));
    _mm_storeu_ps(y, _mm_mul_ps(_mm_mul_ps(_mm_cvtepi32_ps(t), _mm_loadu_ps(m->sc + o)), _mm_set1_ps(m->dx[s0])));
    return;
  }
  int32_t xo[4];
  float dd[4];
  for (int k = 0; k < 4; k++) { const int s = s0 + (k < ns ? k : 0); xo[k] = off8 * (int32_t)m->xsum[s]; dd[k] = m->dx[s]; }
  const __m128i xsv = _mm_loadu_si128((const __m128i *)xo);
  const __m128 d = _mm_loadu_ps(dd);
  for (int j = 0; j < nr; j++) {
    const __m128i t = _mm_sub_epi32(hb_hsum8x4_i32(v[j][0], v[j][ns > 1], v[j][ns > 2 ? 2 : 0], v[j][ns > 3 ? 3 : 0]), xsv);
    float r[4];
    _mm_storeu_ps(r, _mm_mul_ps(_mm_mul_ps(_mm_cvtepi32_ps(t), _mm_set1_ps(m->sc[o + j])), d));
    for (int k = 0; k < ns; k++) y[(size_t)k * O + j] = r[k];
  }
}

#define TILES_(nr_, ns_) for (; o + (nr_) <= o1; o += (nr_)) TILE_NAME(tile)(fmt, nr_, ns_, m, o, s0)
/* weight rows [lo, hi) in passes of hb_q8_subrows, each against the rows of x four at a time */
TILE_TGT INL void TILE_NAME(rows)(const int fmt, const hb_q8 *m, int lo, int hi) {
  const int S = m->S, R = hb_q8_subrows(m->rowb);
  for (int o0 = lo; o0 < hi; o0 += R) {
    const int o1 = hi - o0 < R ? hi : o0 + R;
    for (int s0 = 0; s0 < S; s0 += 4) {
      int o = o0;
      const int ns = S - s0 < 4 ? S - s0 : 4;
      if (fmt == HB_INT4G) {   /* two float accumulators per pair: tiles that keep them in 16 registers */
        if (ns == 1) { TILES_(2, 1); TILES_(1, 1); }
        else if (ns == 2) { TILES_(2, 2); TILES_(1, 2); }
        else if (ns == 3) TILES_(1, 3);
        else TILES_(1, 4);
      } else if (ns == 1) { TILES_(4, 1); TILES_(1, 1); }
      else if (ns == 2) { TILES_(2, 2); TILES_(1, 2); }
      else if (ns == 3) { TILES_(2, 3); TILES_(1, 3); }
      else { TILES_(2, 4); TILES_(1, 4); }
    }
  }
}
TILE_TGT static void TILE_NAME(i8)(const hb_q8 *m, int lo, int hi) { TILE_NAME(rows)(HB_INT8, m, lo, hi); }
TILE_TGT static void TILE_NAME(i4)(const hb_q8 *m, int lo, int hi) { TILE_NAME(rows)(HB_INT4, m, lo, hi); }
TILE_TGT static void TILE_NAME(i2)(const hb_q8 *m, int lo, int hi) { TILE_NAME(rows)(HB_INT2, m, lo, hi); }
TILE_TGT static void TILE_NAME(i4g)(const hb_q8 *m, int lo, int hi) { TILE_NAME(rows)(HB_INT4G, m, lo, hi); }
#undef TILES_
#undef DP1
#undef DP2
