/* libhb element-wise kernels: SwiGLU and e^(x−m) (one shared polynomial exp), add, axpy, interleaved RoPE (spec §3.2),
 * dtype conversion to f32.
 * State: the F8 E4M3 decode table (built once); per thread, the RoPE cos/sin table of the last positions.
 * Float ops are plain f32 (no contraction: -std=c11 implies -ffp-contract=off), so a TS reference with
 * Math.fround matches add/axpy bit for bit.
 * RoPE angles, cos/sin and the rotation are computed in double and stored as f32. */
#include "hb.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

/* SwiGLU out[n] = g·σ(g)·u, σ(g) = 1/(1+e^−g), with e^−g from one polynomial (Cephes' expf: rounding to
 * n = rint(v·log2 e), r = v − n·ln2 in two fused steps, a degree-5 polynomial in r fused step by step,
 * times 2^n) for v in [−87.3, 88.3] (2^n stays a normal float), 0 below (e^v < 2^−125: lost against 1 in
 * σ, negligible in a softmax) and +inf above (σ = 0, as 1/(1+expf) gives there); NaN passes through. The SIMD
 * lanes and the scalar reference run the same fused operations, so every element gets the same bits
 * wherever it sits in the array (a row alone equals that row inside a batch). Max error ~2 ulp of e^v. */
#define EXP_HI 88.3f
#define EXP_LO (-87.3f)
#define LOG2E 1.44269504088896341f
#define LN2_C1 0.693359375f
#define LN2_C2 (-2.12194440e-4f)
#define EP0 1.9875691500e-4f
#define EP1 1.3981999507e-3f
#define EP2 8.3334519073e-3f
#define EP3 4.1665795894e-2f
#define EP4 1.6666665459e-1f
#define EP5 5.0000001201e-1f

static float exp_ref(float v) {
  if (v > EXP_HI) return INFINITY;           /* comparisons are false for NaN: it passes through */
  if (v < EXP_LO) return 0.0f;
  const float n = rintf(v * LOG2E);
  float r = fmaf(n, -LN2_C1, v);
  r = fmaf(n, -LN2_C2, r);
  float p = fmaf(EP0, r, EP1);
  p = fmaf(p, r, EP2); p = fmaf(p, r, EP3); p = fmaf(p, r, EP4); p = fmaf(p, r, EP5);
  const float y = fmaf(p, r * r, r) + 1.0f;
  if (n != n) return y;                      /* NaN */
  union { uint32_t u; float f; } e = { .u = (uint32_t)((int32_t)n + 127) << 23 };
  return y * e.f;
}
static void swiglu_ref(const float *g, const float *u, float *out, int n) {
  for (int i = 0; i < n; i++) {
    const float s = 1.0f / (1.0f + exp_ref(-g[i]));
    out[i] = g[i] * s * u[i];
  }
}
#if defined(__x86_64__) || defined(__i386__)
#define T512 __attribute__((target("avx512f,avx2,fma")))
#define T256 __attribute__((target("avx2,fma")))
/* exp_ref on 16 / 8 lanes: the same fused steps, so the same bits */
T512 static inline __m512 exp512(__m512 v0) {
  const __m512 hi = _mm512_set1_ps(EXP_HI);
  const __m512 v = _mm512_max_ps(_mm512_set1_ps(EXP_LO), _mm512_min_ps(hi, v0));   /* NaN is the 2nd operand: it passes */
  const __m512 nf = _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(nf, _mm512_set1_ps(-LN2_C1), v);
  r = _mm512_fmadd_ps(nf, _mm512_set1_ps(-LN2_C2), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(EP0), r, _mm512_set1_ps(EP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EP2)); p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EP4)); p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EP5));
  __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(nf), _mm512_set1_epi32(127)), 23);
  y = _mm512_mask_mul_ps(y, _mm512_cmp_ps_mask(nf, nf, _CMP_ORD_Q), y, _mm512_castsi512_ps(e));
  y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(v0, _mm512_set1_ps(EXP_LO), _CMP_LT_OQ), _mm512_setzero_ps());
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(v0, hi, _CMP_GT_OQ), _mm512_set1_ps(INFINITY));
}
T256 static inline __m256 exp256(__m256 v0) {
  const __m256 hi = _mm256_set1_ps(EXP_HI);
  const __m256 v = _mm256_max_ps(_mm256_set1_ps(EXP_LO), _mm256_min_ps(hi, v0));
  const __m256 nf = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(nf, _mm256_set1_ps(-LN2_C1), v);
  r = _mm256_fmadd_ps(nf, _mm256_set1_ps(-LN2_C2), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(EP0), r, _mm256_set1_ps(EP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EP2)); p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EP4)); p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EP5));
  __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nf), _mm256_set1_epi32(127)), 23);
  y = _mm256_blendv_ps(y, _mm256_mul_ps(y, _mm256_castsi256_ps(e)), _mm256_cmp_ps(nf, nf, _CMP_ORD_Q));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(v0, _mm256_set1_ps(EXP_LO), _CMP_LT_OQ));
  return _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(v0, hi, _CMP_GT_OQ));
}
T512 static int swiglu_avx512(const float *g, const float *u, float *out, int n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 gv = _mm512_loadu_ps(g + i);
    const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), gv))));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(gv, s), _mm512_loadu_ps(u + i)));
  }
  return i;
}
T256 static int swiglu_avx2(const float *g, const float *u, float *out, int n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), gv))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(gv, s), _mm256_loadu_ps(u + i)));
  }
  return i;
}
T512 static int expm_avx512(float *x, int n, float m) {
  const __m512 mv = _mm512_set1_ps(m);
  int i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv)));
  if (i < n) {   /* the tail in masked lanes (each lane's bits are exp_ref's) */
    const __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(x + i, k, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv)));
  }
  return n;
}
T256 static int expm_avx2(float *x, int n, float m) {
  const __m256 mv = _mm256_set1_ps(m);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv)));
  if (i < n) {   /* the tail in masked lanes */
    const __m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - i), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(x + i, k, exp256(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), mv)));
  }
  return n;
}
#endif

