/* libhb matmul kernels for x86: AVX-512 (F+BW+VL) and AVX2+FMA+F16C, chosen by matmul.c.
 * Holds no state. Weights are dequantized in registers (wNN loaders); f32 accumulation with FMA.
 * S <= 4: one pass over each weight row against all S rows of x (decode reads W once).
 * S > 4: each chunk of rows is dequantized once to an f32 tile (per-thread scratch), then 4 rows of x
 * at a time run against the tile. Row-scaled formats accumulate q·x and scale the sum at the end. */
#include "matmul.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define T256 __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline))
#define ROWSCALED(f) ((f) == HB_INT8 || (f) == HB_INT4 || (f) == HB_INT2)

/* ================================ AVX-512 ================================ */
/* 16 values of row r from element i (i % 16 == 0, i + 16 <= I), unscaled */
T512 INL __m512 w16(const int fmt, const uint8_t *r, int i) {
  switch (fmt) {
  case HB_F32: return _mm512_loadu_ps((const float *)r + i);
  case HB_BF16:
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)r + i))), 16));
  case HB_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)r + i)));
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

/* 32 values from element i (i % 32 == 0 or int4 at any even i): int4 splits each of 16 bytes into
 * lo / hi nibble bytes and interleaves them back into element order before widening */
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

/* out[k] = Σ_i w(r,i)·x[k*I + i], k < ns; int4g applies group scales gsc, other formats are unscaled */
T512 INL void dot16(const int fmt, const int ns, const uint8_t *r, const float *gsc, int gs, int I,
                    const float *x, float *out) {
  __m512 a[4][2];
  float t[4] = { 0, 0, 0, 0 };
  for (int k = 0; k < 4; k++) a[k][0] = a[k][1] = _mm512_setzero_ps();
  int i = 0;
  const int G = fmt == HB_INT4G ? gs : I;
  for (int g = 0, g0 = 0; g0 < I; g++, g0 += G) {
    const int e = I - g0 < G ? I : g0 + G;
    const float sg = fmt == HB_INT4G ? gsc[g] : 1.0f;
    const __m512 vs = _mm512_set1_ps(sg);
    for (; i + 32 <= e; i += 32) {
      __m512 w0, w1;
      w32(fmt, r, i, &w0, &w1);
      if (fmt == HB_INT4G) { w0 = _mm512_mul_ps(w0, vs); w1 = _mm512_mul_ps(w1, vs); }
      for (int k = 0; k < ns; k++) {
        a[k][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + (size_t)k * I + i), a[k][0]);
        a[k][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + (size_t)k * I + i + 16), a[k][1]);
      }
    }
    for (; i + 16 <= e; i += 16) {
      __m512 w0 = w16(fmt, r, i);
      if (fmt == HB_INT4G) w0 = _mm512_mul_ps(w0, vs);
      for (int k = 0; k < ns; k++) a[k][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + (size_t)k * I + i), a[k][0]);
    }
    if (i < e && (fmt == HB_F32 || fmt == HB_BF16 || fmt == HB_F16)) {  /* masked tail */
      const __mmask16 mk = (__mmask16)((1u << (e - i)) - 1);
      __m512 w0;
      if (fmt == HB_F32) w0 = _mm512_maskz_loadu_ps(mk, (const float *)r + i);
      else {
        __m256i h = _mm256_maskz_loadu_epi16(mk, (const uint16_t *)r + i);
        w0 = fmt == HB_F16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
      }
      for (int k = 0; k < ns; k++)
        a[k][0] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(mk, x + (size_t)k * I + i), a[k][0]);
      i = e;
    }
    for (; i < e; i++) {  /* scalar tail */
      const float w = hb_mm_q(fmt, r, i) * sg;
      for (int k = 0; k < ns; k++) t[k] += w * x[(size_t)k * I + i];
    }
  }
  for (int k = 0; k < ns; k++) out[k] = _mm512_reduce_add_ps(_mm512_add_ps(a[k][0], a[k][1])) + t[k];
}

/* dot16 with ns (1..4) made a compile-time constant */
T512 INL void dot16n(const int fmt, int ns, const uint8_t *r, const float *gsc, int gs, int I, const float *x,
                  float *out) {
  switch (ns) {
  case 1: dot16(fmt, 1, r, gsc, gs, I, x, out); break;
  case 2: dot16(fmt, 2, r, gsc, gs, I, x, out); break;
  case 3: dot16(fmt, 3, r, gsc, gs, I, x, out); break;
  default: dot16(fmt, 4, r, gsc, gs, I, x, out); break;
  }
}

