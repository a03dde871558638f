/* libhb fast-mode int4g GEMM for AVX-VNNI (256-bit vpdpbusd, 16 ymm registers: Alder Lake and later consumer Intel
 * cores; batches of at least HB_Q8_I4G_GEMM_S rows of x, gs ≥ 32; numerics: matmul_q8.h). Panels of 16 weight rows
 * packed once per call with the nibbles already split: per 8-element segment four vectors (the low nibbles of rows
 * 0-7, of rows 8-15, then the high ones), lane j holding row j's 4 nibbles, so the hot loop does no unpacking and
 * holds its weights in 2 registers, each multiplied by a broadcast of 4 activations (P4 layout: the 4 even
 * elements, then the 4 odd ones). Up to 6 rows of x per block: 12 integer accumulators (one chain per x row and
 * half-panel, started at the group's −8·Σq_x), 2 weights and a broadcast fill the registers; the float
 * accumulators (one convert and FMA per group and 8 rows) live in L1. The same bits as the scalar reference.
 * State: the thread-local panel buffer. */
#include "matmul_q8.h"
#if HB_HAVE_AVXVNNI
#include "matmul_q8_x86.h"

#define TV __attribute__((target("avx2,fma,avxvnni")))
#define MR 6   /* rows of x per block */

/* acc + Σ4 a (u8) · b (s8) per dword in place (the VEX vpdpbusd): as hb_dp512, the asm keeps GCC 12 from copying and
 * spilling the 12 accumulators around the intrinsic */
TV INL __m256i dp(__m256i acc, __m256i a, __m256i b) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
  return acc;
}

static void *panel_buf(size_t bytes) {
  static _Thread_local void *buf;
  static _Thread_local size_t cap;
  return hb_grow(&buf, &cap, bytes);
}


/* x rows s0..s0+ns-1 against the panel of rows o..o+15; cg[s·ng + g]: −8·Σq_x over group g of x row s;
 * next: the next panel's rows, prefetched meanwhile (first block only), or NULL */
TV INL void block(const int ns, const hb_q8 *m, const __m256i *p, const float *sp, const int32_t *cg, int o, int s0,
                  const uint8_t *next) {
  const int ng = m->ng, L = m->gs / 8, nseg = (m->I + 7) / 8;
  const size_t Ip = (size_t)m->Ip, pfper = next ? (16 * m->rowb + nseg - 1) / (size_t)nseg : 0;   /* next-panel bytes per segment */
  const int8_t *x = m->qx + (size_t)s0 * Ip;
  float f[MR][16] __attribute__((aligned(32)));   /* the float accumulators, in L1 */
  for (int k = 0; k < ns; k++) {
    _mm256_store_ps(f[k], _mm256_setzero_ps());
    _mm256_store_ps(f[k] + 8, _mm256_setzero_ps());
  }
  for (int g = 0; g < ng; g++) {
    __m256i a0[MR], a1[MR];
    for (int k = 0; k < ns; k++) a0[k] = a1[k] = _mm256_set1_epi32(cg[(size_t)(s0 + k) * ng + g]);
    const int q1 = (g + 1) * L < nseg ? (g + 1) * L : nseg;
    if (next) {   /* the group's share of the next panel, outside the hot loop; the first group: its scales */
      for (size_t c = (size_t)g * L * pfper; c < (size_t)q1 * pfper; c += 64)
        if (next + c < m->Wend) _mm_prefetch((const char *)(next + c), _MM_HINT_T0);
      if (g == 0)
        for (size_t c = 0; c < (size_t)16 * ng * 4; c += 64) _mm_prefetch((const char *)(m->sc + (size_t)(o + 16) * ng) + c, _MM_HINT_T0);
    }
    for (int q = g * L; q < q1; q++) {
      const __m256i *w = p + 4 * (size_t)q;
      const int8_t *xq = x + 128 * (size_t)(q >> 4) + 4 * (size_t)(q & 15);   /* evens; the odds 64 bytes on */
      for (int hi = 0; hi < 2; hi++) {
        const __m256i w0 = _mm256_load_si256(w + 2 * hi), w1 = _mm256_load_si256(w + 2 * hi + 1);
        for (int k = 0; k < ns; k++) {
          int32_t xv;
          memcpy(&xv, xq + (size_t)k * Ip + 64 * hi, 4);
          const __m256i b = _mm256_set1_epi32(xv);
          a0[k] = dp(a0[k], w0, b);
          a1[k] = dp(a1[k], w1, b);
        }
      }
    }
    const __m256 sv0 = _mm256_load_ps(sp + (size_t)g * 16), sv1 = _mm256_load_ps(sp + (size_t)g * 16 + 8);
    for (int k = 0; k < ns; k++) {
      _mm256_store_ps(f[k], _mm256_fmadd_ps(_mm256_cvtepi32_ps(a0[k]), sv0, _mm256_load_ps(f[k])));
      _mm256_store_ps(f[k] + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(a1[k]), sv1, _mm256_load_ps(f[k] + 8)));
    }
  }
  for (int k = 0; k < ns; k++) {
    const __m256 d = _mm256_set1_ps(m->dx[s0 + k]);
    float *y = m->y + (size_t)(s0 + k) * m->O + o;
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_load_ps(f[k]), d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_load_ps(f[k] + 8), d));
  }
}

/* rows [lo, hi) in whole panels; returns the first row left undone (lo when the batch is too small) */
TV int hb_q8_gemm_i4g_avxvnni(const hb_q8 *m, int lo, int hi) {
  if (m->fmt != HB_INT4G || m->S < HB_Q8_I4G_GEMM_S || m->gs < 32 || hi - lo < 16) return lo;
  const int S = m->S, ng = m->ng, nc = (int)((m->rowb + 31) / 32);
  const size_t pbytes = (size_t)nc * 8 * 128, sbytes = (size_t)ng * 16 * 4;
  uint8_t *buf = panel_buf(pbytes + sbytes + (size_t)S * ng * 4);
  if (!buf) return lo;
  __m256i *p = (__m256i *)buf;
  float *sp = (float *)(buf + pbytes);
  int32_t *cg = (int32_t *)(buf + pbytes + sbytes);
  hb_i4g_gemm_start(m, lo, 16, cg);
  int o = lo;
  for (; o + 16 <= hi; o += 16) {
    hb_i4g_pack16(m, o, nc, p, sp);
    const uint8_t *next = o + 32 <= hi ? hb_q8_row(m, o + 16) : NULL;
    const int nblk = (S + MR - 1) / MR;   /* blocks of near-equal size, the later ones taking the extra rows */
    for (int bk = 0, s0 = 0; bk < nblk; bk++) {
      const int ns = (S - s0) / (nblk - bk);
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
