/* libhb normalizations: RMSNorm and LayerNorm over rows of x [S,D].
 * Holds no state. Statistics are computed in double, in a fixed order so results are reproducible and a
 * scalar TS reference can match them bit for bit: RMSNorm's Σx² over 8 interleaved partial sums (element i
 * into sum i mod 8; x² is exact in double, so the AVX-512 / AVX2 loops and the scalar one agree), combined
 * as ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)); LayerNorm's sums sequential. Each output is rounded
 * to f32 once. Rows run on the pool when S·D is large (prefill); decode (S = 1) stays on the caller. */
#include "hb.h"
#include <math.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

typedef struct { const float *x, *w, *b; float *y; int D; double eps; } norm_ctx;

static double combine8(const double t[8]) { return ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7])); }

/* Σ x[i]² as the header says; from element i0 on scalar (i0 a multiple of 8), continuing the sums in t */
static double sumsq_tail(const float *x, int i0, int D, double t[8]) {
  for (int i = i0; i < D; i++) t[i & 7] += (double)x[i] * (double)x[i];
  return combine8(t);
}
/* y[i] = (float)(x[i] · r · w[i]) in double, from element i0 on */
static void scale_tail(const float *x, const float *w, double r, float *y, int i0, int D) {
  for (int i = i0; i < D; i++) y[i] = (float)((double)x[i] * r * (w ? (double)w[i] : 1.0));
}
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f"))) static double sumsq_avx512(const float *x, int D) {
  __m512d a = _mm512_setzero_pd();
  int i = 0;
  for (; i + 8 <= D; i += 8) {
    const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
    a = _mm512_add_pd(a, _mm512_mul_pd(v, v));
  }
  double t[8];
  _mm512_storeu_pd(t, a);
  return sumsq_tail(x, i, D, t);
}
__attribute__((target("avx512f"))) static void scale_avx512(const float *x, const float *w, double r, float *y, int D) {
  const __m512d vr = _mm512_set1_pd(r);
  int i = 0;
  for (; i + 8 <= D; i += 8) {
    __m512d v = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), vr);
    if (w) v = _mm512_mul_pd(v, _mm512_cvtps_pd(_mm256_loadu_ps(w + i)));
    _mm256_storeu_ps(y + i, _mm512_cvtpd_ps(v));
  }
  scale_tail(x, w, r, y, i, D);
}
__attribute__((target("avx2"))) static double sumsq_avx2(const float *x, int D) {
  __m256d a = _mm256_setzero_pd(), b = a;   /* lanes 0-3 and 4-7 of the 8 sums */
  int i = 0;
  for (; i + 8 <= D; i += 8) {
    const __m256d u = _mm256_cvtps_pd(_mm_loadu_ps(x + i)), v = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
    a = _mm256_add_pd(a, _mm256_mul_pd(u, u));
    b = _mm256_add_pd(b, _mm256_mul_pd(v, v));
  }
  double t[8];
  _mm256_storeu_pd(t, a);
  _mm256_storeu_pd(t + 4, b);
  return sumsq_tail(x, i, D, t);
}
__attribute__((target("avx2"))) static void scale_avx2(const float *x, const float *w, double r, float *y, int D) {
  const __m256d vr = _mm256_set1_pd(r);
  int i = 0;
  for (; i + 4 <= D; i += 4) {
    __m256d v = _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), vr);
    if (w) v = _mm256_mul_pd(v, _mm256_cvtps_pd(_mm_loadu_ps(w + i)));
    _mm_storeu_ps(y + i, _mm256_cvtpd_ps(v));
  }
  scale_tail(x, w, r, y, i, D);
}
#endif

/* y[s] = x[s] / sqrt(mean(x[s]²) + eps) ⊙ w   (w NULL = 1) */
static void rms_rows(void *c, int lo, int hi) {
  const norm_ctx *n = c;
  const int D = n->D;
#if defined(__x86_64__) || defined(__i386__)
  const int lvl = hb_simd_level();
#endif
  for (int s = lo; s < hi; s++) {
    const float *x = n->x + (size_t)s * D;
    float *y = n->y + (size_t)s * D;
    double t[8] = { 0 }, ss;
#if defined(__x86_64__) || defined(__i386__)
    if (lvl >= HB_AVX512) ss = sumsq_avx512(x, D);
    else if (lvl >= HB_AVX2) ss = sumsq_avx2(x, D);
    else
#endif
      ss = sumsq_tail(x, 0, D, t);
    const double r = 1.0 / sqrt(ss / D + n->eps);
#if defined(__x86_64__) || defined(__i386__)
    if (lvl >= HB_AVX512) scale_avx512(x, n->w, r, y, D);
    else if (lvl >= HB_AVX2) scale_avx2(x, n->w, r, y, D);
    else
#endif
      scale_tail(x, n->w, r, y, 0, D);
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

/* x [S, D] += a, then y = RMSNorm(x) · w: a residual add and the next norm in one call (hb_add, then hb_rmsnorm: the
 * same bits) */
void hb_add_rmsnorm(float *x, const float *a, const float *w, float *y, int S, int D, float eps) {
  if (!x || !a || S <= 0 || D <= 0) return;
  hb_add(x, a, S * D);
  hb_rmsnorm(x, w, y, S, D, eps);
}

void hb_layernorm(const float *x, const float *w, const float *b, float *y, int S, int D, float eps) {
  if (!x || !y || S <= 0 || D <= 0) return;
  norm_ctx c = { x, w, b, y, D, eps };
  run_rows(ln_rows, &c, S);
}

