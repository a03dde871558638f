/* libhb fast-mode int4g kernels for AVX2 (the AVX2 level, and AVX-512 without VNNI), gs ≥ 32; numerics and layouts:
 * matmul_q8.h. No vpdpbusd: vpmaddubsw (unsigned nibble × signed activation, pairs summed to 16 bits), then vpmaddwd
 * with ones. Nibbles are 0..15 and |q_x| ≤ 127, so a 16-bit lane stays exact while it sums at most 17 products: one
 * maddubs of the low nibbles plus one of the high ones gives 4 products (≤ 7620), and up to 16 products are summed in
 * 16 bits before widening. The −8 offsets come back once per group (cg: −8·Σq_x over the group, from corr).
 *  - dtile (2-4 rows of x at gs ≠ 64 and past dec1's last whole tile, rows the GEMM leaves): 8 weight rows × up to
 *    4 rows of x, each 32-byte chunk of a row unpacked once for all of them; per x row the 8 weight rows' 16-bit
 *    products reduced together (two levels of vpmaddwd + vpackssdw, a vpmaddwd, a 128-bit swap) into one vector of 8
 *    group sums, then one convert and FMA per group for the 8 rows (scales transposed 8 groups at a time). Software
 *    prefetch of the same offset in rows ≥ HB_PF_AHEAD on (the first x block only; never past the matrix).
 *  - gemm (batches of GEMM_S+ rows): panels of 16 weight rows packed once per call with the nibbles split, lane j
 *    holding row j's 4 nibbles of a segment (matmul_q8_i4g_gemm_avxvnni.c's layout), each multiplied by a broadcast
 *    of 4 activations: no horizontal reductions; 4 segments summed in 16 bits, then widened into the group's int32
 *    sum; up to MR rows of x per block (blocks of near-equal size), float accumulators in L1.
 *  - dec1 (1-4 rows of x, gs = 64: decode, and decode steps of 2-4 streams): 8 weight rows, a 32-byte chunk of each
 *    a group; the 8 rows' 16-bit products reduced by shuffles and 16-bit adds (two unpack-and-add levels: each lane
 *    then ≤ 4·7620), one vpmaddwd per 4 rows and a 128-bit swap into one vector of the 8 rows' group sums, the group
 *    correction added once for all 8 (not per row), one convert and FMA per group. Prefetch in address order,
 *    HB_PF_AHEAD bytes ahead or, for tiles of 9 KiB and more, a tile ahead (4 lines per group's 256 bytes; GLM-5's
 *    2048x6144 experts 1.22x), the scales two tiles on (the tile's loop: matmul_q8_dec1.h, shared with AVX-VNNI).
 *    Against the tile256 8 × 1 tiles it ran (2 cores of an AMD EPYC, Zen 5, HB_SIMD=avx2, 512x1024 int4g64,
 *    in-process A/B): from L2 1.13-1.32x (~1.19x without the call's overhead), from
 *    DRAM (74 MB of matrices) one thread 1.12-1.26x, two 1.02-1.13x; bench/ab.ts's decode experts (shape 0) 1.19-1.22x
 *    on one thread, 1.05-1.23x on two. Tried and dropped: a prefetch distance of 4, 8, 12 or 16 KiB (0.94-1.00x), to L2
 *    only (T1, also 12 and 20 KiB ahead: 0.86-1.00x), the scales by vgatherdps (0.85-0.91x), half the rows reduced by
 *    vpmaddwd + vpackssdw (the ports balanced: 0.99x), two groups per step (each row's 64-byte line at once: 0.98x).
 *    Other gs and rows past the last whole tile of 8 stay on matmul_q8_tile256.h's 8 × 1 tiles (dtile at S = 1, the
 *    same reduction as those, ran 0.94-0.99x of them; reading the 8 rows one after the other 0.80x from DRAM).
 *    2-4 rows of x (matmul_q8_dec1.h's gsumn: each weight row loaded and split once, then per row of x pdot and the
 *    same tree as one row's; one vpmaddwd per 4 weight rows and x row), against dtile (HB_SIMD=avx2, 512x1024
 *    int4g64, in-process A/B): from DRAM one thread S = 2 1.21x, 3 1.15x, 4 1.12x, two threads 1.08x, 1.16x, 1.12x;
 *    from L2 1.06x, 1.10x, 1.09x; bench/ab.ts's 8 streams' union (shape 1) 1.075x on two threads. Tried and
 *    dropped: gsum8 once per row of x (the weight rows split again for each: DRAM S = 2 1.22x but 3 0.99x, 4 0.96x;
 *    L2 S = 2 0.97x).
 * dtile and gemm measured against the tile256 kernels (2 cores of an AMD EPYC, Zen 5, HB_SIMD=avx2): bench/ab.ts's
 * routed-expert prefill calls 1.25-1.31x; one thread, 512x1024 int4g64 from memory S = 2 1.03-1.07x, 3 1.13-1.18x,
 * 4 1.15x; from the cache S = 16 1.3-1.5x.
 * hb_q8_i4g_avx2 returns the first row left undone (lo for gs < 32 and for one row of x with gs ≠ 64: the tile256
 * kernels; for one row with gs = 64 the first row past dec1's whole tiles of 8; 2-4 rows at gs = 64: dec1's whole
 * tiles, the rest on dtile). Every path computes the exact integer group sums and the one fused chain per output: the
 * same bits as the scalar reference.
 * State: the thread-local scratch (packed panel, scales, group corrections). */
