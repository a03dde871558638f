/* libhb batched matmuls: n matrices W_k [O_k, I] in one call, each on its own x_k [S_k, I] (possibly the
 * same buffer: q_a ‖ kv_a ‖ indexer wk ‖ weights_proj on one hidden state; every routed expert's gate ‖
 * up on that expert's rows, then every down). Fast mode quantizes each distinct activation block (buffer, rows)
 * once per layout (not once per matrix), on the pool when it is large; one pool job then covers the rows of
 * every matrix, so a decode step pays one wake-up instead of n. Each y_k equals hb_matmul /
 * hb_matmul_q8 of W_k alone, bit for bit (same row kernels, which are batch-invariant).
 * State: the calling thread's job tables (grown as needed); quantized x in matmul_q8.c's scratch. */
#include "matmul.h"
#include "matmul_q8.h"
#include <stdint.h>
#include <stdlib.h>

#define MANY_MAX 4096

typedef struct {                       /* one distinct quantized activation block */
  const float *x;
  const int32_t *rows;                 /* its rows of x by index (NULL: rows 0..S-1) */
  int S, layout;
  hb_q8x q;
} xblock;

typedef struct { const float *x; const int32_t *rows; int S; float *dst; } gather_job;

typedef struct {
  int n, *first;                       /* first[k]: global index of W_k's row 0; first[n] = Σ O */
  int *q8;                             /* 1: fast kernel */
  int *blk;                            /* k -> its activation block (fast kernels) */
  hb_mm *mm;
  hb_mm_rows_fn *mfn;
  hb_q8 *qm;
  hb_q8_rows_fn *qfn;
  xblock *xb;                          /* quantization jobs */
  int nxb, *xrow0;                     /* xrow0[b]: global index of block b's row 0 (quantization split) */
  int *xtb0;                           /* xtb0[b]: global index of block b's first 16-row AMX tile block */
  gather_job *gj;                      /* indexed rows made contiguous for f32 kernels */
  int ngj, *grow0, gI;                 /* grow0[g]: global index of entry g's row 0 (copy split); row width */
} many_job;

static many_job *job_tables(int n) {
  static _Thread_local many_job j;
  static _Thread_local int cap;
  if (n > cap) {
    free(j.first); free(j.q8); free(j.blk); free(j.mm); free(j.mfn); free(j.qm); free(j.qfn); free(j.xb); free(j.xrow0); free(j.xtb0);
    free(j.gj); free(j.grow0);
    j.first = malloc((size_t)(n + 1) * sizeof *j.first); j.q8 = malloc((size_t)n * sizeof *j.q8);
    j.blk = malloc((size_t)n * sizeof *j.blk);
    j.mm = malloc((size_t)n * sizeof *j.mm); j.mfn = malloc((size_t)n * sizeof *j.mfn);
    j.qm = malloc((size_t)n * sizeof *j.qm); j.qfn = malloc((size_t)n * sizeof *j.qfn);
    j.xb = malloc((size_t)n * sizeof *j.xb); j.xrow0 = malloc((size_t)(n + 1) * sizeof *j.xrow0);
    j.xtb0 = malloc((size_t)(n + 1) * sizeof *j.xtb0);
    j.gj = malloc((size_t)n * sizeof *j.gj); j.grow0 = malloc((size_t)(n + 1) * sizeof *j.grow0);
    cap = j.first && j.q8 && j.blk && j.mm && j.mfn && j.qm && j.qfn && j.xb && j.xrow0 && j.xtb0 && j.gj && j.grow0 ? n : 0;
    if (!cap) return NULL;
  }
  return &j;
}

static void many_task(void *c, int lo, int hi) {
  const many_job *j = c;
  /* binary search for the first matrix whose rows reach lo */
  int a = 0, b = j->n - 1;
  while (a < b) { const int m = (a + b) / 2; if (j->first[m + 1] <= lo) a = m + 1; else b = m; }
  for (int k = a; k < j->n && j->first[k] < hi; k++) {
    const int f = j->first[k], e = j->first[k + 1];
    if (e <= lo) continue;
    const int l = (lo > f ? lo : f) - f, h = (hi < e ? hi : e) - f;
    if (j->q8[k]) {
      hb_q8 m = j->qm[k];
      if (m.S <= 4 && h == e - f && k + 1 < j->n && j->q8[k + 1]) {   /* decode's spans: the next matrix is likely ours */
        m.Wnext = j->qm[k + 1].W;
        m.nextb = (size_t)j->qm[k + 1].O * j->qm[k + 1].rowb;
      }
      hb_prefetch_head(hb_q8_row(&m, l), (size_t)(h - l) * m.rowb);
      j->qfn[k](&m, l, h);
    } else if (j->mfn[k]) {
      hb_prefetch_head(hb_mm_row(&j->mm[k], l), (size_t)(h - l) * j->mm[k].rowb);
      j->mfn[k](&j->mm[k], l, h);
    }
  }
}