#if defined(__aarch64__)
#include <arm_neon.h>
/* exp_ref on 4 lanes: the same fused steps, so the same bits */
static inline float32x4_t exp4(float32x4_t v0) {
  const float32x4_t hi = vdupq_n_f32(EXP_HI);
  const float32x4_t v = vmaxq_f32(vdupq_n_f32(EXP_LO), vminq_f32(hi, v0));   /* NaN stays NaN */
  const float32x4_t nf = vrndnq_f32(vmulq_f32(v, vdupq_n_f32(LOG2E)));
  float32x4_t r = vfmaq_f32(v, nf, vdupq_n_f32(-LN2_C1));
  r = vfmaq_f32(r, nf, vdupq_n_f32(-LN2_C2));
  float32x4_t p = vfmaq_f32(vdupq_n_f32(EP1), vdupq_n_f32(EP0), r);
  p = vfmaq_f32(vdupq_n_f32(EP2), p, r); p = vfmaq_f32(vdupq_n_f32(EP3), p, r);
  p = vfmaq_f32(vdupq_n_f32(EP4), p, r); p = vfmaq_f32(vdupq_n_f32(EP5), p, r);
  float32x4_t y = vaddq_f32(vfmaq_f32(r, p, vmulq_f32(r, r)), vdupq_n_f32(1.0f));
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(nf), vdupq_n_s32(127)), 23);
  y = vbslq_f32(vceqq_f32(nf, nf), vmulq_f32(y, vreinterpretq_f32_s32(e)), y);
  y = vbslq_f32(vcltq_f32(v0, vdupq_n_f32(EXP_LO)), vdupq_n_f32(0.0f), y);
  return vbslq_f32(vcgtq_f32(v0, hi), vdupq_n_f32(INFINITY), y);
}
static int expm_neon(float *x, int n, float m) {
  const float32x4_t mv = vdupq_n_f32(m);
  int i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(x + i, exp4(vsubq_f32(vld1q_f32(x + i), mv)));
  return i;
}
static int swiglu_neon(const float *g, const float *u, float *out, int n) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t gv = vld1q_f32(g + i);
    const float32x4_t s = vdivq_f32(one, vaddq_f32(one, exp4(vnegq_f32(gv))));
    vst1q_f32(out + i, vmulq_f32(vmulq_f32(gv, s), vld1q_f32(u + i)));
  }
  return i;
}
static int divd_neon(float *x, int n, double d) {
  const float64x2_t dv = vdupq_n_f64(d);
  int i = 0;
  for (; i + 2 <= n; i += 2) vst1_f32(x + i, vcvt_f32_f64(vdivq_f64(vcvt_f64_f32(vld1_f32(x + i)), dv)));
  return i;
}
static float maxf_neon(const float *x, int n) {   /* lanes as maxf_avx512; the tail by the scan */
  float32x4_t acc = vdupq_n_f32(x[0]);
  int i = 0;
  for (; i + 4 <= n; i += 4) { const float32x4_t v = vld1q_f32(x + i); acc = vbslq_f32(vcgtq_f32(v, acc), v, acc); }
  float l[4], m = x[0];
  vst1q_f32(l, acc);
  for (int j = 0; j < 4; j++) if (l[j] > m) m = l[j];
  for (; i < n; i++) if (x[i] > m) m = x[i];
  return m;
}
#endif

