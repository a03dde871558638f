/* libhb element-wise kernels: SwiGLU, add, axpy, interleaved RoPE (spec §3.2), dtype conversion to f32.
 * State: the F8 E4M3 decode table (built once). Float ops are plain f32 (no contraction: -std=c11
 * implies -ffp-contract=off), so a TS reference with Math.fround matches add/axpy bit for bit.
 * RoPE angles, cos/sin and the rotation are computed in double and stored as f32. */
#include "hb.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

/* out[n] = g·σ(g)·u,  σ(g) = 1/(1+e^−g) */
void hb_swiglu(const float *g, const float *u, float *out, int n) {
  if (!g || !u || !out) return;
  for (int i = 0; i < n; i++) {
    const float s = 1.0f / (1.0f + expf(-g[i]));
    out[i] = g[i] * s * u[i];
  }
}

/* y[n] += x */
void hb_add(float *y, const float *x, int n) {
  if (!y || !x) return;
  for (int i = 0; i < n; i++) y[i] += x[i];
}

/* y[n] += a·x */
void hb_axpy(float *y, float a, const float *x, int n) {
  if (!y || !x) return;
  for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* In place, for s < S, v < nvec, j < dr/2, p = x + s·rowStride + v·vecStride:
 * θ_j = theta^(−2j/dr), φ = pos[s]·θ_j, (p[2j], p[2j+1]) <- (a·cos φ − b·sin φ, b·cos φ + a·sin φ). */
void hb_rope(float *x, int S, int rowStride, int nvec, int vecStride, int dr, const int32_t *pos, double theta) {
  const int h = dr / 2;
  if (!x || !pos || S <= 0 || nvec <= 0 || h <= 0) return;
  double stack[3 * 256], *th = h <= 256 ? stack : malloc(3 * sizeof(double) * (size_t)h);
  if (!th) return;
  double *c = th + h, *sn = c + h;
  for (int j = 0; j < h; j++) th[j] = pow(theta, (-2.0 * j) / dr);
  for (int s = 0; s < S; s++) {
    for (int j = 0; j < h; j++) {
      const double phi = (double)pos[s] * th[j];
      c[j] = cos(phi);
      sn[j] = sin(phi);
    }
    for (int v = 0; v < nvec; v++) {
      float *p = x + (ptrdiff_t)s * rowStride + (ptrdiff_t)v * vecStride;
      for (int j = 0; j < h; j++) {
        const double a = p[2 * j], b = p[2 * j + 1];
        p[2 * j] = (float)(a * c[j] - b * sn[j]);
        p[2 * j + 1] = (float)(b * c[j] + a * sn[j]);
      }
    }
  }
  if (th != stack) free(th);
}

/* ---- conversion to f32 ---- */
static float f8_table[256];
static pthread_once_t f8_once = PTHREAD_ONCE_INIT;
/* OCP F8 E4M3 (e4m3fn): 1 sign, 4 exponent (bias 7), 3 mantissa; no inf; S.1111.111 = NaN */
static void f8_init(void) {
  for (int c = 0; c < 256; c++) {
    const int e = (c >> 3) & 15, m = c & 7;
    float v = (e == 15 && m == 7) ? NAN : e ? ldexpf(1.0f + m / 8.0f, e - 7) : ldexpf((float)m, -9);
    f8_table[c] = (c & 0x80) ? -v : v;
  }
}

typedef struct { int kind; const void *src; float *dst; int64_t n; } conv_ctx;
#define CONV_BLOCK 65536

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2,f16c"))) static void f16_f16c(const uint16_t *s, float *d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
  for (; i < n; i++) d[i] = hb_f16_to_f32(s[i]);
}
#endif

static void conv_range(const conv_ctx *c, int64_t lo, int64_t hi) {
  float *d = c->dst;
  switch (c->kind) {
  case HB_CONV_BF16: {
    const uint16_t *s = c->src;
    for (int64_t i = lo; i < hi; i++) d[i] = hb_bf16_to_f32(s[i]);
    break;
  }
  case HB_CONV_F16: {
    const uint16_t *s = c->src;
#if defined(__x86_64__) || defined(__i386__)
    if (hb_simd_level() >= HB_AVX2) { f16_f16c(s + lo, d + lo, hi - lo); break; }
#endif
    for (int64_t i = lo; i < hi; i++) d[i] = hb_f16_to_f32(s[i]);
    break;
  }
  case HB_CONV_F8E4M3: {
    const uint8_t *s = c->src;
    for (int64_t i = lo; i < hi; i++) d[i] = f8_table[s[i]];
    break;
  }
  default:
    for (int64_t i = lo; i < hi; i++) d[i] = NAN;   /* unknown kind: visible, never a crash */
  }
}

static void conv_task(void *p, int lo, int hi) {
  const conv_ctx *c = p;
  const int64_t a = (int64_t)lo * CONV_BLOCK, b = (int64_t)hi * CONV_BLOCK;
  conv_range(c, a, b < c->n ? b : c->n);
}

/* dst[n] (f32) = src[n] decoded as kind (HB_CONV_*) */
void hb_convert(int kind, const void *src, float *dst, int64_t n) {
  if (!src || !dst || n <= 0) return;
  if (kind == HB_CONV_F8E4M3) pthread_once(&f8_once, f8_init);
  conv_ctx c = { kind, src, dst, n };
  const int64_t blocks = (n + CONV_BLOCK - 1) / CONV_BLOCK;
  if (blocks >= 4 && blocks <= 0x7fffffff) hb_parallel_for((int)blocks, 1, conv_task, &c);
  else conv_range(&c, 0, n);
}
