/* libhb attention family: the MLA/DSA attention core (hb_attn, hb_attn_ref), the lightning-indexer
 * scores (hb_index_scores) and the DSA top-k selection with the spec's tie rule (hb_dsa_select),
 * spec §3.1/§3.3. Holds no state: each task mallocs its own score scratch; select needs none.
 * SIMD: AVX-512 / AVX2+FMA micro-kernels picked per call from hb_simd_level(); scalar reference
 * kernels at HB_SCALAR (and on non-x86 builds). Every dot product of one (query, key) pair is
 * summed the same way whatever kernel computes it (one accumulator over 16- or 8-wide chunks,
 * tail last), and every output element is one FMA chain over keys in list order, so a result does
 * not depend on batch size, head grouping, key blocking or thread count — only on the SIMD level. */
#include "hb.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HB_X86 1
#endif

/* ---------------- micro-kernels ----------------
 * dot4x2: out[2i+j] = a_i·b_j (4 queries × 2 keys);  dot1x4: out[j] = a·b_j.  Lengths n.
 * wsum:   o_g[e] = Σ_j p_g[j] · v_g(key_j)[e], g < 4, e < dv, v_g(t) = vb[g] + t·vRow; shared: vb all equal.
 * Unused lanes of a call get duplicated pointers (the duplicate results are ignored / identical). */
typedef void (*dot4x2_fn)(const float *const a[4], const float *const b[2], int n, float out[8]);
typedef void (*dot1x4_fn)(const float *a, const float *const b[4], int n, float out[4]);
typedef void (*wsum_fn)(const float *const p[4], const float *const vb[4], int shared, ptrdiff_t vRow,
                        const int32_t *keys, int n, int dv, float *const o[4]);
typedef struct { dot4x2_fn dot4x2; dot1x4_fn dot1x4; wsum_fn wsum; } kern_t;

static float dot_ref(const float *a, const float *b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}
static void dot4x2_ref(const float *const a[4], const float *const b[2], int n, float out[8]) {
  for (int i = 0; i < 4; i++) for (int j = 0; j < 2; j++) out[2 * i + j] = dot_ref(a[i], b[j], n);
}
static void dot1x4_ref(const float *a, const float *const b[4], int n, float out[4]) {
  for (int j = 0; j < 4; j++) out[j] = dot_ref(a, b[j], n);
}
static void wsum_ref(const float *const p[4], const float *const vb[4], int shared, ptrdiff_t vRow,
                     const int32_t *keys, int n, int dv, float *const o[4]) {
  (void)shared;
  for (int g = 0; g < 4; g++) {
    float *og = o[g];
    for (int e = 0; e < dv; e++) og[e] = 0.0f;
    for (int j = 0; j < n; j++) {
      const float *v = vb[g] + (ptrdiff_t)(keys ? keys[j] : j) * vRow, pj = p[g][j];
      for (int e = 0; e < dv; e++) og[e] += pj * v[e];
    }
  }
}

#ifdef HB_X86
#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
#define T256 __attribute__((target("avx2,fma")))
#define INL static inline __attribute__((always_inline))

/* ---- AVX-512: per pair, one acc over 16-wide chunks, last partial chunk masked, then reduce ---- */
#define LDU(p) _mm512_loadu_ps((p) + i)
#define LDM(p) _mm512_maskz_loadu_ps(m, (p) + i)
INL __mmask16 tailmask(int r) { return r >= 16 ? (__mmask16)0xFFFF : r > 0 ? (__mmask16)((1u << r) - 1u) : 0; }

T512 static void dot4x2_avx512(const float *const a[4], const float *const b[2], int n, float out[8]) {
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *b0 = b[0], *b1 = b[1];
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  int i = 0;
#define BODY(LD) { __m512 x0 = LD(b0), x1 = LD(b1), y; \
    y = LD(a0); c00 = _mm512_fmadd_ps(y, x0, c00); c01 = _mm512_fmadd_ps(y, x1, c01); \
    y = LD(a1); c10 = _mm512_fmadd_ps(y, x0, c10); c11 = _mm512_fmadd_ps(y, x1, c11); \
    y = LD(a2); c20 = _mm512_fmadd_ps(y, x0, c20); c21 = _mm512_fmadd_ps(y, x1, c21); \
    y = LD(a3); c30 = _mm512_fmadd_ps(y, x0, c30); c31 = _mm512_fmadd_ps(y, x1, c31); }
  for (; i + 16 <= n; i += 16) BODY(LDU)
  if (i < n) { __mmask16 m = tailmask(n - i); BODY(LDM) } /* tail */
