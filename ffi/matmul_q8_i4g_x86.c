/* libhb fast-mode int4g kernels for AVX-512 VNNI (numerics and activation layouts: matmul_q8.h): weight rows
 * sit in the 16 lanes of a vector, so a group's float step (a convert and an FMA) serves 16 rows at once.
 * Per 128-element block, one vpdpbusd pair per weight row gives its 16 segment sums (lane j = elements
 * 8j..8j+7, the −8·Σq_x offsets `corr` added exactly); the group sums come from those lanes:
 *  - dec4 (gs ≥ 32; decode and batches below the GEMM's): 8 or 4 weight rows × up to 4 rows of x, each weight
 *    block unpacked once; two levels of unpacks reduce 4 rows' lanes together, then per group a convert and an
 *    FMA on 4 lanes (scales transposed 4 groups at a time). Software prefetch on the first pass over the rows.
 *  - tile16 (gs 8 and 16): 16 weight rows × one row of x per pass; a 16 × 16 dword transpose gives vectors of
 *    16 rows per segment, whose sums are the group sums.
 *  - rows left over: one row at a time, group sums of the spilled lanes.
 * Batches of HB_Q8_I4G_GEMM_S+ rows go through the panel GEMM first (matmul_q8_i4g_gemm_x86.c). Every path
 * computes the exact integer group sums and the one fused chain per output: the same bits as the scalar
 * reference. Holds no state. */
#include "matmul_q8.h"
#if defined(__x86_64__) || defined(__i386__)
#include "matmul_q8_x86.h"
#include <math.h>

#define TV __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))

/* the 64 bytes of a block at p, zero past `left` of them (a row's last partial block: a masked load) */
TV INL __m512i blk64(const uint8_t *p, int left) {
  return left >= 64 ? _mm512_loadu_si512((const void *)p) : _mm512_maskz_loadu_epi8(((__mmask64)1 << left) - 1, p);
}
/* one 128-element block b of row r (64 bytes, `left` of them in the row) against x row q / its corr c:
 * lane j = Σ over segment 16b + j, exact */
TV INL __m512i seg16(const uint8_t *r, int left, __m512i xe, __m512i xo, __m512i c) {
  const __m512i w = blk64(r, left);
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(c, _mm512_and_si512(w, m4), xe), _mm512_and_si512(_mm512_srli_epi16(w, 4), m4), xo);
}

/* y[s, o..o+15] for gs 8 and 16 (a group within a 128-bit lane) */
TV INL void tile16(const hb_q8 *m, int o, int s, int first) {
  const size_t rb = m->rowb;
  const uint8_t *r0 = hb_q8_row(m, o);
  const int L = m->gs / 8, ng = m->ng, nblk = (int)((rb + 63) / 64);
  const int8_t *x = m->qx + (size_t)s * m->Ip;
  const int32_t *cr = m->corr + (size_t)s * (m->Ip / 8);
  const float *sg = m->sc + (size_t)o * ng;
  const __m512i ridx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(ng));
  __m512 acc = _mm512_setzero_ps();
  int g = 0;
  for (int b = 0; b < nblk; b++) {
    const __m512i xe = _mm512_loadu_si512((const void *)(x + 128 * (size_t)b)), xo = _mm512_loadu_si512((const void *)(x + 128 * (size_t)b + 64));
    const __m512i c = _mm512_loadu_si512((const void *)(cr + 16 * (size_t)b));
    const int left = (int)(rb - 64 * (size_t)b);
    __m512i t[16];
    for (int j = 0; j < 16; j++) {
      const uint8_t *p = r0 + j * rb + 64 * (size_t)b;
      if (first) pf(m, p + 16 * rb);   /* the same block of the next tile's row */
      t[j] = seg16(p, left, xe, xo, c);
    }
    hb_transpose16(t);   /* t[q] lane j: segment 16b + q of row o + j */
    for (int q0 = 0; q0 < 16 && g < ng; q0 += L, g++) {
      __m512i v = t[q0];
      for (int q = q0 + 1; q < q0 + L; q++) v = _mm512_add_epi32(v, t[q]);
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_i32gather_ps(ridx, sg + g, 4), acc);
    }
  }
  float *y = m->y + (size_t)s * m->O + o;
  _mm512_storeu_ps(y, _mm512_mul_ps(acc, _mm512_set1_ps(m->dx[s])));
}

