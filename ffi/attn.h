/* libhb attention internals shared by attn.c (attention core, one quad of heads, scalar micro-kernels,
 * dispatch), attn_stats.c (the core with softmax statistics), attn_x86.c (AVX-512 / AVX2+FMA micro-kernels)
 * and dsa.c (indexer scores, top-k). Holds no state.
 * Every dot product of one (query, key) pair is summed the same way whatever kernel computes it (one
 * accumulator over 16- or 8-wide chunks, tail last), so results depend only on the SIMD level. */
#ifndef HB_ATTN_H
#define HB_ATTN_H
#include "hb.h"

/* ---------------- micro-kernels ----------------
 * dot4x4: out[4i+j] = a_i·b_j (4 queries × 4 keys);  dot1x4: out[j] = a·b_j.  Lengths n.
 * wsum:   o_g[e] = Σ_j p_g[j] · v_g(key_j)[e], g < 4, e < dv, v_g(t) = vb[g] + t·vRow; shared: vb all equal.
 * wcont:  continues one such chain (below).
 * Unused lanes of a call get duplicated pointers (the duplicate results are ignored / identical). */
typedef void (*hb_dot1x4_fn)(const float *a, const float *const b[4], int n, float out[4]);
typedef void (*hb_wsum_fn)(const float *const p[4], const float *const vb[4], int shared, ptrdiff_t vRow,
                           const int32_t *keys, int n, int dv, float *const o[4]);
typedef void (*hb_dot4x4_fn)(const float *const a[4], const float *const b[4], int n, float out[16]);
/* wcont: o[e] += p[j] · v(j)[e] for j < n in order, v(j) = v + j·vRow, e < dv: more keys of one wsum chain (the
 * same multiply-add as the level's wsum: fused at the SIMD levels, a product then a sum in the reference) */
typedef void (*hb_wcont_fn)(const float *p, const float *v, ptrdiff_t vRow, int n, int dv, float *o);
typedef struct { hb_dot4x4_fn dot4x4; hb_dot1x4_fn dot1x4; hb_wsum_fn wsum; hb_wcont_fn wcont; } hb_attn_kern;

/* ---------------- one quad of heads ----------------
 * The operands of an hb_attn-style call (see hb_attn in attn.c for the layout) and the scratch width maxn. */
typedef struct {
  int dk, dv, maxn;
  const float *q, *k, *v; int qRow, qHead, kRow, kHead, vRow, vHead;
  const int32_t *sel, *nsel; int selRow; float scale;
  float *out; int oRow, oHead;
  hb_attn_kern kn;
  const uint8_t *kc;     /* non-NULL: keys = values = these cache rows of kRow values in format kfmt (HB_KV_F16, HB_KV_Q8;
                          * the absorbed form's cache): each row's keys are widened into f32 scratch first */
  int kfmt;
} hb_attn_ops;
/* Row s (nsel[s] > 0 keys), heads h0..h0+ng-1 (1 <= ng <= 4): p[i][j] = scale · q_h·k_t (p = scratch
 * [ng, maxn]), softmax per head (max-subtracted, f32 exp, double sum), out_h = Σ_j p_j · v_t in list order.
 * st (may be NULL): st[2i] = max score m, st[2i+1] = l = Σ_j exp(score_j − m) of head h0+i. pf: prefetch the
 * gathered key rows ahead (the first quad over a row's keys; the next ones find them in the cache). (attn.c) */
void hb_attn_quad(const hb_attn_ops *o, int s, int h0, int ng, float *p, float *st, int pf);

/* hb_attn_segs's segments made once (their scratch width: the most keys of any row), then run a row and a group of heads
 * at a time (hb_mla_absorbed's one job per layer; attn.c). make returns the segments kept (0: none, or bad arguments);
 * a row runs as in hb_attn_segs (the same bits), and rows of one set reuse what a thread widened of them. */
typedef struct { hb_attn_ops *segs; int *r0, *rows; int nseg, H; unsigned long long gen; } hb_attn_set;
int hb_attn_set_make(hb_attn_set *set, int nseg, const double *desc, int H, int dk, int dv, const float *q, int qRow,
                     int qHead, int kRow, int kHead, int vRow, int vHead, const int32_t *sel, const int32_t *nsel, int selRow,
                     float scale, float *out, int oRow, int oHead, int kvfmt);
void hb_attn_set_row(const hb_attn_set *set, int row, int h0, int G);   /* batch row (of the set's q / out) */
void hb_attn_set_free(hb_attn_set *set);

/* the micro-kernels for a SIMD level (HB_SCALAR: the scalar references) */
hb_attn_kern hb_attn_kern_for(int level);
#if defined(__x86_64__) || defined(__i386__)
extern const hb_attn_kern hb_attn_kern_avx512, hb_attn_kern_avx2; /* attn_x86.c */
#elif defined(__aarch64__)
extern const hb_attn_kern hb_attn_kern_neon; /* attn_neon.c */
#endif
#endif