#undef BODY
  out[0] = _mm512_reduce_add_ps(c00); out[1] = _mm512_reduce_add_ps(c01);
  out[2] = _mm512_reduce_add_ps(c10); out[3] = _mm512_reduce_add_ps(c11);
  out[4] = _mm512_reduce_add_ps(c20); out[5] = _mm512_reduce_add_ps(c21);
  out[6] = _mm512_reduce_add_ps(c30); out[7] = _mm512_reduce_add_ps(c31);
}
T512 static void dot1x4_avx512(const float *a, const float *const b[4], int n, float out[4]) {
  const float *b0 = b[0], *b1 = b[1], *b2 = b[2], *b3 = b[3];
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
  int i = 0;
#define BODY4(LD) { __m512 y = LD(a); c0 = _mm512_fmadd_ps(y, LD(b0), c0); c1 = _mm512_fmadd_ps(y, LD(b1), c1); \
                    c2 = _mm512_fmadd_ps(y, LD(b2), c2); c3 = _mm512_fmadd_ps(y, LD(b3), c3); }
  for (; i + 16 <= n; i += 16) BODY4(LDU)
  if (i < n) { __mmask16 m = tailmask(n - i); BODY4(LDM) } /* tail */
#undef BODY4
#undef LDU
#undef LDM
  out[0] = _mm512_reduce_add_ps(c0); out[1] = _mm512_reduce_add_ps(c1);
  out[2] = _mm512_reduce_add_ps(c2); out[3] = _mm512_reduce_add_ps(c3);
}
/* 64 output elements × 4 heads in 16 accumulators; one FMA chain per element over j. */
T512 static void wsum_avx512(const float *const p[4], const float *const vb[4], int shared, ptrdiff_t vRow,
                             const int32_t *keys, int n, int dv, float *const o[4]) {
  for (int e0 = 0; e0 < dv; e0 += 64) {
    const __mmask16 m0 = tailmask(dv - e0), m1 = tailmask(dv - e0 - 16), m2 = tailmask(dv - e0 - 32),
                    m3 = tailmask(dv - e0 - 48);
    __m512 z = _mm512_setzero_ps(), a00 = z, a01 = z, a02 = z, a03 = z, a10 = z, a11 = z, a12 = z, a13 = z,
           a20 = z, a21 = z, a22 = z, a23 = z, a30 = z, a31 = z, a32 = z, a33 = z;
#define HEAD(g, L0, L1, L2, L3)                                                                              \
  do {                                                                                                       \
    __m512 pb = _mm512_set1_ps(p[g][j]);                                                                     \
    a##g##0 = _mm512_fmadd_ps(pb, L0, a##g##0); a##g##1 = _mm512_fmadd_ps(pb, L1, a##g##1);                   \
    a##g##2 = _mm512_fmadd_ps(pb, L2, a##g##2); a##g##3 = _mm512_fmadd_ps(pb, L3, a##g##3);                   \
  } while (0)
#define LD(g, q, m) _mm512_maskz_loadu_ps(m, vb[g] + off + 16 * q)
    if (shared)
      for (int j = 0; j < n; j++) {
        const ptrdiff_t off = (ptrdiff_t)(keys ? keys[j] : j) * vRow + e0;
        const __m512 v0 = LD(0, 0, m0), v1 = LD(0, 1, m1), v2 = LD(0, 2, m2), v3 = LD(0, 3, m3);
        HEAD(0, v0, v1, v2, v3); HEAD(1, v0, v1, v2, v3); HEAD(2, v0, v1, v2, v3); HEAD(3, v0, v1, v2, v3);
      }
    else
      for (int j = 0; j < n; j++) {
        const ptrdiff_t off = (ptrdiff_t)(keys ? keys[j] : j) * vRow + e0;
        HEAD(0, LD(0, 0, m0), LD(0, 1, m1), LD(0, 2, m2), LD(0, 3, m3));
        HEAD(1, LD(1, 0, m0), LD(1, 1, m1), LD(1, 2, m2), LD(1, 3, m3));
        HEAD(2, LD(2, 0, m0), LD(2, 1, m1), LD(2, 2, m2), LD(2, 3, m3));
        HEAD(3, LD(3, 0, m0), LD(3, 1, m1), LD(3, 2, m2), LD(3, 3, m3));
      }
#undef LD
#undef HEAD
#define STORE(g)                                                                                             \
  do {                                                                                                       \
    _mm512_mask_storeu_ps(o[g] + e0, m0, a##g##0); _mm512_mask_storeu_ps(o[g] + e0 + 16, m1, a##g##1);      \
    _mm512_mask_storeu_ps(o[g] + e0 + 32, m2, a##g##2); _mm512_mask_storeu_ps(o[g] + e0 + 48, m3, a##g##3);  \
  } while (0)
    STORE(0); STORE(1); STORE(2); STORE(3);
#undef STORE
  }
}

/* ---- AVX2: per pair, acc over 8-wide chunks, horizontal sum, then the scalar tail with fmaf ---- */
T256 INL float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
T256 static void dot4x2_avx2(const float *const a[4], const float *const b[2], int n, float out[8]) {
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *b0 = b[0], *b1 = b[1];
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x0 = _mm256_loadu_ps(b0 + i), x1 = _mm256_loadu_ps(b1 + i), y;
    y = _mm256_loadu_ps(a0 + i); c00 = _mm256_fmadd_ps(y, x0, c00); c01 = _mm256_fmadd_ps(y, x1, c01);
    y = _mm256_loadu_ps(a1 + i); c10 = _mm256_fmadd_ps(y, x0, c10); c11 = _mm256_fmadd_ps(y, x1, c11);
    y = _mm256_loadu_ps(a2 + i); c20 = _mm256_fmadd_ps(y, x0, c20); c21 = _mm256_fmadd_ps(y, x1, c21);
    y = _mm256_loadu_ps(a3 + i); c30 = _mm256_fmadd_ps(y, x0, c30); c31 = _mm256_fmadd_ps(y, x1, c31);
  }
  out[0] = hsum256(c00); out[1] = hsum256(c01); out[2] = hsum256(c10); out[3] = hsum256(c11);
  out[4] = hsum256(c20); out[5] = hsum256(c21); out[6] = hsum256(c30); out[7] = hsum256(c31);
  for (; i < n; i++) /* tail */
    for (int r = 0; r < 4; r++) { out[2 * r] = fmaf(a[r][i], b0[i], out[2 * r]); out[2 * r + 1] = fmaf(a[r][i], b1[i], out[2 * r + 1]); }
}
T256 static void dot1x4_avx2(const float *a, const float *const b[4], int n, float out[4]) {
  const float *b0 = b[0], *b1 = b[1], *b2 = b[2], *b3 = b[3];
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 y = _mm256_loadu_ps(a + i);
    c0 = _mm256_fmadd_ps(y, _mm256_loadu_ps(b0 + i), c0);
    c1 = _mm256_fmadd_ps(y, _mm256_loadu_ps(b1 + i), c1);
    c2 = _mm256_fmadd_ps(y, _mm256_loadu_ps(b2 + i), c2);
    c3 = _mm256_fmadd_ps(y, _mm256_loadu_ps(b3 + i), c3);
  }
  out[0] = hsum256(c0); out[1] = hsum256(c1); out[2] = hsum256(c2); out[3] = hsum256(c3);
  for (; i < n; i++) for (int j = 0; j < 4; j++) out[j] = fmaf(a[i], b[j][i], out[j]); /* tail */
}
/* 16 output elements × 4 heads in 8 accumulators, then 8-wide, then a scalar fmaf tail. */
T256 static void wsum_avx2(const float *const p[4], const float *const vb[4], int shared, ptrdiff_t vRow,
                           const int32_t *keys, int n, int dv, float *const o[4]) {
  int e0 = 0;
  for (; e0 + 16 <= dv; e0 += 16) {
    __m256 z = _mm256_setzero_ps(), a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z;
#define HEAD(g, L0, L1)                                                                                      \
  do {                                                                                                       \
    __m256 pb = _mm256_set1_ps(p[g][j]);                                                                     \
    a##g##0 = _mm256_fmadd_ps(pb, L0, a##g##0); a##g##1 = _mm256_fmadd_ps(pb, L1, a##g##1);                   \
  } while (0)
    if (shared)
      for (int j = 0; j < n; j++) {
        const float *vv = vb[0] + (ptrdiff_t)(keys ? keys[j] : j) * vRow + e0;
        const __m256 v0 = _mm256_loadu_ps(vv), v1 = _mm256_loadu_ps(vv + 8);
        HEAD(0, v0, v1); HEAD(1, v0, v1); HEAD(2, v0, v1); HEAD(3, v0, v1);
      }
    else
      for (int j = 0; j < n; j++) {
        const ptrdiff_t off = (ptrdiff_t)(keys ? keys[j] : j) * vRow + e0;
        HEAD(0, _mm256_loadu_ps(vb[0] + off), _mm256_loadu_ps(vb[0] + off + 8));
        HEAD(1, _mm256_loadu_ps(vb[1] + off), _mm256_loadu_ps(vb[1] + off + 8));
        HEAD(2, _mm256_loadu_ps(vb[2] + off), _mm256_loadu_ps(vb[2] + off + 8));
        HEAD(3, _mm256_loadu_ps(vb[3] + off), _mm256_loadu_ps(vb[3] + off + 8));
      }
#undef HEAD
    _mm256_storeu_ps(o[0] + e0, a00); _mm256_storeu_ps(o[0] + e0 + 8, a01);
    _mm256_storeu_ps(o[1] + e0, a10); _mm256_storeu_ps(o[1] + e0 + 8, a11);
    _mm256_storeu_ps(o[2] + e0, a20); _mm256_storeu_ps(o[2] + e0 + 8, a21);
    _mm256_storeu_ps(o[3] + e0, a30); _mm256_storeu_ps(o[3] + e0 + 8, a31);
  }
  for (; e0 + 8 <= dv; e0 += 8) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int j = 0; j < n; j++) {
      const ptrdiff_t off = (ptrdiff_t)(keys ? keys[j] : j) * vRow + e0;
      a0 = _mm256_fmadd_ps(_mm256_set1_ps(p[0][j]), _mm256_loadu_ps(vb[0] + off), a0);
      a1 = _mm256_fmadd_ps(_mm256_set1_ps(p[1][j]), _mm256_loadu_ps(vb[1] + off), a1);
      a2 = _mm256_fmadd_ps(_mm256_set1_ps(p[2][j]), _mm256_loadu_ps(vb[2] + off), a2);
      a3 = _mm256_fmadd_ps(_mm256_set1_ps(p[3][j]), _mm256_loadu_ps(vb[3] + off), a3);
    }
    _mm256_storeu_ps(o[0] + e0, a0); _mm256_storeu_ps(o[1] + e0, a1);
    _mm256_storeu_ps(o[2] + e0, a2); _mm256_storeu_ps(o[3] + e0, a3);
  }
  for (; e0 < dv; e0++) /* tail */
    for (int g = 0; g < 4; g++) {
      float acc = 0.0f;
      for (int j = 0; j < n; j++) acc = fmaf(p[g][j], vb[g][(ptrdiff_t)(keys ? keys[j] : j) * vRow + e0], acc);
      o[g][e0] = acc;
    }
}
#endif

