/* libhb matmul kernels for x86: AVX-512 (F+BW+VL) and AVX2+FMA+F16C, chosen by matmul.c.
 * Holds no state. Weights are dequantized in registers (w = q·s, exactly the reference's f32 value);
 * f32 accumulation with FMA.
 * S <= 4: one pass over each weight row against all S rows of x (decode reads W once).
 * S > 4: each chunk of rows is dequantized once to an f32 panel (per-thread scratch; f32 weights are
 * used in place), then register tiles (AVX-512: 2 rows × 4 rows of x) run over it.
 * Batch invariance: y[s,o] is bit-identical whatever S, the position of s in its block of 4, the path
 * (fused or panel) or the thread split. Every path runs the same per-(o,s) order: lanes accumulate in
 * two interleaved vectors over 2·W-element steps, one W step into the first, then the tail (AVX-512:
 * masked into the first; AVX2: a sequential scalar sum), and the same final reduction. */
#include "matmul.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define T256 __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline))
#define QUANT(f) ((f) >= HB_INT8 && (f) <= HB_INT4G)
#define FLOATFMT(f) ((f) == HB_F32 || (f) == HB_BF16 || (f) == HB_F16)

/* Scales walk with the blocks: row formats keep s[o]; int4g (gs % 16 == 0) steps to the next group
 * every gs/W blocks. `g` may end one past the row's groups but is only read for a block that exists. */
typedef struct { const float *g; int per, left; } scale_walk;
INL scale_walk walk_start(const int fmt, const float *sc, int gs, int W) {
  scale_walk w = { sc, fmt == HB_INT4G ? gs / W : 0, fmt == HB_INT4G ? gs / W : 0 };
  return w;
}
INL float walk_take(const int fmt, scale_walk *w) {  /* scale of the current block, then advance */
  const float s = *w->g;
  if (fmt == HB_INT4G && --w->left == 0) { w->left = w->per; w->g++; }
  return s;
}

/* ================================ AVX-512 ================================ */
/* 16 values of row r from element i (i % 16 == 0, i + 16 <= I), unscaled */
T512 INL __m512 w16(const int fmt, const uint8_t *r, int i) {
  switch (fmt) {
  case HB_F32: return _mm512_loadu_ps((const float *)(const void *)r + i);
  case HB_BF16:
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(r + 2 * (size_t)i))), 16));
  case HB_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(r + 2 * (size_t)i)));
  case HB_INT8: return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(r + i))));
  case HB_INT4: case HB_INT4G: {  /* 8 bytes -> u16 lanes lo | hi<<8 -> 16 bytes in element order */
    __m128i t = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(r + i / 2)));
    t = _mm_or_si128(_mm_and_si128(t, _mm_set1_epi16(0x0f)),
                     _mm_and_si128(_mm_slli_epi16(t, 4), _mm_set1_epi16(0x0f00)));
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(t), _mm512_set1_epi32(8)));
  }
  default: { /* HB_INT2: lane l = bits 2l of the 4 bytes */
    uint32_t u; memcpy(&u, r + i / 4, 4);
    const __m512i sh = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    __m512i v = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32((int)u), sh), _mm512_set1_epi32(3));
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(v, _mm512_set1_epi32(2)));
  }
  }
}

/* 32 values from element i: int4 splits 16 bytes into lo / hi nibble bytes and interleaves them back
 * into element order before widening (fewer shuffles than two w16) */
T512 INL void w32(const int fmt, const uint8_t *r, int i, __m512 *w0, __m512 *w1) {
  if (fmt == HB_INT4 || fmt == HB_INT4G) {
    const __m128i b = _mm_loadu_si128((const __m128i *)(r + i / 2)), m4 = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(b, m4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
    const __m512i eight = _mm512_set1_epi32(8);
    *w0 = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)), eight));
    *w1 = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(lo, hi)), eight));
  } else {
    *w0 = w16(fmt, r, i);
    *w1 = w16(fmt, r, i + 16);
  }
}

