/* libhb MLA absorbed-form projections for every head in one call (spec §3.1):
 *   q side: qcat[s,h] = [ W_K,hᵀ (kmul_h ⊙ q_nope[s,h]) ‖ q_pe[s,h] ]
 *   v side: o[s,h]    = W_V,h o_lat[s,h]
 * as hb_mla_heads: H independent matrices W_h = rows [r0 + h·rstride, +O) of W [*, I], each applied to its
 * own strided vector. Parallel over (head, block of ≤ 16 rows); each task gathers its rows and runs the row
 * kernels of hb_matmul (exact) or hb_matmul_q8 (fast) once for all of them (they are batch-invariant), so the
 * output equals per-head, per-row calls bit for bit and does not depend on S. hb_mla_q / hb_mla_absorbed: a layer's
 * queries (norm, q_b, RoPE) and its absorbed attention (q side, the core over every segment, v side) in one call
 * each, the latter at one row in one pool job. Holds no state (thread-local scratch for the gathered vectors and
 * outputs). */
#include "matmul.h"
#include "matmul_q8.h"
#include "attn.h"
#include <stdlib.h>


typedef struct {
  int exact, fmt, gs, O, I, H, S, nt;
  const uint8_t *W;
  const uint8_t *cols;                 /* fast mode, int8: W's column-quad copy, read by cf (matmul_q8.h); or NULL */
  hb_q8_cols_fn cf;
  const float *sc;
  size_t hb, hs;                       /* bytes / scales between consecutive heads' first rows */
  size_t r0b, r0s;                     /* bytes / scales before head 0 */
  const float *x, *xmul, *tail;
  size_t xRow, xHead, yRow, yHead;
  float *y;
} heads_job;

#define ROWS_PER_TASK 16            /* rows of one head per task: the weights are read once for all of them */

static float *vec_scratch(size_t n) {
  static _Thread_local void *buf;
  static _Thread_local size_t cap;
  return hb_grow(&buf, &cap, n * sizeof(float));
}

/* head h over rows [s0, s0 + n): the rows' (scaled) vectors gathered into u [n, I], one kernel call for all n (row
 * kernels are batch-invariant: the same bits as n calls of one row), outputs scattered back to their strided places */
static void head_rows(const heads_job *j, int h, int s0, int n) {
  const int O = j->O, I = j->I;
  /* the head's weights (or their column-quad copy) start streaming while its vectors are gathered */
  if (j->cols) hb_prefetch_head(j->cols + (size_t)h * O * I, (size_t)O * I);
  else hb_prefetch_head(j->W + j->r0b + (size_t)h * j->hb, (size_t)O * hb_mm_row_bytes(j->fmt, I));
  float *u = vec_scratch((size_t)n * ((size_t)I + (size_t)O));
  if (!u) {
    for (int s = s0; s < s0 + n; s++)
      for (int o = 0; o < O; o++) j->y[(size_t)s * j->yRow + (size_t)h * j->yHead + o] = 0.0f / 0.0f;
    return;
  }
  float *yt = u + (size_t)n * I;
  const float *m = j->xmul ? j->xmul + (size_t)h * I : NULL;
  for (int k = 0; k < n; k++) {
    const float *x = j->x + (size_t)(s0 + k) * j->xRow + (size_t)h * j->xHead;
    float *uk = u + (size_t)k * I;
    if (m) for (int i = 0; i < I; i++) uk[i] = x[i] * m[i];
    else memcpy(uk, x, (size_t)I * sizeof(float));
  }
  const uint8_t *W = j->W + j->r0b + (size_t)h * j->hb;
  const float *sc = j->sc ? j->sc + j->r0s + (size_t)h * j->hs : NULL;
  void *buf = !j->exact && hb_q8_ok(j->fmt, W, sc, j->gs, I) ? hb_q8_scratch(hb_q8x_bytes(I, n)) : NULL;
  if (buf) {
    hb_q8x q;
    hb_q8 mq;
    hb_q8x_quant(&q, buf, hb_q8_layout(j->fmt, 0), 0, u, (size_t)I, I, n);
    if (j->cols) j->cf(j->cols + (size_t)h * O * I, sc, O, I, &q, yt, (size_t)O);
    else {
      hb_q8_bind(&mq, j->fmt, W, sc, j->gs, O, I, &q, yt);
      hb_q8_kernel(j->fmt, 0)(&mq, 0, O);
    }
  } else {
    hb_mm mm;
    const hb_mm_rows_fn fn = hb_mm_prepare(&mm, j->fmt, W, sc, j->gs, O, I, u, n, yt);
    if (fn) fn(&mm, 0, O);
  }
  for (int k = 0; k < n; k++) {
    const size_t xo = (size_t)(s0 + k) * j->xRow + (size_t)h * j->xHead;
    float *y = j->y + (size_t)(s0 + k) * j->yRow + (size_t)h * j->yHead;
    memcpy(y, yt + (size_t)k * O, (size_t)O * sizeof(float));
    if (j->tail && j->nt > 0) memcpy(y + O, j->tail + xo, (size_t)j->nt * sizeof(float));
  }
}