static kern_t kern_for(int level) {
  kern_t k = { dot4x2_ref, dot1x4_ref, wsum_ref };
#ifdef HB_X86
  if (level >= HB_AVX512) { k.dot4x2 = dot4x2_avx512; k.dot1x4 = dot1x4_avx512; k.wsum = wsum_avx512; }
  else if (level >= HB_AVX2) { k.dot4x2 = dot4x2_avx2; k.dot1x4 = dot1x4_avx2; k.wsum = wsum_avx2; }
#else
  (void)level;
#endif
  return k;
}

/* ---------------- hb_attn ---------------- */
/* Work item = (s, group of G consecutive heads). With shared keys (kHead 0) each key row is loaded once
 * for 4 heads; with shared values (vHead 0) each value chunk once for 4 heads. */
typedef struct {
  int S, H, dk, dv, G, ngroups, maxn;
  const float *q, *k, *v; int qRow, qHead, kRow, kHead, vRow, vHead;
  const int32_t *sel, *nsel; int selRow; float scale;
  float *out; int oRow, oHead;
  kern_t kn;
} attn_ctx;

#define KEY(j) ((ptrdiff_t)(sr ? sr[j] : (j)))
static void attn_item(const attn_ctx *c, int s, int h0, int G, float *p /* [G, maxn] */) {
  const int n = c->nsel[s] > 0 ? c->nsel[s] : 0;
  const int32_t *sr = c->sel ? c->sel + (ptrdiff_t)s * c->selRow : NULL;
  const float *qs = c->q + (ptrdiff_t)s * c->qRow;
  float *os = c->out + (ptrdiff_t)s * c->oRow;
  if (n == 0) {
    for (int g = 0; g < G; g++) memset(os + (ptrdiff_t)(h0 + g) * c->oHead, 0, sizeof(float) * (size_t)c->dv);
    return;
  }
  for (int g0 = 0; g0 < G; g0 += 4) {
    const int ng = G - g0 < 4 ? G - g0 : 4;
    int hh[4];
    for (int i = 0; i < 4; i++) hh[i] = h0 + g0 + (i < ng ? i : ng - 1); /* unused lanes repeat the last head */
    /* pass 1: p[g][j] = scale · q_h·k_t */
    if (c->kHead == 0 && ng >= 3) {
      const float *a[4] = { qs + (ptrdiff_t)hh[0] * c->qHead, qs + (ptrdiff_t)hh[1] * c->qHead,
                            qs + (ptrdiff_t)hh[2] * c->qHead, qs + (ptrdiff_t)hh[3] * c->qHead };
      float d[8];
      for (int j = 0; j < n; j += 2) {
        const int j1 = j + 1 < n ? j + 1 : j;
        const float *b[2] = { c->k + KEY(j) * c->kRow, c->k + KEY(j1) * c->kRow };
        c->kn.dot4x2(a, b, c->dk, d);
        for (int i = 0; i < ng; i++) {
          float *pg = p + (size_t)(g0 + i) * c->maxn;
          pg[j] = c->scale * d[2 * i];
          if (j1 != j) pg[j1] = c->scale * d[2 * i + 1];
        }
      }
    } else {
      for (int i = 0; i < ng; i++) {
        const float *a = qs + (ptrdiff_t)hh[i] * c->qHead, *kh = c->k + (ptrdiff_t)hh[i] * c->kHead;
        float *pg = p + (size_t)(g0 + i) * c->maxn, d[4];
        for (int j = 0; j < n; j += 4) {
          const int m = n - j < 4 ? n - j : 4;
          const float *b[4];
          for (int r = 0; r < 4; r++) b[r] = kh + KEY(j + (r < m ? r : m - 1)) * c->kRow;
          c->kn.dot1x4(a, b, c->dk, d);
          for (int r = 0; r < m; r++) pg[j + r] = c->scale * d[r];
        }
      }
    }
    /* softmax per head: max-subtracted, f32 exp, double sum */
    for (int i = 0; i < ng; i++) {
      float *pg = p + (size_t)(g0 + i) * c->maxn, mx = pg[0];
      for (int j = 1; j < n; j++) if (pg[j] > mx) mx = pg[j];
      double sum = 0.0;
      for (int j = 0; j < n; j++) { pg[j] = expf(pg[j] - mx); sum += pg[j]; }
      for (int j = 0; j < n; j++) pg[j] = (float)((double)pg[j] / sum);
    }
    /* pass 2: o_h = Σ_j p_j · v_t, j in list order */
    const float *pp[4], *vb[4];
    float *oo[4];
    for (int i = 0; i < 4; i++) {
      pp[i] = p + (size_t)(hh[i] - h0) * c->maxn;
      vb[i] = c->v + (ptrdiff_t)hh[i] * c->vHead;
      oo[i] = os + (ptrdiff_t)hh[i] * c->oHead;
    }
    c->kn.wsum(pp, vb, c->vHead == 0, c->vRow, sr, n, c->dv, oo);
  }
}
#undef KEY