/* x[n] <- e^(x − m) with the polynomial above (softmax numerators); same bits at every SIMD level */
void hb_expm(float *x, int n, float m) {
  if (!x || n <= 0) return;
  int i = 0;
#if defined(__x86_64__) || defined(__i386__)
  const int lvl = hb_simd_level();
  if (lvl >= HB_AVX512) i = expm_avx512(x, n, m);
  else if (lvl >= HB_AVX2) i = expm_avx2(x, n, m);
#elif defined(__aarch64__)
  if (hb_simd_level() == HB_NEON) i = expm_neon(x, n, m);
#endif
  for (; i < n; i++) x[i] = exp_ref(x[i] - m);
}

#if defined(__x86_64__) || defined(__i386__)
T512 static int divd_avx512(float *x, int n, double d) {
  const __m512d dv = _mm512_set1_pd(d);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm512_cvtpd_ps(_mm512_div_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), dv)));
  return i;
}
/* the lanes' running maxima (a lane takes x only when x > its value: NaN never does), then their maximum */
T512 static float maxf_avx512(const float *x, int n) {
  __m512 acc = _mm512_set1_ps(x[0]);
  int i = 0;
  for (; i + 16 <= n; i += 16) { const __m512 v = _mm512_loadu_ps(x + i); acc = _mm512_mask_mov_ps(acc, _mm512_cmp_ps_mask(v, acc, _CMP_GT_OQ), v); }
  if (i < n) {
    const __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(k, x + i);
    acc = _mm512_mask_mov_ps(acc, _mm512_mask_cmp_ps_mask(k, v, acc, _CMP_GT_OQ), v);
  }
  float l[16], m = x[0];
  _mm512_storeu_ps(l, acc);
  for (int j = 0; j < 16; j++) if (l[j] > m) m = l[j];
  return m;
}
T256 static int divd_avx2(float *x, int n, double d) {
  const __m256d dv = _mm256_set1_pd(d);
  int i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(x + i, _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), dv)));
  return i;
}
T256 static float maxf_avx2(const float *x, int n) {
  __m256 acc = _mm256_set1_ps(x[0]);
  int i = 0;
  for (; i + 8 <= n; i += 8) { const __m256 v = _mm256_loadu_ps(x + i); acc = _mm256_blendv_ps(acc, v, _mm256_cmp_ps(v, acc, _CMP_GT_OQ)); }
  float l[8], m = x[0];
  _mm256_storeu_ps(l, acc);
  for (int j = 0; j < 8; j++) if (l[j] > m) m = l[j];
  for (; i < n; i++) if (x[i] > m) m = x[i];
  return m;
}
#endif
/* max of x[0..n) as `m = x[0]; if (x[j] > m) m = x[j]` finds it (NaN only when x[0] is, the first of equal
 * values): the vector lanes give the maximum's value, whose bits are unique unless it is ±0 (then the scan) */
float hb_maxf(const float *x, int n) {
  if (!x || n <= 0) return -INFINITY;
#if defined(__x86_64__) || defined(__i386__)
  const int lvl = n >= 16 ? hb_simd_level() : HB_SCALAR;
  if (lvl >= HB_AVX2) {
    const float m = lvl >= HB_AVX512 ? maxf_avx512(x, n) : maxf_avx2(x, n);
    if (m != 0.0f) return m;
  }
#elif defined(__aarch64__)
  if (n >= 16 && hb_simd_level() == HB_NEON) {
    const float m = maxf_neon(x, n);
    if (m != 0.0f) return m;
  }
#endif
  float m = x[0];
  for (int j = 1; j < n; j++) if (x[j] > m) m = x[j];
  return m;
}

