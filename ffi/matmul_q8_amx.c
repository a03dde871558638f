/* libhb fast-mode GEMMs on Intel AMX (Sapphire Rapids and later: TDPBSSD, 16 × 16 int32 tiles of 16 × 64-byte int8
 * operands), for batches of at least HB_Q8_AMX_S rows of x (prefill; numerics: matmul_q8.h, the same bits as the
 * scalar reference). Operand A is 16 weight rows × one 64-element k-step, B the same k-step of 16 rows of x in AMX's
 * VNNI order (tile row r, bytes 4m..4m+3 = elements 4r..4r+3 of x row m), so C[n][m] = Σ w[o+n]·x[m] over the k-step:
 *  - x's tiles (hb_q8x.qt) are built once per call, after quantization: per 16 rows of x (zero past S) and k-step j,
 *    1 KiB = a 16 × 16 dword transpose of the rows' 64 bytes of that k-step in the kernels' k order (natural for
 *    int8; for int4g, the 32 even then the 32 odd elements of the 64, as P4 and the nibble unpack give them);
 *  - int8 rows: A straight from W (row stride rowb), 2 × 2 tiles of C (32 weight rows × 32 rows of x) over all of
 *    I in int32 (exact: |isum| < 2^31 for I ≤ HB_Q8_MAXI), then the row epilogue ((float)isum · s[o]) · d[s];
 *  - int4g (gs a multiple of 64): 16 weight rows unpacked once to signed bytes (code − 8, one GFNI affine map per
 *    k-step) in a thread-local buffer, one C per group, each group's float step acc = fma((float)isum_g, s[o, g], acc)
 *    on C's rows (16 weight rows × 16 rows of x), four groups in flight on four C tiles; y = acc · d[s] after a
 *    16 × 16 transpose. (Measurements behind these choices: bench/README.md, "Thirteenth round".)
 * Rows past the last whole 16 (int4g) or 32 (int8) are left to the AVX-512 VNNI kernels. State: the thread-local
 * unpack and C buffers; every call loads its tile configuration and releases the tiles at its end. */
#include "matmul_q8.h"
#if HB_HAVE_AMX
#include "matmul_q8_x86.h"
#include <stdatomic.h>

#define TA __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,gfni,fma")))

static atomic_llong amx_rows;   /* weight rows done here, summed over calls (tests: the AMX path really ran) */
long long hb_q8_amx_rows(void) { return atomic_load(&amx_rows); }

typedef struct { uint8_t palette, start_row, rsv[14]; uint16_t colsb[16]; uint8_t rows[16]; } tilecfg;
/* every tile 16 rows × 64 bytes */
TA static void tiles_on(void) {
  tilecfg c;
  memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int i = 0; i < 8; i++) { c.colsb[i] = 64; c.rows[i] = 16; }
  _tile_loadconfig(&c);
}

/* 64 bytes of x row s at k-step j in the kernels' k order (layout NAT or P4) */
TA INL __m512i kstep(const hb_q8x *q, int s, int j) {
  const int8_t *r = q->qx + (size_t)s * q->Ip;
  if (q->layout != HB_Q8_P4) return _mm512_loadu_si512((const void *)(r + 64 * (size_t)j));
  const int8_t *b = r + 128 * (size_t)(j >> 1) + 32 * (j & 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b)), _mm256_loadu_si256((const __m256i *)(b + 64)), 1);
}

/* x tiles of token blocks [tb0, tb1) (see above; thread-safe for disjoint ranges) */
TA void hb_q8x_tiles(const hb_q8x *q, int tb0, int tb1) {
  const int nks = q->Ip / 64;
  for (int tb = tb0; tb < tb1; tb++)
    for (int j = 0; j < nks; j++) {
      __m512i r[16];
      for (int m = 0; m < 16; m++) r[m] = 16 * tb + m < q->S ? kstep(q, 16 * tb + m, j) : _mm512_setzero_si512();
      hb_transpose16(r);
      int8_t *t = q->qt + ((size_t)tb * nks + j) * 1024;
      for (int i = 0; i < 16; i++) _mm512_store_si512((void *)(t + 64 * i), r[i]);
    }
}

static void *buf_of(size_t bytes) {
  static _Thread_local void *buf;
  static _Thread_local size_t cap;
  return hb_grow(&buf, &cap, bytes);
}

