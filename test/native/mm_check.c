/* Cross-architecture check of libhb's exact-mode matmul at the level in use (NEON on aarch64, built and run under
 * qemu by test/neon.test.ts): hb_matmul against the scalar reference hb_matmul_ref (max error ≤ 1e-5 of the
 * largest output: the levels sum differently) for every weight format, row lengths with every tail, int4g group
 * sizes (one the NEON kernel leaves to the reference), and every row of a batch equal to the same row alone, bit
 * for bit. Prints "ok <cases> <level>", or the first failure and exits 1. Random data from a fixed LCG. */
#include "../../ffi/hb.h"
#include "lcg.h"
#include "../../ffi/matmul.h" /* hb_mm_row_bytes */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int main(void) {
  hb_init(2);
  const int fmts[] = { HB_F32, HB_INT8, HB_INT4, HB_INT2, HB_INT4G, HB_BF16, HB_F16 };
  const int Is[] = { 1, 7, 8, 9, 16, 64, 100, 333 };
  const int gss[] = { 8, 16, 64, 12 };
  const int Os[] = { 1, 5, 33 }, Ss[] = { 1, 3, 6 };
  long cases = 0;
  for (int f = 0; f < 7; f++)
    for (int ii = 0; ii < 8; ii++)
      for (int gi = 0; gi < (fmts[f] == HB_INT4G ? 4 : 1); gi++)
        for (int oi = 0; oi < 3; oi++)
          for (int si = 0; si < 3; si++) {
            const int fmt = fmts[f], I = Is[ii], O = Os[oi], S = Ss[si], gs = gss[gi];
            const size_t rb = hb_mm_row_bytes(fmt, I), ng = (size_t)(I + gs - 1) / gs;
            uint8_t *W = malloc((size_t)O * rb + 8);
            for (size_t b = 0; b < (size_t)O * rb; b++) W[b] = (uint8_t)rnd();
            if (fmt == HB_F32) for (size_t k = 0; k < (size_t)O * I; k++) { const float v = rndf(); memcpy(W + 4 * k, &v, 4); }
            if (fmt == HB_BF16 || fmt == HB_F16)
              for (size_t k = 0; k < (size_t)O * I; k++) { /* finite halves: exponent field 8..18 */
                const uint16_t h = fmt == HB_BF16 ? (uint16_t)((rnd() & 0x807f) | ((120 + rnd() % 10) << 7))
                                                  : (uint16_t)((rnd() & 0x83ff) | ((8 + rnd() % 11) << 10));
                memcpy(W + 2 * k, &h, 2);
              }
            float *sc = malloc((size_t)O * ng * sizeof *sc), *x = malloc((size_t)S * I * sizeof *x);
            for (size_t k = 0; k < (size_t)O * ng; k++) sc[k] = 0.01f + 0.05f * (rndf() + 1.0f);
            for (size_t k = 0; k < (size_t)S * I; k++) x[k] = rndf();
            float *y = malloc((size_t)S * O * sizeof *y), *r = malloc((size_t)S * O * sizeof *r), *one = malloc((size_t)O * sizeof *one);
            hb_matmul(fmt, W, sc, gs, O, I, x, S, y);
            hb_matmul_ref(fmt, W, sc, gs, O, I, x, S, r);
            double d = 0, m = 1e-30;
            for (int k = 0; k < S * O; k++) { d = fmax(d, fabs((double)y[k] - r[k])); m = fmax(m, fabs((double)r[k])); }
            if (!(d <= 1e-5 * m)) { printf("fmt %d I %d gs %d O %d S %d: error %g of %g against the reference\n", fmt, I, gs, O, S, d, m); return 1; }
            for (int s = 0; s < S; s++) {
              hb_matmul(fmt, W, sc, gs, O, I, x + (size_t)s * I, 1, one);
              if (memcmp(one, y + (size_t)s * O, (size_t)O * sizeof *one) != 0) { printf("fmt %d I %d gs %d O %d S %d: row %d alone differs\n", fmt, I, gs, O, S, s); return 1; }
            }
            free(W); free(sc); free(x); free(y); free(r); free(one);
            cases++;
          }
  printf("ok %ld %s\n", cases, hb_simd_name());
  return 0;
}