/* task it: head it % H over rows [s0, s0 + ROWS_PER_TASK) ∩ [0, S), s0 = (it / H)·ROWS_PER_TASK */
static void head_task(void *c, int lo, int hi) {
  const heads_job *j = c;
  for (int it = lo; it < hi; it++) {
    const int s0 = (it / j->H) * ROWS_PER_TASK;
    head_rows(j, it % j->H, s0, j->S - s0 < ROWS_PER_TASK ? j->S - s0 : ROWS_PER_TASK);
  }
}

/* For s < S, h < H: y[s·yRow + h·yHead + o] = Σ_i W[r0 + h·rstride + o, i] · x'[i], o < O, with
 * x' = x[s·xRow + h·xHead + i] (times xmul[h·I + i] when xmul is given); then, when tail is given,
 * y[.. + O + t] = tail[s·xRow + h·xHead + t] for t < nt. W is fmt (0..6) with scales/gs as in hb_matmul. cols
 * (int8 W of whole heads, r0 0 and rstride O, or NULL): W's column-quad copy, head after head, which fast mode reads
 * where the level has the kernel (matmul_q8.h; the same bits). hb_mla_heads's job (heads_make; its tasks head_task),
 * its weight bytes counted; heads_make returns 0 for bad arguments. */
static int heads_make(heads_job *j, int exact, int S, int H, int fmt, const void *W, const float *scales, int gs, int O,
                      int I, int r0, int rstride, const float *x, int xRow, int xHead, const float *xmul, float *y,
                      int yRow, int yHead, const float *tail, int nt, const uint8_t *cols) {
  if (S <= 0 || H <= 0 || O <= 0 || I <= 0 || !W || !x || !y || fmt < HB_F32 || fmt > HB_F16) return 0;
  const int quant = fmt >= HB_INT8 && fmt <= HB_INT4G;
  if (quant && (!scales || (fmt == HB_INT4G && gs <= 0))) return 0;
  const size_t rb = hb_mm_row_bytes(fmt, I);
  const size_t spr = !quant ? 0 : fmt == HB_INT4G ? (size_t)(I + gs - 1) / gs : 1;
  *j = (heads_job){ .exact = exact, .fmt = fmt, .gs = gs, .O = O, .I = I, .H = H, .S = S, .nt = nt, .W = W,
                  .cf = !exact && fmt == HB_INT8 && r0 == 0 && rstride == O && O % 16 == 0 && I % 4 == 0 ? hb_q8_cols_kernel() : NULL,
                  .sc = quant ? scales : NULL, .hb = (size_t)rstride * rb, .hs = (size_t)rstride * spr,
                  .r0b = (size_t)r0 * rb, .r0s = (size_t)r0 * spr, .x = x, .xmul = xmul, .tail = tail,
                  .xRow = (size_t)xRow, .xHead = (size_t)xHead, .yRow = (size_t)yRow, .yHead = (size_t)yHead, .y = y };
  j->cols = j->cf ? cols : NULL;
  hb_wbytes_add((int64_t)H * (int64_t)O * (int64_t)(rb + 4 * spr));
  return 1;
}

