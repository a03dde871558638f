/* libhb 256-bit fast-mode row kernels, written once for two instruction sets: included (no include guard)
 * by matmul_q8_x86.c with TILE_VNNI 0 (AVX2: maddubs + madd) and by matmul_q8_avxvnni.c with TILE_VNNI 1
 * (AVX-VNNI: vpdpbusd), each defining TILE_TGT (the target attribute) and TILE_NAME(x) (suffixes the
 * names). 32 weight bytes per chunk (int32 lane j sums weight bytes 4j..4j+3); integer sums are exact
 * either way, so both instantiations equal the scalar reference bit for bit.
 *  - int8: AVX2 multiplies |w| by x·sign(w) (no pair sum can saturate); VNNI multiplies w + 128 (sign bit
 *    flipped: unsigned) by x and takes 128·Σq_x off at the end;
 *  - int4 / int4g / int2: unsigned fields as is, the −8 / −2 offsets per segment (corr) or per row (xsum).
 * Integer formats: each weight row, one after the other, against up to 4 rows of x (its unpacking shared by
 * them; decode's rows four to an epilogue); the last partial chunk is read through a zeroed copy (padded
 * activations are zero).
 * int4g (one fused step per group, matmul_q8.h): a tile's 8 (weight row, x row) pairs (8 × 1 for decode,
 * 4 × 2 for batches) run their 8 fused chains side by side in the lanes of one float accumulator. Lane j
 * of chunk c holds segment 8c + j (elements 64c + 8j..+7, its corr added); a group's exact sum is that of
 * its gs/8 segments, over gs/64 chunks when gs > 64 (int32 until the group ends). At each group's end the
 * 8 pairs' vectors are transposed and added (16-bit packs while the true sums fit) into one vector per
 * group (lane l: pair l's isum_g), converted and fused with the pairs' scales of that group (8 groups of
 * scales transposed at a time); groups past the row do not exist (no step). Holds no state. */
#if TILE_VNNI
#define DP1(acc, a, x) _mm256_dpbusd_avx_epi32(acc, a, x)
#define DP2(acc, a, x, b, y) _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(acc, a, x), b, y)
#else
#define DP1(acc, a, x) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, x), _mm256_set1_epi16(1)))
#define DP2(acc, a, x, b, y)                                                                              \
  _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(a, x), _mm256_maddubs_epi16(b, y)), \
                                          _mm256_set1_epi16(1)))
#endif

/* one chunk c (parity par = c mod 2, a constant) of a weight row, w, against x rows k < ns (integer formats): the
 * integer sums into v[k] */
TILE_TGT INL void TILE_NAME(chunk)(const int fmt, const int ns, const int par, const hb_q8 *m, __m256i w, const int8_t *q,
                                    int c, __m256i v[4]) {
  const int Ip = m->Ip;
  const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3);
  if (fmt == HB_INT8) {
    const __m256i wu = TILE_VNNI ? _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)) : _mm256_abs_epi8(w);
    for (int k = 0; k < ns; k++) {
      const __m256i x = _mm256_loadu_si256((const __m256i *)(q + (size_t)k * Ip + 32 * (size_t)c));
      v[k] = DP1(v[k], wu, TILE_VNNI ? x : _mm256_sign_epi8(x, w));
    }
  } else if (fmt == HB_INT2) {
    const size_t xo = 256 * (size_t)(c >> 1) + 32 * (size_t)par;
    const __m256i f0 = _mm256_and_si256(w, m3), f1 = _mm256_and_si256(_mm256_srli_epi16(w, 2), m3);
    const __m256i f2 = _mm256_and_si256(_mm256_srli_epi16(w, 4), m3), f3 = _mm256_and_si256(_mm256_srli_epi16(w, 6), m3);
    for (int k = 0; k < ns; k++) {
      const int8_t *xb = q + (size_t)k * Ip + xo;
      const __m256i x0 = _mm256_loadu_si256((const __m256i *)xb), x1 = _mm256_loadu_si256((const __m256i *)(xb + 64));
      const __m256i x2 = _mm256_loadu_si256((const __m256i *)(xb + 128)), x3 = _mm256_loadu_si256((const __m256i *)(xb + 192));
#if TILE_VNNI
      v[k] = DP2(DP2(v[k], f0, x0, f1, x1), f2, x2, f3, x3);
#else   /* the four 16-bit pair sums first (≤ 4·762: no saturation), then one widening */
      const __m256i t = _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(f0, x0), _mm256_maddubs_epi16(f1, x1)),
                                         _mm256_add_epi16(_mm256_maddubs_epi16(f2, x2), _mm256_maddubs_epi16(f3, x3)));
      v[k] = _mm256_add_epi32(v[k], _mm256_madd_epi16(t, _mm256_set1_epi16(1)));