#include "matmul_q8.h"
#if defined(__x86_64__) || defined(__i386__)
#include "matmul_q8_x86.h"

#define TA __attribute__((target("avx2,fma")))
#define GEMM_S 5   /* batches of at least this many rows take the GEMM (S = 4: the tiles 6% faster; 5 even; 6: the GEMM 5%) */
#define MR 6       /* rows of x per GEMM block: 2·MR accumulators, 2 weights, a broadcast and the ones in 16 ymm
                      (5: ~2% slower at S = 12, 16) */

static void *scratch(size_t bytes) {
  static _Thread_local void *buf;
  static _Thread_local size_t cap;
  return hb_grow(&buf, &cap, bytes);
}


/* maddubs(lo, xb[0..31]) + maddubs(hi, xb[64..95]) (≤ 7620 a lane), x from memory operands: in asm, so that GCC does not
 * hoist a chunk's x loads into registers across the 8 weight rows (it did, and spilled, for 2-4 rows of x) */
TA INL __m256i pdot(__m256i lo, __m256i hi, const int8_t *xb) {
  __m256i a, b;
  __asm__("vpmaddubsw %2, %3, %0\n\tvpmaddubsw %4, %5, %1\n\tvpaddw %1, %0, %0"
          : "=&x"(a), "=&x"(b) : "m"(*(const __m256i *)xb), "x"(lo), "m"(*(const __m256i *)(xb + 64)), "x"(hi));
  return a;
}
/* vphaddw's result (16-bit lanes: a's adjacent pairs summed, then b's, per 128-bit half) without its cost (vphaddw ran
 * the one-row tiles ~8% slower): packssdw of two vpmaddwd (the sums fit: no saturation) */
TA INL __m256i hadd16(__m256i a, __m256i b, __m256i one) {
  return _mm256_packs_epi32(_mm256_madd_epi16(a, one), _mm256_madd_epi16(b, one));
}

/* y[s0 + k, o + j] for k < ns, j < nrv (rows from nrv on repeat the last valid one: not stored); P2: gs = 32 (two
 * groups per chunk: the 128-bit halves), else gs ≥ 64 (gs/64 chunks per group). cg: the x rows' group corrections. */
