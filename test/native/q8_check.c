/* Cross-architecture check of libhb's fast-mode kernels (built for aarch64 and run under qemu by
 * test/neon.test.ts): at the level in use (NEON with SDOT when the CPU has it) hb_matmul_q8 must equal
 * the scalar reference hb_matmul_q8_ref bit for bit, for every weight format and a spread of shapes, and a
 * batch's rows must equal the same rows alone. Prints "ok <cases> <level> dotprod=<0|1>", or the first
 * mismatch and exits 1. Random data from a fixed LCG; no state. */
#include "../../ffi/hb.h"
#include "lcg.h"
#include "../../ffi/matmul.h" /* hb_mm_row_bytes */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int hb_cpu_dotprod;

int main(void) {
  hb_init(2);
  const int fmts[] = { HB_INT8, HB_INT4, HB_INT2, HB_INT4G };
  const int Is[] = { 1, 7, 64, 127, 128, 129, 200, 256, 300, 1000, 4100 };
  const int gss[] = { 8, 16, 32, 64, 128, 256 };
  const int Os[] = { 1, 5, 7, 33, 38 };
  /* rows alone and in sub-batches: every S from 1 to 9 (9: the whole batch) */
  const int parts[][2] = { { 0, 1 }, { 3, 1 }, { 8, 1 }, { 1, 4 }, { 4, 5 }, { 2, 2 }, { 5, 3 }, { 3, 6 }, { 1, 7 }, { 1, 8 } };
  const int S = 9;
  long cases = 0;
  for (int f = 0; f < 4; f++)
    for (int ii = 0; ii < (int)(sizeof Is / sizeof *Is); ii++)
      for (int gi = 0; gi < (fmts[f] == HB_INT4G ? 6 : 1); gi++)
        for (int oi = 0; oi < 5; oi++) {
          const int fmt = fmts[f], I = Is[ii], O = Os[oi], gs = fmt == HB_INT4G ? gss[gi] : 0;
          const size_t rb = hb_mm_row_bytes(fmt, I), ns = fmt == HB_INT4G ? (size_t)O * (size_t)((I + gs - 1) / gs) : (size_t)O;
          uint8_t *W = malloc((size_t)O * rb);
          float *sc = malloc(ns * sizeof(float)), *x = malloc((size_t)S * I * sizeof(float));
          float *ref = malloc((size_t)S * O * sizeof(float)), *got = malloc((size_t)S * O * sizeof(float));
          for (size_t i = 0; i < (size_t)O * rb; i++) W[i] = (uint8_t)rnd();
          for (size_t i = 0; i < ns; i++) sc[i] = 0.001f + fabsf(rndf() * 0.05f);
          for (int i = 0; i < S * I; i++) x[i] = rndf() * 3.0f;
          x[5 % (S * I)] = 0.0f;
          if (I > 3) memset(x + 2 * I, 0, (size_t)I * sizeof(float));   /* an all-zero row */
          hb_matmul_q8_ref(fmt, W, sc, gs, O, I, x, S, ref);
          hb_matmul_q8(fmt, W, sc, gs, O, I, x, S, got);
          if (memcmp(ref, got, (size_t)S * O * sizeof(float))) {
            printf("mismatch: fmt %d I %d gs %d O %d: the batch differs from the scalar reference\n", fmt, I, gs, O);
            return 1;
          }
          for (int p = 0; p < (int)(sizeof parts / sizeof *parts); p++) {
            const int s0 = parts[p][0], n = parts[p][1];
            hb_matmul_q8(fmt, W, sc, gs, O, I, x + (size_t)s0 * I, n, got);
            if (memcmp(ref + (size_t)s0 * O, got, (size_t)n * O * sizeof(float))) {
              printf("mismatch: fmt %d I %d gs %d O %d: rows %d..%d alone differ from the batch\n", fmt, I, gs, O, s0, s0 + n);
              return 1;
            }
          }
          cases++;
          free(W); free(sc); free(x); free(ref); free(got);
        }
  printf("ok %ld %s dotprod=%d\n", cases, hb_simd_name(), hb_cpu_dotprod);
  return 0;
}
