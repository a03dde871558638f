/* libhb fast-mode matmul: W [O,I] (fmt 1..4) · x [S,I] -> y [S,O] with x quantized to int8 per row
 * (absmax/127) and exact integer dot products (numerics and layouts: matmul_q8.h).
 * Owns: the per-call quantization of x (once per call, into the calling thread's scratch), the scalar
 * reference kernel, the dispatch (VNNI / AVX-512 / AVX2 / NEON dotprod / scalar) and the parallel split.
 * Float formats (f32, bf16, f16), rows longer than HB_Q8_MAXI and bad calls take the exact path
 * (hb_matmul), so every format is accepted. State: one thread-local scratch buffer per thread. */
#include "matmul_q8.h"
#include "matmul.h" /* hb_mm_row_bytes */
#include <math.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
float hb_q8_amax_avx2(const float *x, int n, int *bad);
void hb_q8_round_avx2(const float *x, int n, float id, int8_t *q);
float hb_q8_amax_avx512(const float *x, int n, int *bad);
void hb_q8_round_avx512(const float *x, int n, float id, int8_t *q);
int64_t hb_q8_pack_avx512(const int8_t *tmp, int nb, int layout, int8_t *q, int32_t *corr);
#endif

/* weight bytes one call reads: packed rows + scales */
int64_t hb_q8_wbytes(int fmt, int O, int I, int gs) {
  const int ng = fmt == HB_INT4G ? (I + gs - 1) / gs : 1;
  return (int64_t)O * (int64_t)hb_mm_row_bytes(fmt, I) + 4 * (int64_t)O * ng;
}

/* ---- scalar reference (natural x layout) ---- */
static inline int wq(int fmt, const uint8_t *r, int i) {
  switch (fmt) {
  case HB_INT8: return (int8_t)r[i];
  case HB_INT2: return (int)((r[i >> 2] >> ((i & 3) * 2)) & 3) - 2;
  default: return (int)((r[i >> 1] >> ((i & 1) * 4)) & 15) - 8;
  }
}
#define INL static inline __attribute__((always_inline))
INL void rows_ref(const int fmt, const hb_q8 *m, int lo, int hi) {
  const int I = m->I, S = m->S, O = m->O;
  for (int o = lo; o < hi; o++) {
    const uint8_t *r = hb_q8_row(m, o);
    for (int s = 0; s < S; s++) {
      const int8_t *q = m->qx + (size_t)s * m->Ip;
      float out;
      if (fmt == HB_INT4G) {
        const float *sg = m->sc + (size_t)o * m->ng;
        float acc = 0.0f;
        for (int g = 0, i0 = 0; i0 < I; g++, i0 += m->gs) {
          int32_t isum = 0;
          for (int i = i0; i < I && i < i0 + m->gs; i++) isum += wq(fmt, r, i) * q[i];
          acc = fmaf((float)isum, sg[g], acc);
        }
        out = acc * m->dx[s];
      } else {
        int64_t isum = 0;
        for (int i = 0; i < I; i++) isum += wq(fmt, r, i) * q[i];
        out = hb_q8_rowfmt_out(isum, m->sc[o], m->dx[s]);
      }
      m->y[(size_t)s * O + o] = out;
    }
  }
}
static void ref_i8(const hb_q8 *m, int lo, int hi) { rows_ref(HB_INT8, m, lo, hi); }
static void ref_i4(const hb_q8 *m, int lo, int hi) { rows_ref(HB_INT4, m, lo, hi); }
static void ref_i2(const hb_q8 *m, int lo, int hi) { rows_ref(HB_INT2, m, lo, hi); }
static void ref_i4g(const hb_q8 *m, int lo, int hi) { rows_ref(HB_INT4G, m, lo, hi); }
void hb_q8_rows_ref(const hb_q8 *m, int lo, int hi) {
  switch (m->fmt) {
  case HB_INT8: ref_i8(m, lo, hi); break;
  case HB_INT4: ref_i4(m, lo, hi); break;
  case HB_INT2: ref_i2(m, lo, hi); break;
  default: ref_i4g(m, lo, hi); break;
  }
}

/* ---- quantization of x ---- */
static float amax_ref(const float *x, int n, int *bad) {
  float a = 0.0f;
  for (int i = 0; i < n; i++) {
    const float v = fabsf(x[i]);
    if (!(v <= 3.40282347e38f)) *bad = 1;   /* inf or NaN */
    else if (v > a) a = v;
  }
  return a;
}
/* q = rint(x·id), half to even (the 1.5·2^23 trick rounds like cvtps2dq), |x·id| ≤ 127 by construction */
static void round_ref(const float *x, int n, float id, int8_t *q) {
  for (int i = 0; i < n; i++) {
    float v = x[i] * id;
    v = (v + 12582912.0f) - 12582912.0f;
    v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
    q[i] = (int8_t)(v == v ? (int)v : 0);
  }
}