TA INL void dtile(const int P2, const int ns, const hb_q8 *m, int o, int nrv, int s0, const int32_t *cg, int first) {
  const size_t rb = m->rowb, Ip = (size_t)m->Ip;
  const int ng = m->ng, nfull = m->I / 64, tailb = (int)(rb - (size_t)nfull * 32), nch = nfull + (tailb > 0);
  const int gc = P2 ? 1 : m->gs >> 6;
  const uint8_t *r0 = hb_q8_row(m, o), *w[8];
  const float *sg[8];
  uint8_t tail[8][32];   /* the partial last chunk, zero-padded */
  for (int j = 0; j < 8; j++) {
    const int jj = j < nrv ? j : nrv - 1;
    w[j] = r0 + (size_t)jj * rb;
    sg[j] = m->sc + (size_t)(o + jj) * ng;
    if (tailb > 0) { memset(tail[j], 0, 32); memcpy(tail[j], w[j] + 32 * (size_t)nfull, (size_t)tailb); }
  }
  const int8_t *x = m->qx + (size_t)s0 * Ip;
  const size_t pfd = 8 * rb * ((Q8_PF + 8 * rb - 1) / (8 * rb));   /* a later tile's rows, at least Q8_PF on */
  const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi16(1);
  __m256 acc[4];
  __m256i G[4], G2[4], st[8];
  for (int k = 0; k < ns; k++) acc[k] = _mm256_setzero_ps();
  for (int g0 = 0, c = 0; g0 < ng; g0 += 8) {
    hb_scales8(sg, ng, g0, st);
    for (int g = g0; g < g0 + 8 && g < ng;) {   /* a chunk (P2: two groups) or a group (gc chunks) */
      const int ce = P2 ? c + 1 : c + gc < nch ? c + gc : nch;
      for (int k = 0; k < ns; k++) {
        G[k] = _mm256_set1_epi32(cg[(size_t)k * ng + g]);
        if (P2) G2[k] = _mm256_set1_epi32(g + 1 < ng ? cg[(size_t)k * ng + g + 1] : 0);
      }
      for (; c < ce; c++) {
        if (c == nfull) for (int j = 0; j < 8; j++) w[j] = tail[j];
        if (first && !(c & 1) && c < nfull)   /* each row's next 64 bytes in a later tile (address order: even) */
          for (int j = 0; j < 8; j++) pf(m, w[j] + pfd);
        const size_t xo = 128 * (size_t)(c >> 1) + 32 * (size_t)(c & 1);
        __m256i h[4][4];   /* per x row: the 16-bit reduction tree of the 8 weight rows' products */
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
          const __m256i v = _mm256_loadu_si256((const __m256i *)w[j]);
          const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
          for (int k = 0; k < ns; k++) {
            const int8_t *xb = x + (size_t)k * Ip + xo;
            const __m256i p = ns > 1 ? pdot(lo, hi, xb)
                                     : _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)xb)),
                                                        _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(xb + 64))));
            h[k][j >> 1] = (j & 1) ? hadd16(h[k][j >> 1], p, one) : p;   /* ≤ 2·7620 */
          }
          if (j == 3) for (int k = 0; k < ns; k++) h[k][0] = hadd16(h[k][0], h[k][1], one);   /* ≤ 4·7620 */
          if (j == 7) for (int k = 0; k < ns; k++) h[k][2] = hadd16(h[k][2], h[k][3], one);
        }
        for (int j = 0; j < 8; j++) w[j] += 32;
        for (int k = 0; k < ns; k++) {   /* a: rows 0-3 (low half | high half of the chunk), b: rows 4-7 */
          const __m256i a = _mm256_madd_epi16(h[k][0], one), b = _mm256_madd_epi16(h[k][2], one);
          const __m256i l = _mm256_permute2x128_si256(a, b, 0x20), u = _mm256_permute2x128_si256(a, b, 0x31);
          if (P2) { G[k] = _mm256_add_epi32(G[k], l); G2[k] = _mm256_add_epi32(G2[k], u); }
          else G[k] = _mm256_add_epi32(G[k], _mm256_add_epi32(l, u));
        }
      }
      for (int k = 0; k < ns; k++) acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(G[k]), _mm256_castsi256_ps(st[g - g0]), acc[k]);
      g++;
      if (P2 && g < ng) {
        for (int k = 0; k < ns; k++) acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(G2[k]), _mm256_castsi256_ps(st[g - g0]), acc[k]);
        g++;
      }
    }
  }
  for (int k = 0; k < ns; k++) {
    const __m256 r = _mm256_mul_ps(acc[k], _mm256_set1_ps(m->dx[s0 + k]));
    float *y = m->y + (size_t)(s0 + k) * m->O + o;
    if (nrv == 8) _mm256_storeu_ps(y, r);
    else {
      float a[8];
      _mm256_storeu_ps(a, r);
      for (int j = 0; j < nrv; j++) y[j] = a[j];
    }
  }
}

