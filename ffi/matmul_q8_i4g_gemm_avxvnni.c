/* libhb fast-mode int4g GEMM for AVX-VNNI (256-bit vpdpbusd, 16 ymm registers: Alder Lake and later consumer Intel
 * cores; batches of at least HB_Q8_I4G_GEMM_S rows of x, gs ≥ 32, and fewer rows of x at gs = 64; numerics:
 * matmul_q8.h). Panels of 16 weight rows packed once per call with the nibbles already split: per 8-element segment
 * four vectors (the low nibbles of rows 0-7, of rows 8-15, then the high ones), lane j holding row j's 4 nibbles, so
 * the hot loop does no unpacking and holds its weights in 2 registers, each multiplied by a broadcast of 4 activations
 * (P4 layout: the 4 even elements, then the 4 odd ones). Up to 6 rows of x per block: 12 integer accumulators (one
 * chain per x row and half-panel, started at the group's −8·Σq_x), 2 weights and a broadcast fill the registers; the
 * float accumulators (one convert and FMA per group and 8 rows) live in L1.
 * One row of x (S = 1: decode) with gs = 64, whole tiles of 8 weight rows (dec1): per step one group (a 32-byte chunk)
 * of each of the 8 rows, two vpdpbusd per row (low nibbles × the even elements, high × the odd) into 8 segment sums,
 * the 8 rows' vectors reduced by a dword transpose-and-add tree (unpack + add of dwords, of qwords, then the 128-bit
 * halves) into one vector of the 8 rows' exact group sums, the group correction added once for all 8, one convert
 * and FMA per group. Prefetch in address order HB_PF_AHEAD bytes ahead, or a tile ahead for tiles of 9 KiB and more
 * (4 lines per group's 256 bytes; GLM-5's 2048x6144 1.21x), the scales two tiles on (the tile's loop:
 * matmul_q8_dec1.h, shared with AVX2). Against matmul_q8_tile256.h's 8 × 1 tiles (2 cores of an AMD EPYC, Zen 5,
 * HB_SIMD=avxvnni; 512x1024 int4g64, in-process A/B): from DRAM (74 MB of matrices) one
 * thread 1.24-1.32x, two 1.10x; from L2 1.05x (~1.07x without the call's ~1.7 µs overhead); bench/ab.ts's decode
 * experts (shape 0) 1.17-1.20x on two threads, 1.25x on one, 8 streams' union (shape 1) 1.08-1.10x. Tried and dropped
 * (against it): the reduction by vphaddd (L2 0.97x), by blends and one shuffle per level (L2 0.93x), by 16-bit
 * packs first (vpackssdw, then vpmaddwd + vpackssdw + vpmaddwd, or vpmaddwd + vphaddd: L2 and DRAM 0.95-1.03x,
 * decode experts 0.98x); a prefetch distance of 4 or 8 KiB (0.92-0.96x). The rows past the last whole tile and other
 * gs stay on the tile256 tiles.
 * 2-3 rows of x (S below HB_Q8_I4G_GEMM_S), gs = 64: the same tiles (matmul_q8_dec1.h's gsumn: each weight row loaded
 * and split once, then per row of x two vpdpbusd from memory operands, gdotx, and the same tree), against the
 * tile256 4 × 2 tiles (HB_SIMD=avxvnni, 512x1024 int4g64, in-process A/B): from DRAM one thread S = 2 1.30x, 3
 * 1.23x, two threads 1.09x, 1.07x; from L2 1.00x, 1.16x; bench/ab.ts's 8 streams' union (shape 1) 1.125x on two
 * threads. Tried and dropped: gsum8 once per row of x (the weight rows split again for each: L2 S = 2 0.965x, two
 * threads from DRAM 0.96x). The same bits as the scalar reference.
 * State: the thread-local panel buffer (the group corrections below HB_Q8_I4G_GEMM_S rows). */
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

/* ---- 1-4 rows of x (S below HB_Q8_I4G_GEMM_S), gs = 64 ---- */

/* the segment sums (8 lanes) of a 64-element group (32 bytes at w) against (xe, xd) */
TV INL __m256i gdot(const uint8_t *w, __m256i xe, __m256i xd, __m256i m4) {
  const __m256i v = _mm256_loadu_si256((const __m256i *)w);
  return dp(dp(_mm256_setzero_si256(), _mm256_and_si256(v, m4), xe), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), xd);
}
/* dword transpose-and-add steps: lanes of a, b in pairs (per 128-bit half: [a d0+d2, b d0+d2, a d1+d3, b d1+d3]), then
 * qword pairs ([a, b, c, d], each the sum of half its lanes); then hb_add_halves */
TV INL __m256i tadd32(__m256i a, __m256i b) { return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b)); }
TV INL __m256i tadd64(__m256i a, __m256i b) { return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b)); }
/* matmul_q8_dec1.h's gsum8: lane j = the exact group sum of row j (32 bytes at w + j·rb) against (xe, xd) */
TV INL __m256i avxvnni_gsum8(const uint8_t *w, size_t rb, __m256i xe, __m256i xd) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i u0 = tadd64(tadd32(gdot(w, xe, xd, m4), gdot(w + rb, xe, xd, m4)),
                            tadd32(gdot(w + 2 * rb, xe, xd, m4), gdot(w + 3 * rb, xe, xd, m4)));
  const __m256i u1 = tadd64(tadd32(gdot(w + 4 * rb, xe, xd, m4), gdot(w + 5 * rb, xe, xd, m4)),
                            tadd32(gdot(w + 6 * rb, xe, xd, m4), gdot(w + 7 * rb, xe, xd, m4)));
  return hb_add_halves(u0, u1);
}
/* the group's segment sums (8 lanes) of a split row (lo, hi) against the 32 bytes at xb and xb + 64 (x from memory
 * operands: matmul_q8_dec1.h's gsumn, one split row against 2-3 rows of x) */
TV INL __m256i gdotx(__m256i lo, __m256i hi, const int8_t *xb) {
  __m256i a;
  __asm__("vpxor %0, %0, %0\n\t%{vex%} vpdpbusd %1, %2, %0\n\t%{vex%} vpdpbusd %3, %4, %0"
          : "=&x"(a) : "m"(*(const __m256i *)xb), "x"(lo), "m"(*(const __m256i *)(xb + 64)), "x"(hi));
  return a;
}
#define DEC1_XDOT gdotx
#define DEC1_WIDEN(u) (u)
#define DEC1_TGT TV
#define DEC1_NAME(x) avxvnni_##x
#include "matmul_q8_dec1.h"
#undef DEC1_TGT
#undef DEC1_NAME
#undef DEC1_XDOT
#undef DEC1_WIDEN
/* 1-4 rows of x, gs = 64: rows [lo, hi) in whole tiles of 8 (dec1); returns the first row left undone */
TV int hb_q8_dec1_i4g_avxvnni(const hb_q8 *m, int lo, int hi) {
  if (m->fmt != HB_INT4G || m->S > 4 || m->gs != 64 || hi - lo < 8) return lo;
  int32_t *cg = panel_buf((size_t)m->S * m->ng * 4);
  return cg ? avxvnni_dec1_rows(m, lo, hi, cg) : lo;
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