static inline int layout_pos(int layout, int i) {
  if (layout == HB_Q8_P4) return (i & ~127) + ((i & 1) << 6) + ((i & 127) >> 1);
  if (layout == HB_Q8_P2) return (i & ~255) + ((i & 3) << 6) + ((i & 255) >> 2);
  return i;
}

/* x [n] -> q [n] in natural order; returns d = amax/127 (NaN when the row held a non-finite value) */
static float quant_nat(const float *x, int n, int lvl, int8_t *q) {
  int bad = 0;
  float a;
  (void)lvl;
#if defined(__x86_64__) || defined(__i386__)
  if (lvl >= HB_AVX512) a = hb_q8_amax_avx512(x, n, &bad);
  else if (lvl >= HB_AVX2) a = hb_q8_amax_avx2(x, n, &bad);
  else
#endif
    a = amax_ref(x, n, &bad);
  const float id = a > 0.0f && !bad ? 127.0f / a : 0.0f;
#if defined(__x86_64__) || defined(__i386__)
  if (lvl >= HB_AVX512) hb_q8_round_avx512(x, n, id, q);
  else if (lvl >= HB_AVX2) hb_q8_round_avx2(x, n, id, q);
  else
#endif
    round_ref(x, n, id, q);
  return bad ? NAN : a / 127.0f;
}
float hb_q8_quant(const float *x, int n, int8_t *q) { return quant_nat(x, n, hb_simd_level(), q); }

/* one row: q (layout), corr (P4 only), xsum, d; tmp holds I int8 */
static void quant_row(const float *x, int I, int Ip, int layout, int lvl, int8_t *q, int32_t *corr, int64_t *xsum,
                      float *d, int8_t *tmp) {
  *d = quant_nat(x, I, lvl, tmp);
  /* whole 128-element blocks with SIMD (AVX-512), the rest (and every int2 row) element by element */
  int i0 = 0;
  int64_t sum = 0;
#if defined(__x86_64__) || defined(__i386__)
  if (lvl >= HB_AVX512 && layout != HB_Q8_P2 && I >= 128) {
    i0 = I / 128 * 128;
    sum = hb_q8_pack_avx512(tmp, I / 128, layout, q, corr);
  }
#endif
  if (layout == HB_Q8_NAT) {
    for (int i = i0; i < Ip; i++) {
      const int v = i < I ? tmp[i] : 0;
      sum += v;
      q[i] = (int8_t)v;
    }
  } else {
    memset(q + i0, 0, (size_t)(Ip - i0));
    if (corr) memset(corr + i0 / 8, 0, (size_t)(Ip - i0) / 8 * sizeof *corr);
    for (int i = i0; i < I; i++) {
      sum += tmp[i];
      q[layout_pos(layout, i)] = tmp[i];
      if (corr) corr[i >> 3] -= 8 * tmp[i];
    }
  }
  *xsum = sum;
}

void *hb_q8_scratch(size_t bytes) {
  static _Thread_local void *buf;
  static _Thread_local size_t cap;
  return hb_grow(&buf, &cap, bytes);
}

int hb_q8_ok(int fmt, const void *W, const float *scales, int gs, int I) {
  if (fmt < HB_INT8 || fmt > HB_INT4G || !W || !scales || I <= 0 || I > HB_Q8_MAXI) return 0;
  return fmt != HB_INT4G || (gs >= 8 && (gs & (gs - 1)) == 0);
}

static int simd_kernels(int ref) {
  if (ref) return 0;
#if defined(__x86_64__) || defined(__i386__)
  return hb_simd_level() >= HB_AVX2;
#elif defined(__aarch64__)
  extern int hb_cpu_dotprod;
  return hb_simd_level() == HB_NEON && hb_cpu_dotprod;
#else
  return 0;
#endif
}

int hb_q8_layout(int fmt, int ref) {
  if (!simd_kernels(ref)) return HB_Q8_NAT;
  if (fmt == HB_INT4 || fmt == HB_INT4G) return HB_Q8_P4;
  if (fmt == HB_INT2) return HB_Q8_P2;
  return HB_Q8_NAT;
}

hb_q8_cols_fn hb_q8_cols_kernel(void) {
#if defined(__x86_64__) || defined(__i386__)
  return simd_kernels(0) && hb_simd_level() >= HB_AVX512VNNI ? hb_q8_cols_vnni : NULL;
#else
  return NULL;
#endif
}