/* the last I − i (< 16) values, zero-padded, as exact f32 (q·s for quantized formats) */
T512 INL __m512 wtail16(const int fmt, const uint8_t *r, int i, int I, float s) {
  const __mmask16 mk = (__mmask16)((1u << (I - i)) - 1);
  if (fmt == HB_F32) return _mm512_maskz_loadu_ps(mk, (const float *)(const void *)r + i);
  if (fmt == HB_BF16 || fmt == HB_F16) {
    const __m256i h = _mm256_maskz_loadu_epi16(mk, r + 2 * (size_t)i);
    return fmt == HB_F16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  float buf[16] = { 0 };
  for (int j = 0; j < I - i; j++) buf[j] = hb_mm_q(fmt, r, i + j) * s;
  return _mm512_loadu_ps(buf);
}

/* out[k] = Σ_i w(r,i)·x[k*I + i], k < ns (1..4, a constant after inlining); sc = &s[o] (row formats),
 * &s[o·ng] (int4g), unused for float formats */
T512 INL void dot16(const int fmt, const int ns, const uint8_t *r, const float *sc, int gs, int I,
                    const float *x, float *out) {
  __m512 a[4][2];
  for (int k = 0; k < 4; k++) a[k][0] = a[k][1] = _mm512_setzero_ps();
  scale_walk sw = walk_start(fmt, sc, gs, 16);
  int i = 0;
  for (; i + 32 <= I; i += 32) {
    __m512 w0, w1;
    w32(fmt, r, i, &w0, &w1);
    if (QUANT(fmt)) {
      w0 = _mm512_mul_ps(w0, _mm512_set1_ps(walk_take(fmt, &sw)));
      w1 = _mm512_mul_ps(w1, _mm512_set1_ps(walk_take(fmt, &sw)));
    }
    for (int k = 0; k < ns; k++) {
      a[k][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + (size_t)k * I + i), a[k][0]);
      a[k][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + (size_t)k * I + i + 16), a[k][1]);
    }
  }
  if (i + 16 <= I) {
    __m512 w0 = w16(fmt, r, i);
    if (QUANT(fmt)) w0 = _mm512_mul_ps(w0, _mm512_set1_ps(walk_take(fmt, &sw)));
    for (int k = 0; k < ns; k++) a[k][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + (size_t)k * I + i), a[k][0]);
    i += 16;
  }
  if (i < I) {
    const __mmask16 mk = (__mmask16)((1u << (I - i)) - 1);
    const __m512 w0 = wtail16(fmt, r, i, I, QUANT(fmt) ? *sw.g : 1.0f);
    for (int k = 0; k < ns; k++)
      a[k][0] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(mk, x + (size_t)k * I + i), a[k][0]);
  }
  for (int k = 0; k < ns; k++) out[k] = _mm512_reduce_add_ps(_mm512_add_ps(a[k][0], a[k][1]));
}

T512 INL void dot16n(const int fmt, int ns, const uint8_t *r, const float *sc, int gs, int I, const float *x,
                     float *out) {
  switch (ns) {  /* ns as a constant keeps the accumulators in registers */
  case 1: dot16(fmt, 1, r, sc, gs, I, x, out); break;
  case 2: dot16(fmt, 2, r, sc, gs, I, x, out); break;
  case 3: dot16(fmt, 3, r, sc, gs, I, x, out); break;
  default: dot16(fmt, 4, r, sc, gs, I, x, out); break;
  }
}

/* S > 4 register tile over an f32 panel: y[k*O + r] for 2 rows r (stride I) × 4 rows k of x, in exactly
 * dot16's order: 2 × 4 × 2 named accumulators; per 32 elements 4 w and 8 x loads feed 16 FMAs (the empty
 * asm keeps each x vector in a register: gcc would otherwise fold it into both rows' FMAs as a load). */
