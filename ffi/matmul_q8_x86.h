/* libhb x86 fast-mode helpers shared by the AVX2 / AVX-512 kernels (matmul_q8_x86.c, matmul_q8_i4g_x86.c) and the
 * AVX-VNNI ones (matmul_q8_avxvnni.c): weight-stream prefetch, a 256-bit row sum, the 16 × 16 and 8 × 8 dword
 * transposes, int4g's 8-row tiles' scales (hb_scales8), a zero-padded 32-byte row load, the int4g GEMMs' panel packing
 * and group corrections. Holds no state. */
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
/* prefetch p, or past the matrix's end the same distance into the weights this thread likely runs next (decode runs
 * many small matrices at scattered addresses: each would start its stream cold) */
INL void pf(const hb_q8 *m, const uint8_t *p) {
  if (p < m->Wend) _mm_prefetch((const char *)p, _MM_HINT_T0);
  else if ((size_t)(p - m->Wend) < m->nextb) _mm_prefetch((const char *)(m->Wnext + (p - m->Wend)), _MM_HINT_T0);
}
/* acc + Σ4 a (u8) · b (s8) per dword, the accumulator updated in place: GCC 12 gives _mm512_dpbusd_epi32 in a loop over
 * an array of accumulators a register copy in and out of each (a third of the GEMM loops' instructions, which then
 * run into the front end's width); the asm keeps each accumulator in its register */
static inline __attribute__((always_inline, target("avx512f,avx512vnni"))) __m512i hb_dp512(__m512i acc, __m512i a, __m512i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}
T256 INL int64_t hsum64_8(__m256i v) {
  int32_t t[8];
  _mm256_storeu_si256((__m256i *)t, v);
  int64_t s = 0;
  for (int k = 0; k < 8; k++) s += t[k];
  return s;
}
/* 16 × 16 dwords in place: r[j] lane q = dword q of row j -> r[q] lane j (the packed-panel GEMMs, int4g's 16-row tiles) */
static inline __attribute__((always_inline, target("avx512f"))) void hb_transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) { t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]); t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]); }
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);     u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]); u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  /* u[4i + c], 128-bit lane L = dword 4L + c of rows 4i..4i+3: a 4 × 4 transpose of 128-bit lanes per c */
  for (int c = 0; c < 4; c++) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44), v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_shuffle_i32x4(v0, v2, 0x88);     r[4 + c] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    r[8 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88); r[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

/* 32 bytes of a row at p with `left` bytes left in it; a last partial block through a zeroed copy (AVX2 has no
 * byte-masked load) */
static inline __attribute__((always_inline, target("avx2"))) __m256i hb_loadrow32(const uint8_t *p, int left) {
  if (left >= 32) return _mm256_loadu_si256((const __m256i *)p);
  uint8_t t[32] = { 0 };
  memcpy(t, p, (size_t)left);
  return _mm256_loadu_si256((const __m256i *)t);
}
/* 8 × 8 dwords in place: r[j] lane q = dword q of row j -> r[q] lane j (the 256-bit packed-panel GEMMs) */
static inline __attribute__((always_inline, target("avx2"))) void hb_transpose8(__m256i r[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) { t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]); t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]); }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);     u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]); u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  /* u[4i + c], 128-bit lane L = dword 4L + c of rows 4i..4i+3 */
  for (int c = 0; c < 4; c++) {
    r[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
  }
}
/* lane l of the low 128-bit half of a and of b, then of their high halves, added: [a.lo + a.hi | b.lo + b.hi] (int4g's
 * 8-row tiles at 256 bits: rows 0-3 in a, 4-7 in b) */
static inline __attribute__((always_inline, target("avx2"))) __m256i hb_add_halves(__m256i a, __m256i b) {
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}
/* st[i] lane l = the scale of group g + i of row sg[l] (groups past the row: 0): int4g's 8-row tiles at 256 bits, once
 * per 8 groups (not inlined) */
static __attribute__((noinline, target("avx2"))) void hb_scales8(const float *const *sg, int ng, int g, __m256i *st) {
  const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(ng - g), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int l = 0; l < 8; l++)
    st[l] = _mm256_castps_si256(ng - g >= 8 ? _mm256_loadu_ps(sg[l] + g) : _mm256_maskload_ps(sg[l] + g, mk));
  hb_transpose8(st);
}