/* rows [lo, hi) in passes of ~16 KiB of weights, each against the rows of x four at a time */
TA INL void drows(const int P2, const hb_q8 *m, int lo, int hi, const int32_t *cg) {
  const int S = m->S, ng = m->ng, R = (hb_q8_subrows(m->rowb) + 7) & ~7;
  for (int o0 = lo; o0 < hi; o0 += R) {
    const int o1 = hi - o0 < R ? hi : o0 + R;
    for (int s0 = 0; s0 < S; s0 += 4) {
      const int ns = S - s0 < 4 ? S - s0 : 4;
      const int32_t *c = cg + (size_t)s0 * ng;
      for (int o = o0; o < o1; o += 8) {
        const int nrv = o1 - o < 8 ? o1 - o : 8;
        switch (ns) {
        case 1: dtile(P2, 1, m, o, nrv, s0, c, s0 == 0); break;
        case 2: dtile(P2, 2, m, o, nrv, s0, c, s0 == 0); break;
        case 3: dtile(P2, 3, m, o, nrv, s0, c, s0 == 0); break;
        default: dtile(P2, 4, m, o, nrv, s0, c, s0 == 0); break;
        }
      }
    }
  }
}

/* ---- 1-4 rows of x, gs = 64 ---- */

/* row j's 16-bit products of a 64-element group (32 bytes at w) against (xe, xd): maddubs(lo, xe) + maddubs(hi, xd),
 * ≤ 7620 a lane. In asm: GCC parked each loaded row on the stack to fold it into the two vpand */
TA INL __m256i gdot16(const uint8_t *w, __m256i xe, __m256i xd, __m256i m4) {
  __m256i lo, hi;
  __asm__("vmovdqu %2, %0\n\t"
          "vpsrlw $4, %0, %1\n\t"
          "vpand %0, %5, %0\n\t"
          "vpand %1, %5, %1\n\t"
          "vpmaddubsw %3, %0, %0\n\t"
          "vpmaddubsw %4, %1, %1\n\t"
          "vpaddw %1, %0, %0"
          : "=&x"(lo), "=&x"(hi) : "m"(*(const __m256i *)w), "x"(xe), "x"(xd), "x"(m4));
  return lo;
}
/* 16-bit transpose-and-add steps (shuffles and adds, no multiplies): dword pairs of a, b (per 128-bit half: [a d0+d2,
 * b d0+d2, a d1+d3, b d1+d3]), then qword pairs ([a, b, c, d], dwords of 2 lanes) */
TA INL __m256i tadd32(__m256i a, __m256i b) { return _mm256_add_epi16(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b)); }
TA INL __m256i tadd64(__m256i a, __m256i b) { return _mm256_add_epi16(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b)); }
/* matmul_q8_dec1.h's gsum8: lane j = the exact sum of the group's products of row j (32 bytes at w + j·rb) against
 * (xe, xd): two tadd levels (each 16-bit lane then sums 4 of one row's lanes: ≤ 4·7620), one vpmaddwd per 4 rows, the
 * 128-bit halves added */
TA INL __m256i avx2_gsum8(const uint8_t *w, size_t rb, __m256i xe, __m256i xd) {
  const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi16(1);
  const __m256i u0 = tadd64(tadd32(gdot16(w, xe, xd, m4), gdot16(w + rb, xe, xd, m4)),
                            tadd32(gdot16(w + 2 * rb, xe, xd, m4), gdot16(w + 3 * rb, xe, xd, m4)));
  const __m256i u1 = tadd64(tadd32(gdot16(w + 4 * rb, xe, xd, m4), gdot16(w + 5 * rb, xe, xd, m4)),
                            tadd32(gdot16(w + 6 * rb, xe, xd, m4), gdot16(w + 7 * rb, xe, xd, m4)));
  const __m256i a = _mm256_madd_epi16(u0, one), b = _mm256_madd_epi16(u1, one);
  return hb_add_halves(a, b);
}
#define DEC1_XDOT pdot
#define DEC1_WIDEN(u) _mm256_madd_epi16(u, _mm256_set1_epi16(1))
#define DEC1_TGT TA
#define DEC1_NAME(x) avx2_##x
#include "matmul_q8_dec1.h"
#undef DEC1_TGT
#undef DEC1_NAME
#undef DEC1_XDOT
#undef DEC1_WIDEN

/* ---- the GEMM ---- */

/* t + maddubs(w, the 4 bytes at p broadcast): in asm, so that GCC neither hoists the broadcasts of a batch into registers
 * (it did, and spilled the accumulators: the batches ran 10% slower than the register tiles) nor copies t around */