#endif
    }
  } else {
    const size_t xo = 128 * (size_t)(c >> 1) + 32 * (size_t)par;
    const __m256i lo = _mm256_and_si256(w, m4), hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
    for (int k = 0; k < ns; k++) {
      const int8_t *xb = q + (size_t)k * Ip + xo;
      v[k] = DP2(v[k], lo, _mm256_loadu_si256((const __m256i *)xb), hi, _mm256_loadu_si256((const __m256i *)(xb + 64)));
    }
  }
}

/* the integer sums of the weight row at r against x rows k < ns of q into v[k]: chunks in pairs (the parity a
 * constant), each pair's line prefetched Q8_PF on, then the partial last chunk through a zeroed copy */
TILE_TGT INL void TILE_NAME(sums)(const int fmt, const int ns, const hb_q8 *m, const uint8_t *r, const int8_t *q, __m256i v[4]) {
  const int epc = fmt == HB_INT8 ? 32 : fmt == HB_INT2 ? 128 : 64, nfull = m->I / epc;
  const int tailb = (int)(m->rowb - (size_t)nfull * 32);
  int c = 0;
  for (; c + 2 <= nfull; c += 2) {
    pf(m, r + 32 * (size_t)c + Q8_PF);
    TILE_NAME(chunk)(fmt, ns, 0, m, _mm256_loadu_si256((const __m256i *)(r + 32 * (size_t)c)), q, c, v);
    TILE_NAME(chunk)(fmt, ns, 1, m, _mm256_loadu_si256((const __m256i *)(r + 32 * (size_t)c + 32)), q, c + 1, v);
  }
  if (c < nfull) {                       /* an even chunk left */
    pf(m, r + 32 * (size_t)c + Q8_PF);
    TILE_NAME(chunk)(fmt, ns, 0, m, _mm256_loadu_si256((const __m256i *)(r + 32 * (size_t)c)), q, c, v);
    c++;
  }
  if (tailb > 0) {                       /* the partial chunk c = nfull, through a zeroed copy */
    uint8_t tail[32];
    memset(tail, 0, 32);
    memcpy(tail, r + 32 * (size_t)c, (size_t)tailb);
    if (c & 1) TILE_NAME(chunk)(fmt, ns, 1, m, _mm256_loadu_si256((const __m256i *)tail), q, c, v);
    else TILE_NAME(chunk)(fmt, ns, 0, m, _mm256_loadu_si256((const __m256i *)tail), q, c, v);
  }
}

/* weight rows o..o+nr-1 × x rows s0..s0+ns-1 (nr = 4 with ns = 1, else nr = 1 with ns ≤ 4: constants after inlining)
 * -> y[s0+k, o+j] (integer formats): the rows one after the other, one stream, each against the ns rows of x (its
 * chunks unpacked once for them). Tiles of 4 or 2 weight rows read 32 bytes of each in turn, and those four or two
 * streams ran 1.2-1.5x slower from DRAM (2 cores of an AMD EPYC, Zen 5, HB_SIMD=avx2 and avxvnni, int8 1024x1024 to
 * 16384x2048 at S = 1-8, in-process A/B); the integer sums are the same either way, so the bits are. */