static void attn_task(void *ctx, int lo, int hi) {
  const attn_ctx *c = ctx;
  float *p = malloc(sizeof(float) * (size_t)c->G * (size_t)(c->maxn > 0 ? c->maxn : 1));
  for (int it = lo; it < hi; it++) {
    int s = it / c->ngroups, h0 = (it % c->ngroups) * c->G;
    int G = c->H - h0 < c->G ? c->H - h0 : c->G;
    if (p) { attn_item(c, s, h0, G, p); continue; }
    for (int g = 0; g < G; g++) { /* out of memory: make the failure visible instead of silent */
      float *o = c->out + (ptrdiff_t)s * c->oRow + (ptrdiff_t)(h0 + g) * c->oHead;
      for (int e = 0; e < c->dv; e++) o[e] = NAN;
    }
  }
  free(p);
}

static void attn_run(kern_t kn, int S, int H, int dk, int dv, const float *q, int qRow, int qHead, const float *k,
                     int kRow, int kHead, const float *v, int vRow, int vHead, const int32_t *sel,
                     const int32_t *nsel, int selRow, float scale, float *out, int oRow, int oHead) {
  if (S <= 0 || H <= 0 || dk < 0 || dv <= 0 || !q || !k || !v || !nsel || !out) return;
  attn_ctx c = { S, H, dk, dv, 1, H, 0, q, k, v, qRow, qHead, kRow, kHead, vRow, vHead, sel, nsel, selRow, scale,
                 out, oRow, oHead, kn };
  for (int s = 0; s < S; s++) if (nsel[s] > c.maxn) c.maxn = nsel[s];
  /* groups of 8 heads (two quads), or 4, while that still leaves >= 2 items per thread */
  int G = H < 8 ? H : 8;
  while (G > 4 && (long)S * ((H + G - 1) / G) < 2L * hb_nthreads()) G = 4;
  c.G = G; c.ngroups = (H + G - 1) / G;
  hb_parallel_for(S * c.ngroups, 1, attn_task, &c);
}

