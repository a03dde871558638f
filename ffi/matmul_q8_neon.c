/* libhb fast-mode matmul kernel for aarch64 with the dot-product extension (SDOT), chosen by
 * matmul_q8.c when cpu.c found it (numerics and activation layouts: matmul_q8.h). Holds no state.
 * 16 weight bytes per chunk; weights are made signed (nibble − 8, field − 2) so no offset is needed;
 * int32 lane j of a chunk sums weight bytes 4j..4j+3, i.e. one 8-element segment for int4 / int4g.
 * int8 / int4 / int2: one weight row against up to 4 rows of x, the lanes summed once at the end.
 * int4g: 4 weight rows at a time (the last one repeated when fewer remain) against up to 4 rows of x; a group's
 * exact sum is the sum of its gs/8 segment lanes, kept in int32 over the chunks it spans (gs ≥ 64); when it ends,
 * the 4 weight rows' sums of that group are gathered into one vector (vpaddq for gs ≥ 32, vpaddq + vuzp for gs = 16,
 * a 4×4 transpose for gs = 8) and fused with their 4 scales of that group: one vfmaq per group, groups in order,
 * none past the row's last group.
 * The last partial chunk is read through a zeroed copy (its x is zero). Compiled only for aarch64. */
#include "matmul_q8.h"
#if defined(__aarch64__)
#include <arm_neon.h>

#if defined(__clang__)
#define TD __attribute__((target("dotprod")))
#else
#define TD __attribute__((target("arch=armv8.2-a+dotprod")))
#endif
#define INL static inline __attribute__((always_inline))