TILE_TGT INL void TILE_NAME(tile)(const int fmt, const int nr, const int ns, const hb_q8 *m, int o, int s0) {
  const uint8_t *r = hb_q8_row(m, o);
  const int8_t *q = m->qx + (size_t)s0 * m->Ip;
  __m256i v[4][4];
  for (int j = 0; j < nr; j++) {   /* (a local accumulator: v[j] with j unknown would live in memory) */
    __m256i u[4];
    for (int k = 0; k < ns; k++) u[k] = _mm256_setzero_si256();
    TILE_NAME(sums)(fmt, ns, m, r + j * m->rowb, q, u);
    for (int k = 0; k < ns; k++) v[j][k] = u[k];
  }
  const int O = m->O, off8 = fmt == HB_INT8 ? (TILE_VNNI ? 128 : 0) : fmt == HB_INT4 ? 8 : 2;
  float *y = m->y + (size_t)s0 * O + o;
  if (m->I > 32768) {   /* lane sums that could pass 2^31: 64-bit totals */
    for (int k = 0; k < ns; k++)
      for (int j = 0; j < nr; j++)
        y[(size_t)k * O + j] = hb_q8_rowfmt_out(hsum64_8(v[j][k]) - off8 * m->xsum[s0 + k], m->sc[o + j], m->dx[s0 + k]);
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

/* ---- int4g. P = 64/gs groups per chunk (8, 4, 2, 1), 0 when gs > 64 (a group spans gs/64 chunks) ---- */
/* in[l] lane p -> out[p] lane l (an 8 × 8 transpose) */
TILE_TGT INL void TILE_NAME(tr8)(const __m256i *in, __m256i *out) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(in[i], in[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(in[i], in[i + 1]);
  }
  for (int h = 0; h < 8; h += 4) {   /* u[h + p] = lane p | lane p + 4 of in[h..h+3] */
    u[h] = _mm256_unpacklo_epi64(t[h], t[h + 2]);
    u[h + 1] = _mm256_unpackhi_epi64(t[h], t[h + 2]);
    u[h + 2] = _mm256_unpacklo_epi64(t[h + 1], t[h + 3]);
    u[h + 3] = _mm256_unpackhi_epi64(t[h + 1], t[h + 3]);
  }
  for (int p = 0; p < 4; p++) {
    out[p] = _mm256_permute2x128_si256(u[p], u[p + 4], 0x20);
    out[p + 4] = _mm256_permute2x128_si256(u[p], u[p + 4], 0x31);
  }
}
/* the group sums G[p] (lane l: pair l) from h[i], pairs 2i and 2i+1: P = 4, 2, 1 (16 bits): [2i's segments 0..3, 2i+1's |
 * 4..7] (true sums: |s| ≤ 8·8·127, so pairs of them fit too; pmaddwd widens); or P = 0 (32 bits, one group): [2i's
 * segment pairs 0-1, 2-3, 2i+1's | 4-5, 6-7] */
TILE_TGT INL void TILE_NAME(gfin)(const int P, const __m256i *h, __m256i *G) {
  __m256i a0, a1, b0, b1;   /* pairs 0..3 and 4..7: [group p | group p + P/2] */
  if (P) {   /* packssdw(pmaddwd(a, 1), pmaddwd(b, 1)): phaddw's order (faster) */
#define HADD16_(a, b) _mm256_packs_epi32(_mm256_madd_epi16(a, _mm256_set1_epi16(1)), _mm256_madd_epi16(b, _mm256_set1_epi16(1)))
    const __m256i q0 = HADD16_(h[0], h[1]), q1 = HADD16_(h[2], h[3]), e = P == 4 ? _mm256_set1_epi32(1) : _mm256_set1_epi16(1);
#undef HADD16_
    a0 = _mm256_madd_epi16(q0, e); b0 = _mm256_madd_epi16(q1, e);
    if (P == 4) {   /* the 16-bit halves apart */
      a1 = _mm256_madd_epi16(q0, _mm256_set1_epi32(0x10000)); b1 = _mm256_madd_epi16(q1, _mm256_set1_epi32(0x10000));
      G[1] = _mm256_permute2x128_si256(a1, b1, 0x20); G[3] = _mm256_permute2x128_si256(a1, b1, 0x31);
    }
  } else { a0 = _mm256_hadd_epi32(h[0], h[1]); b0 = _mm256_hadd_epi32(h[2], h[3]); }
  const __m256i g0 = _mm256_permute2x128_si256(a0, b0, 0x20), g1 = _mm256_permute2x128_si256(a0, b0, 0x31);
  if (P <= 1) G[0] = _mm256_add_epi32(g0, g1);
  else { G[0] = g0; G[P / 2] = g1; }
}
/* acc + the segment sums of the 32 weight bytes at w against (xe, xd) */
TILE_TGT INL __m256i TILE_NAME(gdot)(const uint8_t *w, __m256i acc, __m256i xe, __m256i xd) {
  const __m256i m4 = _mm256_set1_epi8(0x0f), v = _mm256_loadu_si256((const __m256i *)w);
  return DP2(acc, _mm256_and_si256(v, m4), xe, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), xd);
}
/* chunk c (32 bytes of row j at w[j]) against x rows k < ns, pair l = k·nr + j (nr·ns = 8). P = 0: V[l] += its segment
 * sums; else G = its group sums (lanes in pairs: each pair's true segment sums, corr included, packed to 16 bits) */
TILE_TGT INL void TILE_NAME(gchunk)(const int P, const int nr, const int ns, const uint8_t *const *w, const int8_t *const *x,
                                     const int32_t *const *cr, int c, __m256i *V, __m256i *G) {
  const size_t xo = 128 * (size_t)(c >> 1) + 32 * (size_t)(c & 1);
  __m256i xe[4], xd[4], cb[4], h[4];
  for (int k = 0; k < ns; k++) {
    xe[k] = _mm256_loadu_si256((const __m256i *)(x[k] + xo));
    xd[k] = _mm256_loadu_si256((const __m256i *)(x[k] + xo + 64));
    if (P) cb[k] = _mm256_loadu_si256((const __m256i *)(cr[k] + 8 * (size_t)c));
  }
#define DOT_(l) TILE_NAME(gdot)(w[(l) % nr], P ? cb[(l) / nr] : V[l], xe[(l) / nr], xd[(l) / nr])
  if (P == 0 || P == 8) {
    for (int l = 0; l < 8; l++) V[l] = DOT_(l);
    if (P) TILE_NAME(tr8)(V, G);
    return;
  }
  for (int i = 0; i < 4; i++) h[i] = _mm256_packs_epi32(DOT_(2 * i), DOT_(2 * i + 1));   /* reduced as they come */
#undef DOT_
  TILE_NAME(gfin)(P, h, G);
}
/* st[i] lane l = the scale of group g + i of row sg[l] (groups past the row: 0); once per 8 groups (not inlined) */
TILE_TGT __attribute__((noinline)) static void TILE_NAME(gscales)(const float *const *sg, int ng, int g, __m256i *st) {
  const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(ng - g), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i s[8];
  for (int l = 0; l < 8; l++)
    s[l] = _mm256_castps_si256(ng - g >= 8 ? _mm256_loadu_ps(sg[l] + g) : _mm256_maskload_ps(sg[l] + g, mk));
  TILE_NAME(tr8)(s, st);
}
/* weight rows o + j (j < nr) × x rows s0 + k (k < ns), nr·ns = 8 (constants), pair l = k·nr + j in lane l of one
 * float accumulator. Rows from nrv on repeat the last valid one (not stored). Groups 8 at a time (their scales). */
TILE_TGT INL void TILE_NAME(gtile)(const int P, const int nr, const int ns, const hb_q8 *m, int o, int nrv, int s0) {
  const int Ip = m->Ip, ng = m->ng, nfull = m->I / 64, tailb = (int)(m->rowb - (size_t)nfull * 32);
  const int nch = nfull + (tailb > 0), gc = P ? 1 : m->gs >> 6;   /* chunks; chunks per group (P = 0) */
  const uint8_t *w[8];
  const int8_t *x[4];
  const int32_t *cr[4];
  const float *sg[8];
  uint8_t tail[8][32];   /* the partial last chunk, zero-padded */
  for (int j = 0; j < nr; j++) {
    w[j] = hb_q8_row(m, o + (j < nrv ? j : nrv - 1));
    if (tailb > 0) { memset(tail[j], 0, 32); memcpy(tail[j], w[j] + 32 * (size_t)nfull, (size_t)tailb); }
  }
  for (int k = 0; k < ns; k++) { x[k] = m->qx + (size_t)(s0 + k) * Ip; cr[k] = m->corr + (size_t)(s0 + k) * (Ip / 8); }
  for (int l = 0; l < 8; l++) sg[l] = m->sc + (size_t)(o + (l % nr < nrv ? l % nr : nrv - 1)) * ng;
  __m256i V[8], G[8], st[8];
  __m256 acc = _mm256_setzero_ps();
  for (int g0 = 0, c = 0; g0 < ng; g0 += 8) {
    TILE_NAME(gscales)(sg, ng, g0, st);
    for (int g = g0; g < g0 + 8 && g < ng;) {   /* a chunk (P groups) or a group (gc chunks) */
      const int ce = P ? c + 1 : c + gc < nch ? c + gc : nch;
      if (!P) {   /* the group's corr */
        for (int k = 0; k < ns; k++) {
          __m256i b = _mm256_loadu_si256((const __m256i *)(cr[k] + 8 * (size_t)c));
          for (int i = c + 1; i < ce; i++) b = _mm256_add_epi32(b, _mm256_loadu_si256((const __m256i *)(cr[k] + 8 * (size_t)i)));
          for (int j = 0; j < nr; j++) V[k * nr + j] = b;
        }
      }
      for (; c < ce; c++) {   /* w[j]: chunk c of row j */
        if (c == nfull) for (int j = 0; j < nr; j++) w[j] = tail[j];
        else if (!(c & 1)) for (int j = 0; j < nr; j++) pf(m, w[j] + (size_t)nr * m->rowb);   /* the next tile's row j */
        TILE_NAME(gchunk)(P, nr, ns, w, x, cr, c, V, G);
        for (int j = 0; j < nr; j++) w[j] += 32;
      }
      if (!P) {
        __m256i h[4];
        for (int i = 0; i < 4; i++) h[i] = _mm256_hadd_epi32(V[2 * i], V[2 * i + 1]);
        TILE_NAME(gfin)(0, h, G);
      }
      for (int p = 0; p < (P ? P : 1) && g < ng; p++, g++)
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(G[p]), _mm256_castsi256_ps(st[g - g0]), acc);
    }
  }
  float *y = m->y + (size_t)s0 * m->O + o;
  if (ns == 1 && nr == 8 && nrv == 8) { _mm256_storeu_ps(y, _mm256_mul_ps(acc, _mm256_set1_ps(m->dx[s0]))); return; }
  float a[8];
  _mm256_storeu_ps(a, acc);
  for (int k = 0; k < ns; k++)
    for (int j = 0; j < nrv; j++) y[(size_t)k * m->O + j] = a[k * nr + j] * m->dx[s0 + k];
}
/* int4g rows [lo, hi) in passes of ≥ 8 rows: x rows two at a time (4 weight rows × 2), the last one alone (8 × 1:
 * decode); a pass's last rows in one tile */