hb_q8_rows_fn hb_q8_kernel(int fmt, int ref) {
  (void)fmt;
  if (!simd_kernels(ref)) return hb_q8_rows_ref;
#if defined(__x86_64__) || defined(__i386__)
  const int lvl = hb_simd_level();
#if HB_HAVE_AVXVNNI
  if (lvl == HB_AVXVNNI) return hb_q8_rows_avxvnni;
#endif
  return lvl >= HB_AVX512VNNI ? hb_q8_rows_vnni : lvl >= HB_AVX512 ? hb_q8_rows_avx512 : hb_q8_rows_avx2;
#elif defined(__aarch64__)
  return hb_q8_rows_dotprod;
#else
  return hb_q8_rows_ref;
#endif
}

static int padded(int I) { return (I + HB_Q8_PAD - 1) / HB_Q8_PAD * HB_Q8_PAD; }

/* qx, corr, xsum and dx; a multiple of 64: blocks placed one after another (hb_matmul_many) keep qx on cache-line
 * boundaries, so no activation load of the kernels straddles two lines */
static size_t base_bytes(int I, int S) {
  return ((size_t)S * ((size_t)padded(I) * 3 / 2 + 12) + (size_t)I + 64 + 63) & ~(size_t)63;
}
/* the AMX tiles of x after them (reserved whenever a batch is large enough to take them) */
static int tile_blocks(int S) { return HB_HAVE_AMX && S >= HB_Q8_AMX_S ? (S + 15) / 16 : 0; }
size_t hb_q8x_bytes(int I, int S) { return base_bytes(I, S) + (size_t)tile_blocks(S) * 16 * padded(I); }

int hb_q8x_amx(hb_q8x *q) {
  const int n = tile_blocks(q->S);
  if (!n || hb_simd_level() < HB_AMX || (q->layout != HB_Q8_NAT && q->layout != HB_Q8_P4)) return 0;
  q->qt = (int8_t *)q->qx + base_bytes(q->I, q->S);
  return n;
}

/* point q at buf (hb_q8x_bytes(I, S) bytes) for S rows in `layout`; nothing is quantized yet */
void hb_q8x_init(hb_q8x *q, void *buf, int layout, int I, int S) {
  const int Ip = padded(I);
  const size_t qb = (size_t)S * Ip, cb = (size_t)S * (Ip / 8) * 4;
  uint8_t *b = buf;
  q->qx = (int8_t *)b;
  q->corr = layout == HB_Q8_P4 ? (int32_t *)(b + qb) : NULL;
  q->xsum = (int64_t *)(b + ((qb + cb + 7) & ~(size_t)7));
  q->dx = (float *)(q->xsum + S);
  q->qt = NULL;
  q->I = I; q->Ip = Ip; q->S = S; q->layout = layout;
}

/* quantize rows [s0, s1) of x (row s at x + (idx ? idx[s] : s)·xstride floats) into q; safe to run on
 * several threads for disjoint row ranges (the row scratch is thread-local) */
void hb_q8x_quant_rows(hb_q8x *q, int ref, const float *x, size_t xstride, const int32_t *idx, int s0, int s1) {
  static _Thread_local int8_t *tmp;
  static _Thread_local int cap;
  if (q->I > cap) {
    free(tmp);
    tmp = malloc((size_t)q->I + 64);
    cap = tmp ? q->I : 0;
  }
  const int lvl = ref ? HB_SCALAR : hb_simd_level();
  for (int s = s0; s < s1; s++) {
    if (!tmp) { q->dx[s] = NAN; memset(q->qx + (size_t)s * q->Ip, 0, (size_t)q->Ip); q->xsum[s] = 0; continue; }
    quant_row(x + (size_t)(idx ? idx[s] : s) * xstride, q->I, q->Ip, q->layout, lvl, q->qx + (size_t)s * q->Ip,
              q->corr ? q->corr + (size_t)s * (q->Ip / 8) : NULL, q->xsum + s, q->dx + s, tmp);
  }
}

void hb_q8x_quant(hb_q8x *q, void *buf, int layout, int ref, const float *x, size_t xstride, int I, int S) {
  hb_q8x_init(q, buf, layout, I, S);
  hb_q8x_quant_rows(q, ref, x, xstride, NULL, 0, S);
}

void hb_q8_bind(hb_q8 *m, int fmt, const void *W, const float *scales, int gs, int O, int I, const hb_q8x *q, float *y) {
  const size_t rowb = hb_mm_row_bytes(fmt, I);
  *m = (hb_q8){ .fmt = fmt, .gs = gs, .ng = fmt == HB_INT4G ? (I + gs - 1) / gs : 1, .O = O, .I = I, .S = q->S,
                .Ip = q->Ip, .W = W, .Wend = (const uint8_t *)W + (size_t)O * rowb, .rowb = rowb, .sc = scales,
                .qx = q->qx, .corr = q->corr, .xsum = q->xsum, .dx = q->dx, .qt = q->qt, .y = y };
}

