/* libhb exact-mode matmul kernel for aarch64 NEON (f32 activations), chosen by matmul.c at HB_NEON. Holds no
 * state. Weights are dequantized in registers (w = q·s, exactly the reference's f32 value), 8 elements a step.
 * Per (o, s) one order whatever S or the thread split: two 4-lane accumulators (fused multiply-adds, elements
 * 8j..8j+3 into the first, 8j+4..8j+7 into the second), their lane sum as (l0 + l1) + (l2 + l3), then the last
 * I mod 8 elements by a scalar fmaf chain. Each weight row is read once per 4 rows of x. int4g needs gs % 8 == 0
 * (else matmul.c keeps the reference). Compiled only for aarch64 (checked under qemu: test/native/mm_check.c). */
#include "matmul.h"
#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>

#define INL static inline __attribute__((always_inline))
#define QUANT(f) ((f) >= HB_INT8 && (f) <= HB_INT4G)

/* 8 values of row r from element i (i % 8 == 0, i + 8 <= I), unscaled */
INL void w8(const int fmt, const uint8_t *r, int i, float32x4_t *w0, float32x4_t *w1) {
  switch (fmt) {
  case HB_F32: *w0 = vld1q_f32((const float *)(const void *)r + i); *w1 = vld1q_f32((const float *)(const void *)r + i + 4); return;
  case HB_BF16: {
    const uint16x8_t h = vld1q_u16((const uint16_t *)(const void *)(r + 2 * (size_t)i));
    *w0 = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
    *w1 = vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16));
    return;
  }
  case HB_F16: {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16((const uint16_t *)(const void *)(r + 2 * (size_t)i)));
    *w0 = vcvt_f32_f16(vget_low_f16(h)); *w1 = vcvt_f32_f16(vget_high_f16(h));
    return;
  }
  case HB_INT8: {
    const int16x8_t v = vmovl_s8(vld1_s8((const int8_t *)(r + i)));
    *w0 = vcvtq_f32_s32(vmovl_s16(vget_low_s16(v))); *w1 = vcvtq_f32_s32(vmovl_s16(vget_high_s16(v)));
    return;
  }
  case HB_INT4: case HB_INT4G: { /* 4 bytes: element 2j = low nibble of byte j, 2j + 1 = high */
    uint32_t u;
    memcpy(&u, r + i / 2, 4);
    const uint8x8_t b = vreinterpret_u8_u32(vdup_n_u32(u));
    const int16x8_t v = vsubq_s16(vreinterpretq_s16_u16(vmovl_u8(vzip1_u8(vand_u8(b, vdup_n_u8(15)), vshr_n_u8(b, 4)))), vdupq_n_s16(8));
    *w0 = vcvtq_f32_s32(vmovl_s16(vget_low_s16(v))); *w1 = vcvtq_f32_s32(vmovl_s16(vget_high_s16(v)));
    return;
  }
  default: { /* HB_INT2 */
    float t[8];
    for (int j = 0; j < 8; j++) t[j] = hb_mm_q(fmt, r, i + j);
    *w0 = vld1q_f32(t); *w1 = vld1q_f32(t + 4);
  }
  }
}

/* out[k] = Σ_i w(r,i)·x[k·I + i], k < ns (1..4); sc: &s[o] (row formats), &s[o·ng] (int4g), unused for floats */
INL void dot8(const int fmt, const int ns, const uint8_t *r, const float *sc, int gs, int I, const float *x, float *out) {
  float32x4_t a[4][2];
  for (int k = 0; k < 4; k++) a[k][0] = a[k][1] = vdupq_n_f32(0.0f);
  const int per = fmt == HB_INT4G ? gs / 8 : 0;
  const float *g = sc;
  int left = per, i = 0;
  for (; i + 8 <= I; i += 8) {
    float32x4_t w0, w1;
    w8(fmt, r, i, &w0, &w1);
    if (QUANT(fmt)) {
      const float s = *g;
      if (fmt == HB_INT4G && --left == 0) { left = per; g++; }
      w0 = vmulq_n_f32(w0, s); w1 = vmulq_n_f32(w1, s);
    }
    for (int k = 0; k < ns; k++) {
      a[k][0] = vfmaq_f32(a[k][0], w0, vld1q_f32(x + (size_t)k * I + i));
      a[k][1] = vfmaq_f32(a[k][1], w1, vld1q_f32(x + (size_t)k * I + i + 4));
    }
  }
  for (int k = 0; k < ns; k++) {
    const float32x4_t v = vaddq_f32(a[k][0], a[k][1]);
    float t = (vgetq_lane_f32(v, 0) + vgetq_lane_f32(v, 1)) + (vgetq_lane_f32(v, 2) + vgetq_lane_f32(v, 3));
    for (int j = i; j < I; j++) { /* tail */
      float w = hb_mm_q(fmt, r, j);
      if (fmt == HB_INT4G) w *= sc[j / gs];
      else if (QUANT(fmt)) w *= sc[0];
      t = fmaf(w, x[(size_t)k * I + j], t);
    }
    out[k] = t;
  }
}

INL void rows_neon(const int fmt, const hb_mm *m, int lo, int hi) {
  const int I = m->I, S = m->S, O = m->O;
  float out[4];
  for (int o = lo; o < hi; o++) {
    const uint8_t *r = hb_mm_row(m, o);
    const float *sc = fmt == HB_INT4G ? m->sc + (size_t)o * m->ng : QUANT(fmt) ? m->sc + o : NULL;
    for (int s0 = 0; s0 < S; s0 += 4) {
      const int ns = S - s0 < 4 ? S - s0 : 4;
      const float *x = m->x + (size_t)s0 * I;
      switch (ns) {
      case 1: dot8(fmt, 1, r, sc, m->gs, I, x, out); break;
      case 2: dot8(fmt, 2, r, sc, m->gs, I, x, out); break;
      case 3: dot8(fmt, 3, r, sc, m->gs, I, x, out); break;
      default: dot8(fmt, 4, r, sc, m->gs, I, x, out); break;
      }
      for (int k = 0; k < ns; k++) m->y[(size_t)(s0 + k) * O + o] = out[k];
    }
  }
}
#define ROWS(F, name) static void name(const hb_mm *m, int lo, int hi) { rows_neon(F, m, lo, hi); }
ROWS(HB_F32, neon_f32) ROWS(HB_INT8, neon_i8) ROWS(HB_INT4, neon_i4) ROWS(HB_INT2, neon_i2) ROWS(HB_INT4G, neon_i4g)
ROWS(HB_BF16, neon_bf16) ROWS(HB_F16, neon_f16)
#undef ROWS
void hb_mm_rows_neon(const hb_mm *m, int lo, int hi) {
  static const hb_mm_rows_fn t[] = { neon_f32, neon_i8, neon_i4, neon_i2, neon_i4g, neon_bf16, neon_f16 };
  t[m->fmt](m, lo, hi);
}
#endif