static void quant_task(void *c, int lo, int hi) {   /* global activation rows [lo, hi) */
  const many_job *j = c;
  for (int b = 0; b < j->nxb && lo < hi; b++) {
    const int f = j->xrow0[b], e = j->xrow0[b + 1];
    if (hi <= f || lo >= e) continue;
    xblock *x = &j->xb[b];
    hb_q8x_quant_rows(&x->q, 0, x->x, (size_t)x->q.I, x->rows, (lo > f ? lo : f) - f, (hi < e ? hi : e) - f);
  }
}

static void tiles_task(void *c, int lo, int hi) {   /* global 16-row blocks of x [lo, hi) (AMX) */
  const many_job *j = c;
  for (int b = 0; b < j->nxb && lo < hi; b++) {
    const int f = j->xtb0[b], e = j->xtb0[b + 1];
    if (hi <= f || lo >= e) continue;
    hb_q8x_tiles(&j->xb[b].q, (lo > f ? lo : f) - f, (hi < e ? hi : e) - f);
  }
}

/* two row lists of S rows (NULL: 0..S-1) name the same rows: the same list, or short ones equal element by element
 * (decode: each expert a token chose holds its own copy of [0], and they share one quantized x) */
static int same_rows(const int32_t *a, const int32_t *b, int S) {
  if (a == b) return 1;
  if (S > 8) return 0;
  for (int i = 0; i < S; i++) if ((a ? a[i] : i) != (b ? b[i] : i)) return 0;
  return 1;
}

static inline const void *addr(double v) { return (const void *)(uintptr_t)v; }

/* the calling thread's buffer for indexed rows made contiguous (f32 kernels), grown as needed */
static float *gather_buf(size_t total) {
  static _Thread_local void *buf;
  static _Thread_local size_t cap;
  return hb_grow(&buf, &cap, total * sizeof(float));   /* rows on cache-line boundaries */
}

static void gather_task(void *c, int lo, int hi) {   /* global gathered rows [lo, hi) */
  const many_job *j = c;
  const int I = j->gI;
  for (int g = 0; g < j->ngj && lo < hi; g++) {
    const int f = j->grow0[g], e = j->grow0[g + 1];
    if (hi <= f || lo >= e) continue;
    const gather_job *G = &j->gj[g];
    for (int s = (lo > f ? lo : f) - f, s1 = (hi < e ? hi : e) - f; s < s1; s++)
      memcpy(G->dst + (size_t)s * I, G->x + (size_t)G->rows[s] * I, (size_t)I * sizeof(float));
  }
}

/* desc: HB_MANY_DESC (10) doubles per matrix (doubles so JS can store ptr() addresses):
 *   fmt, gs, O, W, scales, y, x_k, S_k, rows_k (0 = none), 0.
 * y_k [S_k, O_k] = W_k · x_k, where with rows_k (int32 [S_k]) row s of x_k is row rows_k[s] of x_k's buffer
 * (fast mode quantizes straight from those rows; f32 kernels get them gathered). exact != 0: f32
 * activations, else fast mode. A bad descriptor (null W / y / x_k, O ≤ 0, S_k ≤ 0) leaves that matrix out and
 * its y untouched; n > 4096 is cut to 4096. */