/* the 256-bit int4g GEMMs' panel (matmul_q8_i4g_gemm_avxvnni.c, matmul_q8_i4g_avx2.c): rows o..o+15 -> p[4q + h]
 * (q < 8·nc): lane j = the low nibbles of packed bytes 4q..4q+3 of row o + 8h + j for h = 0, 1, their high nibbles
 * for h = 2, 3 (zero past the row); sp[g·16 + j] = scale of group g of row o + j */
static inline __attribute__((target("avx2"))) void hb_i4g_pack16(const hb_q8 *m, int o, int nc, __m256i *p, float *sp) {
  const size_t rb = m->rowb;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (int h = 0; h < 2; h++)
    for (int c = 0; c < nc; c++) {   /* 32 bytes (8 segments) of 8 rows */
      __m256i r[8];
      for (int j = 0; j < 8; j++) r[j] = hb_loadrow32(hb_q8_row(m, o + 8 * h + j) + 32 * (size_t)c, (int)(rb - 32 * (size_t)c));
      hb_transpose8(r);
      for (int q = 0; q < 8; q++) {
        p[4 * (8 * (size_t)c + q) + h] = _mm256_and_si256(r[q], m4);
        p[4 * (8 * (size_t)c + q) + 2 + h] = _mm256_and_si256(_mm256_srli_epi16(r[q], 4), m4);
      }
    }
  const int ng = m->ng;   /* the scales: 8 groups × 8 rows at a time, transposed as dwords */
  for (int h = 0; h < 2; h++)
    for (int g0 = 0; g0 < ng; g0 += 8) {
      const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(ng - g0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      __m256i r[8];
      for (int j = 0; j < 8; j++) r[j] = _mm256_castps_si256(_mm256_maskload_ps(m->sc + (size_t)(o + 8 * h + j) * ng + g0, mk));
      hb_transpose8(r);
      for (int q = 0; q < 8 && g0 + q < ng; q++) _mm256_store_si256((__m256i *)(sp + (size_t)(g0 + q) * 16 + 8 * h), r[q]);
    }
}

/* The packed-panel GEMMs' first panel (`rows` weight rows at lo) past the head the caller prefetched, into L2: each
 * later panel comes during the first block of the one before it; cold first panels held these calls ~15% back */
static inline void hb_q8_prefetch_panel(const hb_q8 *m, int lo, int rows) {
  for (size_t c = HB_PF_AHEAD; c < (size_t)rows * m->rowb; c += 64) _mm_prefetch((const char *)hb_q8_row(m, lo) + c, _MM_HINT_T1);
}
/* cg[s·ng + g] = −8·Σq_x over group g of x row s, s < S (the sum of the group's segment corrections), where each
 * group's integer accumulators start */
static inline void hb_i4g_group_corr(const hb_q8 *m, int32_t *cg) {
  const int ng = m->ng, L = m->gs / 8, nseg = (m->I + 7) / 8;
  for (int s = 0; s < m->S; s++) {
    const int32_t *cr = m->corr + (size_t)s * (m->Ip / 8);
    for (int g = 0; g < ng; g++) {
      int32_t c = 0;
      for (int q = g * L; q < (g + 1) * L && q < nseg; q++) c += cr[q];
      cg[(size_t)s * ng + g] = c;
    }
  }
}
/* The VNNI int4g panel GEMMs' start (both widths): the first panel's scales and rows prefetched, then the group
 * corrections (hb_i4g_group_corr) */
static inline void hb_i4g_gemm_start(const hb_q8 *m, int lo, int rows, int32_t *cg) {
  const int ng = m->ng;
  for (size_t c = 0; c < (size_t)rows * ng * 4; c += 64) _mm_prefetch((const char *)(m->sc + (size_t)lo * ng) + c, _MM_HINT_T0);
  hb_q8_prefetch_panel(m, lo, rows);
  hb_i4g_group_corr(m, cg);
}

/* int4g at AVX2, gs ≥ 32, S ≥ 2 (matmul_q8_i4g_avx2.c): rows [lo, hi) (all of them; none for gs < 32 or one row of x),
 * returns the first row left undone */
int hb_q8_i4g_avx2(const hb_q8 *m, int lo, int hi);

/* rows of W handled per pass over a block of ≤ 4 activation rows: ~16 KiB of packed weights */
static inline int hb_q8_subrows(size_t rowb) {
  const size_t r = 16384 / (rowb ? rowb : 1);
  return r < 1 ? 1 : (int)r;
}

#endif
