/* libhb fast-mode int8 GEMM for AVX-512 VNNI: batches of at least HB_Q8_GEMM_S rows of x (prefill).
 * Weight rows go 32 at a time into a panel, packed once per call: k-quads outer, rows inner, so one
 * 64-byte vector holds quad kq of 16 rows (as w + 128: vpdpbusd takes them unsigned, like the other
 * VNNI kernels). Each block of up to 8 rows of x then runs against the panel with its quads broadcast, so
 * the 32 sums of an x row stay in two registers and need no horizontal reduction. The integer sums are
 * exact, so every output equals the other kernels' bit for bit: y = ((float)Σ q_w·q_x · s[o]) · d[s]
 * (matmul_q8.h). Rows past the last whole panel are left to the caller's kernels.
 * State: one thread-local panel buffer per thread (grows, never shrinks). */
#include "matmul_q8.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define TV __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define INL static inline __attribute__((always_inline))
#define PANEL HB_Q8_PANEL /* 32: two vectors of 16 sums */
#define MR 8     /* x rows per block: 16 accumulators, 2 weight loads and 8 broadcasts per 16 vpdpbusd */

static uint32_t *panel_buf(size_t bytes) {
  static _Thread_local void *buf;
  static _Thread_local size_t cap;
  return hb_grow(&buf, &cap, bytes);
}

/* in place: r[j] lane q = dword q of row j  ->  r[q] lane j = dword q of row j (16 × 16 dwords) */
TV INL void transpose16(__m512i r[16]) {
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

/* rows o..o+31 -> p[(kq · 32 + j)] = bytes 4kq..4kq+3 of row o + j, each + 128, for kq < 16·nb (bytes past I:
 * w = 0, which meets zero activations) */
TV static void pack(const hb_q8 *m, int o, int nb, uint32_t *p) {
  const __m512i flip = _mm512_set1_epi8((char)0x80);
  for (int h = 0; h < PANEL; h += 16)
    for (int b = 0; b < nb; b++) {
      const int left = m->I - 64 * b;
      const __mmask64 mk = left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1);
      __m512i r[16];
      for (int j = 0; j < 16; j++) r[j] = _mm512_maskz_loadu_epi8(mk, hb_q8_row(m, o + h + j) + 64 * (size_t)b);
      transpose16(r);
      for (int q = 0; q < 16; q++) _mm512_store_si512((void *)(p + (size_t)(16 * b + q) * PANEL + h), _mm512_xor_si512(r[q], flip));
    }
}

/* x rows s0..s0+ns-1 against the panel p of rows o..o+31 (nkq quads); next: the rows to prefetch meanwhile
 * (the next panel, streamed from memory while this one computes), or NULL */
TV INL void block(const int ns, const hb_q8 *m, const uint32_t *p, int nkq, int o, int s0, const uint8_t *next) {
  __m512i a0[MR], a1[MR];
  for (int k = 0; k < ns; k++) { a0[k] = _mm512_setzero_si512(); a1[k] = _mm512_setzero_si512(); }
  const size_t Ip = (size_t)m->Ip;
  const int8_t *x = m->qx + (size_t)s0 * Ip;
  for (int kq = 0; kq < nkq; kq++) {
    if (next) {
      const uint8_t *a = next + 128 * (size_t)kq;
      if (a < m->Wend) _mm_prefetch((const char *)a, _MM_HINT_T0);
      if (a + 64 < m->Wend) _mm_prefetch((const char *)(a + 64), _MM_HINT_T0);
    }
    const __m512i w0 = _mm512_load_si512((const void *)(p + (size_t)kq * PANEL));
    const __m512i w1 = _mm512_load_si512((const void *)(p + (size_t)kq * PANEL + 16));
    for (int k = 0; k < ns; k++) {
      int32_t xq;
      memcpy(&xq, x + (size_t)k * Ip + 4 * (size_t)kq, 4);
      const __m512i xb = _mm512_set1_epi32(xq);
      a0[k] = _mm512_dpbusd_epi32(a0[k], w0, xb);
      a1[k] = _mm512_dpbusd_epi32(a1[k], w1, xb);
    }
  }
  /* Σ (w+128)·x − 128·Σx = Σ w·x, exact in int32 (I ≤ 32768); then hb_q8_rowfmt_out's conversion and products */
  const __m512 sc0 = _mm512_loadu_ps(m->sc + o), sc1 = _mm512_loadu_ps(m->sc + o + 16);
  for (int k = 0; k < ns; k++) {
    const int s = s0 + k;
    const __m512i off = _mm512_set1_epi32(128 * (int32_t)m->xsum[s]);
    const __m512 d = _mm512_set1_ps(m->dx[s]);
    float *y = m->y + (size_t)s * m->O + o;
    _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a0[k], off)), sc0), d));
    _mm512_storeu_ps(y + 16, _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a1[k], off)), sc1), d));
  }
}

/* int8 weight rows [lo, hi) in whole panels; returns the first row left undone (hi when none) */
TV int hb_q8_gemm_i8_vnni(const hb_q8 *m, int lo, int hi) {
  if (m->fmt != HB_INT8 || m->S < HB_Q8_GEMM_S || m->I > 32768 || hi - lo < PANEL) return lo;
  const int nb = (m->I + 63) / 64, nkq = 16 * nb;   /* nkq·4 ≤ Ip: the x reads stay in the padded rows */
  uint32_t *p = panel_buf((size_t)nkq * PANEL * 4);
  if (!p) return lo;
  int o = lo;
  for (; o + PANEL <= hi; o += PANEL) {
    pack(m, o, nb, p);
    const uint8_t *next = o + 2 * PANEL <= hi ? hb_q8_row(m, o + PANEL) : NULL;
    int s0 = 0;
    for (; s0 + MR <= m->S; s0 += MR) { block(MR, m, p, nkq, o, s0, next); next = NULL; }
    switch (m->S - s0) {
    case 1: block(1, m, p, nkq, o, s0, NULL); break;
    case 2: block(2, m, p, nkq, o, s0, NULL); break;
    case 3: block(3, m, p, nkq, o, s0, NULL); break;
    case 4: block(4, m, p, nkq, o, s0, NULL); break;
    case 5: block(5, m, p, nkq, o, s0, NULL); break;
    case 6: block(6, m, p, nkq, o, s0, NULL); break;
    case 7: block(7, m, p, nkq, o, s0, NULL); break;
    default: break;
    }
  }
  return o;
}
#endif