T512 static void tile16_2x4(const float *w, const float *x, int I, float *y, int O) {
  const __m512 z = _mm512_setzero_ps();
  __m512 a00 = z, a01 = z, a02 = z, a03 = z, a10 = z, a11 = z, a12 = z, a13 = z;  /* blocks 0 mod 2 */
  __m512 b00 = z, b01 = z, b02 = z, b03 = z, b10 = z, b11 = z, b12 = z, b13 = z;  /* blocks 1 mod 2 */
  const float *w0 = w, *w1 = w + I, *x0 = x, *x1 = x + I, *x2 = x + 2 * (size_t)I, *x3 = x + 3 * (size_t)I;
  __m512 va, vb, wa0, wb0, wa1, wb1;
  int i = 0;
#define XK2(k, xp)                                                                                   \
  va = _mm512_loadu_ps(xp + i); vb = _mm512_loadu_ps(xp + i + 16); __asm__("" : "+v"(va), "+v"(vb)); \
  a0##k = _mm512_fmadd_ps(wa0, va, a0##k); b0##k = _mm512_fmadd_ps(wb0, vb, b0##k);                   \
  a1##k = _mm512_fmadd_ps(wa1, va, a1##k); b1##k = _mm512_fmadd_ps(wb1, vb, b1##k);
#define XK1(k, load)                                                                                 \
  va = load; a0##k = _mm512_fmadd_ps(wa0, va, a0##k); a1##k = _mm512_fmadd_ps(wa1, va, a1##k);
  for (; i + 32 <= I; i += 32) {
    wa0 = _mm512_loadu_ps(w0 + i); wb0 = _mm512_loadu_ps(w0 + i + 16);
    wa1 = _mm512_loadu_ps(w1 + i); wb1 = _mm512_loadu_ps(w1 + i + 16);
    XK2(0, x0) XK2(1, x1) XK2(2, x2) XK2(3, x3)
  }
  if (i + 16 <= I) {
    wa0 = _mm512_loadu_ps(w0 + i); wa1 = _mm512_loadu_ps(w1 + i);
    XK1(0, _mm512_loadu_ps(x0 + i)) XK1(1, _mm512_loadu_ps(x1 + i))
    XK1(2, _mm512_loadu_ps(x2 + i)) XK1(3, _mm512_loadu_ps(x3 + i))
    i += 16;
  }
  if (i < I) {
    const __mmask16 mk = (__mmask16)((1u << (I - i)) - 1);
    wa0 = _mm512_maskz_loadu_ps(mk, w0 + i); wa1 = _mm512_maskz_loadu_ps(mk, w1 + i);
    XK1(0, _mm512_maskz_loadu_ps(mk, x0 + i)) XK1(1, _mm512_maskz_loadu_ps(mk, x1 + i))
    XK1(2, _mm512_maskz_loadu_ps(mk, x2 + i)) XK1(3, _mm512_maskz_loadu_ps(mk, x3 + i))
  }
#undef XK2
#undef XK1
#define RED(a, b) _mm512_reduce_add_ps(_mm512_add_ps(a, b))
  y[0] = RED(a00, b00); y[1] = RED(a10, b10);
  y[(size_t)O] = RED(a01, b01); y[(size_t)O + 1] = RED(a11, b11);
  y[2 * (size_t)O] = RED(a02, b02); y[2 * (size_t)O + 1] = RED(a12, b12);
  y[3 * (size_t)O] = RED(a03, b03); y[3 * (size_t)O + 1] = RED(a13, b13);
#undef RED
}

/* dst[I] = the row's exact f32 values (q·s) */
T512 INL void deq16(const int fmt, const uint8_t *r, const float *sc, int gs, int I, float *dst) {
  scale_walk sw = walk_start(fmt, sc, gs, 16);
  int i = 0;
  for (; i + 16 <= I; i += 16) {
    __m512 w0 = w16(fmt, r, i);
    if (QUANT(fmt)) w0 = _mm512_mul_ps(w0, _mm512_set1_ps(walk_take(fmt, &sw)));
    _mm512_storeu_ps(dst + i, w0);
  }
  const float s = QUANT(fmt) && i < I ? *sw.g : 1.0f;
  for (; i < I; i++) dst[i] = hb_mm_q(fmt, r, i) * s;
}

/* per-row scale pointer handed to dot/deq */
INL const float *row_scales(const int fmt, const hb_mm *m, int o) {
  return fmt == HB_INT4G ? m->sc + (size_t)o * m->ng : QUANT(fmt) ? m->sc + o : NULL;
}

T512 INL void rows16(const int fmt, const hb_mm *m, int lo, int hi) {
  const int I = m->I, S = m->S, O = m->O;
  float out[4];
  float *tile = (S > 4 && fmt != HB_F32) ? hb_mm_scratch((size_t)(hi - lo) * I) : NULL;
  if (S <= 4 || (fmt != HB_F32 && !tile)) {  /* fused: dequantize in registers */
    for (int o = lo; o < hi; o++)
      for (int s0 = 0; s0 < S; s0 += 4) {
        const int ns = S - s0 < 4 ? S - s0 : 4;
        dot16n(fmt, ns, hb_mm_row(m, o), row_scales(fmt, m, o), m->gs, I, m->x + (size_t)s0 * I, out);
        for (int k = 0; k < ns; k++) m->y[(size_t)(s0 + k) * O + o] = out[k];
      }
    return;
  }
  if (tile)
    for (int o = lo; o < hi; o++) deq16(fmt, hb_mm_row(m, o), row_scales(fmt, m, o), m->gs, I, tile + (size_t)(o - lo) * I);
  const float *panel = tile ? tile : (const float *)(const void *)hb_mm_row(m, lo);  /* f32 [hi-lo, I] */
  for (int s0 = 0; s0 < S; s0 += 4) {
    const float *x = m->x + (size_t)s0 * I;
    const int ns = S - s0 < 4 ? S - s0 : 4;
    int o = lo;
    if (ns == 4)
      for (; o + 2 <= hi; o += 2) tile16_2x4(panel + (size_t)(o - lo) * I, x, I, m->y + (size_t)s0 * O + o, O);
    for (; o < hi; o++) {
      dot16n(HB_F32, ns, (const uint8_t *)(panel + (size_t)(o - lo) * I), NULL, 0, I, x, out);
      for (int k = 0; k < ns; k++) m->y[(size_t)(s0 + k) * O + o] = out[k];
    }
  }
}