/* Scalar reference: same contract as hb_attn, plain sequential sums. */
void hb_attn_ref(int S, int H, int dk, int dv, const float *q, int qRow, int qHead, const float *k, int kRow,
                 int kHead, const float *v, int vRow, int vHead, const int32_t *sel, const int32_t *nsel, int selRow,
                 float scale, float *out, int oRow, int oHead) {
  attn_run(kern_for(HB_SCALAR), S, H, dk, dv, q, qRow, qHead, k, kRow, kHead, v, vRow, vHead, sel, nsel, selRow,
           scale, out, oRow, oHead);
}

/* q [..,dk] · k [..,dk] -> softmax -> · v [..,dv] -> out [..,dv]; operand (s|t, h) at base + row·(s|t) + head·h;
 * keys of row s: sel ? sel[s*selRow + j] : j, j < nsel[s] (0 keys -> zeros). out must not alias q/k/v. */
void hb_attn(int S, int H, int dk, int dv, const float *q, int qRow, int qHead, const float *k, int kRow, int kHead,
             const float *v, int vRow, int vHead, const int32_t *sel, const int32_t *nsel, int selRow, float scale,
             float *out, int oRow, int oHead) {
  attn_run(kern_for(hb_simd_level()), S, H, dk, dv, q, qRow, qHead, k, kRow, kHead, v, vRow, vHead, sel, nsel,
           selRow, scale, out, oRow, oHead);
}

