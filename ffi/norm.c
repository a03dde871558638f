/* libhb normalizations: RMSNorm and LayerNorm over rows of x [S,D], softmax in place over n.
 * Holds no state. Statistics are computed in double (sequential sums, so results are reproducible
 * and a scalar TS reference can match them bit for bit); each output is rounded to f32 once.
 * Rows run on the pool when S·D is large (prefill); decode (S = 1) stays on the caller. */
#include "hb.h"
#include <math.h>

typedef struct { const float *x, *w, *b; float *y; int D; double eps; } norm_ctx;

/* y[s] = x[s] / sqrt(mean(x[s]²) + eps) ⊙ w   (w NULL = 1) */
static void rms_rows(void *c, int lo, int hi) {
  const norm_ctx *n = c;
  const int D = n->D;
  for (int s = lo; s < hi; s++) {
    const float *x = n->x + (size_t)s * D;
    float *y = n->y + (size_t)s * D;
    double ss = 0;
    for (int i = 0; i < D; i++) ss += (double)x[i] * (double)x[i];
    const double r = 1.0 / sqrt(ss / D + n->eps);
    for (int i = 0; i < D; i++) y[i] = (float)((double)x[i] * r * (n->w ? (double)n->w[i] : 1.0));
  }
}

/* y[s] = (x[s] − mean) / sqrt(var + eps) ⊙ w + b   (population variance; w NULL = 1, b NULL = 0) */
static void ln_rows(void *c, int lo, int hi) {
  const norm_ctx *n = c;
  const int D = n->D;
  for (int s = lo; s < hi; s++) {
    const float *x = n->x + (size_t)s * D;
    float *y = n->y + (size_t)s * D;
    double sum = 0, var = 0;
    for (int i = 0; i < D; i++) sum += x[i];
    const double mean = sum / D;
    for (int i = 0; i < D; i++) { const double d = (double)x[i] - mean; var += d * d; }
    const double r = 1.0 / sqrt(var / D + n->eps);
    for (int i = 0; i < D; i++)
      y[i] = (float)(((double)x[i] - mean) * r * (n->w ? (double)n->w[i] : 1.0) + (n->b ? (double)n->b[i] : 0.0));
  }
}

static void run_rows(hb_task_fn fn, norm_ctx *c, int S) {
  if ((size_t)S * c->D >= (1u << 16) && S > 1) hb_parallel_for(S, 1 + (int)(8192 / c->D), fn, c);
  else fn(c, 0, S);
}

void hb_rmsnorm(const float *x, const float *w, float *y, int S, int D, float eps) {
  if (!x || !y || S <= 0 || D <= 0) return;
  norm_ctx c = { x, w, NULL, y, D, eps };
  run_rows(rms_rows, &c, S);
}

void hb_layernorm(const float *x, const float *w, const float *b, float *y, int S, int D, float eps) {
  if (!x || !y || S <= 0 || D <= 0) return;
  norm_ctx c = { x, w, b, y, D, eps };
  run_rows(ln_rows, &c, S);
}

/* x[n] <- exp(x − max) / Σ exp(x − max); the exps are f32 (expf), the sum is double */
void hb_softmax(float *x, int n) {
  if (!x || n <= 0) return;
  float m = x[0];
  for (int i = 1; i < n; i++) if (x[i] > m) m = x[i];
  double sum = 0;
  for (int i = 0; i < n; i++) { x[i] = expf(x[i] - m); sum += x[i]; }
  const double inv = 1.0 / sum;
  for (int i = 0; i < n; i++) x[i] = (float)(x[i] * inv);
}