#define ROWS16(F, name) T512 static void name(const hb_mm *m, int lo, int hi) { rows16(F, m, lo, hi); }
ROWS16(HB_F32, r16_f32) ROWS16(HB_INT8, r16_i8) ROWS16(HB_INT4, r16_i4) ROWS16(HB_INT2, r16_i2)
ROWS16(HB_INT4G, r16_i4g) ROWS16(HB_BF16, r16_bf16) ROWS16(HB_F16, r16_f16)

void hb_mm_rows_avx512(const hb_mm *m, int lo, int hi) {
  static const hb_mm_rows_fn t[] = { r16_f32, r16_i8, r16_i4, r16_i2, r16_i4g, r16_bf16, r16_f16 };
  t[m->fmt](m, lo, hi);
}

/* ================================= AVX2 ================================== */
/* 8 values of row r from element i (i % 8 == 0, i + 8 <= I), unscaled */
T256 INL __m256 w8(const int fmt, const uint8_t *r, int i) {
  switch (fmt) {
  case HB_F32: return _mm256_loadu_ps((const float *)(const void *)r + i);
  case HB_BF16:
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(r + 2 * (size_t)i))), 16));
  case HB_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(r + 2 * (size_t)i)));
  case HB_INT8: return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(r + i))));
  case HB_INT4: case HB_INT4G: {
    uint32_t u; memcpy(&u, r + i / 2, 4);
    __m128i t = _mm_cvtepu8_epi16(_mm_cvtsi32_si128((int)u));
    t = _mm_or_si128(_mm_and_si128(t, _mm_set1_epi16(0x0f)),
                     _mm_and_si128(_mm_slli_epi16(t, 4), _mm_set1_epi16(0x0f00)));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(t), _mm256_set1_epi32(8)));
  }
  default: {
    uint16_t u; memcpy(&u, r + i / 4, 2);
    const __m256i sh = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    __m256i v = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(u), sh), _mm256_set1_epi32(3));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(v, _mm256_set1_epi32(2)));
  }
  }
}

/* 16 values from element i (see w32) */
T256 INL void w16x2(const int fmt, const uint8_t *r, int i, __m256 *w0, __m256 *w1) {
  if (fmt == HB_INT4 || fmt == HB_INT4G) {
    const __m128i b = _mm_loadl_epi64((const __m128i *)(r + i / 2)), m4 = _mm_set1_epi8(0x0f);
    const __m128i q = _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
    const __m256i eight = _mm256_set1_epi32(8);
    *w0 = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(q), eight));
    *w1 = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(q, q)), eight));
  } else {
    *w0 = w8(fmt, r, i);
    *w1 = w8(fmt, r, i + 8);
  }
}

T256 INL float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