TD INL void dot_neon(const int fmt, const int ns, const hb_q8 *m, int o, int s0, float *out) {
  const uint8_t *r = hb_q8_row(m, o);
  const int I = m->I, Ip = m->Ip, epc = fmt == HB_INT8 ? 16 : fmt == HB_INT2 ? 64 : 32;
  const int nfull = I / epc;
  const int tailb = (int)(m->rowb - (size_t)nfull * 16);
  const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(3);
  const int8x16_t eight = vdupq_n_s8(8), two = vdupq_n_s8(2);
  int32x4_t v[4];
  const int8_t *q[4];
  for (int k = 0; k < 4; k++) v[k] = vdupq_n_s32(0);
  for (int k = 0; k < ns; k++) q[k] = m->qx + (size_t)(s0 + k) * Ip;
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
      for (int k = 0; k < ns; k++) {
        const int8_t *xb = q[k] + xo;
        const int32x4_t t = vdotq_s32(v[k], lo, vld1q_s8(xb));
        v[k] = vdotq_s32(t, hi, vld1q_s8(xb + 64));
      }
    }
  }
  for (int k = 0; k < ns; k++) {
    const int64_t isum = vaddlvq_s32(v[k]);
    out[k] = hb_q8_rowfmt_out(isum, m->sc[o], m->dx[s0 + k]);
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
/* ---- int4g ---- */
/* [s[o0, g], s[o1, g], s[o2, g], s[o3, g]]: the 4 weight rows' scales of group g */
TD INL float32x4_t sc_col(const float *const sg[4], int g) {
  float32x4_t v = vdupq_n_f32(0.0f);
  v = vld1q_lane_f32(sg[0] + g, v, 0);
  v = vld1q_lane_f32(sg[1] + g, v, 1);
  v = vld1q_lane_f32(sg[2] + g, v, 2);
  return vld1q_lane_f32(sg[3] + g, v, 3);
}
/* 4×4 transpose: out[j] lane i = in[i] lane j */
TD INL void tr4(const int32x4_t in[4], int32x4_t out[4]) {
  const int64x2_t a = vreinterpretq_s64_s32(vtrn1q_s32(in[0], in[1])), b = vreinterpretq_s64_s32(vtrn2q_s32(in[0], in[1]));
  const int64x2_t c = vreinterpretq_s64_s32(vtrn1q_s32(in[2], in[3])), d = vreinterpretq_s64_s32(vtrn2q_s32(in[2], in[3]));
  out[0] = vreinterpretq_s32_s64(vzip1q_s64(a, c));
  out[1] = vreinterpretq_s32_s64(vzip1q_s64(b, d));
  out[2] = vreinterpretq_s32_s64(vzip2q_s64(a, c));
  out[3] = vreinterpretq_s32_s64(vzip2q_s64(b, d));
}
/* weight rows o4[0..3] against x rows s0..s0+ns-1: out[k] lane i = y[s0 + k, o4[i]].
 * gk: 0 for gs = 8 (4 groups per chunk), 1 for gs = 16 (2 per chunk), 2 for gs ≥ 32 (gs/32 chunks per group).
 * t[i][k] lane j: weight row i · x row k over segment 4c + j, summed over the chunks of the current group. */
TD INL void dot4_i4g(const int gk, const int ns, const hb_q8 *m, const int o4[4], int s0, float32x4_t out[4]) {
  const int I = m->I, Ip = m->Ip, ng = m->ng, nfull = I / 32;
  const int tailb = (int)(m->rowb - (size_t)nfull * 16), nch = nfull + (tailb > 0);
  const int cmask = gk == 2 ? m->gs / 32 - 1 : 0, cshift = gk == 2 ? __builtin_ctz((unsigned)m->gs / 32) : 0;
  const uint8x16_t m4 = vdupq_n_u8(0x0f);
  const int8x16_t eight = vdupq_n_s8(8);
  const uint8_t *r[4];
  const float *sg[4];
  const int8_t *q[4];
  for (int i = 0; i < 4; i++) {
    r[i] = hb_q8_row(m, o4[i]);
    sg[i] = m->sc + (size_t)o4[i] * ng;
  }
  for (int k = 0; k < ns; k++) q[k] = m->qx + (size_t)(s0 + k) * Ip;
  int32x4_t t[4][4];
  float32x4_t acc[4];
  for (int k = 0; k < 4; k++) {
    acc[k] = vdupq_n_f32(0.0f);
    for (int i = 0; i < 4; i++) t[i][k] = vdupq_n_s32(0);
  }
  uint8_t tail[16];
  for (int c = 0; c < nch; c++) {
    const size_t xo = 128 * (size_t)(c >> 2) + 16 * (size_t)(c & 3);
    int8x16_t xl[4], xh[4];
    for (int k = 0; k < ns; k++) {
      xl[k] = vld1q_s8(q[k] + xo);
      xh[k] = vld1q_s8(q[k] + xo + 64);
    }
    for (int i = 0; i < 4; i++) {
      uint8x16_t w;
      if (c < nfull) w = vld1q_u8(r[i] + 16 * (size_t)c);
      else {
        memset(tail, 0, sizeof tail);
        memcpy(tail, r[i] + 16 * (size_t)c, (size_t)tailb);
        w = vld1q_u8(tail);
      }
      const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(w, m4)), eight);
      const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(w, 4)), eight);
      for (int k = 0; k < ns; k++) t[i][k] = vdotq_s32(vdotq_s32(t[i][k], lo, xl[k]), hi, xh[k]);
    }
    if (gk == 2) {
      if ((c & cmask) != cmask && c != nch - 1) continue;   /* the group goes on in the next chunk */
      const float32x4_t sv = sc_col(sg, c >> cshift);
      for (int k = 0; k < ns; k++) {
        const int32x4_t G = vpaddq_s32(vpaddq_s32(t[0][k], t[1][k]), vpaddq_s32(t[2][k], t[3][k]));
        acc[k] = vfmaq_f32(acc[k], vcvtq_f32_s32(G), sv);
      }
    } else if (gk == 1) {
      const int g0 = 2 * c;
      float32x4_t sv0, sv1;
      if (g0 + 2 <= ng) {
        const float32x4_t a = vcombine_f32(vld1_f32(sg[0] + g0), vld1_f32(sg[1] + g0));
        const float32x4_t b = vcombine_f32(vld1_f32(sg[2] + g0), vld1_f32(sg[3] + g0));
        sv0 = vuzp1q_f32(a, b);
        sv1 = vuzp2q_f32(a, b);
      } else sv0 = sv1 = sc_col(sg, g0);   /* the row's last group (sv1 unused) */
      for (int k = 0; k < ns; k++) {
        const int32x4_t p01 = vpaddq_s32(t[0][k], t[1][k]), p23 = vpaddq_s32(t[2][k], t[3][k]);
        acc[k] = vfmaq_f32(acc[k], vcvtq_f32_s32(vuzp1q_s32(p01, p23)), sv0);
        if (g0 + 1 < ng) acc[k] = vfmaq_f32(acc[k], vcvtq_f32_s32(vuzp2q_s32(p01, p23)), sv1);
      }
    } else {
      const int g0 = 4 * c, n = ng - g0 < 4 ? ng - g0 : 4;
      float32x4_t sv[4];
      if (n == 4) {
        int32x4_t rs[4], cs[4];
        for (int i = 0; i < 4; i++) rs[i] = vreinterpretq_s32_f32(vld1q_f32(sg[i] + g0));
        tr4(rs, cs);
        for (int j = 0; j < 4; j++) sv[j] = vreinterpretq_f32_s32(cs[j]);
      } else
        for (int j = 0; j < 4; j++) sv[j] = j < n ? sc_col(sg, g0 + j) : vdupq_n_f32(0.0f);
      for (int k = 0; k < ns; k++) {
        int32x4_t rs[4], G[4];
        for (int i = 0; i < 4; i++) rs[i] = t[i][k];
        tr4(rs, G);
        for (int j = 0; j < n; j++) acc[k] = vfmaq_f32(acc[k], vcvtq_f32_s32(G[j]), sv[j]);
      }
    }
    for (int k = 0; k < ns; k++)
      for (int i = 0; i < 4; i++) t[i][k] = vdupq_n_s32(0);
  }
  for (int k = 0; k < ns; k++) out[k] = vmulq_n_f32(acc[k], m->dx[s0 + k]);
}