TILE_TGT INL void TILE_NAME(grows)(const int P, const hb_q8 *m, int lo, int hi) {
  const int S = m->S, R = (hb_q8_subrows(m->rowb) + 7) & ~7;
  for (int o0 = lo; o0 < hi; o0 += R) {
    const int o1 = hi - o0 < R ? hi : o0 + R;
    for (int s0 = 0; s0 < S; s0 += 2) {
      if (s0 + 1 < S)
        for (int o = o0; o < o1; o += 4) TILE_NAME(gtile)(P, 4, 2, m, o, o1 - o < 4 ? o1 - o : 4, s0);
      else
        for (int o = o0; o < o1; o += 8) TILE_NAME(gtile)(P, 8, 1, m, o, o1 - o < 8 ? o1 - o : 8, s0);
    }
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
      if (ns == 1) { TILES_(4, 1); TILES_(1, 1); }   /* decode: four rows share the epilogue */
      else if (ns == 2) TILES_(1, 2);
      else if (ns == 3) TILES_(1, 3);
      else TILES_(1, 4);
    }
  }
}
TILE_TGT static void TILE_NAME(i8)(const hb_q8 *m, int lo, int hi) { TILE_NAME(rows)(HB_INT8, m, lo, hi); }
TILE_TGT static void TILE_NAME(i4)(const hb_q8 *m, int lo, int hi) { TILE_NAME(rows)(HB_INT4, m, lo, hi); }
TILE_TGT static void TILE_NAME(i2)(const hb_q8 *m, int lo, int hi) { TILE_NAME(rows)(HB_INT2, m, lo, hi); }
TILE_TGT static void TILE_NAME(i4g)(const hb_q8 *m, int lo, int hi) {
  if (m->gs == 8) TILE_NAME(grows)(8, m, lo, hi);
  else if (m->gs == 16) TILE_NAME(grows)(4, m, lo, hi);
  else if (m->gs == 32) TILE_NAME(grows)(2, m, lo, hi);
  else if (m->gs == 64) TILE_NAME(grows)(1, m, lo, hi);
  else TILE_NAME(grows)(0, m, lo, hi);
}
#undef TILES_
#undef DP1
#undef DP2
