/* libhb MLA absorbed-form projections for every head in one call (spec §3.1):
 *   q side: qcat[s,h] = [ W_K,hᵀ (kmul_h ⊙ q_nope[s,h]) ‖ q_pe[s,h] ]
 *   v side: o[s,h]    = W_V,h o_lat[s,h]
 * as hb_mla_heads: H independent matrices W_h = rows [r0 + h·rstride, +O) of W [*, I], each applied to its
 * own strided vector. Parallel over (s, h); each task is one matrix-vector product on its thread with the
 * row kernels of hb_matmul (exact) or hb_matmul_q8 (fast) at S = 1, so the output equals per-head calls
 * bit for bit and does not depend on S. Holds no state (thread-local scratch for the scaled vector). */
#include "matmul.h"
#include "matmul_q8.h"
#include <stdlib.h>


typedef struct {
  int exact, fmt, gs, O, I, H, nt;
  const uint8_t *W;
  const float *sc;
  size_t hb, hs;                       /* bytes / scales between consecutive heads' first rows */
  size_t r0b, r0s;                     /* bytes / scales before head 0 */
  const float *x, *xmul, *tail;
  size_t xRow, xHead, yRow, yHead;
  float *y;
} heads_job;

static float *vec_scratch(int n) {
  static _Thread_local float *buf;
  static _Thread_local int cap;
  if (n > cap) {
    free(buf);
    buf = aligned_alloc(64, ((size_t)n * sizeof(float) + 63) & ~(size_t)63);
    cap = buf ? n : 0;
  }
  return buf;
}

static void head_task(void *c, int lo, int hi) {
  const heads_job *j = c;
  for (int it = lo; it < hi; it++) {
    const int s = it / j->H, h = it % j->H, O = j->O, I = j->I;
    const float *x = j->x + (size_t)s * j->xRow + (size_t)h * j->xHead;
    float *y = j->y + (size_t)s * j->yRow + (size_t)h * j->yHead;
    if (j->xmul) {
      float *u = vec_scratch(I);
      if (!u) { for (int o = 0; o < O; o++) y[o] = 0.0f / 0.0f; continue; }
      const float *m = j->xmul + (size_t)h * I;
      for (int i = 0; i < I; i++) u[i] = x[i] * m[i];
      x = u;
    }
    const uint8_t *W = j->W + j->r0b + (size_t)h * j->hb;
    const float *sc = j->sc ? j->sc + j->r0s + (size_t)h * j->hs : NULL;
    void *buf = !j->exact && hb_q8_ok(j->fmt, W, sc, j->gs, I) ? hb_q8_scratch(hb_q8x_bytes(I, 1)) : NULL;
    if (buf) {
      hb_q8x q;
      hb_q8 m;
      hb_q8x_quant(&q, buf, hb_q8_layout(j->fmt, 0), 0, x, (size_t)I, I, 1);
      hb_q8_bind(&m, j->fmt, W, sc, j->gs, O, I, &q, y);
      hb_q8_kernel(j->fmt, 0)(&m, 0, O);
    } else {
      hb_mm m;
      const hb_mm_rows_fn fn = hb_mm_prepare(&m, j->fmt, W, sc, j->gs, O, I, x, 1, y);
      if (fn) fn(&m, 0, O);
    }
    if (j->tail && j->nt > 0)
      memcpy(y + O, j->tail + (size_t)s * j->xRow + (size_t)h * j->xHead, (size_t)j->nt * sizeof(float));
  }
}

/* For s < S, h < H: y[s·yRow + h·yHead + o] = Σ_i W[r0 + h·rstride + o, i] · x'[i], o < O, with
 * x' = x[s·xRow + h·xHead + i] (times xmul[h·I + i] when xmul is given); then, when tail is given,
 * y[.. + O + t] = tail[s·xRow + h·xHead + t] for t < nt. W is fmt (0..6) with scales/gs as in hb_matmul. */
void hb_mla_heads(int exact, int S, int H, int fmt, const void *W, const float *scales, int gs, int O, int I,
                  int r0, int rstride, const float *x, int xRow, int xHead, const float *xmul, float *y, int yRow,
                  int yHead, const float *tail, int nt) {
  if (S <= 0 || H <= 0 || O <= 0 || I <= 0 || !W || !x || !y || fmt < HB_F32 || fmt > HB_F16) return;
  const int quant = fmt >= HB_INT8 && fmt <= HB_INT4G;
  if (quant && (!scales || (fmt == HB_INT4G && gs <= 0))) return;
  const size_t rb = hb_mm_row_bytes(fmt, I);
  const size_t spr = !quant ? 0 : fmt == HB_INT4G ? (size_t)(I + gs - 1) / gs : 1;
  heads_job j = { .exact = exact, .fmt = fmt, .gs = gs, .O = O, .I = I, .H = H, .nt = nt, .W = W,
                  .sc = quant ? scales : NULL, .hb = (size_t)rstride * rb, .hs = (size_t)rstride * spr,
                  .r0b = (size_t)r0 * rb, .r0s = (size_t)r0 * spr, .x = x, .xmul = xmul, .tail = tail,
                  .xRow = (size_t)xRow, .xHead = (size_t)xHead, .yRow = (size_t)yRow, .yHead = (size_t)yHead, .y = y };
  hb_wbytes_add((int64_t)H * (int64_t)O * (int64_t)(rb + 4 * spr));
  const int n = S * H;
  const int th = hb_nthreads(), small = (size_t)H * O * rb < 49152 || th <= 1, per = n / (2 * th);
  hb_parallel_for(n, small ? n : per < 1 ? 1 : per, head_task, &j);   /* ~2 chunks per thread */
}
