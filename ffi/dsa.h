/* libhb lightning-indexer scores (dsa.c: scalar reference, dispatch; dsa_x86.c: AVX-512 / AVX2 kernels; dsa_neon.c).
 * score(s, t) = Σ_h w[s,h] · ReLU(scale · qI[s,h]·kI[t]) in one order at every SIMD level: each dot product
 * is a fused multiply-add chain over i ascending from 0, then x = dot · scale, ReLU (x > 0 ? x : +0), and
 * the heads are added ascending by fused multiply-adds from 0. Vector kernels put keys in lanes (a block
 * of keys transposed on the stack, query elements broadcast), so every lane runs the scalar chain and all
 * levels give the same bits.
 * Fast mode (hb_index_scores_q8, only where AVX-512 VNNI runs it: hb_index_q8_ok): keys are quantized once, when
 * written, like matmul_q8.h's activations (k8 = rint(k·127/amax) half to even, dk = amax/127, NaN when the row
 * held a non-finite value) and stored in blocks of 16 keys, byte [t/16][i/4][t mod 16][i mod 4] = k8[t][i] + 128
 * (hb_ik_quant); the query heads are quantized the same way per call (q8, dq). Then
 * x = ((float)(Σ_i q8[s,h,i]·k8[t,i]) · cq[s,h]) · dk[t] with cq = dq[s,h]·scale, ReLU and the heads' fused
 * multiply-adds as above. The integer dot is exact, so the scalar reference and the VNNI kernel agree bit for bit.
 * Holds no state. */
#ifndef HB_DSA_H
#define HB_DSA_H
#include "hb.h"
#include <stddef.h>

#define IDX_MAXHD 512   /* head dims up to this use the vector kernels (the transposed block lives on the stack) */

typedef struct {
  int S, nh, hd, maxn; const float *qI, *w, *kI; const int32_t *nk; float *out; int outRow; float scale;
  /* fast mode: keys k8 (blocks of 16) and dk [maxn]; queries q8 [S, nh, hd], cq and qs = 128·Σ_i q8 [S, nh] */
  const uint8_t *k8; const float *dk; const int8_t *q8; const float *cq; const int32_t *qs;
} idx_ctx;

/* keys [t0, t1) for rows [s0, s1): out[s·outRow + t] for t < nk[s] (t1 ≤ maxn: keys past it are never read) */
typedef void (*idx_block_fn)(const idx_ctx *c, int t0, int t1, int s0, int s1);
#if defined(__x86_64__) || defined(__i386__)
void hb_idx_block_avx512(const idx_ctx *c, int t0, int t1, int s0, int s1);
void hb_idx_block_avx2(const idx_ctx *c, int t0, int t1, int s0, int s1);
void hb_idx_block_q8_vnni(const idx_ctx *c, int t0, int t1, int s0, int s1);
/* hb_dsa_select's scans after its first pass (dsa.c select_row), 16 keys at a time: the histogram of the keys
 * that share `prefix` in bits ≥ hs, and the ascending collection of the selected keys */
int hb_sel_hist_avx512(const float *x, int n, uint32_t prefix, int hs, int sh, int nb, uint32_t *hist, int *lo, int *hi);
int hb_sel_collect_avx512(const float *x, int n, uint32_t thr, int need, int32_t *sel);
#elif defined(__aarch64__)
void hb_idx_block_neon(const idx_ctx *c, int t0, int t1, int s0, int s1); /* dsa_neon.c */
#endif
#endif
