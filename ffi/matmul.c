/* libhb matmul: W [O,I] (fmt 0..6 of hb.h) · x [S,I] (f32) -> y [S,O] (f32).
 * Owns the dispatch (SIMD level from cpu.c), the parallel split over O (pool.c), the per-thread
 * dequantization scratch and the scalar reference hb_matmul_ref (also the forced-scalar path).
 * Quantized values follow formats.md: int8 q·s[o]; int4 (nib−8)·s[o] (even i = low nibble);
 * int2 (f−2)·s[o] (bits 2(i mod 4)); int4g (nib−8)·s[o·⌈I/gs⌉ + ⌊i/gs⌋]. */
#include "matmul.h"
#include <math.h>
#include <stdlib.h>

float *hb_mm_scratch(size_t n) {
  static _Thread_local void *buf;
  static _Thread_local size_t cap;
  return hb_grow(&buf, &cap, n * sizeof(float));
}

/* scalar reference: each weight dequantized exactly (q·s), f32 accumulation, 4 rows of x per pass.
 * Instantiated per format (fmt a compile-time constant) so the forced-scalar baseline is fair. */
#define INL static inline __attribute__((always_inline))
INL void dot_ref(const int fmt, const int ns, const hb_mm *m, int o, const float *x, float *out) {
  const int I = m->I;
  const uint8_t *r = hb_mm_row(m, o);
  const float *gsc = fmt == HB_INT4G ? m->sc + (size_t)o * m->ng : NULL;
  float acc[4] = { 0, 0, 0, 0 };
  for (int i = 0, left = m->gs; i < I; i++) {
    float w = hb_mm_q(fmt, r, i);
    if (fmt >= HB_INT8 && fmt <= HB_INT2) w *= m->sc[o];
    else if (fmt == HB_INT4G) {                   /* scale of group ⌊i/gs⌋, stepped without a division */
      w *= *gsc;
      if (--left == 0) { left = m->gs; gsc++; }
    }
    for (int k = 0; k < ns; k++) acc[k] += w * x[(size_t)k * I + i];
  }
  for (int k = 0; k < ns; k++) out[k] = acc[k];
}
INL void rows_ref(const int fmt, const hb_mm *m, int lo, int hi) {
  const int I = m->I, S = m->S, O = m->O;
  float out[4];
  for (int o = lo; o < hi; o++)
    for (int s0 = 0; s0 < S; s0 += 4) {
      const int ns = S - s0 < 4 ? S - s0 : 4;
      const float *x = m->x + (size_t)s0 * I;
      switch (ns) {  /* ns as a constant keeps the accumulators in registers */
      case 1: dot_ref(fmt, 1, m, o, x, out); break;
      case 2: dot_ref(fmt, 2, m, o, x, out); break;
      case 3: dot_ref(fmt, 3, m, o, x, out); break;
      default: dot_ref(fmt, 4, m, o, x, out); break;
      }
      for (int k = 0; k < ns; k++) m->y[(size_t)(s0 + k) * O + o] = out[k];
    }
}
#define ROWS_REF(F, name) static void name(const hb_mm *m, int lo, int hi) { rows_ref(F, m, lo, hi); }
ROWS_REF(HB_F32, ref_f32) ROWS_REF(HB_INT8, ref_i8) ROWS_REF(HB_INT4, ref_i4) ROWS_REF(HB_INT2, ref_i2)
ROWS_REF(HB_INT4G, ref_i4g) ROWS_REF(HB_BF16, ref_bf16) ROWS_REF(HB_F16, ref_f16)

void hb_mm_rows_ref(const hb_mm *m, int lo, int hi) {
  static const hb_mm_rows_fn t[] = { ref_f32, ref_i8, ref_i4, ref_i2, ref_i4g, ref_bf16, ref_f16 };
  t[m->fmt](m, lo, hi);
}

typedef struct { const hb_mm *m; hb_mm_rows_fn fn; } mm_job;
static void mm_task(void *c, int lo, int hi) {
  const mm_job *j = c;
  hb_prefetch_head(hb_mm_row(j->m, lo), (size_t)(hi - lo) * j->m->rowb);
  j->fn(j->m, lo, hi);
}

