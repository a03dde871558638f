/* libhb matmul internals shared by matmul.c (dispatch, scalar reference), matmul_x86.c (AVX2 /
 * AVX-512 kernels), matmul_neon.c and mla.c (packed row sizes). Holds no state. One call is described by hb_mm; kernels
 * fill y[:, lo..hi). */
#ifndef HB_MATMUL_H
#define HB_MATMUL_H
#include "hb.h"
#include <string.h>

typedef struct {
  int fmt, gs, ng;          /* format, int4g group size, groups per row ⌈I/gs⌉ */
  int O, I, S;
  const uint8_t *W;         /* packed W [O, rowb bytes] */
  size_t rowb;              /* bytes per packed row */
  const float *sc;          /* scales: [O] (fmt 1-3), [O, ng] (fmt 4), NULL otherwise */
  const float *x;           /* x [S, I] */
  float *y;                 /* y [S, O] */
} hb_mm;

/* y[s, o] for o in [lo, hi), every s < S */
typedef void (*hb_mm_rows_fn)(const hb_mm *m, int lo, int hi);
void hb_mm_rows_ref(const hb_mm *m, int lo, int hi);
#if defined(__x86_64__) || defined(__i386__)
void hb_mm_rows_avx2(const hb_mm *m, int lo, int hi);
void hb_mm_rows_avx512(const hb_mm *m, int lo, int hi);
#elif defined(__aarch64__)
void hb_mm_rows_neon(const hb_mm *m, int lo, int hi);   /* matmul_neon.c */
#endif
int64_t hb_mm_wbytes(const hb_mm *m);
hb_mm_rows_fn hb_mm_prepare(hb_mm *m, int fmt, const void *W, const float *scales, int gs, int O, int I,
                            const float *x, int S, float *y);
/* per-thread scratch of n floats (64-byte aligned, reused across calls); NULL when out of memory */
float *hb_mm_scratch(size_t n);

/* bytes of one packed row of I elements in fmt (0 for an unknown fmt); also used by mla.c */
static inline size_t hb_mm_row_bytes(int fmt, int I) {
  switch (fmt) {
  case HB_F32: return 4 * (size_t)I;
  case HB_INT8: return (size_t)I;
  case HB_INT4: case HB_INT4G: return ((size_t)I + 1) / 2;
  case HB_INT2: return ((size_t)I + 3) / 4;
  case HB_BF16: case HB_F16: return 2 * (size_t)I;
  }
  return 0;
}

static inline const uint8_t *hb_mm_row(const hb_mm *m, int o) { return m->W + (size_t)o * m->rowb; }

/* element i of a packed row before any scale: the value itself (f32/bf16/f16) or the integer q */
static inline float hb_mm_q(int fmt, const uint8_t *r, int i) {
  switch (fmt) {
  case HB_F32: { float f; memcpy(&f, r + 4 * (size_t)i, 4); return f; }
  case HB_INT8: return (float)(int8_t)r[i];
  case HB_INT4: case HB_INT4G: return (float)((int)((r[i >> 1] >> ((i & 1) * 4)) & 15) - 8);
  case HB_INT2: return (float)((int)((r[i >> 2] >> ((i & 3) * 2)) & 3) - 2);
  case HB_BF16: { uint16_t h; memcpy(&h, r + 2 * (size_t)i, 2); return hb_bf16_to_f32(h); }
  case HB_F16: { uint16_t h; memcpy(&h, r + 2 * (size_t)i, 2); return hb_f16_to_f32(h); }
  }
  return 0.0f;
}
#endif
