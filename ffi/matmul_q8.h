/* libhb fast-mode matmul internals shared by matmul_q8.c (x quantization, scalar reference, dispatch)
 * and the SIMD files (matmul_q8_x86.c, matmul_q8_xq_x86.c, matmul_q8_avxvnni.c, matmul_q8_neon.c). Holds no state.
 *
 * Fast mode: each row s of x is quantized to int8, q = rint(x·127/amax) (half to even), d[s] = amax/127.
 * Every kernel computes the same numbers, bit for bit, at every SIMD level and whatever S:
 *  - integer dot products are exact (no saturation: operand ranges are chosen for that, I ≤ HB_Q8_MAXI);
 *  - row formats (int8, int4, int2):  y = ((float)Σ_i q_w,i·q_x,i · s[o]) · d[s];
 *  - int4g: one float step per group g of gs elements (gs ≥ 8 a power of two; the row's last group may be
 *    shorter): isum_g = Σ_{i∈g} q_w,i·q_x,i exactly in int32, then acc = fma((float)isum_g, s[o, g], acc) for g
 *    ascending from acc = 0 (fused: one rounding; the scalar reference calls fmaf); y = acc · d[s]. (One step
 *    per group, not per 8 elements: the prefill GEMM, with 16 weight rows in a vector's lanes, pays one convert
 *    and one FMA per gs/4 vpdpbusd; the decode tiles reduce several rows' lanes together before their step.)
 * SIMD kernels read the activations in a per-format layout that matches how packed weight bytes unpack:
 *  - int8: natural order;
 *  - int4 / int4g: per 128-element block, the 64 even elements then the 64 odd ones;
 *  - int2: per 256-element block, elements ≡ 0 (mod 4), then ≡ 1, ≡ 2, ≡ 3 (64 each).
 * Unsigned weight codes (nibble, 2-bit field) are used as is; the offset (−8 or −2 times Σ q_x) is added
 * back exactly: per segment for int4g (`corr`), per row for int4/int2 (`xsum`). */
#ifndef HB_MATMUL_Q8_H
#define HB_MATMUL_Q8_H
#include "hb.h"
#include <string.h>

#define HB_Q8_MAXI 65536   /* longer rows take the exact path (int32 lanes could overflow) */
#define HB_Q8_PAD 256      /* x rows are padded with zeros to a multiple of this */
#define HB_Q8_GEMM_S 16    /* int8 batches of at least this many rows take the packed-panel GEMM (AVX-512 VNNI, AVX-VNNI) */
#define HB_Q8_PANEL 32     /* weight rows per panel of that GEMM (a multiple of the AVX-VNNI one's 16) */
#define HB_Q8_I4G_GEMM_S 4 /* int4g batches (gs ≥ 32) of at least this many rows take its panel GEMM (AVX-512 VNNI, AVX-VNNI) */
#define HB_Q8_AMX_S 6      /* int8 and int4g batches of at least this many rows take the AMX GEMMs (matmul_q8_amx.c) */

typedef struct {
  int fmt, gs, ng, O, I, S;
  int Ip;                  /* I rounded up to HB_Q8_PAD: the row stride of qx */
  const uint8_t *W;        /* packed W [O, rowb] */
  const uint8_t *Wend;     /* W + O·rowb: software prefetches go on into Wnext from there */
  const uint8_t *Wnext;    /* the weights the same thread likely runs next (hb_matmul_many's next matrix), nextb bytes */
  size_t nextb;            /* of them (0: none) */
  size_t rowb;
  const float *sc;         /* [O] or [O, ng] */
  const int8_t *qx;        /* [S, Ip] quantized x (layout: natural for scalar, see above for SIMD) */
  const int32_t *corr;     /* int4g: [S, Ip/8] −8·Σ q_x over each 8-element segment (natural index) */
  const int64_t *xsum;     /* [S] Σ q_x over the row */
  const float *dx;         /* [S] amax/127 (NaN when the row held a non-finite value) */
  const int8_t *qt;        /* AMX: x's tiles [⌈S/16⌉, Ip/64, 1024] (matmul_q8_amx.c), or NULL */
  float *y;                /* [S, O] */
} hb_q8;

typedef void (*hb_q8_rows_fn)(const hb_q8 *m, int lo, int hi);

/* Quantized activations of S rows in one layout (reusable by several matrices of the same layout). */
enum { HB_Q8_NAT = 0 /* natural */, HB_Q8_P4 = 2, HB_Q8_P2 = 3 };
typedef struct { int8_t *qx; int32_t *corr; int64_t *xsum; float *dx; int8_t *qt; int I, Ip, S, layout; } hb_q8x;

/* 1 when W (fmt, scales, gs, I) can take the fast path; 0 = use the exact kernels */
int hb_q8_ok(int fmt, const void *W, const float *scales, int gs, int I);
/* layout and row kernel for fmt at the SIMD level in use (ref: the scalar reference) */
int hb_q8_layout(int fmt, int ref);
hb_q8_rows_fn hb_q8_kernel(int fmt, int ref);
/* scratch bytes for S quantized rows of length I, and the quantization into such a buffer
 * (x rows at stride xstride floats) */