/* validate, fill hb_mm; returns 0 when y was already written (empty or invalid input) */
static int mm_setup(hb_mm *m, int fmt, const void *W, const float *scales, int gs, int O, int I,
                    const float *x, int S, float *y) {
  if (O <= 0 || S <= 0 || !y) return 0;
  const int quant = fmt >= HB_INT8 && fmt <= HB_INT4G;
  if (fmt < HB_F32 || fmt > HB_F16 || !W || !x || I < 0 || (quant && !scales) || (fmt == HB_INT4G && gs <= 0)) {
    for (size_t k = 0; k < (size_t)S * O; k++) y[k] = NAN;   /* bad call: make it visible, never crash */
    return 0;
  }
  if (I == 0) { memset(y, 0, (size_t)S * O * sizeof *y); return 0; }
  *m = (hb_mm){ .fmt = fmt, .gs = gs, .ng = fmt == HB_INT4G ? (I + gs - 1) / gs : 0, .O = O, .I = I, .S = S,
                .W = W, .rowb = hb_mm_row_bytes(fmt, I), .sc = scales, .x = x, .y = y };
  return 1;
}

/* rows per claimed chunk: small for decode (balance); for S > 4 a ~128 KiB f32 panel of at least 4 rows
 * (the register tile), and no more than an even share per thread */
static int mm_chunk(const hb_mm *m) {
  const int nt = hb_nthreads();
  if ((size_t)m->O * m->rowb < 49152) return m->O;   /* small: the calling thread alone (no pool wake-up) */
  if (m->S <= 4) { int c = m->O / (nt * 8); return c < 1 ? 1 : c > 64 ? 64 : c; }
  int c = 32768 / m->I;
  c = c < 4 ? 4 : c > 64 ? 64 : c & ~3;
  const int share = (m->O + nt - 1) / nt;
  return c > share ? (share < 1 ? 1 : share) : c;
}

static void mm_run(const hb_mm *m, hb_mm_rows_fn fn) {
  mm_job j = { m, fn };
  (m->S <= 4 ? hb_parallel_spans : hb_parallel_for)(m->O, mm_chunk(m), mm_task, &j);   /* decode: a span per thread */
}

void hb_matmul_ref(int fmt, const void *W, const float *scales, int gs, int O, int I, const float *x, int S,
                   float *y) {
  hb_mm m;
  if (mm_setup(&m, fmt, W, scales, gs, O, I, x, S, y)) mm_run(&m, hb_mm_rows_ref);
}

/* bytes of W and its scales that one call reads */
int64_t hb_mm_wbytes(const hb_mm *m) {
  const int quant = m->fmt >= HB_INT8 && m->fmt <= HB_INT4G;
  return (int64_t)m->O * (int64_t)m->rowb + (quant ? 4 * (int64_t)m->O * (m->ng ? m->ng : 1) : 0);
}

/* validate and fill m, pick the row kernel for the SIMD level in use; NULL when y
 * was already written (empty or bad call). Also used by the batched entries (matmul_many.c, mla.c). */
hb_mm_rows_fn hb_mm_prepare(hb_mm *m, int fmt, const void *W, const float *scales, int gs, int O, int I,
                            const float *x, int S, float *y) {
  if (!mm_setup(m, fmt, W, scales, gs, O, I, x, S, y)) return NULL;
  hb_mm_rows_fn fn = hb_mm_rows_ref;
#if defined(__x86_64__) || defined(__i386__)
  const int lvl = hb_simd_level();
  /* SIMD int4g needs whole 16-wide vectors per group */
  if (lvl >= HB_AVX2 && !(fmt == HB_INT4G && gs % 16 != 0))
    fn = lvl >= HB_AVX512 ? hb_mm_rows_avx512 : hb_mm_rows_avx2;
#elif defined(__aarch64__)
  if (hb_simd_level() == HB_NEON && !(fmt == HB_INT4G && gs % 8 != 0)) fn = hb_mm_rows_neon;
#endif
  return fn;
}

void hb_matmul(int fmt, const void *W, const float *scales, int gs, int O, int I, const float *x, int S,
               float *y) {
  hb_mm m;
  const hb_mm_rows_fn fn = hb_mm_prepare(&m, fmt, W, scales, gs, O, I, x, S, y);
  if (!fn) return;
  hb_wbytes_add(hb_mm_wbytes(&m));
  mm_run(&m, fn);
}