/* 4 rows' segment sums of a block reduced together: lane 4c + i = Σ of segments 4c..4c+3 of t_i */
TV INL __m512i reduce4(__m512i t0, __m512i t1, __m512i t2, __m512i t3) {
  const __m512i v01 = _mm512_add_epi32(_mm512_unpacklo_epi32(t0, t1), _mm512_unpackhi_epi32(t0, t1));
  const __m512i v23 = _mm512_add_epi32(_mm512_unpacklo_epi32(t2, t3), _mm512_unpackhi_epi32(t2, t3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(v01, v23), _mm512_unpackhi_epi64(v01, v23));
}
/* sq[i] = the scales of group g + i of rows 0..3 (rows ng apart; groups past ng read as 0) */
TV INL void scales4x4(const float *sg, int ng, int g, __m128 sq[4]) {
  const __mmask8 k = (__mmask8)(ng - g >= 4 ? 15 : (1u << (ng - g)) - 1);
  __m128 r0 = _mm_maskz_loadu_ps(k, sg + g), r1 = _mm_maskz_loadu_ps(k, sg + ng + g);
  __m128 r2 = _mm_maskz_loadu_ps(k, sg + 2 * (size_t)ng + g), r3 = _mm_maskz_loadu_ps(k, sg + 3 * (size_t)ng + g);
  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
  sq[0] = r0; sq[1] = r1; sq[2] = r2; sq[3] = r3;
}
/* 128-bit lane c of v (c a constant once the loops over it unroll; a switch when they do not) */
TV INL __m128i lane128(__m512i v, int c) {
  switch (c) {
  case 0: return _mm512_castsi512_si128(v);
  case 1: return _mm512_extracti32x4_epi32(v, 1);
  case 2: return _mm512_extracti32x4_epi32(v, 2);
  default: return _mm512_extracti32x4_epi32(v, 3);
  }
}
/* y[s0..s0+ns-1, o..o+NR-1] for gs ≥ 32 (NR = 4 or 8 weight rows, ns ≤ 4 rows of x: each weight block unpacked once
 * for them): per 4 weight rows, reduce4 of their segment sums, then per group a convert and an FMA on 4 lanes. */
TV INL void dec4(const int GS, const int NR, const int ns, const hb_q8 *m, int o, int s0, int first) {
  const size_t rb = m->rowb, Ip = (size_t)m->Ip;
  const uint8_t *r0 = hb_q8_row(m, o);
  const int L = (GS ? GS : m->gs) / 8, ng = m->ng, nblk = (int)((rb + 63) / 64), NQ = NR / 4;
  const int8_t *x = m->qx + (size_t)s0 * Ip;
  const int32_t *cr = m->corr + (size_t)s0 * (Ip / 8);
  const float *sg = m->sc + (size_t)o * ng;
  __m128 sq[2][4];   /* per 4 weight rows: the scales of groups g & ~3 .. (g & ~3) + 3 */
  const size_t pfd = NR * rb * ((Q8_PF + NR * rb - 1) / (NR * rb));   /* a later call's rows, at least Q8_PF on */
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  __m128 acc[4][2];
  __m128i ig[4][2];
  for (int k = 0; k < ns; k++)
    for (int h = 0; h < NQ; h++) { acc[k][h] = _mm_setzero_ps(); ig[k][h] = _mm_setzero_si128(); }
#define SCALES(g) do { if (((g) & 3) == 0) for (int h = 0; h < NQ; h++) scales4x4(sg + (size_t)4 * h * ng, ng, g, sq[h]); } while (0)
  int g = 0;
  for (int b = 0; b < nblk; b++) {
    const int left = (int)(rb - 64 * (size_t)b);
    const uint8_t *p = r0 + 64 * (size_t)b;
    if (first) {
      /* a block's share of a later tile, in address order (the loads' order, column by column, ran these calls
       * ~13% slower from DRAM when the box was busy: bench/ab.ts shapes 0 / 1) */
      for (int c = 0; c < NR; c++) pf(m, r0 + pfd + (size_t)64 * (NR * b + c));
      if (16 * b < NR * ng) _mm_prefetch((const char *)(sg + NR * ng + 16 * b), _MM_HINT_T0);   /* the next call's scales */
    }
    __m512i t[4][8];   /* t[k][j]: x row k, weight row j */
    for (int k = 0; k < ns; k++) {
      const __m512i c = _mm512_loadu_si512((const void *)(cr + (size_t)k * (Ip / 8) + 16 * (size_t)b));
      for (int j = 0; j < NR; j++) t[k][j] = c;
    }
    for (int j = 0; j < NR; j++) {
      const __m512i w = blk64(p + j * rb, left);
      const __m512i lo = _mm512_and_si512(w, m4), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
      for (int k = 0; k < ns; k++) {
        const int8_t *xb = x + (size_t)k * Ip + 128 * (size_t)b;
        t[k][j] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(t[k][j], lo, _mm512_loadu_si512((const void *)xb)), hi,
                                      _mm512_loadu_si512((const void *)(xb + 64)));
      }
    }
    __m512i w[4][2];
    for (int k = 0; k < ns; k++)
      for (int h = 0; h < NQ; h++) w[k][h] = reduce4(t[k][4 * h], t[k][4 * h + 1], t[k][4 * h + 2], t[k][4 * h + 3]);
    if (L >= 8)          /* lanes 0, 2: segments 0-7, 8-15 */
      for (int k = 0; k < ns; k++)
        for (int h = 0; h < NQ; h++) w[k][h] = _mm512_add_epi32(w[k][h], _mm512_shuffle_i32x4(w[k][h], w[k][h], 0xB1));
    if (L <= 8) {        /* a group per 128-bit lane (L = 4) or per two (L = 8: in the first of them) */
      for (int c = 0; c < 4 && g < ng; c += L / 4, g++) {
        SCALES(g);
        for (int k = 0; k < ns; k++)
          for (int h = 0; h < NQ; h++)
            acc[k][h] = _mm_fmadd_ps(_mm_cvtepi32_ps(lane128(w[k][h], c)), sq[h][g & 3], acc[k][h]);
      }
      continue;
    }
    for (int k = 0; k < ns; k++)
      for (int h = 0; h < NQ; h++)
        ig[k][h] = _mm_add_epi32(ig[k][h], _mm_add_epi32(_mm512_castsi512_si128(w[k][h]), _mm512_extracti32x4_epi32(w[k][h], 2)));
    if (((b + 1) * 16) % L == 0 || b == nblk - 1) {   /* a group spans whole blocks: one step when it ends */
      SCALES(g);
      for (int k = 0; k < ns; k++)
        for (int h = 0; h < NQ; h++) {
          acc[k][h] = _mm_fmadd_ps(_mm_cvtepi32_ps(ig[k][h]), sq[h][g & 3], acc[k][h]);
          ig[k][h] = _mm_setzero_si128();
        }
      g++;
    }
  }
#undef SCALES
  for (int k = 0; k < ns; k++)
    for (int h = 0; h < NQ; h++)
      _mm_storeu_ps(m->y + (size_t)(s0 + k) * m->O + o + 4 * h, _mm_mul_ps(acc[k][h], _mm_set1_ps(m->dx[s0 + k])));
}

