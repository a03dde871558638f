/* libhb batched matmuls: n matrices W_k [O_k, I] applied to the same x [S, I] in one call
 * (q_a ‖ kv_a ‖ indexer wk ‖ weights_proj on one hidden state; an expert's gate ‖ up). Fast mode
 * quantizes x once per activation layout (not once per matrix); one pool job covers the rows of every
 * matrix, so decode pays one wake-up instead of n. Each y_k equals hb_matmul / hb_matmul_q8 of W_k
 * alone, bit for bit (same row kernels). Holds no state (scratch: matmul_q8.c's thread-local buffer). */
#include "matmul.h"
#include "matmul_q8.h"
#include <stdint.h>


#define MANY_MAX 16
typedef struct {
  int n, first[MANY_MAX + 1];          /* first[k]: global index of W_k's row 0; first[n] = Σ O */
  int q8[MANY_MAX];                    /* 1: fast kernel */
  hb_mm mm[MANY_MAX];
  hb_mm_rows_fn mfn[MANY_MAX];
  hb_q8 qm[MANY_MAX];
  hb_q8_rows_fn qfn[MANY_MAX];
} many_job;

static void many_task(void *c, int lo, int hi) {
  const many_job *j = c;
  for (int k = 0; k < j->n && lo < hi; k++) {
    const int a = j->first[k], b = j->first[k + 1];
    if (hi <= a || lo >= b) continue;
    const int l = (lo > a ? lo : a) - a, h = (hi < b ? hi : b) - a;
    if (j->q8[k]) j->qfn[k](&j->qm[k], l, h);
    else if (j->mfn[k]) j->mfn[k](&j->mm[k], l, h);
  }
}

static inline const void *addr(double v) { return (const void *)(uintptr_t)v; }

/* desc: f64[8] per matrix (doubles so JS can store ptr() addresses): fmt, gs, O, W, scales, y, 0, 0.
 * y_k [S, O_k] = W_k · x; exact != 0: f32 activations, else fast mode. n > 16 or a bad descriptor
 * (null W / y, O < 0) leaves that matrix out and its y untouched. */
void hb_matmul_many(int exact, int n, const double *desc, int I, const float *x, int S) {
  if (n <= 0 || !desc || !x || S <= 0) return;
  if (n > MANY_MAX) n = MANY_MAX;
  static _Thread_local many_job j;    /* large: not on the stack; one caller thread at a time */
  j.n = n;
  size_t need = 0, maxrow = 0;
  int layouts[4] = { 0 };
  for (int k = 0; k < n; k++) {
    const double *d = desc + 8 * k;
    const int fmt = (int)d[0], gs = (int)d[1];
    j.q8[k] = !exact && hb_q8_ok(fmt, addr(d[3]), addr(d[4]), gs, I);
    if (j.q8[k]) layouts[hb_q8_layout(fmt, 0)] = 1;
  }
  for (int l = 0; l < 4; l++) if (layouts[l]) need += hb_q8x_bytes(I, S);
  uint8_t *buf = need ? hb_q8_scratch(need) : NULL;
  hb_q8x qx[4];
  if (need && !buf) for (int k = 0; k < n; k++) j.q8[k] = 0;   /* out of memory: exact path */
  else if (need) {
    size_t off = 0;
    for (int l = 0; l < 4; l++) {
      if (!layouts[l]) continue;
      hb_q8x_quant(&qx[l], buf + off, l, 0, x, (size_t)I, I, S);
      off += hb_q8x_bytes(I, S);
    }
  }
  int total = 0;
  for (int k = 0; k < n; k++) {
    const double *d = desc + 8 * k;
    const int fmt = (int)d[0], gs = (int)d[1], O = (int)d[2];
    const void *W = addr(d[3]);
    const float *sc = addr(d[4]);
    float *y = (float *)addr(d[5]);
    j.first[k] = total;
    j.mfn[k] = NULL;
    if (O <= 0 || !y) { j.q8[k] = 0; continue; }
    if (j.q8[k]) {
      hb_q8_bind(&j.qm[k], fmt, W, sc, gs, O, I, &qx[hb_q8_layout(fmt, 0)], y);
      j.qfn[k] = hb_q8_kernel(fmt, 0);
      hb_wbytes_add(hb_q8_wbytes(fmt, O, I, gs));
      if (j.qm[k].rowb > maxrow) maxrow = j.qm[k].rowb;
    } else {
      j.mfn[k] = hb_mm_prepare(&j.mm[k], fmt, W, sc, gs, O, I, x, S, y);
      if (!j.mfn[k]) continue;             /* y already written (I == 0 or a bad format) */
      hb_wbytes_add(hb_mm_wbytes(&j.mm[k]));
      if (j.mm[k].rowb > maxrow) maxrow = j.mm[k].rowb;
    }
    total += O;
  }
  j.first[n] = total;
  if (total > 0) hb_parallel_for(total, hb_mm_chunk_rows(total, maxrow, S), many_task, &j);
}
