/* Quantization of f32 rows into formats.md's formats 1-4 (symmetric absmax per row, or per group of gs
 * for fmt 4): qmax = 2^(bits-1) - 1, s = max(amax/qmax, 1e-8), v = clamp(rint(w/s), lo, qmax) with rint
 * rounding half to even. Packing: int4 even i = low nibble (v+8); int2 bits 2(i mod 4) hold v+2.
 * Parallel over rows on the pool. Scalar only: conversion is I/O-bound. Holds no state. */
#include "matmul.h" /* hb_mm_row_bytes */
#include <math.h>
#include <string.h>

typedef struct { int fmt, gs, O, I; const float *W; uint8_t *q; float *s; } qjob;

static void quant_span(int fmt, const float *w, int n, int i0, float *sc, uint8_t *row) {
  int bits = fmt == HB_INT8 ? 8 : fmt == HB_INT2 ? 2 : 4;
  float qmax = (float)((1 << (bits - 1)) - 1), lo = -(float)(1 << (bits - 1));
  float amax = 0.0f;
  for (int i = 0; i < n; i++) { float a = fabsf(w[i]); if (a > amax) amax = a; }
  float s = amax / qmax; if (!(s > 1e-8f)) s = 1e-8f;
  *sc = s;
  for (int i = 0; i < n; i++) {
    float v = nearbyintf(w[i] / s);           /* default rounding mode: half to even */
    if (v < lo) v = lo;
    if (v > qmax) v = qmax;
    int k = i0 + i, q = (int)v;
    if (fmt == HB_INT8) row[k] = (uint8_t)(int8_t)q;
    else if (fmt == HB_INT2) row[k >> 2] |= (uint8_t)((q + 2) << ((k & 3) * 2));
    else row[k >> 1] |= (uint8_t)((q + 8) << ((k & 1) * 4));
  }
}

static void quant_task(void *c, int lo, int hi) {
  const qjob *j = c;
  size_t rb = hb_mm_row_bytes(j->fmt, j->I);
  int ng = j->fmt == HB_INT4G ? (j->I + j->gs - 1) / j->gs : 1, gs = j->fmt == HB_INT4G ? j->gs : j->I;
  for (int o = lo; o < hi; o++) {
    uint8_t *row = j->q + (size_t)o * rb;
    memset(row, 0, rb);
    for (int g = 0; g < ng; g++) {
      int i0 = g * gs, n = j->I - i0 < gs ? j->I - i0 : gs;
      quant_span(j->fmt, j->W + (size_t)o * j->I + i0, n, i0, j->s + (size_t)o * ng + g, row);
    }
  }
}

/* W [O, I] f32 -> q (O·hb_mm_row_bytes) + scales ([O] or [O, ⌈I/gs⌉]); returns 0, or -1 for a bad fmt/gs */
int hb_quantize(int fmt, const float *W, int O, int I, int gs, uint8_t *q, float *scales) {
  if (fmt < HB_INT8 || fmt > HB_INT4G || (fmt == HB_INT4G && gs <= 0)) return -1;
  qjob j = { fmt, gs, O, I, W, q, scales };
  hb_parallel_for(O, 16, quant_task, &j);
  return 0;
}