/* the job's tasks on the pool, ~2 chunks per thread (small weights: on the caller) */
static void heads_run(heads_job *j) {
  const int n = (j->S + ROWS_PER_TASK - 1) / ROWS_PER_TASK * j->H;
  const int th = hb_nthreads(), small = (size_t)j->H * j->O * hb_mm_row_bytes(j->fmt, j->I) < 49152 || th <= 1, per = n / (2 * th);
  hb_parallel_for(n, small ? n : per < 1 ? 1 : per, head_task, j);
}

void hb_mla_heads(int exact, int S, int H, int fmt, const void *W, const float *scales, int gs, int O, int I,
                  int r0, int rstride, const float *x, int xRow, int xHead, const float *xmul, float *y, int yRow,
                  int yHead, const float *tail, int nt, const uint8_t *cols) {
  heads_job j;
  if (heads_make(&j, exact, S, H, fmt, W, scales, gs, O, I, r0, rstride, x, xRow, xHead, xmul, y, yRow, yHead, tail, nt, cols))
    heads_run(&j);
}

/* hb_mla_absorbed's operands (see it), and its q and v sides' jobs for batch rows [r0, r0 + n) */
typedef struct {
  int exact, H, dn, dr, dv, kvr;
  const double *kt, *vw;
  const float *kmul;
  float *q, *qcat, *olat, *o;
} absorbed_ops;

static int q_side(heads_job *j, const absorbed_ops *a, int r0, int n) {
  const int W = a->kvr + a->dr, Q = a->H * (a->dn + a->dr), QC = a->H * W;
  float *qr = a->q + (size_t)r0 * Q;
  return heads_make(j, a->exact, n, a->H, (int)a->kt[0], (const void *)(uintptr_t)a->kt[2], (const float *)(uintptr_t)a->kt[3],
                    (int)a->kt[1], a->kvr, a->dn, 0, a->kvr, qr, Q, a->dn + a->dr, a->kmul, a->qcat + (size_t)r0 * QC, QC, W,
                    qr + a->dn, a->dr, (const uint8_t *)(uintptr_t)a->kt[4]);
}

static int v_side(heads_job *j, const absorbed_ops *a, int r0, int n) {
  const int L = a->H * a->kvr, V = a->H * a->dv;
  return heads_make(j, a->exact, n, a->H, (int)a->vw[0], (const void *)(uintptr_t)a->vw[2], (const float *)(uintptr_t)a->vw[3],
                    (int)a->vw[1], a->dv, a->kvr, a->dn, a->dn + a->dv, a->olat + (size_t)r0 * L, L, a->kvr, NULL,
                    a->o + (size_t)r0 * V, V, a->dv, NULL, 0, NULL);
}

/* hb_mla_absorbed of one row in one pool job: item = group of G heads; its q side (head_rows of the q job), its core
 * (hb_attn_set_row) and its v side depend on nothing else, so no thread waits for another between the three. One
 * row only: at one row this ran 1.19-1.25x the three jobs, at 2-8 rows 0.86-0.91x them (they read the weights once
 * for all the rows, in finer items; the bench preset, two builds alternated in one process, AMD EPYC). */
typedef struct {
  heads_job qj, vj;
  hb_attn_set at;
  int row, H, G;                       /* the batch row, heads, heads a group (8, or 4 where that leaves 2 a thread) */
} absorbed_row;

static void absorbed_task(void *c, int lo, int hi) {
  const absorbed_row *j = c;
  for (int it = lo; it < hi; it++) {
    const int h0 = it * j->G, G = j->H - h0 < j->G ? j->H - h0 : j->G;
    for (int h = h0; h < h0 + G; h++) head_rows(&j->qj, h, 0, 1);
    hb_attn_set_row(&j->at, j->row, h0, G);
    for (int h = h0; h < h0 + G; h++) head_rows(&j->vj, h, 0, 1);
  }
}