size_t hb_q8x_bytes(int I, int S);
void hb_q8x_quant(hb_q8x *q, void *buf, int layout, int ref, const float *x, size_t xstride, int I, int S);
/* the same in two steps: init (pointers only), then rows [s0, s1) (thread-safe for disjoint ranges) */
void hb_q8x_init(hb_q8x *q, void *buf, int layout, int I, int S);
void hb_q8x_quant_rows(hb_q8x *q, int ref, const float *x, size_t xstride, const int32_t *idx, int s0, int s1);
/* one row x [n] to int8 in natural order, as the activations above (the same bits at every level); returns
 * amax/127, NaN when the row held a non-finite value (also used by dsa.c's fast-mode indexer) */
float hb_q8_quant(const float *x, int n, int8_t *q);
/* AMX: point q->qt at its space (after hb_q8x_init) when the AMX GEMMs can use it (level, S, layout) and return
 * the number of 16-row blocks of x to tile (0: qt stays NULL); then hb_q8x_tiles fills blocks [tb0, tb1) once the
 * rows are quantized (thread-safe for disjoint ranges). hb_q8_amx_rows: weight rows the AMX GEMMs have done. */
int hb_q8x_amx(hb_q8x *q);
void hb_q8x_tiles(const hb_q8x *q, int tb0, int tb1);
long long hb_q8_amx_rows(void);
/* m for W [O,I] · (quantized x) -> y [S,O]; hb_q8_wbytes: the bytes of W and scales it reads */
int64_t hb_q8_wbytes(int fmt, int O, int I, int gs);
void hb_q8_bind(hb_q8 *m, int fmt, const void *W, const float *scales, int gs, int O, int I, const hb_q8x *q, float *y);
/* the calling thread's q8 scratch (grows, never shrinks); NULL when out of memory */
void *hb_q8_scratch(size_t bytes);
/* rows per pool chunk for a matrix of O rows of rowb bytes against S rows (O = run on the calling thread) */
int hb_mm_chunk_rows(int O, size_t rowb, int S);
void hb_q8_rows_ref(const hb_q8 *m, int lo, int hi);
/* int8 rows from a column-quad copy of W [O, I] (O % 16 == 0, I % 4 == 0): cols[((o >> 4)·(I/4) + q)·64 + (o & 15)·4 + t]
 * = W[o, 4q + t] ^ 0x80 (16 rows at a time, their quads in order: one sequential stream), so one vpdpbusd gives 16 rows'
 * partial sums with no horizontal reduction (short rows: MLA's W_K,hᵀ of 64 columns).
 * y[k·yRow + o] for the q->S rows of x: the same integer sums and epilogue as the row kernels, so the same bits.
 * hb_q8_cols_kernel: the kernel at the SIMD level in use, or NULL (then the row kernels run) */
typedef void (*hb_q8_cols_fn)(const uint8_t *cols, const float *sc, int O, int I, const hb_q8x *q, float *y, size_t yRow);
hb_q8_cols_fn hb_q8_cols_kernel(void);
#if defined(__x86_64__) || defined(__i386__)
void hb_q8_rows_avx2(const hb_q8 *m, int lo, int hi);
void hb_q8_rows_avxvnni(const hb_q8 *m, int lo, int hi);
void hb_q8_rows_avx512(const hb_q8 *m, int lo, int hi);
void hb_q8_rows_vnni(const hb_q8 *m, int lo, int hi);
void hb_q8_rows_i4g_vnni(const hb_q8 *m, int lo, int hi);   /* int4g at AVX-512 VNNI (matmul_q8_i4g_x86.c) */
int hb_q8_gemm_i4g_vnni(const hb_q8 *m, int lo, int hi);     /* its panel GEMM: rows [lo, hi) in whole panels, returns the first left */
int hb_q8_gemm_i4g_avxvnni(const hb_q8 *m, int lo, int hi);  /* the same at AVX-VNNI, panels of 16 rows (matmul_q8_i4g_gemm_avxvnni.c) */
int hb_q8_dec1_i4g_avxvnni(const hb_q8 *m, int lo, int hi);  /* 1-4 rows of x, gs = 64, whole tiles of 8 rows; returns the first row left */
/* int8 rows [lo, hi) in whole panels (32 rows; 16 at AVX-VNNI) when S >= HB_Q8_GEMM_S; returns the first row
 * left undone (matmul_q8_gemm_x86.c) */
int hb_q8_gemm_i8_vnni(const hb_q8 *m, int lo, int hi);
int hb_q8_gemm_i8_avxvnni(const hb_q8 *m, int lo, int hi);
/* the AMX GEMMs (matmul_q8_amx.c): rows [lo, hi) in whole 32-row (int8) / 16-row (int4g) blocks when m->qt is set */
int hb_q8_gemm_i8_amx(const hb_q8 *m, int lo, int hi);
int hb_q8_gemm_i4g_amx(const hb_q8 *m, int lo, int hi);
void hb_q8_cols_vnni(const uint8_t *cols, const float *sc, int O, int I, const hb_q8x *q, float *y, size_t yRow);
#endif
#if defined(__aarch64__)
void hb_q8_rows_dotprod(const hb_q8 *m, int lo, int hi);
#endif

static inline const uint8_t *hb_q8_row(const hb_q8 *m, int o) { return m->W + (size_t)o * m->rowb; }

/* the shared epilogues (plain statements: no contraction into FMA under any compiler) */
static inline float hb_q8_rowfmt_out(int64_t isum, float s, float d) {
  float f = (float)isum;
  f = f * s;
  return f * d;
}
#endif
