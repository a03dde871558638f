/* libhb fast-mode matmul kernels for x86 with AVX-VNNI but no AVX-512 (Alder Lake and later consumer Intel
 * cores): the 256-bit register-tile kernels of matmul_q8_tile256.h with the VEX vpdpbusd (and, for int8
 * batches of HB_Q8_GEMM_S+ rows and int4g ones of HB_Q8_I4G_GEMM_S+ rows, the packed-panel GEMMs first; int4g's fewer
 * rows of x at gs = 64, matmul_q8_i4g_gemm_avxvnni.c's decode kernel first). Numerics:
 * matmul_q8.h, bit for bit. Holds no state. */
#include "matmul_q8.h"
#if HB_HAVE_AVXVNNI
#include "matmul_q8_x86.h"

#define TILE_VNNI 1
#define TILE_TGT __attribute__((target("avx2,fma,avxvnni")))
#define TILE_NAME(x) avxvnni_##x
#include "matmul_q8_tile256.h"

/* int8 batches of HB_Q8_GEMM_S+ rows: whole panels through the packed-panel GEMM first (matmul_q8_gemm_x86.c) */
TILE_TGT static void avxvnni_i8_gemm(const hb_q8 *m, int lo, int hi) { avxvnni_i8(m, hb_q8_gemm_i8_avxvnni(m, lo, hi), hi); }
/* int4g batches of HB_Q8_I4G_GEMM_S+ rows (gs ≥ 32): the same, and fewer rows of x at gs = 64 whole tiles of 8
 * rows through its decode kernel; the rest of the rows (past the last whole panel of 16 or tile of 8) through the tiles
 * (matmul_q8_i4g_gemm_avxvnni.c) */
TILE_TGT static void avxvnni_i4g_gemm(const hb_q8 *m, int lo, int hi) {
  avxvnni_i4g(m, m->S < HB_Q8_I4G_GEMM_S ? hb_q8_dec1_i4g_avxvnni(m, lo, hi) : hb_q8_gemm_i4g_avxvnni(m, lo, hi), hi);
}

void hb_q8_rows_avxvnni(const hb_q8 *m, int lo, int hi) {
  static const hb_q8_rows_fn t[] = { NULL, avxvnni_i8_gemm, avxvnni_i4, avxvnni_i2, avxvnni_i4g_gemm };
  t[m->fmt](m, lo, hi);
}
#endif