TA INL __m256i mac16(__m256i t, __m256i w, const int8_t *p) {
  __m256i b;
  __asm__("vpbroadcastd %2, %1\n\tvpmaddubsw %1, %3, %1\n\tvpaddw %1, %0, %0" : "+x"(t), "=&x"(b) : "m"(*(const int32_t *)p), "x"(w));
  return t;
}
/* maddubs(w, the 4 bytes at p broadcast): a batch's first product */
TA INL __m256i mul16(__m256i w, const int8_t *p) {
  __m256i b;
  __asm__("vpbroadcastd %1, %0\n\tvpmaddubsw %0, %2, %0" : "=&x"(b) : "m"(*(const int32_t *)p), "x"(w));
  return b;
}
/* t[k] = the 16-bit sums of n ≤ 4 segments (packed weights wq[4i], wq[4i + 2]: low, high nibbles) against x row k's
 * broadcast activations at xq (evens) and xq + 64 (odds), 4 bytes a segment */
TA INL void batch(const int n, const int ns, const __m256i *wq, const int8_t *xq, size_t Ip, __m256i *t) {
#pragma GCC unroll 4
  for (int i = 0; i < n; i++) {
    const __m256i wl = _mm256_load_si256(wq + 4 * i), wh = _mm256_load_si256(wq + 4 * i + 2);
    for (int k = 0; k < ns; k++) {
      t[k] = i ? mac16(t[k], wl, xq + (size_t)k * Ip + 4 * i) : mul16(wl, xq + (size_t)k * Ip);
      t[k] = mac16(t[k], wh, xq + (size_t)k * Ip + 64 + 4 * i);
    }
  }
}

/* x rows s0..s0+ns-1 against the panel of rows o..o+15 (GS: gs when 32 or 64, else 0: m->gs); next: the next
 * panel's rows, prefetched meanwhile (first block only), or NULL */
TA INL void block(const int GS, const int ns, const hb_q8 *m, const __m256i *p, const float *sp, const int32_t *cg, int o,
                  int s0, const uint8_t *next) {
  const int ng = m->ng, L = (GS ? GS : m->gs) / 8, nseg = (m->I + 7) / 8;
  const size_t Ip = (size_t)m->Ip, pfper = next ? (16 * m->rowb + nseg - 1) / (size_t)nseg : 0;   /* next-panel bytes per segment */
  const int8_t *x = m->qx + (size_t)s0 * Ip;
  const __m256i one = _mm256_set1_epi16(1);
  float f[MR][16] __attribute__((aligned(32)));   /* the float accumulators, in L1 */
  for (int k = 0; k < ns; k++) {
    _mm256_store_ps(f[k], _mm256_setzero_ps());
    _mm256_store_ps(f[k] + 8, _mm256_setzero_ps());
  }
  for (int g = 0; g < ng; g++) {
    const int q0 = g * L, q1 = (g + 1) * L < nseg ? (g + 1) * L : nseg;
    if (next) {   /* the group's share of the next panel, outside the hot loop; the first group: its scales */
      for (size_t c = (size_t)q0 * pfper; c < (size_t)q1 * pfper; c += 64)
        if (next + c < m->Wend) _mm_prefetch((const char *)(next + c), _MM_HINT_T0);
      if (g == 0)
        for (size_t c = 0; c < (size_t)16 * ng * 4; c += 64) _mm_prefetch((const char *)(m->sc + (size_t)(o + 16) * ng) + c, _MM_HINT_T0);
    }
    for (int h = 0; h < 2; h++) {   /* rows 8h..8h+7 */
      __m256i a[MR];
      for (int k = 0; k < ns; k++) a[k] = _mm256_set1_epi32(cg[(size_t)(s0 + k) * ng + g]);
      for (int qb = q0; qb < q1; qb += 4) {   /* 4 segments (16 products a lane) in 16 bits, then widened */
        const int8_t *xq = x + 128 * (size_t)(qb >> 4) + 4 * (size_t)(qb & 15);   /* evens; the odds 64 bytes on */
        const __m256i *wq = p + 4 * (size_t)qb + h;
        __m256i t[MR];
        if (q1 - qb >= 4) batch(4, ns, wq, xq, Ip, t);   /* (qb a multiple of 4: the 4 segments in one 128-block) */
        else batch(q1 - qb, ns, wq, xq, Ip, t);
        for (int k = 0; k < ns; k++) a[k] = _mm256_add_epi32(a[k], _mm256_madd_epi16(t[k], one));
      }
      const __m256 sv = _mm256_load_ps(sp + (size_t)g * 16 + 8 * h);
      for (int k = 0; k < ns; k++)
        _mm256_store_ps(f[k] + 8 * h, _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[k]), sv, _mm256_load_ps(f[k] + 8 * h)));
    }
  }
  for (int k = 0; k < ns; k++) {
    const __m256 d = _mm256_set1_ps(m->dx[s0 + k]);
    float *y = m->y + (size_t)(s0 + k) * m->O + o;
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_load_ps(f[k]), d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_load_ps(f[k] + 8), d));
  }
}

