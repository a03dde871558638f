/* libhb fast-mode int8 GEMM (batches of at least HB_Q8_GEMM_S rows of x), written once for two vector widths:
 * included (no include guard) by matmul_q8_gemm_x86.c for AVX-512 VNNI (W = 16 lanes) and AVX-VNNI (W = 8),
 * each defining W, MR, GEMM_TGT, GEMM_NAME(x), the vector types VI / VF and the ops below.
 * Weight rows go 2·W at a time into a panel, packed once per call: k-quads outer, rows inner, so one vector
 * holds quad kq of W rows (as w + 128: vpdpbusd takes them unsigned, like the other VNNI kernels). Each block
 * of up to MR rows of x then runs against the panel with its quads broadcast, so the 2·W sums of an x row stay
 * in two registers and need no horizontal reduction. The integer sums are exact, so every output equals the
 * other kernels' bit for bit: y = ((float)Σ q_w·q_x · s[o]) · d[s] (matmul_q8.h). Rows past the last whole
 * panel are left to the caller's kernels. State: one thread-local panel buffer per thread and width.
 * Ops: V_LOAD / V_STORE (aligned), V_XOR, V_FLIP() (0x80 bytes), V_SET1(int32), V_DP(acc, w, x), V_SUB,
 * V_CVT (int32 -> f32), V_MULF, V_SET1F, V_LOADUF / V_STOREUF (unaligned floats), V_ZERO; TRANSPOSE(r) (W × W
 * dwords in place: r[j] lane q -> r[q] lane j); LOADROW(p, left) (4·W bytes of a row, zero past `left`). */
#define PANEL (2 * W)

static uint32_t *GEMM_NAME(panel_buf)(size_t bytes) {
  static _Thread_local void *buf;
  static _Thread_local size_t cap;
  return hb_grow(&buf, &cap, bytes);
}

/* rows o..o+PANEL-1 -> p[kq · PANEL + j] = bytes 4kq..4kq+3 of row o + j, each + 128, for kq < W·nb (bytes
 * past I: w = 0, which meets zero activations) */
GEMM_TGT static void GEMM_NAME(pack)(const hb_q8 *m, int o, int nb, uint32_t *p) {
  const VI flip = V_FLIP();
  for (int h = 0; h < PANEL; h += W)
    for (int b = 0; b < nb; b++) {
      const int left = m->I - 4 * W * b;
      VI r[W];
      for (int j = 0; j < W; j++) r[j] = LOADROW(hb_q8_row(m, o + h + j) + 4 * W * (size_t)b, left);
      TRANSPOSE(r);
      for (int q = 0; q < W; q++) V_STORE(p + (size_t)(W * b + q) * PANEL + h, V_XOR(r[q], flip));
    }
}

/* x rows s0..s0+ns-1 against the panel p of rows o..o+PANEL-1 (nkq quads); next: the rows to prefetch meanwhile
 * (the next panel, streamed from memory while this one computes), or NULL */
GEMM_TGT static inline __attribute__((always_inline)) void GEMM_NAME(block)(const int ns, const hb_q8 *m, const uint32_t *p,
                                                                           int nkq, int o, int s0, const uint8_t *next) {
  VI a0[MR], a1[MR];
  for (int k = 0; k < ns; k++) { a0[k] = V_ZERO(); a1[k] = V_ZERO(); }
  const size_t Ip = (size_t)m->Ip, step = (size_t)PANEL * 4;   /* next-panel bytes per quad: all of it over nkq */
  const int8_t *x = m->qx + (size_t)s0 * Ip;
  for (int k0 = 0; k0 < nkq; k0 += W) {   /* nkq is a multiple of W: the prefetch branch stays out of the hot loop */
    if (next)
      for (size_t c = step * (size_t)k0; c < step * (size_t)(k0 + W); c += 64)
        if (next + c < m->Wend) _mm_prefetch((const char *)(next + c), _MM_HINT_T0);
    for (int kq = k0; kq < k0 + W; kq++) {
      const VI w0 = V_LOAD(p + (size_t)kq * PANEL), w1 = V_LOAD(p + (size_t)kq * PANEL + W);
      for (int k = 0; k < ns; k++) {
        int32_t xq;
        memcpy(&xq, x + (size_t)k * Ip + 4 * (size_t)kq, 4);
        const VI xb = V_SET1(xq);
        a0[k] = V_DP(a0[k], w0, xb);
        a1[k] = V_DP(a1[k], w1, xb);
      }
    }
  }
  /* Σ (w+128)·x − 128·Σx = Σ w·x, exact in int32 (I ≤ 32768); then hb_q8_rowfmt_out's conversion and products */
  const VF sc0 = V_LOADUF(m->sc + o), sc1 = V_LOADUF(m->sc + o + W);
  for (int k = 0; k < ns; k++) {
    const int s = s0 + k;
    const VI off = V_SET1(128 * (int32_t)m->xsum[s]);
    const VF d = V_SET1F(m->dx[s]);
    float *y = m->y + (size_t)s * m->O + o;
    V_STOREUF(y, V_MULF(V_MULF(V_CVT(V_SUB(a0[k], off)), sc0), d));
    V_STOREUF(y + W, V_MULF(V_MULF(V_CVT(V_SUB(a1[k], off)), sc1), d));
  }
}

/* int8 weight rows [lo, hi) in whole panels; returns the first row left undone (hi when none) */
GEMM_TGT static int GEMM_NAME(gemm_i8)(const hb_q8 *m, int lo, int hi) {
  if (m->fmt != HB_INT8 || m->S < HB_Q8_GEMM_S || m->I > 32768 || hi - lo < PANEL) return lo;
  const int nb = (m->I + 4 * W - 1) / (4 * W), nkq = W * nb;   /* nkq·4 ≤ Ip: the x reads stay in the padded rows */
  uint32_t *p = GEMM_NAME(panel_buf)((size_t)nkq * PANEL * 4);
  if (!p) return lo;
  hb_q8_prefetch_panel(m, lo, PANEL);
  int o = lo;
  for (; o + PANEL <= hi; o += PANEL) {
    GEMM_NAME(pack)(m, o, nb, p);
    const uint8_t *next = o + 2 * PANEL <= hi ? hb_q8_row(m, o + PANEL) : NULL;
    int s0 = 0;
    for (; s0 + MR <= m->S; s0 += MR) { GEMM_NAME(block)(MR, m, p, nkq, o, s0, next); next = NULL; }
    switch (m->S - s0) {   /* the rest of the rows, with the count a constant */
    case 1: GEMM_NAME(block)(1, m, p, nkq, o, s0, NULL); break;
    case 2: GEMM_NAME(block)(2, m, p, nkq, o, s0, NULL); break;
    case 3: GEMM_NAME(block)(3, m, p, nkq, o, s0, NULL); break;
    case 4: GEMM_NAME(block)(4, m, p, nkq, o, s0, NULL); break;
    case 5: GEMM_NAME(block)(5, m, p, nkq, o, s0, NULL); break;
#if MR > 6
    case 6: GEMM_NAME(block)(6, m, p, nkq, o, s0, NULL); break;
    case 7: GEMM_NAME(block)(7, m, p, nkq, o, s0, NULL); break;
#endif
    default: break;
    }
  }
  return o;
}
#undef PANEL