/* ---------------- hb_index_scores ---------------- */
/* Work item = (s, block of IDX_TB keys); 4 heads × 2 keys per micro-kernel call, heads summed ascending. */
#define IDX_TB 256
typedef struct {
  int S, nh, hd, nblk; const float *qI, *w, *kI; const int32_t *nk; float *out; int outRow; float scale; kern_t kn;
} idx_ctx;

static void idx_task(void *ctx, int lo, int hi) {
  const idx_ctx *c = ctx;
  for (int it = lo; it < hi; it++) {
    const int s = it / c->nblk, t0 = (it % c->nblk) * IDX_TB, n = c->nk[s];
    const int t1 = t0 + IDX_TB < n ? t0 + IDX_TB : n;
    const float *qs = c->qI + (ptrdiff_t)s * c->nh * c->hd, *ws = c->w + (ptrdiff_t)s * c->nh;
    float *o = c->out + (ptrdiff_t)s * c->outRow;
    for (int t = t0; t < t1; t += 2) {
      const int tb = t + 1 < t1 ? t + 1 : t;
      const float *b[2] = { c->kI + (ptrdiff_t)t * c->hd, c->kI + (ptrdiff_t)tb * c->hd };
      float acc0 = 0.0f, acc1 = 0.0f, d[8];
      for (int h = 0; h < c->nh; h += 4) {
        const int m = c->nh - h < 4 ? c->nh - h : 4;
        const float *a[4];
        for (int r = 0; r < 4; r++) a[r] = qs + (ptrdiff_t)(h + (r < m ? r : m - 1)) * c->hd;
        c->kn.dot4x2(a, b, c->hd, d);
        for (int r = 0; r < m; r++) {
          float x0 = c->scale * d[2 * r], x1 = c->scale * d[2 * r + 1];
          acc0 += ws[h + r] * (x0 > 0.0f ? x0 : 0.0f);
          acc1 += ws[h + r] * (x1 > 0.0f ? x1 : 0.0f);
        }
      }
      o[t] = acc0;
      if (tb != t) o[tb] = acc1;
    }
  }
}

