/* libhb attention micro-kernels for aarch64 NEON (contracts: attn.h), chosen by hb_attn_kern_for at HB_NEON.
 * Holds no state. Per (query, key) pair one float32x4 accumulator over 4-wide chunks (fused multiply-adds),
 * reduced as (l0 + l1) + (l2 + l3), then a scalar fmaf tail: the same sum whichever kernel computes the pair.
 * Every output element of wsum / wcont is one fused multiply-add chain over keys in list order. Compiled only
 * for aarch64 (checked under qemu by test/neon.test.ts: test/native/attn_check.c). */
#include "attn.h"
#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>

static inline float red4(float32x4_t v) {
  return (vgetq_lane_f32(v, 0) + vgetq_lane_f32(v, 1)) + (vgetq_lane_f32(v, 2) + vgetq_lane_f32(v, 3));
}

/* 4 queries × 4 keys: 16 accumulators, each chunk of a query and of a key loaded once */
static void dot4x4_neon(const float *const a[4], const float *const b[4], int n, float out[16]) {
  float32x4_t c[4][4];
  for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) c[i][j] = vdupq_n_f32(0.0f);
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    const float32x4_t x0 = vld1q_f32(b[0] + k), x1 = vld1q_f32(b[1] + k), x2 = vld1q_f32(b[2] + k), x3 = vld1q_f32(b[3] + k);
    for (int i = 0; i < 4; i++) {
      const float32x4_t y = vld1q_f32(a[i] + k);
      c[i][0] = vfmaq_f32(c[i][0], y, x0); c[i][1] = vfmaq_f32(c[i][1], y, x1);
      c[i][2] = vfmaq_f32(c[i][2], y, x2); c[i][3] = vfmaq_f32(c[i][3], y, x3);
    }
  }
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      float s = red4(c[i][j]);
      for (int t = k; t < n; t++) s = fmaf(a[i][t], b[j][t], s); /* tail */
      out[4 * i + j] = s;
    }
}

static void dot1x4_neon(const float *a, const float *const b[4], int n, float out[4]) {
  float32x4_t c0 = vdupq_n_f32(0.0f), c1 = c0, c2 = c0, c3 = c0;
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    const float32x4_t y = vld1q_f32(a + k);
    c0 = vfmaq_f32(c0, y, vld1q_f32(b[0] + k)); c1 = vfmaq_f32(c1, y, vld1q_f32(b[1] + k));
    c2 = vfmaq_f32(c2, y, vld1q_f32(b[2] + k)); c3 = vfmaq_f32(c3, y, vld1q_f32(b[3] + k));
  }
  const float32x4_t c[4] = { c0, c1, c2, c3 };
  for (int j = 0; j < 4; j++) {
    float s = red4(c[j]);
    for (int t = k; t < n; t++) s = fmaf(a[t], b[j][t], s); /* tail */
    out[j] = s;
  }
}

/* 16 output elements × 4 heads in 16 accumulators, then 4-wide, then a scalar fmaf tail */
static void wsum_neon(const float *const p[4], const float *const vb[4], int shared, ptrdiff_t vRow,
                      const int32_t *keys, int n, int dv, float *const o[4]) {
  (void)shared;
  int e0 = 0;
  for (; e0 + 16 <= dv; e0 += 16) {
    float32x4_t acc[4][4];
    for (int g = 0; g < 4; g++) for (int q = 0; q < 4; q++) acc[g][q] = vdupq_n_f32(0.0f);
    for (int j = 0; j < n; j++) {
      const ptrdiff_t off = (ptrdiff_t)(keys ? keys[j] : j) * vRow + e0;
      for (int g = 0; g < 4; g++) {
        const float32x4_t pb = vdupq_n_f32(p[g][j]);
        for (int q = 0; q < 4; q++) acc[g][q] = vfmaq_f32(acc[g][q], pb, vld1q_f32(vb[g] + off + 4 * q));
      }
    }
    for (int g = 0; g < 4; g++) for (int q = 0; q < 4; q++) vst1q_f32(o[g] + e0 + 4 * q, acc[g][q]);
  }
  for (; e0 + 4 <= dv; e0 += 4) {
    float32x4_t acc[4];
    for (int g = 0; g < 4; g++) acc[g] = vdupq_n_f32(0.0f);
    for (int j = 0; j < n; j++) {
      const ptrdiff_t off = (ptrdiff_t)(keys ? keys[j] : j) * vRow + e0;
      for (int g = 0; g < 4; g++) acc[g] = vfmaq_f32(acc[g], vdupq_n_f32(p[g][j]), vld1q_f32(vb[g] + off));
    }
    for (int g = 0; g < 4; g++) vst1q_f32(o[g] + e0, acc[g]);
  }
  for (; e0 < dv; e0++) { /* tail: all four sums before any store (duplicate lanes share an output) */
    float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
    for (int j = 0; j < n; j++)
      for (int g = 0; g < 4; g++) acc[g] = fmaf(p[g][j], vb[g][(ptrdiff_t)(keys ? keys[j] : j) * vRow + e0], acc[g]);
    for (int g = 0; g < 4; g++) o[g][e0] = acc[g];
  }
}

static void wcont_neon(const float *p, const float *v, ptrdiff_t vRow, int n, int dv, float *o) {
  int e0 = 0;
  for (; e0 + 4 <= dv; e0 += 4) {
    float32x4_t a = vld1q_f32(o + e0);
    for (int j = 0; j < n; j++) a = vfmaq_f32(a, vdupq_n_f32(p[j]), vld1q_f32(v + j * vRow + e0));
    vst1q_f32(o + e0, a);
  }
  for (; e0 < dv; e0++) for (int j = 0; j < n; j++) o[e0] = fmaf(p[j], v[j * vRow + e0], o[e0]); /* tail */
}

const hb_attn_kern hb_attn_kern_neon = { dot4x4_neon, dot1x4_neon, wsum_neon, wcont_neon };
#endif
