/* libhb fast-mode int4g GEMM for AVX-512 VNNI (batches of at least HB_Q8_I4G_GEMM_S rows of x, gs ≥ 32: prefill's
 * routed experts; numerics: matmul_q8.h). Panels of 32 weight rows packed once per call: each 4 packed bytes
 * (8 elements) of the 32 rows side by side, so one load and two nibble masks give two vpdpbusd operands for 32
 * rows, each multiplied by a broadcast of 4 activations (P4 layout: the 4 even elements, then the 4 odd ones).
 * Up to 6 rows of x per block: 24 integer accumulators (the low nibbles' sums, started at the group's −8·Σq_x,
 * apart from the high ones': two chains of one vpdpbusd per segment, 5% faster than one chain of two) and 12
 * float ones, one add, convert and FMA per group and 16 rows. The same bits as the scalar reference. State: the
 * thread-local panel buffer. */
#include "matmul_q8.h"
#if defined(__x86_64__) || defined(__i386__)
#include "matmul_q8_x86.h"

#define TV __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))
#define MR 6   /* rows of x per block */

static void *panel_buf(size_t bytes) {
  static _Thread_local void *buf;
  static _Thread_local size_t cap;
  return hb_grow(&buf, &cap, bytes);
}

/* rows o..o+31 -> p[k·32 + j] = packed bytes 4k..4k+3 of row o + j (zero past the row), for k < 16·nb;
 * sp[g·32 + j] = scale of group g of row o + j */
TV static void pack(const hb_q8 *m, int o, int nb, uint32_t *p, float *sp) {
  const size_t rb = m->rowb;
  for (int h = 0; h < 32; h += 16)
    for (int b = 0; b < nb; b++) {
      const int left = (int)(rb - 64 * (size_t)b);
      const __mmask64 mk = left >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << left) - 1;
      __m512i r[16];
      for (int j = 0; j < 16; j++) r[j] = _mm512_maskz_loadu_epi8(mk, hb_q8_row(m, o + h + j) + 64 * (size_t)b);
      hb_transpose16(r);
      for (int q = 0; q < 16; q++) _mm512_store_si512(p + (size_t)(16 * b + q) * 32 + h, r[q]);
    }
  const int ng = m->ng;   /* the scales: 16 groups × 16 rows at a time, transposed as dwords */
  for (int h = 0; h < 32; h += 16)
    for (int g0 = 0; g0 < ng; g0 += 16) {
      const __mmask16 mk = (__mmask16)(ng - g0 >= 16 ? 0xffff : (1u << (ng - g0)) - 1);
      __m512i r[16];
      for (int j = 0; j < 16; j++) r[j] = _mm512_maskz_loadu_epi32(mk, m->sc + (size_t)(o + h + j) * ng + g0);
      hb_transpose16(r);
      for (int q = 0; q < 16 && g0 + q < ng; q++) _mm512_store_si512((void *)(sp + (size_t)(g0 + q) * 32 + h), r[q]);
    }
}

/* x rows s0..s0+ns-1 against the panel of rows o..o+31; cg[s·ng + g]: −8·Σq_x over group g of x row s;
 * next: the next panel's rows, prefetched meanwhile (first block only), or NULL */