/* the 16 × 16 floats r[n] lane m (weight row o + n, x row 16·tb + m) times d[s] into y [S, O] */
TA INL void store_t(const hb_q8 *m, __m512 acc[16], int o, int tb, int rowfmt) {
  __m512i r[16];
  for (int n = 0; n < 16; n++) r[n] = _mm512_castps_si512(acc[n]);
  hb_transpose16(r);
  const int ns = m->S - 16 * tb < 16 ? m->S - 16 * tb : 16;
  for (int k = 0; k < ns; k++) {
    const int s = 16 * tb + k;
    const __m512 v = _mm512_castsi512_ps(r[k]);
    /* int8: acc is already ((float)isum · s[o]) · d[s]; int4g: y = acc · d[s] */
    _mm512_storeu_ps(m->y + (size_t)s * m->O + o, rowfmt ? v : _mm512_mul_ps(v, _mm512_set1_ps(m->dx[s])));
  }
}

/* ---- int8 rows ---- */
/* C tile `c` (weight rows o..o+15 × token block tb) through `cb` -> y */
TA INL void i8_out(const hb_q8 *m, const int32_t *cb, int o, int tb) {
  const __m512 d = _mm512_maskz_loadu_ps((__mmask16)(m->S - 16 * tb >= 16 ? 0xffff : (1u << (m->S - 16 * tb)) - 1), m->dx + 16 * tb);
  __m512 acc[16];
  for (int n = 0; n < 16; n++) {
    const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)(cb + 16 * n))), _mm512_set1_ps(m->sc[o + n]));
    acc[n] = _mm512_mul_ps(f, d);
  }
  store_t(m, acc, o, tb, 1);
}

TA int hb_q8_gemm_i8_amx(const hb_q8 *m, int lo, int hi) {
  if (!m->qt || m->fmt != HB_INT8 || m->I % 64 || hi - lo < 32) return lo;
  int32_t *cb = buf_of(4 * 1024);
  if (!cb) return lo;
  const int nks = m->Ip / 64, kk = m->I / 64, ntb = (m->S + 15) / 16;
  const long rb = (long)m->rowb;
  tiles_on();
  int o = lo;
  for (; o + 32 <= hi; o += 32) {
    const int8_t *w0 = (const int8_t *)hb_q8_row(m, o), *w1 = (const int8_t *)hb_q8_row(m, o + 16);
    for (int tb = 0; tb < ntb; tb += 2) {
      const int8_t *b0 = m->qt + (size_t)tb * nks * 1024, *b1 = b0 + (size_t)nks * 1024;
      const int two = tb + 1 < ntb;
      _tile_zero(4); _tile_zero(5);
      if (two) { _tile_zero(6); _tile_zero(7); }
      for (int j = 0; j < kk; j++) {
        _tile_loadd(0, w0 + 64 * (size_t)j, rb);
        _tile_loadd(1, w1 + 64 * (size_t)j, rb);
        _tile_loadd(2, b0 + 1024 * (size_t)j, 64);
        _tile_dpbssd(4, 0, 2);
        _tile_dpbssd(5, 1, 2);
        if (two) {
          _tile_loadd(3, b1 + 1024 * (size_t)j, 64);
          _tile_dpbssd(6, 0, 3);
          _tile_dpbssd(7, 1, 3);
        }
      }
      _tile_stored(4, cb, 64); _tile_stored(5, cb + 256, 64);
      if (two) { _tile_stored(6, cb + 512, 64); _tile_stored(7, cb + 768, 64); }
      i8_out(m, cb, o, tb);
      i8_out(m, cb + 256, o + 16, tb);
      if (two) { i8_out(m, cb + 512, o, tb + 1); i8_out(m, cb + 768, o + 16, tb + 1); }
    }
  }
  _tile_release();
  atomic_fetch_add(&amx_rows, o - lo);
  return o;
}

/* ---- int4g ---- */
/* weight rows o..o+15 -> a[n·I + 64j ..]: k-step j of row n as signed bytes (code − 8) in the kernels' k order */
TA INL void unpack16(const hb_q8 *m, int o, int8_t *a) {
  /* a group's 32 packed bytes broadcast to both halves, then one GF(2) affine map per byte turns the low nibble (lower
   * half) or the high one (upper half) into code − 8 as a signed byte: bits 0-2 copied, bits 3-7 = NOT the nibble's
   * top bit (matrix row for result bit i in byte 7 − i; the constant 0xF8 flips bits 3-7) */
  const int I = m->I, nk = I / 64;
  const long long lo4 = 0x0102040808080808LL, hi4 = 0x1020408080808080LL;
  const __m512i mat = _mm512_setr_epi64(lo4, lo4, lo4, lo4, hi4, hi4, hi4, hi4);
  for (int n = 0; n < 16; n++) {
    const uint8_t *r = hb_q8_row(m, o + n);
    int8_t *d = a + (size_t)n * I;
    for (int j = 0; j < nk; j++) {
      const __m512i w = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(r + 32 * (size_t)j)));
      _mm512_store_si512((void *)(d + 64 * (size_t)j), _mm512_gf2p8affine_epi64_epi8(w, mat, 0xF8));
    }
  }
}

