/* libhb attention core with softmax statistics (hb_attn_stats, hb_attn_stats_ref): the hb_attn contract
 * (ffi/attn.c) plus, per (s, h), the row max m and the sum l = Σ_j exp(score_j − m) of its softmax, so two
 * partial attentions over disjoint key sets merge exactly:
 *   M = max(m1, m2), a = l1·e^(m1−M), b = l2·e^(m2−M), out = (a·out1 + b·out2) / (a + b).
 * Used by the Vulkan chain's KV split (gpu/): the device attends over its resident KV blocks, the CPU over
 * the rest of the host cache, at the same time. Holds no state (each task mallocs its score scratch).
 * SIMD: the attention micro-kernels of attn.h for hb_simd_level() (scalar references at HB_SCALAR); the
 * reference entry always uses the scalar ones. */
#include "attn.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int S, H, dk, dv, maxn, nquads;
  const float *q, *k, *v; int qRow, qHead, kRow, kHead, vRow, vHead;
  const int32_t *sel, *nsel; int selRow; float scale;
  float *out; int oRow, oHead; float *stats;
  hb_attn_kern kn;
} stats_ctx;

#define KEY(j) ((ptrdiff_t)(sr ? sr[j] : (j)))
/* one (row s, quad of heads h0..h0+ng-1) item; p = scratch [4, maxn] */
static void stats_item(const stats_ctx *c, int s, int h0, int ng, float *p) {
  const int n = c->nsel[s] > 0 ? c->nsel[s] : 0;
  const int32_t *sr = c->sel ? c->sel + (ptrdiff_t)s * c->selRow : NULL;
  const float *qs = c->q + (ptrdiff_t)s * c->qRow;
  float *os = c->out + (ptrdiff_t)s * c->oRow, *st = c->stats + 2 * ((ptrdiff_t)s * c->H + h0);
  if (n == 0) { /* no keys: zeros, m = −inf, l = 0 (an empty partial) */
    for (int g = 0; g < ng; g++) {
      memset(os + (ptrdiff_t)(h0 + g) * c->oHead, 0, sizeof(float) * (size_t)c->dv);
      st[2 * g] = -INFINITY;
      st[2 * g + 1] = 0.0f;
    }
    return;
  }
  int hh[4];
  for (int i = 0; i < 4; i++) hh[i] = h0 + (i < ng ? i : ng - 1); /* unused lanes repeat the last head */
  /* scores p[g][j] = scale · q_h·k_t */
  if (c->kHead == 0 && ng >= 3) {
    const float *a[4] = { qs + (ptrdiff_t)hh[0] * c->qHead, qs + (ptrdiff_t)hh[1] * c->qHead,
                          qs + (ptrdiff_t)hh[2] * c->qHead, qs + (ptrdiff_t)hh[3] * c->qHead };
    float d[8];
    for (int j = 0; j < n; j += 2) {
      const int j1 = j + 1 < n ? j + 1 : j;
      const float *b[2] = { c->k + KEY(j) * c->kRow, c->k + KEY(j1) * c->kRow };
      c->kn.dot4x2(a, b, c->dk, d);
      for (int i = 0; i < ng; i++) {
        float *pg = p + (size_t)i * c->maxn;
        pg[j] = c->scale * d[2 * i];
        if (j1 != j) pg[j1] = c->scale * d[2 * i + 1];
      }
    }
  } else {
    for (int i = 0; i < ng; i++) {
      const float *a = qs + (ptrdiff_t)hh[i] * c->qHead, *kh = c->k + (ptrdiff_t)hh[i] * c->kHead;
      float *pg = p + (size_t)i * c->maxn, d[4];
      for (int j = 0; j < n; j += 4) {
        const int m = n - j < 4 ? n - j : 4;
        const float *b[4];
        for (int r = 0; r < 4; r++) b[r] = kh + KEY(j + (r < m ? r : m - 1)) * c->kRow;
        c->kn.dot1x4(a, b, c->dk, d);
        for (int r = 0; r < m; r++) pg[j + r] = c->scale * d[r];
      }
    }
  }
  /* softmax per head (max-subtracted, f32 exp, double sum), keeping m and l */
  for (int i = 0; i < ng; i++) {
    float *pg = p + (size_t)i * c->maxn, mx = pg[0];
    for (int j = 1; j < n; j++) if (pg[j] > mx) mx = pg[j];
    double sum = 0.0;
    for (int j = 0; j < n; j++) { pg[j] = expf(pg[j] - mx); sum += pg[j]; }
    for (int j = 0; j < n; j++) pg[j] = (float)((double)pg[j] / sum);
    st[2 * i] = mx;
    st[2 * i + 1] = (float)sum;
  }
  /* o_h = Σ_j p_j · v_t, j in list order */
  const float *pp[4], *vb[4];
  float *oo[4];
  for (int i = 0; i < 4; i++) {
    pp[i] = p + (size_t)(hh[i] - h0) * c->maxn;
    vb[i] = c->v + (ptrdiff_t)hh[i] * c->vHead;
    oo[i] = os + (ptrdiff_t)hh[i] * c->oHead;
  }
  c->kn.wsum(pp, vb, c->vHead == 0, c->vRow, sr, n, c->dv, oo);
}
#undef KEY

static void stats_task(void *ctx, int lo, int hi) {
  const stats_ctx *c = ctx;
  float *p = malloc(sizeof(float) * 4 * (size_t)(c->maxn > 0 ? c->maxn : 1));
  for (int it = lo; it < hi; it++) {
    const int s = it / c->nquads, h0 = (it % c->nquads) * 4, ng = c->H - h0 < 4 ? c->H - h0 : 4;
    if (p) { stats_item(c, s, h0, ng, p); continue; }
    for (int g = 0; g < ng; g++) { /* out of memory: a visible failure (NaN), never a silent one */
      float *o = c->out + (ptrdiff_t)s * c->oRow + (ptrdiff_t)(h0 + g) * c->oHead;
      for (int e = 0; e < c->dv; e++) o[e] = NAN;
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
  stats_ctx c = { S, H, dk, dv, 0, (H + 3) / 4, q, k, v, qRow, qHead, kRow, kHead, vRow, vHead, sel, nsel, selRow,
                  scale, out, oRow, oHead, stats, kn };
  for (int s = 0; s < S; s++) if (nsel[s] > c.maxn) c.maxn = nsel[s];
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