/* the index `best = 0; if (x[j] > x[best]) best = j` finds (greedy decoding): hb_maxf's value, then the first element
 * equal to it (0 when it is NaN: x[0] then; ±0 compare equal, and the scan keeps the first of them); blocks of 16
 * compared without branches (vectorized), the block that holds it scanned */
int hb_argmaxf(const float *x, int n) {
  if (!x || n <= 0) return 0;
  const float m = hb_maxf(x, n);
  if (m != m) return 0;
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    int any = 0;
    for (int j = 0; j < 16; j++) any |= x[i + j] == m;
    if (any) break;
  }
  for (; i < n; i++) if (x[i] == m) return i;
  return 0;
}

/* x[n] <- (float)((double)x[j] / d): softmax normalisation; IEEE division, so the same bits at every level */
void hb_divd(float *x, int n, double d) {
  int i = 0;
#if defined(__x86_64__) || defined(__i386__)
  const int lvl = hb_simd_level();
  if (lvl >= HB_AVX512) i = divd_avx512(x, n, d);
  else if (lvl >= HB_AVX2) i = divd_avx2(x, n, d);
#elif defined(__aarch64__)
  if (hb_simd_level() == HB_NEON) i = divd_neon(x, n, d);
#endif
  for (; i < n; i++) x[i] = (float)((double)x[i] / d);
}

static void swiglu_run(const float *g, const float *u, float *out, int n) {
  int i = 0;
#if defined(__x86_64__) || defined(__i386__)
  const int lvl = hb_simd_level();
  if (lvl >= HB_AVX512) i = swiglu_avx512(g, u, out, n);
  else if (lvl >= HB_AVX2) i = swiglu_avx2(g, u, out, n);
#elif defined(__aarch64__)
  if (hb_simd_level() == HB_NEON) i = swiglu_neon(g, u, out, n);
#endif
  swiglu_ref(g + i, u + i, out + i, n - i);
}
typedef struct { const float *g, *u; float *out; int n; } swiglu_job;
static void swiglu_task(void *c, int lo, int hi) {   /* elements [4096·lo, 4096·hi) ∩ [0, n) */
  const swiglu_job *j = c;
  const int a = 4096 * lo, b = 4096 * hi < j->n ? 4096 * hi : j->n;
  swiglu_run(j->g + a, j->u + a, j->out + a, b - a);
}
/* out[n] = silu(g)·u; large n (prefill) in 4096-element chunks on the pool: every element gets the same bits
 * wherever it falls */
void hb_swiglu(const float *g, const float *u, float *out, int n) {
  if (!g || !u || !out || n <= 0) return;
  swiglu_job j = { g, u, out, n };
  if (n >= 16384) hb_parallel_for((n + 4095) / 4096, 1, swiglu_task, &j);
  else swiglu_run(g, u, out, n);
}

typedef struct { float *y; const float *x; int n; } add_job;
static void add_task(void *c, int lo, int hi) {   /* elements [4096·lo, 4096·hi) ∩ [0, n) */
  const add_job *j = c;
  const int b = 4096 * hi < j->n ? 4096 * hi : j->n;
  for (int i = 4096 * lo; i < b; i++) j->y[i] += j->x[i];
}
/* y[n] += x; large n (prefill) on the pool, whose threads hold the operands' halves in their caches */
void hb_add(float *y, const float *x, int n) {
  if (!y || !x || n <= 0) return;
  add_job j = { y, x, n };
  if (n >= 65536) hb_parallel_for((n + 4095) / 4096, 4, add_task, &j);
  else add_task(&j, 0, (n + 4095) / 4096);
}

