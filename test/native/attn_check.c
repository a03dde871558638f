/* Cross-architecture check of libhb's attention at the level in use (NEON on aarch64, built and run under qemu
 * by test/neon.test.ts): hb_attn against the scalar reference hb_attn_ref (relative error ≤ 1e-5: the levels
 * sum differently), and every row of a batch equal to the same row alone, bit for bit — per-head keys (the
 * prefill blocks of four rows, causal and random key counts, a selection that is the identity or not) and
 * shared keys (the absorbed form), dk and dv with every tail width; and the indexer's f32 scores equal to the
 * forced-scalar run, bit for bit, as are e^(x−m), SwiGLU and the softmax max / normalisation, and the f16 / q8 KV rows
 * widened (every half's 65536 bit patterns; q8 rows of several widths). Prints "ok <cases> <level>", or the first
 * failure and exits 1. Random data from a fixed LCG; no state. */
#include "../../ffi/hb.h"
#include "lcg.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hb_attn(int S, int H, int dk, int dv, const float *q, int qRow, int qHead, const float *k, int kRow, int kHead,
             const float *v, int vRow, int vHead, const int32_t *sel, const int32_t *nsel, int selRow, float scale,
             float *out, int oRow, int oHead);
void hb_index_scores(int S, int nh, int hd, const float *qI, const float *w, const float *kI, const int32_t *nk, float *out,
                     int outRow, float scale);
void hb_attn_ref(int S, int H, int dk, int dv, const float *q, int qRow, int qHead, const float *k, int kRow, int kHead,
                 const float *v, int vRow, int vHead, const int32_t *sel, const int32_t *nsel, int selRow, float scale,
                 float *out, int oRow, int oHead);

static float *randv(size_t n) { float *a = malloc(n * sizeof *a); for (size_t i = 0; i < n; i++) a[i] = rndf(); return a; }