/* one weight row o against x row s (rows past the last whole tile) */
TV static void row1(const hb_q8 *m, int o, int s) {
  const size_t rb = m->rowb;
  const int L = m->gs / 8, ng = m->ng, nseg = (m->I + 7) / 8, nblk = (int)((rb + 63) / 64);
  const int8_t *x = m->qx + (size_t)s * m->Ip;
  const int32_t *cr = m->corr + (size_t)s * (m->Ip / 8);
  const float *sg = m->sc + (size_t)o * ng;
  int32_t seg[16];
  int32_t isum = 0;
  float acc = 0.0f;
  for (int b = 0, k = 0; b < nblk; b++) {
    const __m512i xe = _mm512_loadu_si512((const void *)(x + 128 * (size_t)b)), xo = _mm512_loadu_si512((const void *)(x + 128 * (size_t)b + 64));
    _mm512_storeu_si512(seg, seg16(hb_q8_row(m, o) + 64 * (size_t)b, (int)(rb - 64 * (size_t)b), xe, xo,
                                   _mm512_loadu_si512((const void *)(cr + 16 * (size_t)b))));
    for (int j = 0; j < 16 && k < nseg; j++, k++) {
      isum += seg[j];
      if ((k + 1) % L == 0 || k == nseg - 1) { acc = fmaf((float)isum, sg[k / L], acc); isum = 0; }
    }
  }
  m->y[(size_t)s * m->O + o] = acc * m->dx[s];
}

TV INL void rows(const int GS, const hb_q8 *m, int lo, int hi) {
#if HB_HAVE_AMX
  lo = hb_q8_gemm_i4g_amx(m, lo, hi);
#endif
  lo = hb_q8_gemm_i4g_vnni(m, lo, hi);
  int R = hb_q8_subrows(m->rowb) & ~15;   /* ~16 KiB of rows per pass over the rows of x, whole tiles */
  if (R < 16) R = 16;
  for (int o0 = lo; o0 < hi; o0 += R) {
    const int o1 = hi - o0 < R ? hi : o0 + R;
    if (m->gs >= 32)
      for (int s0 = 0; s0 < m->S; s0 += 4) {
        const int ns = m->S - s0 < 4 ? m->S - s0 : 4;
        int o = o0;
        if (ns == 1) for (; o + 8 <= o1; o += 8) dec4(GS, 8, 1, m, o, s0, s0 == 0);
        else if (ns == 2) for (; o + 8 <= o1; o += 8) dec4(GS, 8, 2, m, o, s0, s0 == 0);
        for (; o + 4 <= o1; o += 4) {
          if (ns == 1) dec4(GS, 4, 1, m, o, s0, s0 == 0);
          else if (ns == 2) dec4(GS, 4, 2, m, o, s0, s0 == 0);
          else if (ns == 3) dec4(GS, 4, 3, m, o, s0, s0 == 0);
          else dec4(GS, 4, 4, m, o, s0, s0 == 0);
        }
        for (; o < o1; o++)
          for (int s = s0; s < s0 + ns; s++) row1(m, o, s);
      }
    else
      for (int s = 0; s < m->S; s++) {
        int o = o0;
        for (; o + 16 <= o1; o += 16) tile16(m, o, s, s == 0);
        for (; o < o1; o++) row1(m, o, s);
      }
  }
}
TV void hb_q8_rows_i4g_vnni(const hb_q8 *m, int lo, int hi) {
  if (m->gs == 64) rows(64, m, lo, hi);
  else rows(0, m, lo, hi);
}
#endif