/* rows per claimed chunk: everything on the calling thread for small matrices (a pool wake-up costs more
 * than it saves), else ~8 chunks per thread (≤ 256 rows) for S ≤ 4 and ~32 KiB of weights per chunk for
 * larger S (~128 KiB, ≤ 1024 rows, on the AMX path, whose chunks start with a cold tile: +7% on prefill's expert
 * calls; whole 32-row panels of the GEMMs from HB_Q8_I4G_GEMM_S rows, else whole 4-row tiles of int4g);
 * never more than an even share per thread */
int hb_mm_chunk_rows(int O, size_t rowb, int S) {
  const int nt = hb_nthreads(), amx = S >= HB_Q8_AMX_S && hb_simd_level() >= HB_AMX;
  if ((size_t)O * rowb < 49152 || nt <= 1) return O;
  int c;
  if (S <= 4) c = O / (nt * 8);                       /* decode: every chunk costs two shared atomics */
  else c = (int)((amx ? 131072 : 32768) / (rowb ? rowb : 1));
  const int most = S <= 4 ? 256 : amx ? 1024 : 64;
  if (c < 1) c = 1;
  if (c > most) c = most;
  if (S >= HB_Q8_I4G_GEMM_S) c = (c + HB_Q8_PANEL - 1) / HB_Q8_PANEL * HB_Q8_PANEL;   /* whole panels of the GEMMs */
  else if (c > 4) c &= ~3;                                                           /* int4g's 4-row tiles */
  const int share = (O + nt - 1) / nt;
  return c > share ? share : c;
}

typedef struct { const hb_q8 *m; hb_q8_rows_fn fn; } q8_job;
static void q8_task(void *c, int lo, int hi) {
  const q8_job *j = c;
  hb_prefetch_head(hb_q8_row(j->m, lo), (size_t)(hi - lo) * j->m->rowb);
  j->fn(j->m, lo, hi);
}

typedef struct { hb_q8x *q; int ref; const float *x; } quant_job;
static void quant_task(void *c, int lo, int hi) {
  const quant_job *j = c;
  hb_q8x_quant_rows(j->q, j->ref, j->x, (size_t)j->q->I, NULL, lo, hi);
}
static void tiles_task(void *c, int lo, int hi) { hb_q8x_tiles(c, lo, hi); }

static void q8_call(int ref, int fmt, const void *W, const float *scales, int gs, int O, int I, const float *x,
                    int S, float *y) {
  void *buf = O > 0 && S > 0 && y && x && hb_q8_ok(fmt, W, scales, gs, I) ? hb_q8_scratch(hb_q8x_bytes(I, S)) : NULL;
  if (!buf) {
    hb_matmul(fmt, W, scales, gs, O, I, x, S, y);   /* exact path (float format, bad call, ...) */
    return;
  }
  hb_q8x q;
  hb_q8x_init(&q, buf, hb_q8_layout(fmt, ref), I, S);
  quant_job qj = { &q, ref, x };
  hb_parallel_for(S, (size_t)S * I < 65536 ? S : 8, quant_task, &qj);   /* rows are independent: prefill's on the pool */
  const int ntb = ref ? 0 : hb_q8x_amx(&q);
  if (ntb) hb_parallel_for(ntb, 1, tiles_task, &q);
  hb_q8 m;
  hb_q8_bind(&m, fmt, W, scales, gs, O, I, &q, y);
  hb_wbytes_add(hb_q8_wbytes(fmt, O, I, gs));
  q8_job j = { &m, hb_q8_kernel(fmt, ref) };
  (S < HB_Q8_GEMM_S ? hb_parallel_spans : hb_parallel_for)(O, hb_mm_chunk_rows(O, m.rowb, S), q8_task, &j);   /* as hb_matmul_many */
}

/* W [O,I] (fmt) · x [S,I] -> y [S,O], fast mode (exact for float formats) */
void hb_matmul_q8(int fmt, const void *W, const float *scales, int gs, int O, int I, const float *x, int S, float *y) {
  q8_call(0, fmt, W, scales, gs, O, I, x, S, y);
}
/* the same with the scalar reference kernel and quantizer, whatever the SIMD level (tests) */
void hb_matmul_q8_ref(int fmt, const void *W, const float *scales, int gs, int O, int I, const float *x, int S,
                      float *y) {
  q8_call(1, fmt, W, scales, gs, O, I, x, S, y);
}