/* qI [S, nh*hd], w [S, nh], kI [T, hd] -> out[s*outRow + t] = Σ_h w[s,h]·ReLU(scale·qI[s,h]·kI[t]), t < nk[s] */
void hb_index_scores(int S, int nh, int hd, const float *qI, const float *w, const float *kI, const int32_t *nk,
                     float *out, int outRow, float scale) {
  if (S <= 0 || nh <= 0 || hd < 0 || !qI || !w || !kI || !nk || !out) return;
  int maxn = 0;
  for (int s = 0; s < S; s++) if (nk[s] > maxn) maxn = nk[s];
  if (maxn == 0) return;
  idx_ctx c = { S, nh, hd, (maxn + IDX_TB - 1) / IDX_TB, qI, w, kI, nk, out, outRow, scale, kern_for(hb_simd_level()) };
  hb_parallel_for(S * c.nblk, 1, idx_task, &c);
}

/* ---------------- hb_dsa_select ---------------- */
/* Order-preserving float -> uint32 key (-0 mapped to +0 so key equality == float equality, NaN aside). */
static inline uint32_t fkey(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Radix select of the topk-th largest key in 3 passes (11+11+10 bits), then one ascending collection pass:
 * every key > thr, and the first `need` keys == thr, so rows come out sorted and the tie rule is exact. */
static void select_row(const float *x, int n, int topk, int32_t *sel, int32_t *nsel) {
  if (n <= topk) {
    for (int t = 0; t < n; t++) sel[t] = t;
    *nsel = n;
    return;
  }
  static const int shift[3] = { 21, 10, 0 }, width[3] = { 11, 11, 10 };
  uint32_t prefix = 0, hist[2048];
  int need = topk; /* rank of thr among the keys that share `prefix` (1 = largest) */
  for (int pass = 0; pass < 3; pass++) {
    const int sh = shift[pass], nb = 1 << width[pass], hs = sh + width[pass]; /* bits >= hs already fixed */
    memset(hist, 0, sizeof(uint32_t) * (size_t)nb);
    for (int t = 0; t < n; t++) {
      uint32_t kk = fkey(x[t]);
      if (hs == 32 || (kk >> hs) == (prefix >> hs)) hist[(kk >> sh) & (uint32_t)(nb - 1)]++;
    }
    int b = nb - 1;
    for (; b > 0; b--) { if ((int)hist[b] >= need) break; need -= (int)hist[b]; }
    prefix |= (uint32_t)b << sh;
  }
  int m = 0;
  for (int t = 0; t < n && m < topk; t++) {
    uint32_t kk = fkey(x[t]);
    if (kk > prefix) sel[m++] = t;
    else if (kk == prefix && need > 0) { sel[m++] = t; need--; }
  }
  *nsel = m;
}

typedef struct { const float *scores; int scoreRow; const int32_t *nk; int topk; int32_t *sel, *nsel; } sel_ctx;

static void sel_task(void *ctx, int lo, int hi) {
  const sel_ctx *c = ctx;
  for (int s = lo; s < hi; s++)
    select_row(c->scores + (ptrdiff_t)s * c->scoreRow, c->nk[s] > 0 ? c->nk[s] : 0, c->topk,
               c->sel + (ptrdiff_t)s * c->topk, c->nsel + s);
}

/* scores [S, scoreRow], nk [S] -> sel [S, topk] ascending, nsel [S] = min(nk, topk); spec §3.3 tie rule */
void hb_dsa_select(int S, const float *scores, int scoreRow, const int32_t *nk, int topk, int32_t *sel,
                   int32_t *nsel) {
  if (S <= 0 || !scores || !nk || !sel || !nsel) return;
  if (topk <= 0) { for (int s = 0; s < S; s++) nsel[s] = 0; return; }
  sel_ctx c = { scores, scoreRow, nk, topk, sel, nsel };
  hb_parallel_for(S, 1, sel_task, &c);
}