TV INL void block(const int ns, const hb_q8 *m, const uint32_t *p, const float *sp, const int32_t *cg, int o, int s0,
                  const uint8_t *next) {
  const int ng = m->ng, L = m->gs / 8, nseg = (m->I + 7) / 8, Ip = m->Ip;
  const size_t pfper = next ? (32 * m->rowb + nseg - 1) / (size_t)nseg : 0;   /* next-panel bytes per segment */
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const int8_t *x = m->qx + (size_t)s0 * Ip;
  __m512 f0[MR], f1[MR];
  for (int k = 0; k < ns; k++) { f0[k] = _mm512_setzero_ps(); f1[k] = _mm512_setzero_ps(); }
  for (int g = 0; g < ng; g++) {
    __m512i a0[MR], a1[MR], b0[MR], b1[MR];   /* the low nibbles' chains and the high ones' apart: two shorter chains */
    for (int k = 0; k < ns; k++) { a0[k] = a1[k] = _mm512_set1_epi32(cg[(size_t)(s0 + k) * ng + g]); b0[k] = b1[k] = _mm512_setzero_si512(); }
    const int q1 = (g + 1) * L < nseg ? (g + 1) * L : nseg;
    if (next) {   /* the group's share of the next panel, outside the hot loop; the first group: its scales */
      for (size_t c = (size_t)g * L * pfper; c < (size_t)q1 * pfper; c += 64)
        if (next + c < m->Wend) _mm_prefetch((const char *)(next + c), _MM_HINT_T0);
      if (g == 0)
        for (size_t c = 0; c < (size_t)32 * ng * 4; c += 64) _mm_prefetch((const char *)(m->sc + (size_t)(o + 32) * ng) + c, _MM_HINT_T0);
    }
    for (int q = g * L; q < q1; q++) {
      const __m512i w0 = _mm512_load_si512((const void *)(p + (size_t)q * 32)), w1 = _mm512_load_si512((const void *)(p + (size_t)q * 32 + 16));
      const __m512i l0 = _mm512_and_si512(w0, m4), h0 = _mm512_and_si512(_mm512_srli_epi16(w0, 4), m4);
      const __m512i l1 = _mm512_and_si512(w1, m4), h1 = _mm512_and_si512(_mm512_srli_epi16(w1, 4), m4);
      const int8_t *xq = x + 128 * (size_t)(q >> 4) + 4 * (size_t)(q & 15);   /* evens; the odds 64 bytes on */
      for (int k = 0; k < ns; k++) {
        int32_t xl, xh;
        memcpy(&xl, xq + (size_t)k * Ip, 4);
        memcpy(&xh, xq + (size_t)k * Ip + 64, 4);
        const __m512i bl = _mm512_set1_epi32(xl), bh = _mm512_set1_epi32(xh);
        a0[k] = hb_dp512(a0[k], l0, bl); b0[k] = hb_dp512(b0[k], h0, bh);
        a1[k] = hb_dp512(a1[k], l1, bl); b1[k] = hb_dp512(b1[k], h1, bh);
      }
    }
    const __m512 sv0 = _mm512_load_ps(sp + (size_t)g * 32), sv1 = _mm512_load_ps(sp + (size_t)g * 32 + 16);
    for (int k = 0; k < ns; k++) {
      f0[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0[k], b0[k])), sv0, f0[k]);
      f1[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a1[k], b1[k])), sv1, f1[k]);
    }
  }
  for (int k = 0; k < ns; k++) {
    const __m512 d = _mm512_set1_ps(m->dx[s0 + k]);
    float *y = m->y + (size_t)(s0 + k) * m->O + o;
    _mm512_storeu_ps(y, _mm512_mul_ps(f0[k], d));
    _mm512_storeu_ps(y + 16, _mm512_mul_ps(f1[k], d));
  }
}

/* rows [lo, hi) in whole panels; returns the first row left undone (lo when the batch is too small) */
TV int hb_q8_gemm_i4g_vnni(const hb_q8 *m, int lo, int hi) {
  if (m->fmt != HB_INT4G || m->S < HB_Q8_I4G_GEMM_S || m->gs < 32 || hi - lo < 32) return lo;
  const int S = m->S, ng = m->ng, nb = (int)((m->rowb + 63) / 64);
  const size_t pbytes = (size_t)nb * 16 * 32 * 4, sbytes = (size_t)ng * 32 * 4;
  uint8_t *buf = panel_buf(pbytes + sbytes + (size_t)S * ng * 4);
  if (!buf) return lo;
  uint32_t *p = (uint32_t *)buf;
  float *sp = (float *)(buf + pbytes);
  int32_t *cg = (int32_t *)(buf + pbytes + sbytes);
  hb_i4g_gemm_start(m, lo, 32, cg);
  int o = lo;
  for (; o + 32 <= hi; o += 32) {
    pack(m, o, nb, p, sp);
    const uint8_t *next = o + 64 <= hi ? hb_q8_row(m, o + 32) : NULL;
    /* ceil(S / MR) blocks of near-equal size (16 rows: 6, 5, 5 rather than 6, 6, 4; 13: 5, 4, 4 rather than 6, 6, 1) */
    const int nblk = (S + MR - 1) / MR;
    for (int bk = 0, s0 = 0; bk < nblk; bk++) {
      const int ns = (S - s0) / (nblk - bk);   /* the later blocks take the extra rows */
      switch (ns) {   /* the count a constant in each */
      case 1: block(1, m, p, sp, cg, o, s0, next); break;
      case 2: block(2, m, p, sp, cg, o, s0, next); break;
      case 3: block(3, m, p, sp, cg, o, s0, next); break;
      case 4: block(4, m, p, sp, cg, o, s0, next); break;
      case 5: block(5, m, p, sp, cg, o, s0, next); break;
      default: block(MR, m, p, sp, cg, o, s0, next); break;
      }
      s0 += ns;
      next = NULL;
    }
  }
  return o;
}

#endif
