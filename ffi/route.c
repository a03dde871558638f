/* libhb MoE router selection (spec §3.4) for S rows of router logits at once, and the grouping of the chosen
 * (row, gate) pairs by expert that batch-union execution needs. In double precision as the spec's reference:
 * s = sigmoid(z); choice score c = s + bias (the bias only chooses); with n_group > 1 only the topk_group groups
 * with the largest sum of their two best c stay; the K best c in descending order, ties to the lower expert id
 * (a NaN never displaces a chosen expert); gate = s / (Σ chosen s + 1e-20) when norm, times scale, rounded to f32.
 * Scalar (rows split over the pool): E·S operations per layer, next to matmuls of E·I·S. Holds no state. */
#include "hb.h"
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

/* keep the topk_group groups of c with the largest (best + second best) c, ties to the lower group; others -inf */
static void limit_groups(double *c, int E, int G, int keep) {
  const int per = E / G;
  double score[1024];
  int order[1024];
  for (int g = 0; g < G; g++) {
    double m1 = -INFINITY, m2 = -INFINITY;
    for (int e = g * per; e < (g + 1) * per; e++) {
      if (c[e] > m1) { m2 = m1; m1 = c[e]; } else if (c[e] > m2) m2 = c[e];
    }
    score[g] = per > 1 ? m1 + m2 : m1;
    int i = g;   /* insertion: descending score, the lower group first on ties (a stable sort) */
    while (i > 0 && score[order[i - 1]] < score[g]) { order[i] = order[i - 1]; i--; }
    order[i] = g;
  }
  for (int r = keep; r < G; r++)
    for (int e = order[r] * per; e < (order[r] + 1) * per; e++) c[e] = -INFINITY;
}

typedef struct {
  int E, K, nGroup, topkGroup, norm;
  atomic_int fail;   /* a task could not get its scratch */
  const float *z, *bias;
  double scale;
  int32_t *experts;
  float *gates;
} route_job;

/* rows [lo, hi): sigmoid, choice, the K best, their gates */
static void route_rows(void *ctx, int lo, int hi) {
  route_job *j = ctx;
  const int E = j->E, K = j->K;
  double *s = malloc(sizeof(double) * 2 * (size_t)E), *c = s ? s + E : NULL;
  int *top = malloc(sizeof(int) * (size_t)K);
  if (!s || !top) { free(s); free(top); atomic_store(&j->fail, 1); return; }
  for (int r = lo; r < hi; r++) {
    const float *zr = j->z + (size_t)r * E;
    for (int e = 0; e < E; e++) {
      s[e] = 1.0 / (1.0 + exp(-(double)zr[e]));
      c[e] = s[e] + (j->bias ? (double)j->bias[e] : 0.0);
    }
    if (j->nGroup > 1) limit_groups(c, E, j->nGroup, j->topkGroup);
    int n = 0;
    for (int e = 0; e < E; e++) {
      const double v = c[e];
      if (n == K && !(v > c[top[K - 1]])) continue;   /* not better than the K-th (equal: the lower id stays) */
      int i = n < K ? n++ : K - 1;
      while (i > 0 && v > c[top[i - 1]]) { top[i] = top[i - 1]; i--; }
      top[i] = e;
    }
    double sum = 0;
    for (int k = 0; k < K; k++) sum += s[top[k]];
    for (int k = 0; k < K; k++) {
      double g = s[top[k]];
      if (j->norm) g /= sum + 1e-20;
      j->experts[(size_t)r * K + k] = top[k];
      j->gates[(size_t)r * K + k] = (float)(g * j->scale);
    }
  }
  free(s);
  free(top);
}

int hb_moe_route(int S, int E, int K, const float *z, const float *bias, int nGroup, int topkGroup, int norm,
                 double scale, int32_t *experts, float *gates, int32_t *off, int32_t *rows, float *rgates,
                 int32_t *uni, int32_t *cnt) {
  if (S < 0 || E < 1 || K < 1 || K > E || nGroup < 1 || nGroup > 1024 || E % nGroup || topkGroup < 1 || topkGroup > nGroup ||
      !z || !experts || !gates)
    return -1;
  route_job j = { E, K, nGroup, topkGroup, norm, 0, z, bias, scale, experts, gates };
  /* rows are independent: a prompt's (S·E exp calls, ~75 us at 128 × 64) on the pool */
  hb_parallel_for(S, (size_t)S * E < 4096 ? (S > 0 ? S : 1) : 8, route_rows, &j);
  if (atomic_load(&j.fail)) return -1;
  if (!off) return 0;
  /* group by expert: e's pairs at [off[e], off[e+1]), rows ascending; then the union with its row counts */
  for (int e = 0; e <= E; e++) off[e] = 0;
  for (size_t i = 0; i < (size_t)S * K; i++) off[experts[i] + 1]++;
  for (int e = 0; e < E; e++) off[e + 1] += off[e];
  for (int r = 0; r < S; r++)
    for (int k = 0; k < K; k++) {
      const int e = experts[(size_t)r * K + k], at = off[e]++;
      if (rows) rows[at] = r;
      if (rgates) rgates[at] = gates[(size_t)r * K + k];
    }
  for (int e = E; e > 0; e--) off[e] = off[e - 1];
  off[0] = 0;
  int nu = 0;
  for (int e = 0; e < E; e++)
    if (off[e + 1] > off[e]) {
      if (uni) uni[nu] = e;
      if (cnt) cnt[nu] = off[e + 1] - off[e];
      nu++;
    }
  return nu;
}
