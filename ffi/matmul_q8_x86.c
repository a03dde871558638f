/* libhb fast-mode matmul kernels for x86 (numerics and activation layouts: matmul_q8.h). Holds no state.
 *  - AVX-512 VNNI: 64 weight bytes per block; vpdpbusd multiplies unsigned weight codes (nibbles, 2-bit
 *    fields) by signed activations; int8 weights are signed, so they enter as w + 128 (the sign bit
 *    flipped) and 128·Σq_x (per row of x, from quantization) is taken off at the end. One row of x
 *    (decode, or the last of a batch): four weight rows at a time, software prefetch 6 KiB ahead on the
 *    weight stream (decode is DRAM-bound; never past the matrix). More rows: int8 / int4 in passes over 4 rows
 *    of x (a last pass over 2-7; wide_int: 4 or 2 weight rows, named accumulators). int8 batches of at least
 *    HB_Q8_GEMM_S rows first go through the packed-panel GEMM (matmul_q8_gemm_x86.c), whole panels of 32
 *    weight rows; the rows left over come here. int4g has kernels of its own (matmul_q8_i4g_x86.c).
 *  - AVX2 (also used at the AVX-512-without-VNNI level): matmul_q8_tile256.h with maddubs + madd; int4g with gs ≥ 32
 *    and 2+ rows of x, and with gs = 64 and one row of x, in matmul_q8_i4g_avx2.c.
 * int32 lane j of a block always sums weight bytes 4j..4j+3.
 * The last partial block is read with a masked load; padded activations are zero, so padded weights
 * contribute nothing. (The SIMD parts of x quantization: matmul_q8_xq_x86.c.) */
#include "matmul_q8.h"
#if defined(__x86_64__) || defined(__i386__)
#include "matmul_q8_x86.h"

#define TV __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))

/* ================================ AVX-512 VNNI ================================ */
TV INL int64_t hsum64(__m512i v) {
  const __m512i a = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(v));
  const __m512i b = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(v, 1));
  return _mm512_reduce_add_epi64(_mm512_add_epi64(a, b));
}
/* out[k] = y[s0+k, o] for k < ns (a constant after inlining) */
TV INL void dot_vnni(const int fmt, const int ns, const hb_q8 *m, int o, int s0, float *out) {
  const uint8_t *r = hb_q8_row(m, o);
  const int I = m->I, Ip = m->Ip, epb = fmt == HB_INT8 ? 64 : fmt == HB_INT2 ? 256 : 128;
  const int nfull = I / epb;
  const int tailb = (int)(m->rowb - (size_t)nfull * 64);
  const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(3), flip = _mm512_set1_epi8((char)0x80);
  __m512i v[4];
  const int8_t *q[4];
  for (int k = 0; k < 4; k++) v[k] = _mm512_setzero_si512();
  for (int k = 0; k < ns; k++) q[k] = m->qx + (size_t)(s0 + k) * Ip;
  for (int b = 0; b <= nfull; b++) {
    __m512i w;
    if (b < nfull) {
      w = _mm512_loadu_si512((const void *)(r + 64 * (size_t)b));
      pf(m, r + 64 * (size_t)b + Q8_PF);
    }
    else if (tailb > 0) w = _mm512_maskz_loadu_epi8((__mmask64)(tailb >= 64 ? ~0ull : (1ull << tailb) - 1), r + 64 * (size_t)b);
    else break;
    if (fmt == HB_INT8) {
      const __m512i wu = _mm512_xor_si512(w, flip);
      for (int k = 0; k < ns; k++) v[k] = _mm512_dpbusd_epi32(v[k], wu, _mm512_loadu_si512((const void *)(q[k] + 64 * (size_t)b)));
    } else if (fmt == HB_INT2) {
      const __m512i f0 = _mm512_and_si512(w, m3), f1 = _mm512_and_si512(_mm512_srli_epi16(w, 2), m3);
      const __m512i f2 = _mm512_and_si512(_mm512_srli_epi16(w, 4), m3), f3 = _mm512_and_si512(_mm512_srli_epi16(w, 6), m3);
      for (int k = 0; k < ns; k++) {
        const int8_t *xb = q[k] + 256 * (size_t)b;
        __m512i t = _mm512_dpbusd_epi32(v[k], f0, _mm512_loadu_si512((const void *)xb));
        t = _mm512_dpbusd_epi32(t, f1, _mm512_loadu_si512((const void *)(xb + 64)));
        t = _mm512_dpbusd_epi32(t, f2, _mm512_loadu_si512((const void *)(xb + 128)));
        v[k] = _mm512_dpbusd_epi32(t, f3, _mm512_loadu_si512((const void *)(xb + 192)));
      }
    } else {
      const __m512i lo = _mm512_and_si512(w, m4), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
      for (int k = 0; k < ns; k++) {
        const int8_t *xb = q[k] + 128 * (size_t)b;
        const __m512i t = _mm512_dpbusd_epi32(v[k], lo, _mm512_loadu_si512((const void *)xb));
        v[k] = _mm512_dpbusd_epi32(t, hi, _mm512_loadu_si512((const void *)(xb + 64)));
      }
    }
  }
  for (int k = 0; k < ns; k++) {
    const int s = s0 + k;
    int64_t isum = hsum64(v[k]);
    isum -= (fmt == HB_INT8 ? 128 : fmt == HB_INT2 ? 2 : 8) * m->xsum[s];
    out[k] = hb_q8_rowfmt_out(isum, m->sc[o], m->dx[s]);
  }
}

