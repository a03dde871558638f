/* libhb: shared declarations of the native kernel library (loaded by src/native/hb.ts via bun:ffi).
 * Owns: the persistent thread pool (pool.c) and the SIMD level chosen at run time (cpu.c).
 * Every kernel family lives in its own file with a scalar reference and a tail loop. */
#ifndef HB_H
#define HB_H
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

/* ---- thread pool (pool.c) ---- */
int hb_init(int nthreads);                 /* 0 = physical cores; returns pool size (>=1) */
int hb_nthreads(void);
void hb_pool_stats(double *out);           /* [3]: the width jobs run at now (pool_width.h), jobs run narrowed, drops */
void hb_pool_adapt(int on);                /* width chosen (1) or every thread (0), over HB_POOL_ADAPT: kernel benchmarks */
int hb_pool_width_check(void);             /* pool_width.c's scripted self-check: wrong states (0: right) */
void hb_pool_stats(double *out);           /* [3]: the width jobs run at now, jobs run narrowed, drops (pool.c) */
/* Run fn(ctx, lo, hi) over [0, n) in dynamically claimed chunks of `chunk` items, on every pool
 * thread and the caller; returns when all chunks are done. Safe to call with n == 0. */
typedef void (*hb_task_fn)(void *ctx, int lo, int hi);
void hb_parallel_for(int n, int chunk, hb_task_fn fn, void *ctx);
/* the same with one contiguous span of [0, n) per thread, run front to back; a thread done with its own takes the back
 * half of the fullest span (chunks start at multiples of chunk): weight streams of decode (pool.c) */
void hb_parallel_spans(int n, int chunk, hb_task_fn fn, void *ctx);
/* hb_parallel_for on every pool thread whatever the width (pool_width.h) the other jobs run at: the bandwidth probe */
void hb_parallel_every(int n, int chunk, hb_task_fn fn, void *ctx);

/* ---- SIMD dispatch (cpu.c) ---- */
enum { HB_SCALAR = 0, HB_NEON = 1, HB_AVX2 = 2, HB_AVXVNNI = 3, HB_AVX512 = 4, HB_AVX512VNNI = 5, HB_AMX = 6 };
/* compilers that know the AVX-VNNI intrinsics (GCC 11, clang 12); older ones build libhb without that level */
#if (defined(__x86_64__) || defined(__i386__)) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define HB_HAVE_AVXVNNI 1
#else
#define HB_HAVE_AVXVNNI 0
#endif
/* AMX (AVX-512 VNNI plus TDPBSSD tiles, for the prefill GEMMs): GCC 11 / clang 12 on x86-64 Linux, where the OS
 * hands out the tile state through arch_prctl */
#if defined(__x86_64__) && defined(__linux__) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define HB_HAVE_AMX 1
#else
#define HB_HAVE_AMX 0
#endif
int hb_simd_level(void);                   /* level in use */
const char *hb_simd_name(void);
int hb_simd_force(int best);               /* 0 = force scalar, 1 = best available;
                                              HB_AVX2.. = cap at that level (tests); returns level */
double hb_thread_cpu_us(void);             /* the calling thread's CPU time (us; time descheduled not counted) */

/* how far ahead of their loads the weight-streaming kernels prefetch (bytes): 6144 streamed int8 matrices
 * from memory 5-11% faster than 4096 or 8192 at 2 threads (int4g experts: the same within noise) */
#define HB_PF_AHEAD 6144
/* Start streaming the first min(n, HB_PF_AHEAD) bytes at p now: the head of a chunk of n bytes of weight
 * rows, which the kernels' software prefetch never covers, so a cold chunk would otherwise begin with one
 * demand miss after another. */
static inline void hb_prefetch_head(const void *p, size_t n) {
  if (n > HB_PF_AHEAD) n = HB_PF_AHEAD;
  for (size_t i = 0; i < n; i += 64) __builtin_prefetch((const char *)p + i, 0, 3);
}

/* A scratch buffer of at least `bytes` (64-byte aligned), grown by replacing it (contents dropped), never
 * shrunk; the caller keeps *buf and *cap, thread-local. NULL when out of memory. */
static inline void *hb_grow(void **buf, size_t *cap, size_t bytes) {
  if (bytes > *cap) {
    free(*buf);
    *buf = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    *cap = *buf ? bytes : 0;
  }
  return *buf;
}

/* ---- weight formats (formats.md codes 0..4, plus 5 bf16, 6 f16) ---- */
enum { HB_F32 = 0, HB_INT8 = 1, HB_INT4 = 2, HB_INT2 = 3, HB_INT4G = 4, HB_BF16 = 5, HB_F16 = 6 };

