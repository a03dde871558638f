/* libhb fast-mode matmul kernels for x86 with AVX-VNNI but no AVX-512 (Alder Lake and later consumer Intel
 * cores): the 256-bit register-tile kernels of matmul_q8_tile256.h with the VEX vpdpbusd. Numerics:
 * matmul_q8.h, bit for bit. Holds no state. */
#include "matmul_q8.h"
#if HB_HAVE_AVXVNNI
#include "matmul_q8_x86.h"

#define TILE_VNNI 1
#define TILE_TGT __attribute__((target("avx2,fma,avxvnni")))
#define TILE_NAME(x) avxvnni_##x
#include "matmul_q8_tile256.h"

void hb_q8_rows_avxvnni(const hb_q8 *m, int lo, int hi) {
  static const hb_q8_rows_fn t[] = { NULL, avxvnni_i8, avxvnni_i4, avxvnni_i2, avxvnni_i4g };
  t[m->fmt](m, lo, hi);
}
#endif