/* A layer's absorbed attention (attention.ts absorbedQ, absorbedAttn, absorbedV) in one call, the same three calls in
 * the same order (the same bits; one row: absorbed_row). runs [nrun, 2]: (r0, n) row runs of the segments; per run,
 * q side: qcat [*, H·(kvr+dr)] rows = [W_K,hᵀ (kmul_h ⊙ q_nope) ‖ q_pe] of q [*, H·(dn+dr)] (kt: the transposed W_K
 * packed as fmt, gs, W, scales, cols — O kvr, I dn, whole heads); then hb_attn_segs over the nseg segments (desc as
 * its; keys and values the cache rows [kvr + dr], kvfmt) into o_lat [*, H·kvr]; then per run, v side: o [*, H·dv]
 * rows = W_V,h o_lat (vw: kv_b packed as fmt, gs, W, scales — rows dn.. of each head's dn + dv). */
void hb_mla_absorbed(int exact, int nrun, const int32_t *runs, int H, int dn, int dr, int dv, int kvr,
                     const double *kt, const float *kmul, float *q, float *qcat, int nseg, const double *segs,
                     const int32_t *sel, const int32_t *nsel, int topk, float scale, int kvfmt, float *olat,
                     const double *vw, float *o) {
  if (nrun <= 0 || !runs || !kt || !vw || !q || !qcat || !olat || !o || H <= 0 || kvr <= 0) return;
  const absorbed_ops a = { exact, H, dn, dr, dv, kvr, kt, vw, kmul, q, qcat, olat, o };
  const int W = kvr + dr, QC = H * W;
  heads_job j;
  if (nrun == 1 && runs[1] == 1) {
    absorbed_row r = { .row = runs[0], .H = H, .G = (H + 7) / 8 >= 2 * hb_nthreads() ? 8 : 4 };
    if (q_side(&r.qj, &a, runs[0], 1) && v_side(&r.vj, &a, runs[0], 1) &&
        hb_attn_set_make(&r.at, nseg, segs, H, W, kvr, qcat, QC, W, W, 0, W, 0, sel, nsel, topk, scale, olat, H * kvr, kvr, kvfmt))
      hb_parallel_for((H + r.G - 1) / r.G, 1, absorbed_task, &r);
    hb_attn_set_free(&r.at);
    return;
  }
  for (int r = 0; r < nrun; r++) if (q_side(&j, &a, runs[2 * r], runs[2 * r + 1])) heads_run(&j);
  hb_attn_segs(nseg, segs, H, W, kvr, qcat, QC, W, W, 0, W, 0, sel, nsel, topk, scale, olat, H * kvr, kvr, kvfmt);
  for (int r = 0; r < nrun; r++) if (v_side(&j, &a, runs[2 * r], runs[2 * r + 1])) heads_run(&j);
}

/* A layer's queries in one call (attention.ts): cq [S, qr] = RMS(qa; normw, eps), then hb_matmul_many of the n matrices
 * of desc on cq (q_b ‖ indexer wq_b: their descriptor, I = qr), then RoPE of the last dr of each of the H heads of
 * q [S, H·(dn+dr)] at pos, and with qI (the indexer's queries [S, nh·hd], NULL: none) of the first dr of each of its
 * nh heads: hb_rmsnorm, hb_matmul_many and hb_rope as made one by one (the same bits). */
void hb_mla_q(int exact, int n, const double *desc, const float *qa, const float *normw, float *cq, int S, int qr, float eps,
              float *q, int H, int dn, int dr, const int32_t *pos, double theta, float *qI, int nh, int hd) {
  if (!qa || !normw || !cq || !q || !pos || S <= 0 || qr <= 0 || H <= 0) return;
  hb_rmsnorm(qa, normw, cq, S, qr, eps);
  hb_matmul_many(exact, n, desc, qr);
  hb_rope(q + dn, S, H * (dn + dr), H, dn + dr, dr, pos, theta);
  if (qI && nh > 0 && hd >= dr) hb_rope(qI, S, nh * hd, nh, hd, dr, pos, theta);
}