void hb_matmul_many(int exact, int n, const double *desc, int I) {
  if (n <= 0 || !desc || I <= 0) return;
  if (n > MANY_MAX) n = MANY_MAX;
  many_job *j = job_tables(n);
  if (!j) return;
  j->n = n;
  j->nxb = 0;
  /* distinct (x, S, layout) blocks to quantize (fast mode) */
  size_t need = 0;
  int maxS = 0, minS = 0x7fffffff;
  int *blk = j->blk;
  size_t gather = 0;                   /* bound on the floats of indexed rows f32 kernels need contiguous */
  for (int k = 0; k < n; k++) {
    const double *d = desc + HB_MANY_DESC * k;
    const int fmt = (int)d[0], gs = (int)d[1], Sk = (int)d[7];
    const float *xk = addr(d[6]);
    const int32_t *rk = d[8] != 0 ? addr(d[8]) : NULL;
    j->q8[k] = !exact && Sk > 0 && xk && hb_q8_ok(fmt, addr(d[3]), addr(d[4]), gs, I);
    blk[k] = -1;
    if (Sk > maxS) maxS = Sk;
    if (Sk < minS) minS = Sk;
    if (rk && Sk > 0) gather += (size_t)Sk * I;   /* (every one: any may fall back to f32 below) */
    if (!j->q8[k]) continue;
    const int layout = hb_q8_layout(fmt, 0);
    int b = j->nxb - 1;
    while (b >= 0 && !(j->xb[b].x == xk && j->xb[b].S == Sk && j->xb[b].layout == layout && same_rows(j->xb[b].rows, rk, Sk))) b--;
    if (b < 0) {
      b = j->nxb++;
      j->xb[b] = (xblock){ .x = xk, .rows = rk, .S = Sk, .layout = layout };
      need += hb_q8x_bytes(I, Sk);
    }
    blk[k] = b;
  }
  uint8_t *buf = need ? hb_q8_scratch(need) : NULL;
  if (need && !buf) for (int k = 0; k < n; k++) j->q8[k] = 0;   /* out of memory: exact path */
  else if (need) {
    size_t off = 0;
    int rows = 0;
    for (int b = 0; b < j->nxb; b++) {
      hb_q8x_init(&j->xb[b].q, buf + off, j->xb[b].layout, I, j->xb[b].S);
      off += hb_q8x_bytes(I, j->xb[b].S);
      j->xrow0[b] = rows;
      rows += j->xb[b].S;
    }
    j->xrow0[j->nxb] = rows;
    /* rows are independent: large blocks (prefill) quantize on the pool */
    hb_parallel_for(rows, (size_t)rows * I < 65536 ? rows : 8, quant_task, j);
    int tbs = 0;   /* then the AMX tiles of blocks large enough for them */
    for (int b = 0; b < j->nxb; b++) { j->xtb0[b] = tbs; tbs += hb_q8x_amx(&j->xb[b].q); }
    j->xtb0[j->nxb] = tbs;
    if (tbs) hb_parallel_for(tbs, 1, tiles_task, j);
  }
  size_t maxrow = 0, gat = 0;
  float *gbuf = gather ? gather_buf(gather) : NULL;
  j->ngj = 0; j->gI = I;
  int total = 0, grows = 0;
  for (int k = 0; k < n; k++) {
    const double *d = desc + HB_MANY_DESC * k;
    const int fmt = (int)d[0], gs = (int)d[1], O = (int)d[2], Sk = (int)d[7], b = blk[k];
    const void *W = addr(d[3]);
    const float *sc = addr(d[4]), *xk = addr(d[6]);
    const int32_t *rk = d[8] != 0 ? addr(d[8]) : NULL;
    float *y = (float *)addr(d[5]);
    j->first[k] = total;
    j->mfn[k] = NULL;
    if (O <= 0 || !y || Sk <= 0 || !xk) { j->q8[k] = 0; continue; }
    if (rk && !j->q8[k]) {             /* gathered once for consecutive matrices on the same rows (gate ‖ up) */
      if (!gbuf) continue;             /* out of memory: y untouched */
      gather_job *L = j->ngj ? &j->gj[j->ngj - 1] : NULL;
      if (!(L && L->x == xk && L->rows == rk && L->S == Sk)) {
        L = &j->gj[j->ngj];
        *L = (gather_job){ xk, rk, Sk, gbuf + gat };
        j->grow0[j->ngj++] = grows;
        gat += (size_t)Sk * I;
        grows += Sk;
      }
      xk = L->dst;
    }
    if (j->q8[k]) {
      hb_q8_bind(&j->qm[k], fmt, W, sc, gs, O, I, &j->xb[b].q, y);
      j->qfn[k] = hb_q8_kernel(fmt, 0);
      hb_wbytes_add(hb_q8_wbytes(fmt, O, I, gs));
      if (j->qm[k].rowb > maxrow) maxrow = j->qm[k].rowb;
    } else {
      j->mfn[k] = hb_mm_prepare(&j->mm[k], fmt, W, sc, gs, O, I, xk, Sk, y);
      if (!j->mfn[k]) continue;        /* y already written (a bad format) */
      hb_wbytes_add(hb_mm_wbytes(&j->mm[k]));
      if (j->mm[k].rowb > maxrow) maxrow = j->mm[k].rowb;
    }
    total += O;
  }
  j->first[n] = total;
  j->grow0[j->ngj] = grows;
  if (grows > 0) hb_parallel_for(grows, (size_t)grows * I < 65536 ? grows : 8, gather_task, j);   /* before any kernel reads them */
  /* decode-sized batches whose rows all cost the same (one S) stream weights: one contiguous span per thread; the
   * others (prefill's compute; batched decode's experts of 1 to several rows each) take guided claims */
  if (total > 0)
    (maxS < HB_Q8_GEMM_S && minS == maxS ? hb_parallel_spans : hb_parallel_for)(total, hb_mm_chunk_rows(total, maxrow, maxS), many_task, j);
}