int main(void) {
  hb_init(2);
  const int shapes[][5] = { /* S, H, dk, dv, T */
    { 9, 3, 37, 21, 40 }, { 4, 5, 17, 64, 33 }, { 6, 2, 96, 64, 70 }, { 1, 4, 1, 5, 7 }, { 8, 16, 48, 29, 24 } };
  long cases = 0;
  for (int si = 0; si < 5; si++)
    for (int shared = 0; shared < 2; shared++)
      for (int mode = 0; mode < 3; mode++) { /* 0 causal, no sel; 1 random counts, a permuted sel; 2 causal, identity sel */
        const int S = shapes[si][0], H = shapes[si][1], T = shapes[si][4];
        const int dk = shapes[si][2], dv = shared && shapes[si][3] > dk ? dk : shapes[si][3];
        const int qRow = H * dk + 3, kRow = shared ? dk + 1 : H * (dk + dv), kHead = shared ? 0 : dk + dv;
        const int oRow = H * (dv + 2) + 1, selRow = T + 2;
        float *q = randv((size_t)S * qRow), *kv = randv((size_t)T * kRow);
        const float *k = kv, *v = shared ? kv : kv + dk;
        int32_t *nsel = malloc(S * sizeof *nsel), *sel = mode ? malloc((size_t)S * selRow * sizeof *sel) : NULL;
        for (int s = 0; s < S; s++) {
          nsel[s] = mode == 1 ? 1 + (int)(rnd() % T) : T - S + s + 1;
          if (!sel) continue;
          for (int j = 0; j < selRow; j++) sel[s * selRow + j] = j < T ? j : -1;
          if (mode == 1) for (int j = T - 1; j > 0; j--) { const int r = (int)(rnd() % (j + 1)), t = sel[s * selRow + j]; sel[s * selRow + j] = sel[s * selRow + r]; sel[s * selRow + r] = t; }
        }
        const size_t on = (size_t)S * oRow;
        float *out = malloc(on * sizeof *out), *ref = malloc(on * sizeof *ref), *one = malloc((size_t)oRow * sizeof *one);
        for (size_t i = 0; i < on; i++) out[i] = ref[i] = NAN;
        const float scale = 1.0f / sqrtf((float)dk);
        hb_attn(S, H, dk, dv, q, qRow, dk, k, kRow, kHead, v, kRow, kHead, sel, nsel, selRow, scale, out, oRow, dv + 2);
        hb_attn_ref(S, H, dk, dv, q, qRow, dk, k, kRow, kHead, v, kRow, kHead, sel, nsel, selRow, scale, ref, oRow, dv + 2);
        double d = 0, m = 1e-30;
        for (size_t i = 0; i < on; i++) {
          if (isnan(out[i]) != isnan(ref[i])) { printf("shape %d shared %d mode %d: NaN pattern differs at %zu\n", si, shared, mode, i); return 1; }
          if (isnan(ref[i])) continue;
          d = fmax(d, fabs((double)out[i] - ref[i]));
          m = fmax(m, fabs((double)ref[i]));
        }
        if (d / m > 1e-5) { printf("shape %d shared %d mode %d: relative error %g against the reference\n", si, shared, mode, d / m); return 1; }
        for (int s = 0; s < S; s++) {
          for (int i = 0; i < oRow; i++) one[i] = NAN;
          hb_attn(1, H, dk, dv, q + (size_t)s * qRow, qRow, dk, k, kRow, kHead, v, kRow, kHead, sel ? sel + (size_t)s * selRow : NULL,
                  nsel + s, selRow, scale, one, oRow, dv + 2);
          if (memcmp(one, out + (size_t)s * oRow, (size_t)oRow * sizeof *one) != 0) {
            printf("shape %d shared %d mode %d: row %d alone differs from the batch\n", si, shared, mode, s);
            return 1;
          }
        }
        free(q); free(kv); free(nsel); free(sel); free(out); free(ref); free(one);
        cases++;
      }
  /* the indexer's f32 scores: the same bits as the forced-scalar run (dsa.h's one order), a NaN key element too */
  const int ish[][4] = { { 5, 8, 64, 37 }, { 3, 3, 20, 9 }, { 1, 32, 128, 70 } }; /* S, nh, hd, T */
  for (int c = 0; c < 3; c++) {
    const int S = ish[c][0], nh = ish[c][1], hd = ish[c][2], T = ish[c][3];
    float *qI = randv((size_t)S * nh * hd), *w = randv((size_t)S * nh), *kI = randv((size_t)T * hd);
    kI[3 * hd + 1] = NAN;
    int32_t *nk = malloc(S * sizeof *nk);
    for (int s = 0; s < S; s++) nk[s] = T - S + s + 1;
    float *a = malloc((size_t)S * T * sizeof *a), *b = malloc((size_t)S * T * sizeof *b);
    for (int i = 0; i < S * T; i++) a[i] = b[i] = -1.0f;
    hb_index_scores(S, nh, hd, qI, w, kI, nk, a, T, 0.125f);
    const int lvl = hb_simd_level();
    hb_simd_force(0);
    hb_index_scores(S, nh, hd, qI, w, kI, nk, b, T, 0.125f);
    hb_simd_force(lvl == HB_SCALAR ? 0 : 1);
    if (memcmp(a, b, (size_t)S * T * sizeof *a) != 0) { printf("index scores case %d differ from the scalar reference\n", c); return 1; }
    free(qI); free(w); free(kI); free(nk); free(a); free(b);
    cases++;
  }
  /* the softmax helpers and SwiGLU (elt.c): the same bits as the forced-scalar run, extremes and NaN included */
  {
    enum { N = 1003 };
    static float x[N], a[N], b[N], g[N], u[N], ya[N], yb[N];
    for (int i = 0; i < N; i++) { x[i] = rndf() * 120.0f; g[i] = rndf() * 100.0f; u[i] = rndf(); }
    x[5] = NAN; x[6] = INFINITY; x[7] = -INFINITY; x[8] = 88.25f; x[9] = -87.35f; x[10] = -0.0f; g[11] = NAN; g[12] = 0.0f;
    const int lvl = hb_simd_level();
    for (int pass = 0; pass < 2; pass++) {
      float *e = pass ? b : a, *y = pass ? yb : ya;
      hb_simd_force(pass ? 0 : (lvl == HB_SCALAR ? 0 : 1));
      memcpy(e, x, sizeof x);
      hb_expm(e, N, 3.5f);
      hb_swiglu(g, u, y, N);
      e[0] = hb_maxf(x + 11, N - 11);            /* (x[11..] holds no NaN first) */
      hb_divd(e + 1, 500, 3.0);
    }
    hb_simd_force(lvl == HB_SCALAR ? 0 : 1);
    for (int i = 0; i < N; i++) /* bit for bit, except that a NaN's sign and payload are the compiler's to choose */
      if ((memcmp(a + i, b + i, 4) != 0 && !(isnan(a[i]) && isnan(b[i]))) || (memcmp(ya + i, yb + i, 4) != 0 && !(isnan(ya[i]) && isnan(yb[i])))) {
        printf("expm / swiglu / maxf / divd differ from the scalar reference at %d\n", i);
        return 1;
      }
    cases++;
  }
  /* KV rows widened (elt.c / moe.c): every half bit pattern, NaN payloads included, and q8 rows of blocks and tails */
  {
    static uint16_t h[65536];
    static float a[65536], b[65536];
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    const int lvl = hb_simd_level();
    for (int pass = 0; pass < 2; pass++) {
      hb_simd_force(pass ? 0 : (lvl == HB_SCALAR ? 0 : 1));
      hb_kv_widen(HB_KV_F16, h, 65536, pass ? b : a);
    }
    if (memcmp(a, b, sizeof a) != 0) { printf("f16 widening differs from the scalar reference\n"); return 1; }
    cases++;
    for (int W = 1; W <= 600; W += 37) {
      static uint8_t row[8192];
      const size_t rb = hb_kv_row_bytes(HB_KV_Q8, W);
      for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)rnd();
      for (int k = 0; k * 32 < W; k++) { const float d = fabsf(rndf()) * 0.01f; memcpy(row + W + 4 * (size_t)k, &d, 4); }
      for (int pass = 0; pass < 2; pass++) {
        hb_simd_force(pass ? 0 : (lvl == HB_SCALAR ? 0 : 1));
        hb_kv_widen(HB_KV_Q8, row, W, pass ? b : a);
      }
      if (memcmp(a, b, (size_t)W * sizeof *a) != 0) { printf("q8 widening (W %d) differs from the scalar reference\n", W); return 1; }
      cases++;
    }
    hb_simd_force(lvl == HB_SCALAR ? 0 : 1);
  }
  printf("ok %ld %s\n", cases, hb_simd_name());
  return 0;
}