T256 INL void dot8(const int fmt, const int ns, const uint8_t *r, const float *sc, int gs, int I,
                   const float *x, float *out) {
  __m256 a[4][2];
  float t[4] = { 0, 0, 0, 0 };
  for (int k = 0; k < 4; k++) a[k][0] = a[k][1] = _mm256_setzero_ps();
  scale_walk sw = walk_start(fmt, sc, gs, 8);
  int i = 0;
  for (; i + 16 <= I; i += 16) {
    __m256 w0, w1;
    w16x2(fmt, r, i, &w0, &w1);
    if (QUANT(fmt)) {
      w0 = _mm256_mul_ps(w0, _mm256_set1_ps(walk_take(fmt, &sw)));
      w1 = _mm256_mul_ps(w1, _mm256_set1_ps(walk_take(fmt, &sw)));
    }
    for (int k = 0; k < ns; k++) {
      a[k][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (size_t)k * I + i), a[k][0]);
      a[k][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + (size_t)k * I + i + 8), a[k][1]);
    }
  }
  if (i + 8 <= I) {
    __m256 w0 = w8(fmt, r, i);
    if (QUANT(fmt)) w0 = _mm256_mul_ps(w0, _mm256_set1_ps(walk_take(fmt, &sw)));
    for (int k = 0; k < ns; k++) a[k][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (size_t)k * I + i), a[k][0]);
    i += 8;
  }
  const float s = QUANT(fmt) && i < I ? *sw.g : 1.0f;
  for (; i < I; i++) {  /* scalar tail, sequential */
    const float w = hb_mm_q(fmt, r, i) * s;
    for (int k = 0; k < ns; k++) t[k] += w * x[(size_t)k * I + i];
  }
  for (int k = 0; k < ns; k++) out[k] = hsum8(_mm256_add_ps(a[k][0], a[k][1])) + t[k];
}

T256 INL void dot8n(const int fmt, int ns, const uint8_t *r, const float *sc, int gs, int I, const float *x,
                    float *out) {
  switch (ns) {
  case 1: dot8(fmt, 1, r, sc, gs, I, x, out); break;
  case 2: dot8(fmt, 2, r, sc, gs, I, x, out); break;
  case 3: dot8(fmt, 3, r, sc, gs, I, x, out); break;
  default: dot8(fmt, 4, r, sc, gs, I, x, out); break;
  }
}

T256 INL void deq8(const int fmt, const uint8_t *r, const float *sc, int gs, int I, float *dst) {
  scale_walk sw = walk_start(fmt, sc, gs, 8);
  int i = 0;
  for (; i + 8 <= I; i += 8) {
    __m256 w0 = w8(fmt, r, i);
    if (QUANT(fmt)) w0 = _mm256_mul_ps(w0, _mm256_set1_ps(walk_take(fmt, &sw)));
    _mm256_storeu_ps(dst + i, w0);
  }
  const float s = QUANT(fmt) && i < I ? *sw.g : 1.0f;
  for (; i < I; i++) dst[i] = hb_mm_q(fmt, r, i) * s;
}

/* AVX2 has 16 registers: the panel path reuses dot8 (1 row × 4 rows of x, 8 accumulators) */
T256 INL void rows8(const int fmt, const hb_mm *m, int lo, int hi) {
  const int I = m->I, S = m->S, O = m->O;
  float out[4];
  float *tile = (S > 4 && fmt != HB_F32) ? hb_mm_scratch((size_t)(hi - lo) * I) : NULL;
  const int fused = S <= 4 || (fmt != HB_F32 && !tile);
  if (tile)
    for (int o = lo; o < hi; o++) deq8(fmt, hb_mm_row(m, o), row_scales(fmt, m, o), m->gs, I, tile + (size_t)(o - lo) * I);
  for (int o = lo; o < hi; o++) {
    const uint8_t *r = fused || !tile ? hb_mm_row(m, o) : (const uint8_t *)(tile + (size_t)(o - lo) * I);
    for (int s0 = 0; s0 < S; s0 += 4) {
      const int ns = S - s0 < 4 ? S - s0 : 4;
      const float *x = m->x + (size_t)s0 * I;
      if (fused) dot8n(fmt, ns, r, row_scales(fmt, m, o), m->gs, I, x, out);
      else dot8n(HB_F32, ns, r, NULL, 0, I, x, out);
      for (int k = 0; k < ns; k++) m->y[(size_t)(s0 + k) * O + o] = out[k];
    }
  }
}

#define ROWS8(F, name) T256 static void name(const hb_mm *m, int lo, int hi) { rows8(F, m, lo, hi); }
ROWS8(HB_F32, r8_f32) ROWS8(HB_INT8, r8_i8) ROWS8(HB_INT4, r8_i4) ROWS8(HB_INT2, r8_i2)
ROWS8(HB_INT4G, r8_i4g) ROWS8(HB_BF16, r8_bf16) ROWS8(HB_F16, r8_f16)

void hb_mm_rows_avx2(const hb_mm *m, int lo, int hi) {
  static const hb_mm_rows_fn t[] = { r8_f32, r8_i8, r8_i4, r8_i2, r8_i4g, r8_bf16, r8_f16 };
  t[m->fmt](m, lo, hi);
}
#endif