/* dst[I] = fully scaled row (q·s) */
T512 INL void deq16(const int fmt, const uint8_t *r, const float *sc, int gs, int I, float *dst) {
  const int G = fmt == HB_INT4G ? gs : I;
  int i = 0;
  for (int g = 0, g0 = 0; g0 < I; g++, g0 += G) {
    const int e = I - g0 < G ? I : g0 + G;
    const float s = fmt == HB_INT4G ? sc[g] : ROWSCALED(fmt) ? sc[0] : 1.0f;
    const __m512 vs = _mm512_set1_ps(s);
    for (; i + 32 <= e; i += 32) {
      __m512 w0, w1;
      w32(fmt, r, i, &w0, &w1);
      _mm512_storeu_ps(dst + i, _mm512_mul_ps(w0, vs));
      _mm512_storeu_ps(dst + i + 16, _mm512_mul_ps(w1, vs));
    }
    for (; i + 16 <= e; i += 16) _mm512_storeu_ps(dst + i, _mm512_mul_ps(w16(fmt, r, i), vs));
    for (; i < e; i++) dst[i] = hb_mm_q(fmt, r, i) * s;
  }
}

T512 INL void rows16(const int fmt, const hb_mm *m, int lo, int hi) {
  const int I = m->I, S = m->S, O = m->O;
  float out[4];
  float *tile = (S > 4 && fmt != HB_F32) ? hb_mm_scratch((size_t)(hi - lo) * I) : NULL;
  if (S <= 4 || (fmt != HB_F32 && !tile)) {  /* fused: dequantize in registers */
    for (int o = lo; o < hi; o++) {
      const uint8_t *r = hb_mm_row(m, o);
      const float *gsc = fmt == HB_INT4G ? m->sc + (size_t)o * m->ng : NULL;
      const float rs = ROWSCALED(fmt) ? m->sc[o] : 1.0f;
      for (int s0 = 0; s0 < S; s0 += 4) {
        const float *x = m->x + (size_t)s0 * I;
        const int ns = S - s0 < 4 ? S - s0 : 4;
        dot16n(fmt, ns, r, gsc, m->gs, I, x, out);
        for (int k = 0; k < ns; k++) m->y[(size_t)(s0 + k) * O + o] = out[k] * rs;
      }
    }
    return;
  }
  if (tile)
    for (int o = lo; o < hi; o++)
      deq16(fmt, hb_mm_row(m, o), fmt == HB_INT4G ? m->sc + (size_t)o * m->ng : m->sc ? m->sc + o : NULL,
            m->gs, I, tile + (size_t)(o - lo) * I);
  for (int s0 = 0; s0 < S; s0 += 4) {
    const float *x = m->x + (size_t)s0 * I;
    const int ns = S - s0 < 4 ? S - s0 : 4;
    for (int o = lo; o < hi; o++) {
      const uint8_t *r = tile ? (const uint8_t *)(tile + (size_t)(o - lo) * I) : hb_mm_row(m, o);
      dot16n(HB_F32, ns, r, NULL, 0, I, x, out);
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
  case HB_F32: return _mm256_loadu_ps((const float *)r + i);
  case HB_BF16:
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)r + i))), 16));
  case HB_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)r + i)));
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

T256 INL void dot8(const int fmt, const int ns, const uint8_t *r, const float *gsc, int gs, int I,
                   const float *x, float *out) {
  __m256 a[4][2];
  float t[4] = { 0, 0, 0, 0 };
  for (int k = 0; k < 4; k++) a[k][0] = a[k][1] = _mm256_setzero_ps();
  int i = 0;
  const int G = fmt == HB_INT4G ? gs : I;
  for (int g = 0, g0 = 0; g0 < I; g++, g0 += G) {
    const int e = I - g0 < G ? I : g0 + G;
    const float sg = fmt == HB_INT4G ? gsc[g] : 1.0f;
    const __m256 vs = _mm256_set1_ps(sg);
    for (; i + 16 <= e; i += 16) {
      __m256 w0, w1;
      w16x2(fmt, r, i, &w0, &w1);
      if (fmt == HB_INT4G) { w0 = _mm256_mul_ps(w0, vs); w1 = _mm256_mul_ps(w1, vs); }
      for (int k = 0; k < ns; k++) {
        a[k][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (size_t)k * I + i), a[k][0]);
        a[k][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + (size_t)k * I + i + 8), a[k][1]);
      }
    }
    for (; i + 8 <= e; i += 8) {
      __m256 w0 = w8(fmt, r, i);
      if (fmt == HB_INT4G) w0 = _mm256_mul_ps(w0, vs);
      for (int k = 0; k < ns; k++) a[k][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (size_t)k * I + i), a[k][0]);
    }
    for (; i < e; i++) {
      const float w = hb_mm_q(fmt, r, i) * sg;
      for (int k = 0; k < ns; k++) t[k] += w * x[(size_t)k * I + i];
    }
  }
  for (int k = 0; k < ns; k++) out[k] = hsum8(_mm256_add_ps(a[k][0], a[k][1])) + t[k];
}