/* rows [lo, hi) in whole panels of 16; returns the first row left undone */
TA INL int gemm(const int GS, const hb_q8 *m, int lo, int hi, __m256i *p, float *sp, const int32_t *cg) {
  const int S = m->S, nc = (int)((m->rowb + 31) / 32);
  hb_q8_prefetch_panel(m, lo, 16);
  int o = lo;
  for (; o + 16 <= hi; o += 16) {
    hb_i4g_pack16(m, o, nc, p, sp);
    const uint8_t *next = o + 32 <= hi ? hb_q8_row(m, o + 16) : NULL;
    const int nblk = (S + MR - 1) / MR;   /* blocks of near-equal size, the later ones taking the extra rows */
    for (int bk = 0, s0 = 0; bk < nblk; bk++) {
      const int ns = (S - s0) / (nblk - bk);
      switch (ns) {   /* the count a constant in each */
      case 1: block(GS, 1, m, p, sp, cg, o, s0, next); break;
      case 2: block(GS, 2, m, p, sp, cg, o, s0, next); break;
      case 3: block(GS, 3, m, p, sp, cg, o, s0, next); break;
      case 4: block(GS, 4, m, p, sp, cg, o, s0, next); break;
      case 5: block(GS, 5, m, p, sp, cg, o, s0, next); break;
      default: block(GS, MR, m, p, sp, cg, o, s0, next); break;
      }
      s0 += ns;
      next = NULL;
    }
  }
  return o;
}

TA int hb_q8_i4g_avx2(const hb_q8 *m, int lo, int hi) {
  if (m->gs < 32 || hi <= lo) return lo;
  if (m->S <= 4 && m->gs == 64 && hi - lo >= 8) {   /* 1-4 rows, gs = 64: whole tiles of 8 rows (dec1_rows) */
    int32_t *cg = scratch((size_t)m->S * m->ng * 4);
    if (!cg) return lo;
    lo = avx2_dec1_rows(m, lo, hi, cg);
    if (m->S == 1) return lo;   /* one row: the rest on the tile256 kernel's 8 × 1 tiles */
    if (lo < hi) drows(0, m, lo, hi, cg);
    return hi;
  }
  if (m->S == 1) return lo;   /* one row, gs ≠ 64 or under 8 rows: the tile256 tiles */
  const int S = m->S, ng = m->ng, gemm_ok = S >= GEMM_S && hi - lo >= 16;
  const int nc = (int)((m->rowb + 31) / 32);
  const size_t pbytes = gemm_ok ? (size_t)nc * 8 * 128 : 0, sbytes = gemm_ok ? (size_t)ng * 16 * 4 : 0;
  uint8_t *buf = scratch(pbytes + sbytes + (size_t)S * ng * 4);
  if (!buf) return lo;
  int32_t *cg = (int32_t *)(buf + pbytes + sbytes);
  hb_i4g_group_corr(m, cg);
  if (gemm_ok) {
    if (m->gs == 64) lo = gemm(64, m, lo, hi, (__m256i *)buf, (float *)(buf + pbytes), cg);
    else if (m->gs == 32) lo = gemm(32, m, lo, hi, (__m256i *)buf, (float *)(buf + pbytes), cg);
    else lo = gemm(0, m, lo, hi, (__m256i *)buf, (float *)(buf + pbytes), cg);
  }
  if (lo < hi) {
    if (m->gs == 32) drows(1, m, lo, hi, cg);
    else drows(0, m, lo, hi, cg);
  }
  return hi;
}
#endif
