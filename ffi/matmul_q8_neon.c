/* libhb fast-mode matmul kernel for aarch64 with the dot-product extension (SDOT), chosen by
 * matmul_q8.c when cpu.c found it (numerics and activation layouts: matmul_q8.h). Holds no state.
 * 16 weight bytes per chunk; weights are made signed (nibble − 8, field − 2) so no offset is needed;
 * int32 lane j of a chunk sums weight bytes 4j..4j+3, i.e. one 8-element segment for int4 / int4g,
 * whose product with its group scale is fused into accumulator lane (segment mod 16) = 4·(chunk mod 4) + j.
 * The last partial chunk is read through a zeroed copy. Compiled only for aarch64. */
#include "matmul_q8.h"
#if defined(__aarch64__)
#include <arm_neon.h>

#if defined(__clang__)
#define TD __attribute__((target("dotprod")))
#else
#define TD __attribute__((target("arch=armv8.2-a+dotprod")))
#endif
#define INL static inline __attribute__((always_inline))

TD INL float32x4_t scales4(const float *sg, int ng, int gs, int c) {
  float s4[4];
  for (int j = 0; j < 4; j++) {
    const int g = (32 * c + 8 * j) / gs;
    s4[j] = g < ng ? sg[g] : 0.0f;
  }
  return vld1q_f32(s4);
}

TD INL void dot_neon(const int fmt, const int ns, const hb_q8 *m, int o, int s0, float *out) {
  const uint8_t *r = hb_q8_row(m, o);
  const int I = m->I, Ip = m->Ip, epc = fmt == HB_INT8 ? 16 : fmt == HB_INT2 ? 64 : 32;
  const int nfull = I / epc;
  const int tailb = (int)(m->rowb - (size_t)nfull * 16);
  const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(3);
  const int8x16_t eight = vdupq_n_s8(8), two = vdupq_n_s8(2);
  int32x4_t v[4];
  float32x4_t acc[4][4];
  const int8_t *q[4];
  for (int k = 0; k < 4; k++) {
    v[k] = vdupq_n_s32(0);
    for (int a = 0; a < 4; a++) acc[k][a] = vdupq_n_f32(0.0f);
  }
  for (int k = 0; k < ns; k++) q[k] = m->qx + (size_t)(s0 + k) * Ip;
  const float *sg = fmt == HB_INT4G ? m->sc + (size_t)o * m->ng : NULL;
  uint8_t tail[16];
  for (int c = 0; c <= nfull; c++) {
    uint8x16_t w;
    if (c < nfull) w = vld1q_u8(r + 16 * (size_t)c);
    else if (tailb > 0) {
      memset(tail, 0, sizeof tail);
      memcpy(tail, r + 16 * (size_t)c, (size_t)tailb);
      w = vld1q_u8(tail);
    } else break;
    if (fmt == HB_INT8) {
      const int8x16_t ws = vreinterpretq_s8_u8(w);
      for (int k = 0; k < ns; k++) v[k] = vdotq_s32(v[k], ws, vld1q_s8(q[k] + 16 * (size_t)c));
    } else if (fmt == HB_INT2) {
      const size_t xo = 256 * (size_t)(c >> 2) + 16 * (size_t)(c & 3);
      const int8x16_t f0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(w, m3)), two);
      const int8x16_t f1 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(w, 2), m3)), two);
      const int8x16_t f2 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(w, 4), m3)), two);
      const int8x16_t f3 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(w, 6)), two);
      for (int k = 0; k < ns; k++) {
        const int8_t *xb = q[k] + xo;
        int32x4_t t = vdotq_s32(v[k], f0, vld1q_s8(xb));
        t = vdotq_s32(t, f1, vld1q_s8(xb + 64));
        t = vdotq_s32(t, f2, vld1q_s8(xb + 128));
        v[k] = vdotq_s32(t, f3, vld1q_s8(xb + 192));
      }
    } else {
      const size_t xo = 128 * (size_t)(c >> 2) + 16 * (size_t)(c & 3);
      const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(w, m4)), eight);
      const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(w, 4)), eight);
      if (fmt == HB_INT4G) {
        const float32x4_t sv = scales4(sg, m->ng, m->gs, c);
        for (int k = 0; k < ns; k++) {
          const int8_t *xb = q[k] + xo;
          int32x4_t t = vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(xb));
          t = vdotq_s32(t, hi, vld1q_s8(xb + 64));
          acc[k][c & 3] = vfmaq_f32(acc[k][c & 3], vcvtq_f32_s32(t), sv);
        }
      } else {
        for (int k = 0; k < ns; k++) {
          const int8_t *xb = q[k] + xo;
          const int32x4_t t = vdotq_s32(v[k], lo, vld1q_s8(xb));
          v[k] = vdotq_s32(t, hi, vld1q_s8(xb + 64));
        }
      }
    }
  }
  for (int k = 0; k < ns; k++) {
    const int s = s0 + k;
    if (fmt == HB_INT4G) {
      const float32x4_t t8a = vaddq_f32(acc[k][0], acc[k][2]), t8b = vaddq_f32(acc[k][1], acc[k][3]);
      const float32x4_t t4 = vaddq_f32(t8a, t8b);
      const float32x2_t t2 = vadd_f32(vget_low_f32(t4), vget_high_f32(t4));
      const float rr = vget_lane_f32(t2, 0) + vget_lane_f32(t2, 1);
      out[k] = rr * m->dx[s];
      continue;
    }
    const int64_t isum = vaddlvq_s32(v[k]);
    out[k] = hb_q8_rowfmt_out(isum, m->sc[o], m->dx[s]);
  }
}

TD INL void rows_neon(const int fmt, const hb_q8 *m, int lo, int hi) {
  const int S = m->S, O = m->O;
  float out[4];
  for (int o = lo; o < hi; o++)
    for (int s0 = 0; s0 < S; s0 += 4) {
      const int ns = S - s0 < 4 ? S - s0 : 4;
      switch (ns) {
      case 1: dot_neon(fmt, 1, m, o, s0, out); break;
      case 2: dot_neon(fmt, 2, m, o, s0, out); break;
      case 3: dot_neon(fmt, 3, m, o, s0, out); break;
      default: dot_neon(fmt, 4, m, o, s0, out); break;
      }
      for (int k = 0; k < ns; k++) m->y[(size_t)(s0 + k) * O + o] = out[k];
    }
}
TD static void neon_i8(const hb_q8 *m, int lo, int hi) { rows_neon(HB_INT8, m, lo, hi); }
TD static void neon_i4(const hb_q8 *m, int lo, int hi) { rows_neon(HB_INT4, m, lo, hi); }
TD static void neon_i2(const hb_q8 *m, int lo, int hi) { rows_neon(HB_INT2, m, lo, hi); }
TD static void neon_i4g(const hb_q8 *m, int lo, int hi) { rows_neon(HB_INT4G, m, lo, hi); }
void hb_q8_rows_dotprod(const hb_q8 *m, int lo, int hi) {
  static const hb_q8_rows_fn t[] = { NULL, neon_i8, neon_i4, neon_i2, neon_i4g };
  t[m->fmt](m, lo, hi);
}
#endif
