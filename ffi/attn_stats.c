/* libhb attention core with softmax statistics (hb_attn_stats, hb_attn_stats_ref): the hb_attn contract
 * (ffi/attn.c) plus, per (s, h), the row max m and the sum l = Σ_j exp(score_j − m) of its softmax, so two
 * partial attentions over disjoint key sets merge exactly:
 *   M = max(m1, m2), a = l1·e^(m1−M), b = l2·e^(m2−M), out = (a·out1 + b·out2) / (a + b).
 * Used by the Vulkan chain's KV split (src/device/): the device attends over its resident KV blocks, the CPU over
 * the rest of the host cache, at the same time. Holds no state (each task mallocs its score scratch).
 * The per-quad work (scores, softmax, weighted sum) is attn.c's hb_attn_quad, which also fills the statistics.
 * SIMD: the attention micro-kernels of attn.h for hb_simd_level() (scalar references at HB_SCALAR); the
 * reference entry always uses the scalar ones. */
#include "attn.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  hb_attn_ops op;
  int S, H, nquads;
  float *stats;
} stats_ctx;

/* one (row s, quad of heads h0..h0+ng-1) item; p = scratch [4, maxn] */
static void stats_item(const stats_ctx *c, int s, int h0, int ng, float *p) {
  const hb_attn_ops *op = &c->op;
  float *st = c->stats + 2 * ((ptrdiff_t)s * c->H + h0);
  if (op->nsel[s] <= 0) { /* no keys: zeros, m = −inf, l = 0 (an empty partial) */
    float *os = op->out + (ptrdiff_t)s * op->oRow;
    for (int g = 0; g < ng; g++) {
      memset(os + (ptrdiff_t)(h0 + g) * op->oHead, 0, sizeof(float) * (size_t)op->dv);
      st[2 * g] = -INFINITY;
      st[2 * g + 1] = 0.0f;
    }
    return;
  }
  hb_attn_quad(op, s, h0, ng, p, st, 1); /* scores, softmax keeping m and l, weighted sum */
}

static void stats_task(void *ctx, int lo, int hi) {
  const stats_ctx *c = ctx;
  const hb_attn_ops *op = &c->op;
  float *p = malloc(sizeof(float) * 4 * (size_t)(op->maxn > 0 ? op->maxn : 1));
  for (int it = lo; it < hi; it++) {
    const int s = it / c->nquads, h0 = (it % c->nquads) * 4, ng = c->H - h0 < 4 ? c->H - h0 : 4;
    if (p) { stats_item(c, s, h0, ng, p); continue; }
    for (int g = 0; g < ng; g++) { /* out of memory: a visible failure (NaN), never a silent one */
      float *o = op->out + (ptrdiff_t)s * op->oRow + (ptrdiff_t)(h0 + g) * op->oHead;
      for (int e = 0; e < op->dv; e++) o[e] = NAN;
      c->stats[2 * ((ptrdiff_t)s * c->H + h0 + g)] = NAN;
      c->stats[2 * ((ptrdiff_t)s * c->H + h0 + g) + 1] = NAN;
    }
  }
  free(p);
}

static void stats_run(hb_attn_kern kn, int S, int H, int dk, int dv, const float *q, int qRow, int qHead,
                      const float *k, int kRow, int kHead, const float *v, int vRow, int vHead, const int32_t *sel,
                      const int32_t *nsel, int selRow, float scale, float *out, int oRow, int oHead, float *stats) {
  if (S <= 0 || H <= 0 || dk < 0 || dv <= 0 || !q || !k || !v || !nsel || !out || !stats) return;
  stats_ctx c = { { dk, dv, 0, q, k, v, qRow, qHead, kRow, kHead, vRow, vHead, sel, nsel, selRow, scale, out, oRow,
                    oHead, kn }, S, H, (H + 3) / 4, stats };
  for (int s = 0; s < S; s++) if (nsel[s] > c.op.maxn) c.op.maxn = nsel[s];
  hb_parallel_for(S * c.nquads, 1, stats_task, &c);
}

/* hb_attn's operands and key lists; out[s,h] = Σ_j p_j v(t_j) (normalised); stats [S·H, 2]:
 * stats[2(s·H+h)] = m = max_j scale·q·k(t_j), stats[2(s·H+h)+1] = l = Σ_j exp(scale·q·k(t_j) − m).
 * nsel[s] = 0: out zeros, m = −inf, l = 0. out must not alias q/k/v/stats. */
void hb_attn_stats(int S, int H, int dk, int dv, const float *q, int qRow, int qHead, const float *k, int kRow,
                   int kHead, const float *v, int vRow, int vHead, const int32_t *sel, const int32_t *nsel, int selRow,
                   float scale, float *out, int oRow, int oHead, float *stats) {
  stats_run(hb_attn_kern_for(hb_simd_level()), S, H, dk, dv, q, qRow, qHead, k, kRow, kHead, v, vRow, vHead, sel,
            nsel, selRow, scale, out, oRow, oHead, stats);
}

/* Scalar reference of hb_attn_stats (same contract, the scalar micro-kernels whatever the SIMD level). */
void hb_attn_stats_ref(int S, int H, int dk, int dv, const float *q, int qRow, int qHead, const float *k, int kRow,
                       int kHead, const float *v, int vRow, int vHead, const int32_t *sel, const int32_t *nsel,
                       int selRow, float scale, float *out, int oRow, int oHead, float *stats) {
  stats_run(hb_attn_kern_for(HB_SCALAR), S, H, dk, dv, q, qRow, qHead, k, kRow, kHead, v, vRow, vHead, sel, nsel,
            selRow, scale, out, oRow, oHead, stats);
}