/* int8 / int4 against 2-8 rows of x in ONE pass (decode steps of several streams; the rows the GEMM leaves):
 * weight rows o..o+nr-1 × x rows s0..s0+ns-1 (nr·ns ≤ 16 accumulators), each weight block loaded once. The
 * accumulators are named variables, not an array: GCC kept tile_vnni's arrays of int32 accumulators in memory and
 * stored every one of them on every update, so those tiles were bound by stores (one thread, int8 2048×2048 from
 * the cache: S = 4 121-131 → 62-71 us, S = 8 208-224 → 146-148). The same integer sums and epilogue as dot_vnni:
 * the same bits. */
#define W8_ROW(j) __m512i j##0 = z, j##1 = z, j##2 = z, j##3 = z, j##4 = z, j##5 = z, j##6 = z, j##7 = z
#define W8_ACC(acc, j) acc = fmt == HB_INT8 ? _mm512_dpbusd_epi32(acc, lo##j, xe) \
                                            : _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(acc, lo##j, xe), hi##j, xo)
#define W8_DOT(k)                                                                            \
  if (ns > k) {                                                                              \
    const __m512i xe = _mm512_loadu_si512((const void *)(xb + (size_t)(k) * xs));            \
    const __m512i xo = fmt == HB_INT8 ? xe : _mm512_loadu_si512((const void *)(xb + (size_t)(k) * xs + 64)); \
    W8_ACC(a##k, 0);                                                                         \
    if (nr > 1) W8_ACC(b##k, 1);                                                             \
    if (nr > 2) W8_ACC(c##k, 2);                                                             \
    if (nr > 3) W8_ACC(d##k, 3);                                                             \
  }
/* y[s0+k0+i, o] for i < 4, k0 + i < ns, from the accumulators of x rows k0.. (lanes past ns repeat one: not stored) */
TV INL void wide_out(const int off, const hb_q8 *m, int o, int s0, int ns, int k0, __m512i r0, __m512i r1, __m512i r2, __m512i r3) {
  int32_t xo[4];
  float dd[4], r[4];
  for (int i = 0; i < 4; i++) {
    const int s = s0 + k0 + (k0 + i < ns ? i : 0);
    xo[i] = off * (int32_t)m->xsum[s];
    dd[i] = m->dx[s];
  }
  float *y = m->y + (size_t)(s0 + k0) * m->O + o;
  if (m->I > 32768) {   /* lane sums could pass 2^31: 64-bit totals, one output at a time */
    const __m512i rr[4] = { r0, r1, r2, r3 };
    for (int i = 0; i < 4 && k0 + i < ns; i++)
      y[(size_t)i * m->O] = hb_q8_rowfmt_out(hsum64(rr[i]) - off * m->xsum[s0 + k0 + i], m->sc[o], m->dx[s0 + k0 + i]);
    return;
  }
  const __m128i t = _mm_sub_epi32(hb_hsum16x4_i32(r0, r1, r2, r3), _mm_loadu_si128((const __m128i *)xo));
  _mm_storeu_ps(r, _mm_mul_ps(_mm_mul_ps(_mm_cvtepi32_ps(t), _mm_set1_ps(m->sc[o])), _mm_loadu_ps(dd)));
  for (int i = 0; i < 4 && k0 + i < ns; i++) y[(size_t)i * m->O] = r[i];
}
#define W8_OUT(j, oj)                                                                                                   \
  do {                                                                                                                  \
    wide_out(off, m, oj, s0, ns, 0, j##0, ns > 1 ? j##1 : j##0, ns > 2 ? j##2 : j##0, ns > 3 ? j##3 : j##0);            \
    if (ns > 4) wide_out(off, m, oj, s0, ns, 4, j##4, ns > 5 ? j##5 : j##4, ns > 6 ? j##6 : j##4, ns > 7 ? j##7 : j##4); \
  } while (0)
#define W8_LOAD(j, ld)                                                                                   \
  do {                                                                                                   \
    const __m512i w_ = ld;                                                                               \
    if (fmt == HB_INT8) lo##j = _mm512_xor_si512(w_, flip);                                              \
    else { lo##j = _mm512_and_si512(w_, m4); hi##j = _mm512_and_si512(_mm512_srli_epi16(w_, 4), m4); } \
  } while (0)
TV INL void wide_int(const int fmt, const int nr, const int ns, const hb_q8 *m, int o, int s0) {
  const size_t rb = m->rowb, xs = (size_t)m->Ip;
  const uint8_t *r0 = hb_q8_row(m, o);
  const int epb = fmt == HB_INT8 ? 64 : 128, nfull = m->I / epb, tailb = (int)(rb - (size_t)nfull * 64);
  const int off = fmt == HB_INT8 ? 128 : 8;
  const int8_t *x0 = m->qx + (size_t)s0 * xs;
  const __m512i flip = _mm512_set1_epi8((char)0x80), m4 = _mm512_set1_epi8(0x0f), z = _mm512_setzero_si512();
  const size_t pfd = nr * rb * ((Q8_PF + nr * rb - 1) / (nr * rb));   /* a later tile's rows, at least Q8_PF on */
  W8_ROW(a); W8_ROW(b); W8_ROW(c); W8_ROW(d);
  for (int bk = 0; bk <= nfull; bk++) {
    __m512i lo0, lo1 = z, lo2 = z, lo3 = z, hi0 = z, hi1 = z, hi2 = z, hi3 = z;
    const uint8_t *p = r0 + 64 * (size_t)bk;
    if (bk < nfull) {
      W8_LOAD(0, _mm512_loadu_si512((const void *)p));
      if (nr > 1) W8_LOAD(1, _mm512_loadu_si512((const void *)(p + rb)));
      if (nr > 2) W8_LOAD(2, _mm512_loadu_si512((const void *)(p + 2 * rb)));
      if (nr > 3) W8_LOAD(3, _mm512_loadu_si512((const void *)(p + 3 * rb)));
      for (int c = 0; c < nr; c++) pf(m, r0 + pfd + (size_t)64 * (nr * bk + c));   /* in address order: a block's share */
    } else if (tailb > 0) {
      const __mmask64 mk = (__mmask64)(tailb >= 64 ? ~0ull : (1ull << tailb) - 1);
      W8_LOAD(0, _mm512_maskz_loadu_epi8(mk, p));
      if (nr > 1) W8_LOAD(1, _mm512_maskz_loadu_epi8(mk, p + rb));
      if (nr > 2) W8_LOAD(2, _mm512_maskz_loadu_epi8(mk, p + 2 * rb));
      if (nr > 3) W8_LOAD(3, _mm512_maskz_loadu_epi8(mk, p + 3 * rb));
    } else break;
    const int8_t *xb = x0 + (size_t)epb * bk;
    W8_DOT(0) W8_DOT(1) W8_DOT(2) W8_DOT(3) W8_DOT(4) W8_DOT(5) W8_DOT(6) W8_DOT(7)
  }
  W8_OUT(a, o);
  if (nr > 1) W8_OUT(b, o + 1);
  if (nr > 2) W8_OUT(c, o + 2);
  if (nr > 3) W8_OUT(d, o + 3);
}
#undef W8_ROW
#undef W8_ACC
#undef W8_DOT
#undef W8_OUT
#undef W8_LOAD

/* int8 / int4, x rows s0..s0+ns-1 (2 ≤ ns ≤ 8) against weight rows [o, o1): the first pass over the rows (s0 = 0:
 * they come from memory) one weight row after another, one stream (4 or 2 rows interleaved ran S = 2-5 1.14-1.29x
 * slower: 2 cores of an AMD EPYC, Zen 5, int8 16384x2048 / 1024x1024 / 6144x2048, in-process A/B); later passes
 * (S = 8, from the cache) in wide_int tiles of 4 weight rows for ns ≤ 4 and 2 beyond (≤ 16 accumulators: one row
 * a tile there ran 0.81-0.88x), the last one alone. The same integer sums and epilogue either way: the same bits. */
#define WIDE_NS(nr, o) do {                                     \
    switch (ns) {                                               \
    case 2: wide_int(fmt, nr, 2, m, o, s0); break;              \
    case 3: wide_int(fmt, nr, 3, m, o, s0); break;              \
    case 4: wide_int(fmt, nr, 4, m, o, s0); break;              \
    case 5: wide_int(fmt, nr, 5, m, o, s0); break;              \
    case 6: wide_int(fmt, nr, 6, m, o, s0); break;              \
    case 7: wide_int(fmt, nr, 7, m, o, s0); break;              \
    default: wide_int(fmt, nr, 8, m, o, s0); break;             \
    }                                                           \
  } while (0)
TV INL void wide_rows(const int fmt, const hb_q8 *m, int o, int o1, int s0, int ns) {
  if (s0 == 0) {
    for (; o < o1; o++) WIDE_NS(1, o);
    return;
  }
  if (ns <= 4) for (; o + 4 <= o1; o += 4) WIDE_NS(4, o);
  for (; o + 2 <= o1; o += 2) WIDE_NS(2, o);
  if (o < o1) WIDE_NS(1, o);
}
#undef WIDE_NS

/* one block b of one weight row w against one row of x, accumulated into v */
TV INL void dec_block(const int fmt, __m512i w, const int8_t *x, int b, __m512i *v) {
  if (fmt == HB_INT8) {
    *v = _mm512_dpbusd_epi32(*v, _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80)), _mm512_loadu_si512((const void *)(x + 64 * (size_t)b)));
    return;
  }
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i lo = _mm512_and_si512(w, m4), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
  const __m512i xe = _mm512_loadu_si512((const void *)(x + 128 * (size_t)b)), xo = _mm512_loadu_si512((const void *)(x + 128 * (size_t)b + 64));
  *v = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(*v, lo, xe), hi, xo);
}

/* One row of x (decode, or the last row of a batch): weight rows o..o+3 against row s0 of x (int8, int4),
 * each row in exactly dot_vnni's order, the rows one after the other (one sequential stream: four
 * interleaved row streams measured ~25% slower from DRAM at 2 threads). Setup and reductions are shared
 * (rows of a few blocks are common: the per-row overhead of one-row passes costs as much as the data there).
 * Full blocks in a loop of their own, then the partial last block through a masked load. */
TV INL void dec4_vnni(const int fmt, const hb_q8 *m, int o, int s0) {
  const size_t rb = m->rowb;
  const int I = m->I, epb = fmt == HB_INT8 ? 64 : 128, nfull = I / epb;
  const int tailb = (int)(rb - (size_t)nfull * 64);
  const __mmask64 mk = (__mmask64)(tailb >= 64 ? ~0ull : (1ull << tailb) - 1);
  const int8_t *x = m->qx + (size_t)s0 * m->Ip;
  __m512i v[4];
  const uint8_t *r = hb_q8_row(m, o);
  for (int j = 0; j < 4; j++) {
    const uint8_t *rj = r + j * rb;
    v[j] = _mm512_setzero_si512();
    for (int b = 0; b < nfull; b++) {
      pf(m, rj + 64 * (size_t)b + Q8_PF);
      dec_block(fmt, _mm512_loadu_si512((const void *)(rj + 64 * (size_t)b)), x, b, &v[j]);
    }
    if (tailb > 0) dec_block(fmt, _mm512_maskz_loadu_epi8(mk, rj + 64 * (size_t)nfull), x, nfull, &v[j]);
  }
  float *y = m->y + (size_t)s0 * m->O + o;
  const float d = m->dx[s0];
  const int off = fmt == HB_INT8 ? 128 : 8;
  if (I > 32768) {   /* lane sums could pass 2^31 */
    for (int j = 0; j < 4; j++) y[j] = hb_q8_rowfmt_out(hsum64(v[j]) - off * m->xsum[s0], m->sc[o + j], d);
    return;
  }
  /* the four rows at once: exact in int32 here, the same conversion and products as hb_q8_rowfmt_out */
  const __m128i t = _mm_sub_epi32(hb_hsum16x4_i32(v[0], v[1], v[2], v[3]), _mm_set1_epi32(off * (int32_t)m->xsum[s0]));
  _mm_storeu_ps(y, _mm_mul_ps(_mm_mul_ps(_mm_cvtepi32_ps(t), _mm_loadu_ps(m->sc + o)), _mm_set1_ps(d)));
}

TV INL void rows_vnni(const int fmt, const hb_q8 *m, int lo, int hi) {
  const int S = m->S, O = m->O, R = hb_q8_subrows(m->rowb);
  float out[4];
  for (int o0 = lo; o0 < hi; o0 += R) {
    const int o1 = hi - o0 < R ? hi : o0 + R;
    int s0 = 0;
    /* int8 / int4: x rows 4 at a time (4-weight-row tiles) while at least 8 remain, then the rest (≤ 7) in one
     * pass; a last single row: dec4. S = 8 as two passes of 4 rather than one of 8 (2-weight-row tiles): dense
     * decode-step calls of 8 streams ~10% faster in-engine (bench profile, 3 alternated runs), 1024x1024 from
     * memory 30.5 -> 26.8 us (throwaway harness) */
    if (fmt != HB_INT2)
      for (int ns; (ns = S - s0 >= 8 ? 4 : S - s0) >= 2; s0 += ns) wide_rows(fmt, m, o0, o1, s0, ns);
    for (; s0 < S; s0 += 4) {
      const int ns = S - s0 < 4 ? S - s0 : 4;
      int o = o0;
      if (ns == 1 && fmt != HB_INT2)   /* decode, or the last row of a batch */
        for (; o + 4 <= o1; o += 4) dec4_vnni(fmt, m, o, s0);
      for (; o < o1; o++) {
        switch (ns) {
        case 1: dot_vnni(fmt, 1, m, o, s0, out); break;
        case 2: dot_vnni(fmt, 2, m, o, s0, out); break;
        case 3: dot_vnni(fmt, 3, m, o, s0, out); break;
        default: dot_vnni(fmt, 4, m, o, s0, out); break;
        }
        for (int k = 0; k < ns; k++) m->y[(size_t)(s0 + k) * O + o] = out[k];
      }
    }
  }
}
TV static void vnni_i8(const hb_q8 *m, int lo, int hi) {
#if HB_HAVE_AMX
  lo = hb_q8_gemm_i8_amx(m, lo, hi);
#endif
  rows_vnni(HB_INT8, m, hb_q8_gemm_i8_vnni(m, lo, hi), hi);
}
TV static void vnni_i4(const hb_q8 *m, int lo, int hi) { rows_vnni(HB_INT4, m, lo, hi); }
TV static void vnni_i2(const hb_q8 *m, int lo, int hi) { rows_vnni(HB_INT2, m, lo, hi); }
void hb_q8_rows_vnni(const hb_q8 *m, int lo, int hi) {
  static const hb_q8_rows_fn t[] = { NULL, vnni_i8, vnni_i4, vnni_i2, hb_q8_rows_i4g_vnni };
  t[m->fmt](m, lo, hi);
}
void hb_q8_rows_avx512(const hb_q8 *m, int lo, int hi) { hb_q8_rows_avx2(m, lo, hi); }

/* int8 rows from a column-quad copy (matmul_q8.h): per block of 16 rows, every quad of x broadcast against the 16
 * rows' codes of that quad, NS (≤ 8) rows of x at a time, each row's sum over the quads in C chains (quad k in chain
 * k mod C) so that NS·C ≥ 8 products are in flight (one chain of dpbusd per row waited on its latency: absorbed MLA's
 * q side has 16 quads a block); the chains' int32 sums added (exact: the same sums as one chain); then matmul_q8.h's
 * row epilogue (int32 here: I ≤ 32768) */
TV INL void cols_rows(const uint8_t *cols, const float *sc, int O, int I, const hb_q8x *q, float *y, size_t yRow,
                      int s0, const int NS, const int C, int pf0) {
  const int nq = I / 4;
  const uint8_t *end = cols + (size_t)O * I;
  for (int c = 0; c < O; c += 16) {
    __m512i acc[8 * 4];
#pragma GCC unroll 32
    for (int i = 0; i < NS * C; i++) acc[i] = _mm512_setzero_si512();
    const uint8_t *blk = cols + (size_t)(c >> 4) * nq * 64;
    const int8_t *qx = q->qx + (size_t)s0 * q->Ip;
    int k = 0;
    for (; k + C <= nq; k += C) {
#pragma GCC unroll 4
      for (int t = 0; t < C; t++) {
        const uint8_t *wp = blk + 64 * (size_t)(k + t);
        if (pf0 && wp + Q8_PF < end) _mm_prefetch((const char *)(wp + Q8_PF), _MM_HINT_T0);
        const __m512i w = _mm512_loadu_si512((const void *)wp);
#pragma GCC unroll 8
        for (int r = 0; r < NS; r++) {
          int32_t quad;
          memcpy(&quad, qx + (size_t)r * q->Ip + 4 * (k + t), 4);
          acc[r * C + t] = hb_dp512(acc[r * C + t], w, _mm512_set1_epi32(quad));
        }
      }
    }
    for (; k < nq; k++) {
      const uint8_t *wp = blk + 64 * (size_t)k;
      if (pf0 && wp + Q8_PF < end) _mm_prefetch((const char *)(wp + Q8_PF), _MM_HINT_T0);
      const __m512i w = _mm512_loadu_si512((const void *)wp);
#pragma GCC unroll 8
      for (int r = 0; r < NS; r++) {
        int32_t quad;
        memcpy(&quad, qx + (size_t)r * q->Ip + 4 * k, 4);
        acc[r * C] = hb_dp512(acc[r * C], w, _mm512_set1_epi32(quad));
      }
    }
    const __m512 s = _mm512_loadu_ps(sc + c);
#pragma GCC unroll 8
    for (int r = 0; r < NS; r++) {
      __m512i a = acc[r * C];
#pragma GCC unroll 4
      for (int t = 1; t < C; t++) a = _mm512_add_epi32(a, acc[r * C + t]);
      const __m512i d = _mm512_sub_epi32(a, _mm512_set1_epi32(128 * (int32_t)q->xsum[s0 + r]));
      const __m512 f = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(d), s), _mm512_set1_ps(q->dx[s0 + r]));
      _mm512_storeu_ps(y + (size_t)(s0 + r) * yRow + c, f);
    }
  }
}
TV void hb_q8_cols_vnni(const uint8_t *cols, const float *sc, int O, int I, const hb_q8x *q, float *y, size_t yRow) {
  for (int s0 = 0; s0 < q->S; s0 += 8) {
    const int pf0 = s0 == 0;
    switch (q->S - s0 < 8 ? q->S - s0 : 8) {
      case 1: cols_rows(cols, sc, O, I, q, y, yRow, s0, 1, 4, pf0); break;
      case 2: cols_rows(cols, sc, O, I, q, y, yRow, s0, 2, 4, pf0); break;
      case 3: cols_rows(cols, sc, O, I, q, y, yRow, s0, 3, 2, pf0); break;
      case 4: cols_rows(cols, sc, O, I, q, y, yRow, s0, 4, 2, pf0); break;
      case 5: cols_rows(cols, sc, O, I, q, y, yRow, s0, 5, 1, pf0); break;
      case 6: cols_rows(cols, sc, O, I, q, y, yRow, s0, 6, 1, pf0); break;
      case 7: cols_rows(cols, sc, O, I, q, y, yRow, s0, 7, 1, pf0); break;
      default: cols_rows(cols, sc, O, I, q, y, yRow, s0, 8, 1, pf0); break;
    }
  }
}

/* ==================================== AVX2 ==================================== */
#define TILE_VNNI 0
#define TILE_TGT T256
#define TILE_NAME(x) avx2_##x
#include "matmul_q8_tile256.h"
/* int4g, gs ≥ 32, 2+ rows of x, and gs = 64, one row of x: the kernels of matmul_q8_i4g_avx2.c (tiles of 8 weight
 * rows, the panel GEMM for batches); gs 8, 16, one row of x with gs ≠ 64, and the rows they leave: the tiles above */
T256 static void avx2_i4g_fast(const hb_q8 *m, int lo, int hi) { avx2_i4g(m, hb_q8_i4g_avx2(m, lo, hi), hi); }
void hb_q8_rows_avx2(const hb_q8 *m, int lo, int hi) {
  static const hb_q8_rows_fn t[] = { NULL, avx2_i8, avx2_i4, avx2_i2, avx2_i4g_fast };
  t[m->fmt](m, lo, hi);
}
#endif