static inline float hb_bf16_to_f32(uint16_t h) {
  union { uint32_t u; float f; } v; v.u = (uint32_t)h << 16; return v.f;
}
/* IEEE half -> f32, exact (subnormals, ±inf); NaNs come out quiet (bit 22 set) like F16C's vcvtph2ps. */
static inline float hb_f16_to_f32(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
  if (e == 0x1f) u = s | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0);
  else if (e) u = s | ((e + 112) << 23) | (m << 13);
  else if (!m) u = s;
  else { e = 113; while (!(m & 0x400u)) { m <<= 1; e--; } u = s | (e << 23) | ((m & 0x3ffu) << 13); }
  union { uint32_t u; float f; } v; v.u = u; return v.f;
}

/* f32 -> IEEE half, rounded to nearest even, saturated at ±65504 (an f16 KV cache: a large value is no inf); NaN
 * stays NaN. F16C's vcvtps2ph of the clamped value gives the same bits (moe.c). */
static inline uint16_t hb_f32_to_f16(float f) {
  if (f > 65504.0f) f = 65504.0f;
  else if (f < -65504.0f) f = -65504.0f;
  union { float f; uint32_t u; } v; v.f = f;
  const uint32_t s = (v.u >> 16) & 0x8000u, u = v.u & 0x7fffffffu;
  if (u > 0x7f800000u) return (uint16_t)(s | 0x7e00u | ((u & 0x7fffffu) >> 13));   /* NaN: quiet */
  if (u >= 0x38800000u) {                                        /* normal: rebias, round the 13 bits dropped */
    const uint32_t r = u - 0x38000000u;
    return (uint16_t)(s | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  if (u <= 0x33000000u) return (uint16_t)s;                      /* ≤ 2^-25: zero (the tie goes to even) */
  const uint32_t e = u >> 23, m = (u & 0x7fffffu) | 0x800000u, sh = 126 - e;   /* subnormal: m · 2^(e-126) units */
  uint32_t q = m >> sh;
  const uint32_t rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1);
  if (rem > half || (rem == half && (q & 1u))) q++;
  return (uint16_t)(s | q);
}

/* ---- kernels (one file each; see src/native/hb.ts for the TS side) ---- */
/* matmul.c: W [O,I] (fmt) · x [S,I] -> y [S,O]; scales/gs only for fmts 1..4 */
void hb_matmul(int fmt, const void *W, const float *scales, int gs, int O, int I, const float *x, int S, float *y);
void hb_matmul_ref(int fmt, const void *W, const float *scales, int gs, int O, int I, const float *x, int S, float *y);
/* matmul_q8.c: the same in fast mode: x rows quantized to int8 (absmax/127), integer dot products for
 * fmts 1..4 (float fmts: exact); _ref: the scalar kernel whatever the SIMD level (tests) */
void hb_matmul_q8(int fmt, const void *W, const float *scales, int gs, int O, int I, const float *x, int S, float *y);
void hb_matmul_q8_ref(int fmt, const void *W, const float *scales, int gs, int O, int I, const float *x, int S, float *y);
/* matmul_many.c: n matrices, each on its own rows of x [*, I]; desc f64[10] each (matmul_many.c) */
void hb_matmul_many(int exact, int n, const double *desc, int I);
/* mla.c: per-head matrices W_h = rows [r0 + h·rstride, +O) of W [*, I] on strided vectors (absorbed MLA) */
void hb_mla_heads(int exact, int S, int H, int fmt, const void *W, const float *scales, int gs, int O, int I,
                  int r0, int rstride, const float *x, int xRow, int xHead, const float *xmul, float *y, int yRow,
                  int yHead, const float *tail, int nt, const uint8_t *cols);
/* mla.c: a layer's absorbed attention in one call: per row run the q side (hb_mla_heads), hb_attn_segs over the
 * segments, per run the v side (kt / vw: W_Kᵀ and kv_b packed as fmt, gs, W, scales[, cols]; see mla.c) */
void hb_mla_absorbed(int exact, int nrun, const int32_t *runs, int H, int dn, int dr, int dv, int kvr,
                     const double *kt, const float *kmul, float *q, float *qcat, int nseg, const double *segs,
                     const int32_t *sel, const int32_t *nsel, int topk, float scale, int kvfmt, float *olat,
                     const double *vw, float *o);
/* mla.c: a layer's queries in one call: cq = RMS(qa), hb_matmul_many of desc's matrices on cq, RoPE of q's heads (and
 * of the indexer's qI [S, nh·hd] unless NULL) */
void hb_mla_q(int exact, int n, const double *desc, const float *qa, const float *normw, float *cq, int S, int qr, float eps,
              float *q, int H, int dn, int dr, const int32_t *pos, double theta, float *qI, int nh, int hd);
/* attn.c: hb_attn over segments (own keys / values each) in one job (src/native/hb.ts attnSegs) */
void hb_attn_segs(int nseg, const double *desc, int H, int dk, int dv, const float *q, int qRow, int qHead,
                  int kRow, int kHead, int vRow, int vHead, const int32_t *sel, const int32_t *nsel, int selRow,
                  float scale, float *out, int oRow, int oHead, int kvfmt);
/* membw.c: weight bytes read by the matmul entries (a counter), and a memory read-bandwidth probe */
void hb_wbytes_add(int64_t n);
int64_t hb_wbytes(int reset);
double hb_membw(int64_t bytes, int reps);
void *hb_huge_alloc(int64_t bytes);      /* mem.c: 2 MiB-aligned, THP-advised mapping; NULL on failure */
void hb_huge_free(void *p, void *bytes);  /* its ArrayBuffer deallocator (ctx = the bytes asked for) */
/* Descriptor layouts shared with src/native/hb.ts (test/formats.test.ts checks them): hb_matmul_many's HB_MANY_DESC
 * doubles per matrix (fmt, gs, O, W, scales, y, x, S, rows, 0); a matrix packed by hb.ts packMat, HB_MOE_W doubles
 * (its first five); hb_moe_up / hb_moe_down's table, HB_MOE_TAB doubles per expert (gate, up, down packed, down's I) */
#define HB_MANY_DESC 10
#define HB_MOE_W 5
#define HB_MOE_TAB (3 * HB_MOE_W + 1)
/* moe.c: rows of one expert: gather, and y[rows[j]] += gates[j]·ye[j] (as hb_axpy per row) */
void hb_gather_rows(const float *x, int D, const int32_t *rows, int n, float *out);
/* KV cache row formats: f32; IEEE halves; int8 in blocks of 32 values, each block's f32 scale after the row's bytes
 * (src/native/hb.ts KvDtype and kvRowElems mirror these: test/attn.test.ts writes and reads them) */
enum { HB_KV_F32 = 0, HB_KV_F16 = 1, HB_KV_Q8 = 2 };
#define HB_KV_Q8_BLOCK 32
static inline size_t hb_kv_row_bytes(int fmt, int W) {
  return fmt == HB_KV_F16 ? 2 * (size_t)W : fmt == HB_KV_Q8 ? (size_t)W + 4 * (size_t)((W + HB_KV_Q8_BLOCK - 1) / HB_KV_Q8_BLOCK) : 4 * (size_t)W;
}
/* MLA cache rows of nseg segments: desc[3g] = address of segment g's first new cache row, desc[3g+1] = its first
 * batch row r0, desc[3g+2] = its rows n; row r of it = lat[r0+r] [kvr] ‖ kpe[(r0+r)·kpeRow ..] [dr], in fmt */
void hb_kv_write(int nseg, const double *desc, const float *lat, int kvr, const float *kpe, int kpeRow, int dr, int fmt);
/* MLA's new cache rows from a = W_kva h [S, kvr + dr] (moe.c): first, given npre > 0, hb_matmul_many(exact, npre, pre,
 * preI) (the layer's projections of h, a among them); lat = RMS(a's latents) (normw, eps), a's k_pe roped at pos, then
 * hb_kv_write (hb_copy_heads, hb_rmsnorm, hb_rope, hb_kv_write in one call); with ikdesc (NULL: none) the indexer
 * keys kI [S, hd] too: LayerNorm (lnw, lnb, lneps), RoPE of their first dr, rows written as hb_kv_write's f32 */
void hb_mla_kv(int exact, int npre, const double *pre, int preI, int nseg, const double *desc, float *a, int S, int kvr,
               int dr, float *lat, const float *normw, float eps, const int32_t *pos, double theta, int fmt,
               const double *ikdesc, float *kI, int hd, const float *lnw, const float *lnb, float lneps);
void hb_copy_heads(float *dst, int dRow, int dHead, const float *src, int sRow, int sHead, int S, int H, int n);
/* one cache row of W values in fmt widened to f32 (exact for f16; q · scale for q8), on the calling thread */
void hb_kv_widen(int fmt, const void *row, int W, float *dst);
/* n values f32 -> f16 (hb_f32_to_f16; F16C where the level has it); and back, exact, on the calling thread (elt.c) */
void hb_to_f16(const float *src, uint16_t *dst, int64_t n);
void hb_f16_widen(const uint16_t *src, float *dst, int64_t n);
void hb_scatter_axpy(float *y, int D, const int32_t *rows, const float *gates, const float *ye, int n);
/* moe.c: one MoE layer's routed experts (rows grouped by expert as hb_moe_route leaves them) from a per-expert table
 * tab [E, 16] (gate, up, down packed as hb.ts packMat, then down's I): hg / hu [n, F] = gate / up of each expert of
 * uni on its rows of x [*, D]; then hg <- swiglu, ye [n, D] = downs (with shd, the shared expert's down packed: sg <-
 * swiglu(sg, su), sy [S, D] = its down, in the same batch), y [S, D] = Σ gates · ye scattered (+ sy with shd) */
void hb_moe_up(int exact, int nu, const int32_t *uni, const int32_t *off, const int32_t *rows, const double *tab,
               int D, int F, const float *x, float *hg, float *hu);
void hb_moe_down(int exact, int nu, const int32_t *uni, const int32_t *off, const int32_t *rows, const float *gates,
                 const double *tab, int D, int F, int n, float *hg, const float *hu, float *ye, int S, float *y,
                 const double *shd, float *sg, const float *su, float *sy);
/* MoE router (route.c): S rows of logits z [S, E] -> experts / gates [S, K]; with off [E+1] (else NULL: no grouping)
 * the pairs grouped by expert (rows / rgates [S·K], each expert's at [off[e], off[e+1]), rows ascending) and the
 * union uni / cnt [E] (experts with rows, ascending, and their row counts); returns the union's size, -1 on bad sizes */
int hb_moe_route(int S, int E, int K, const float *z, const float *bias, int nGroup, int topkGroup, int norm,
                 double scale, int32_t *experts, float *gates, int32_t *off, int32_t *rows, float *rgates,
                 int32_t *uni, int32_t *cnt);
/* moe.c: a MoE layer's router and routed experts in one call when every chosen expert is live: first, given npre > 0,
 * hb_matmul_many(exact, npre, pre, preI) (the layer's router ‖ shared gate ‖ up, which writes z); p [HB_MOE_P] = E, K,
 * n_group, topk_group, norm, scale, D, F; hb_moe_route's arguments from z on; then expert e is live when ver[e] != 0
 * and row[e] == ver[e] (its table row packed from the weights its cache holds now); then hb_moe_up / hb_moe_down's.
 * Returns the union's size when it computed y, -2 - that size when it only routed (an expert not live), -1 as
 * hb_moe_route's -1 */
#define HB_MOE_P 8
int hb_moe_layer(int exact, int npre, const double *pre, int preI, int S, const double *p, const float *z,
                 const float *bias, int32_t *experts, float *gates, int32_t *off, int32_t *rows, float *rgates,
                 int32_t *uni, int32_t *cnt, const int32_t *ver, const int32_t *row, const double *tab, const float *x,
                 float *hg, float *hu, float *ye, float *y, const double *shd, float *sg, const float *su, float *sy);
/* norm.c */
void hb_rmsnorm(const float *x, const float *w, float *y, int S, int D, float eps);
void hb_add_rmsnorm(float *x, const float *a, const float *w, float *y, int S, int D, float eps);
void hb_layernorm(const float *x, const float *w, const float *b, float *y, int S, int D, float eps);
/* elt.c */
void hb_swiglu(const float *g, const float *u, float *out, int n);
void hb_expm(float *x, int n, float m);              /* x <- e^(x − m), elt.c's polynomial (same bits everywhere) */
void hb_divd(float *x, int n, double d);            /* x <- (float)((double)x / d): softmax normalisation (elt.c) */
float hb_maxf(const float *x, int n);                 /* max as a forward scan with > finds it (elt.c) */
int hb_argmaxf(const float *x, int n);                /* that scan's index (elt.c): greedy decoding */
void hb_sort_u64(uint64_t *keys, uint64_t *tmp, int n); /* keys [n] ascending, tmp [n] scratch (sort.c; the sampler's) */
void hb_add(float *y, const float *x, int n);
void hb_axpy(float *y, float a, const float *x, int n);
void hb_rope(float *x, int S, int rowStride, int nvec, int vecStride, int dr, const int32_t *pos, double theta);
enum { HB_CONV_BF16 = 1, HB_CONV_F16 = 2, HB_CONV_F8E4M3 = 3 };
void hb_convert(int kind, const void *src, float *dst, int64_t n);
/* io.c */
int64_t hb_pread(int fd, void *buf, int64_t len, int64_t off);
/* pool.c self-check for tests: runs hb_parallel_for(n, chunk) (flags & 2: hb_parallel_spans), with a nested call
 * inside each chunk when flags & 1, and returns how many indices were not visited exactly once plus how many chunks
 * did not start at a multiple of chunk (0 = ok). */
int hb_pool_check(int n, int chunk, int flags);
#endif
