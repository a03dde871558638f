/* libhb lightning-indexer scores (dsa.c: scalar reference, dispatch; dsa_x86.c: AVX-512 / AVX2 kernels).
 * score(s, t) = Σ_h w[s,h] · ReLU(scale · qI[s,h]·kI[t]) in one order at every SIMD level: each dot product
 * is a fused multiply-add chain over i ascending from 0, then x = dot · scale, ReLU (x > 0 ? x : +0), and
 * the heads are added ascending by fused multiply-adds from 0. Vector kernels put keys in lanes (a block
 * of keys transposed on the stack, query elements broadcast), so every lane runs the scalar chain and all
 * levels give the same bits. Holds no state. */
#ifndef HB_DSA_H
#define HB_DSA_H
#include "hb.h"
#include <stddef.h>

#define IDX_MAXHD 512   /* head dims up to this use the vector kernels (the transposed block lives on the stack) */

typedef struct {
  int S, nh, hd, maxn; const float *qI, *w, *kI; const int32_t *nk; float *out; int outRow; float scale;
} idx_ctx;

/* keys [t0, t1) for rows [s0, s1): out[s·outRow + t] for t < nk[s] (t1 ≤ maxn: keys past it are never read) */
typedef void (*idx_block_fn)(const idx_ctx *c, int t0, int t1, int s0, int s1);
#if defined(__x86_64__) || defined(__i386__)
void hb_idx_block_avx512(const idx_ctx *c, int t0, int t1, int s0, int s1);
void hb_idx_block_avx2(const idx_ctx *c, int t0, int t1, int s0, int s1);
#endif
#endif