TD INL void rows_i4g(const int gk, const hb_q8 *m, int lo, int hi) {
  const int S = m->S, O = m->O;
  float32x4_t out[4];
  float o32[4];
  for (int o = lo; o < hi; o += 4) {
    const int nr = hi - o < 4 ? hi - o : 4;
    int o4[4];
    for (int i = 0; i < 4; i++) o4[i] = i < nr ? o + i : hi - 1;   /* fewer than 4 left: the last one again */
    for (int s0 = 0; s0 < S; s0 += 4) {
      const int ns = S - s0 < 4 ? S - s0 : 4;
      switch (ns) {
      case 1: dot4_i4g(gk, 1, m, o4, s0, out); break;
      case 2: dot4_i4g(gk, 2, m, o4, s0, out); break;
      case 3: dot4_i4g(gk, 3, m, o4, s0, out); break;
      default: dot4_i4g(gk, 4, m, o4, s0, out); break;
      }
      for (int k = 0; k < ns; k++) {
        float *yk = m->y + (size_t)(s0 + k) * O + o;
        if (nr == 4) vst1q_f32(yk, out[k]);
        else {
          vst1q_f32(o32, out[k]);
          for (int i = 0; i < nr; i++) yk[i] = o32[i];
        }
      }
    }
  }
}

TD static void neon_i8(const hb_q8 *m, int lo, int hi) { rows_neon(HB_INT8, m, lo, hi); }
TD static void neon_i4(const hb_q8 *m, int lo, int hi) { rows_neon(HB_INT4, m, lo, hi); }
TD static void neon_i2(const hb_q8 *m, int lo, int hi) { rows_neon(HB_INT2, m, lo, hi); }
TD static void neon_i4g_8(const hb_q8 *m, int lo, int hi) { rows_i4g(0, m, lo, hi); }
TD static void neon_i4g_16(const hb_q8 *m, int lo, int hi) { rows_i4g(1, m, lo, hi); }
TD static void neon_i4g_32(const hb_q8 *m, int lo, int hi) { rows_i4g(2, m, lo, hi); }
TD static void neon_i4g(const hb_q8 *m, int lo, int hi) {
  if (m->gs == 8) neon_i4g_8(m, lo, hi);
  else if (m->gs == 16) neon_i4g_16(m, lo, hi);
  else neon_i4g_32(m, lo, hi);
}
void hb_q8_rows_dotprod(const hb_q8 *m, int lo, int hi) {
  static const hb_q8_rows_fn t[] = { NULL, neon_i8, neon_i4, neon_i2, neon_i4g };
  t[m->fmt](m, lo, hi);
}
#endif