/* dot8 with ns (1..4) made a compile-time constant */
T256 INL void dot8n(const int fmt, int ns, const uint8_t *r, const float *gsc, int gs, int I, const float *x,
                  float *out) {
  switch (ns) {
  case 1: dot8(fmt, 1, r, gsc, gs, I, x, out); break;
  case 2: dot8(fmt, 2, r, gsc, gs, I, x, out); break;
  case 3: dot8(fmt, 3, r, gsc, gs, I, x, out); break;
  default: dot8(fmt, 4, r, gsc, gs, I, x, out); break;
  }
}

T256 INL void deq8(const int fmt, const uint8_t *r, const float *sc, int gs, int I, float *dst) {
  const int G = fmt == HB_INT4G ? gs : I;
  int i = 0;
  for (int g = 0, g0 = 0; g0 < I; g++, g0 += G) {
    const int e = I - g0 < G ? I : g0 + G;
    const float s = fmt == HB_INT4G ? sc[g] : ROWSCALED(fmt) ? sc[0] : 1.0f;
    const __m256 vs = _mm256_set1_ps(s);
    for (; i + 16 <= e; i += 16) {
      __m256 w0, w1;
      w16x2(fmt, r, i, &w0, &w1);
      _mm256_storeu_ps(dst + i, _mm256_mul_ps(w0, vs));
      _mm256_storeu_ps(dst + i + 8, _mm256_mul_ps(w1, vs));
    }
    for (; i + 8 <= e; i += 8) _mm256_storeu_ps(dst + i, _mm256_mul_ps(w8(fmt, r, i), vs));
    for (; i < e; i++) dst[i] = hb_mm_q(fmt, r, i) * s;
  }
}

T256 INL void rows8(const int fmt, const hb_mm *m, int lo, int hi) {
  const int I = m->I, S = m->S, O = m->O;
  float out[4];
  float *tile = (S > 4 && fmt != HB_F32) ? hb_mm_scratch((size_t)(hi - lo) * I) : NULL;
  if (S <= 4 || (fmt != HB_F32 && !tile)) {
    for (int o = lo; o < hi; o++) {
      const uint8_t *r = hb_mm_row(m, o);
      const float *gsc = fmt == HB_INT4G ? m->sc + (size_t)o * m->ng : NULL;
      const float rs = ROWSCALED(fmt) ? m->sc[o] : 1.0f;
      for (int s0 = 0; s0 < S; s0 += 4) {
        const float *x = m->x + (size_t)s0 * I;
        const int ns = S - s0 < 4 ? S - s0 : 4;
        dot8n(fmt, ns, r, gsc, m->gs, I, x, out);
        for (int k = 0; k < ns; k++) m->y[(size_t)(s0 + k) * O + o] = out[k] * rs;
      }
    }
    return;
  }
  if (tile)
    for (int o = lo; o < hi; o++)
      deq8(fmt, hb_mm_row(m, o), fmt == HB_INT4G ? m->sc + (size_t)o * m->ng : m->sc ? m->sc + o : NULL,
           m->gs, I, tile + (size_t)(o - lo) * I);
  for (int s0 = 0; s0 < S; s0 += 4) {
    const float *x = m->x + (size_t)s0 * I;
    const int ns = S - s0 < 4 ? S - s0 : 4;
    for (int o = lo; o < hi; o++) {
      const uint8_t *r = tile ? (const uint8_t *)(tile + (size_t)(o - lo) * I) : hb_mm_row(m, o);
      dot8n(HB_F32, ns, r, NULL, 0, I, x, out);
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