/* y[n] += a·x */
void hb_axpy(float *y, float a, const float *x, int n) {
  if (!y || !x) return;
  for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* cos φ, sin φ of every (row, pair) of the last rope call on this thread: a forward ropes q, k_pe and the
 * indexer's q / k at the same positions in every layer, so the angles are computed once per batch. */
static _Thread_local struct { double theta; int dr, S, cap; int32_t *pos; double *cs; } rope_tab;

/* the table for (pos[S], dr, theta): cs[(s·h + j)·2 + {0,1}] = cos, sin of pos[s]·theta^(−2j/dr); NULL when out of memory */
static const double *rope_angles(int S, int dr, const int32_t *pos, double theta) {
  const int h = dr / 2;
  if (rope_tab.cs && rope_tab.theta == theta && rope_tab.dr == dr && rope_tab.S == S &&
      !memcmp(rope_tab.pos, pos, (size_t)S * sizeof *pos))
    return rope_tab.cs;
  if ((size_t)S * h > (size_t)rope_tab.cap) {
    const int cap = S * h;
    double *cs = malloc(2 * sizeof(double) * (size_t)cap);
    int32_t *ps = malloc(sizeof(int32_t) * (size_t)cap);   /* S ≤ S·h */
    if (!cs || !ps) { free(cs); free(ps); return NULL; }
    free(rope_tab.cs); free(rope_tab.pos);
    rope_tab.cs = cs; rope_tab.pos = ps; rope_tab.cap = cap;
  }
  double stack[256], *th = h <= 256 ? stack : malloc(sizeof(double) * (size_t)h);
  if (!th) return NULL;
  rope_tab.S = 0;                                  /* invalid while being rebuilt */
  double *cs = rope_tab.cs;
  for (int j = 0; j < h; j++) th[j] = pow(theta, (-2.0 * j) / dr);
  for (int s = 0; s < S; s++)
    for (int j = 0; j < h; j++) {
      const double phi = (double)pos[s] * th[j];
      cs[2 * ((size_t)s * h + j)] = cos(phi);
      cs[2 * ((size_t)s * h + j) + 1] = sin(phi);
    }
  if (th != stack) free(th);
  memcpy(rope_tab.pos, pos, (size_t)S * sizeof *pos);
  rope_tab.theta = theta; rope_tab.dr = dr; rope_tab.S = S;
  return cs;
}

/* In place, for s < S, v < nvec, j < dr/2, p = x + s·rowStride + v·vecStride:
 * θ_j = theta^(−2j/dr), φ = pos[s]·θ_j, (p[2j], p[2j+1]) <- (a·cos φ − b·sin φ, b·cos φ + a·sin φ). */
typedef struct { float *x; const double *cs; int rowStride, nvec, vecStride, h; } rope_job;
static void rope_task(void *c, int lo, int hi) {   /* rows [lo, hi) */
  const rope_job *j = c;
  const int h = j->h;
  for (int s = lo; s < hi; s++) {
    const double *r = j->cs + 2 * (size_t)s * h;
    for (int v = 0; v < j->nvec; v++) {
      float *p = j->x + (ptrdiff_t)s * j->rowStride + (ptrdiff_t)v * j->vecStride;
      for (int k = 0; k < h; k++) {
        const double a = p[2 * k], b = p[2 * k + 1], c = r[2 * k], sn = r[2 * k + 1];
        p[2 * k] = (float)(a * c - b * sn);
        p[2 * k + 1] = (float)(b * c + a * sn);
      }
    }
  }
}
void hb_rope(float *x, int S, int rowStride, int nvec, int vecStride, int dr, const int32_t *pos, double theta) {
  const int h = dr / 2;
  if (!x || !pos || S <= 0 || nvec <= 0 || h <= 0) return;
  const double *cs = rope_angles(S, dr, pos, theta);   /* the caller's table: the pool's tasks read it */
  if (!cs) return;
  rope_job j = { x, cs, rowStride, nvec, vecStride, h };
  const int per = nvec * h;   /* pairs per row */
  if ((size_t)S * per >= 8192) hb_parallel_for(S, 1 + 2048 / per, rope_task, &j);   /* a prompt's rows on the pool */
  else rope_task(&j, 0, S);
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

#if defined(__aarch64__)
/* FCVT: exact, NaNs quieted with their payload kept (FPCR.DN is off), as hb_f16_to_f32 */
static void f16_neon(const uint16_t *s, float *d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(s + i));
    vst1q_f32(d + i, vcvt_f32_f16(vget_low_f16(h)));
    vst1q_f32(d + i + 4, vcvt_high_f32_f16(h));
  }
  for (; i < n; i++) d[i] = hb_f16_to_f32(s[i]);
}
#endif

/* n halves -> f32 on the calling thread (exact; F16C or NEON where the level has it) */
void hb_f16_widen(const uint16_t *s, float *d, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  if (hb_simd_level() >= HB_AVX2) { f16_f16c(s, d, n); return; }
#elif defined(__aarch64__)
  if (hb_simd_level() == HB_NEON) { f16_neon(s, d, n); return; }
#endif
  for (int64_t i = 0; i < n; i++) d[i] = hb_f16_to_f32(s[i]);
}

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
    hb_f16_widen(s + lo, d + lo, hi - lo);
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
