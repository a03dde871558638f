/* libhb lightning-indexer scores for aarch64 NEON (the order of dsa.h, so the same bits as the scalar reference):
 * keys in the 4 lanes (a block of 4 keys transposed on the stack), query elements broadcast, 8 heads at a time,
 * each lane one key's fused multiply-add chain over i; ReLU as x > 0 ? x : +0 (a NaN gives +0, as in the
 * reference); the heads' fused multiply-adds ascending. Holds no state. Compiled only for aarch64 (checked under
 * qemu by test/neon.test.ts: test/native/attn_check.c). */
#include "dsa.h"
#if defined(__aarch64__)
#include <arm_neon.h>

void hb_idx_block_neon(const idx_ctx *c, int t0, int t1, int s0, int s1) {
  float kt[IDX_MAXHD * 4];
  const int nh = c->nh, hd = c->hd;
  const float32x4_t sc = vdupq_n_f32(c->scale), zero = vdupq_n_f32(0.0f);
  for (int tb = t0; tb < t1; tb += 4) {
    const int nb = t1 - tb < 4 ? t1 - tb : 4;
    for (int j = 0; j < 4; j++) {
      const float *k = c->kI + (ptrdiff_t)(tb + (j < nb ? j : 0)) * hd;
      for (int i = 0; i < hd; i++) kt[4 * i + j] = k[i];
    }
    for (int s = s0; s < s1; s++) {
      int n = (c->nk[s] < t1 ? c->nk[s] : t1) - tb;
      if (n <= 0) continue;
      if (n > 4) n = 4;
      const float *q = c->qI + (ptrdiff_t)s * nh * hd, *w = c->w + (ptrdiff_t)s * nh;
      float32x4_t score = zero;
      for (int h0 = 0; h0 < nh; h0 += 8) {
        const int m = nh - h0 < 8 ? nh - h0 : 8;
        const float *qh[8];
        for (int j = 0; j < 8; j++) qh[j] = q + (ptrdiff_t)(h0 + (j < m ? j : 0)) * hd;
        float32x4_t a[8];
        for (int j = 0; j < 8; j++) a[j] = zero;
        for (int i = 0; i < hd; i++) {
          const float32x4_t k = vld1q_f32(kt + 4 * i);
          for (int j = 0; j < 8; j++) a[j] = vfmaq_f32(a[j], vdupq_n_f32(qh[j][i]), k);
        }
        for (int j = 0; j < m; j++) {
          const float32x4_t x = vmulq_f32(a[j], sc);
          score = vfmaq_f32(score, vdupq_n_f32(w[h0 + j]), vbslq_f32(vcgtq_f32(x, zero), x, zero));
        }
      }
      float o[4];
      vst1q_f32(o, score);
      for (int j = 0; j < n; j++) c->out[(ptrdiff_t)s * c->outRow + tb + j] = o[j];
    }
  }
}
#endif