/* acc[n] += C row n (group g's integer sums) · s[o + n, g] */
TA INL void i4g_step(const hb_q8 *m, const int32_t *cb, int o, int g, __m512 acc[16]) {
  const float *sg = m->sc + (size_t)o * m->ng + g;
  for (int n = 0; n < 16; n++)
    acc[n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)(cb + 16 * n))), _mm512_set1_ps(sg[(size_t)n * m->ng]), acc[n]);
}

/* group g's integer sums into C tile c through A / B tiles ta / tb_ (the tile numbers constants) */
#define DOT(c, ta, tb_, g)                                                                  \
  do {                                                                                      \
    _tile_zero(c);                                                                          \
    for (int j = (g) * kpg; j < ((g) + 1) * kpg && j < nkk; j++) {                          \
      _tile_loadd(ta, a + 64 * (size_t)j, (long)I);                                         \
      _tile_loadd(tb_, bt + 1024 * (size_t)j, 64);                                          \
      _tile_dpbssd(c, ta, tb_);                                                             \
    }                                                                                       \
  } while (0)
/* C tile c through cb into acc (group g); first, group g's share of the next tile's rows prefetched into L2 (a few
 * lines per group: +2-4% over a burst per four groups) */
#define STEP(c, cb, g)                                                                     \
  do {                                                                                     \
    if (tb == 0)                                                                           \
      for (size_t q_ = (g) * per; q_ < ((g) + 1) * per && q_ < tbytes; q_ += 64)            \
        if (next + q_ < m->Wend) _mm_prefetch((const char *)(next + q_), _MM_HINT_T1);     \
    _tile_stored(c, cb, 64);                                                               \
    i4g_step(m, cb, o, g, acc);                                                            \
  } while (0)

TA int hb_q8_gemm_i4g_amx(const hb_q8 *m, int lo, int hi) {
  if (!m->qt || m->fmt != HB_INT4G || m->gs % 64 || m->I % 64 || hi - lo < 16) return lo;
  const int I = m->I, nks = m->Ip / 64, nkk = I / 64, kpg = m->gs / 64, ng = m->ng, ntb = (m->S + 15) / 16;
  uint8_t *buf = buf_of((size_t)16 * I + 4 * 1024);
  if (!buf) return lo;
  int8_t *a = (int8_t *)buf;
  int32_t *cb = (int32_t *)(buf + (size_t)16 * I);
  tiles_on();
  const size_t tbytes = 16 * m->rowb, per = (tbytes + ng - 1) / ng;   /* a tile's packed rows; their share per group */
  int o = lo;
  for (; o + 16 <= hi; o += 16) {
    unpack16(m, o, a);
    const uint8_t *next = hb_q8_row(m, o + 16);   /* the next tile's rows and scales, streamed in during this one */
    for (int c = 0; c < 16 * ng * 4; c += 64) _mm_prefetch((const char *)(m->sc + (size_t)(o + 16) * ng) + c, _MM_HINT_T0);
    for (int tb = 0; tb < ntb; tb++) {
      const int8_t *bt = m->qt + (size_t)tb * nks * 1024;
      __m512 acc[16];
      for (int n = 0; n < 16; n++) acc[n] = _mm512_setzero_ps();
      /* four groups in flight on C tiles 4..7, each stored and stepped while the next pair multiplies: the tiles
       * are not renamed, so one C per group, reused at once, would wait on its own store every time */
      DOT(4, 0, 1, 0);
      if (ng > 1) DOT(5, 2, 3, 1);
      for (int g = 0; g < ng; g += 4) {
        if (g + 2 < ng) DOT(6, 0, 1, g + 2);
        if (g + 3 < ng) DOT(7, 2, 3, g + 3);
        STEP(4, cb, g);
        if (g + 1 < ng) STEP(5, cb + 256, g + 1);
        if (g + 4 < ng) DOT(4, 0, 1, g + 4);
        if (g + 5 < ng) DOT(5, 2, 3, g + 5);
        if (g + 2 < ng) STEP(6, cb + 512, g + 2);
        if (g + 3 < ng) STEP(7, cb + 768, g + 3);
      }
      store_t(m, acc, o, tb, 0);
    }
  }
  _tile_release();
  atomic_fetch_add(&amx_rows, o - lo);
  return o;
}
#undef DOT
#undef STEP
#else   /* no AMX in this build: hb_q8x_amx never hands out tiles */
long long hb_q8_amx_rows(void) { return 0; }
void hb_q8x_tiles(const hb_q8x *q, int tb0, int tb1) { (void)q; (void)tb0; (void)tb1; }
#endif
