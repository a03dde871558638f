/* libhb attention core: the MLA/DSA attention (hb_attn, hb_attn_ref), spec §3.1, and the micro-kernel
 * dispatch shared with dsa.c (scalar references here, SIMD ones in attn_x86.c and attn_neon.c). State: each
 * thread's scratch (scores; keys widened from an f16 / q8 cache, reused by the same call's next items of that
 * row), kept between calls (see attn_scratch). SIMD: AVX-512 / AVX2+FMA / NEON micro-kernels picked per
 * call from hb_simd_level(); scalar reference kernels at HB_SCALAR. Every dot product of
 * one (query, key) pair is summed the same way whatever kernel computes it (one accumulator over 16- or
 * 8-wide chunks, tail last), and every output element is one FMA chain over keys in list order, so a
 * result does not depend on batch size, head grouping, key blocking or thread count — only on the SIMD
 * level. */
#include "attn.h"
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- scalar micro-kernels and dispatch ---------------- */
static float dot_ref(const float *a, const float *b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}
static void dot4x4_ref(const float *const a[4], const float *const b[4], int n, float out[16]) {
  for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) out[4 * i + j] = dot_ref(a[i], b[j], n);
}
static void dot1x4_ref(const float *a, const float *const b[4], int n, float out[4]) {
  for (int j = 0; j < 4; j++) out[j] = dot_ref(a, b[j], n);
}
static void wsum_ref(const float *const p[4], const float *const vb[4], int shared, ptrdiff_t vRow,
                     const int32_t *keys, int n, int dv, float *const o[4]) {
  (void)shared;
  for (int g = 0; g < 4; g++) {
    float *og = o[g];
    for (int e = 0; e < dv; e++) og[e] = 0.0f;
    for (int j = 0; j < n; j++) {
      const float *v = vb[g] + (ptrdiff_t)(keys ? keys[j] : j) * vRow, pj = p[g][j];
      for (int e = 0; e < dv; e++) og[e] += pj * v[e];
    }
  }
}

static void wcont_ref(const float *p, const float *v, ptrdiff_t vRow, int n, int dv, float *o) {
  for (int j = 0; j < n; j++)
    for (int e = 0; e < dv; e++) o[e] += p[j] * v[(ptrdiff_t)j * vRow + e];
}

hb_attn_kern hb_attn_kern_for(int level) {
  hb_attn_kern k = { dot4x4_ref, dot1x4_ref, wsum_ref, wcont_ref };
#if defined(__x86_64__) || defined(__i386__)
  if (level >= HB_AVX512) k = hb_attn_kern_avx512;
  else if (level >= HB_AVX2) k = hb_attn_kern_avx2;
#elif defined(__aarch64__)
  if (level == HB_NEON) k = hb_attn_kern_neon;
#else
  (void)level;
#endif
  return k;
}

/* ---------------- one quad of heads (shared with attn_stats.c) ---------------- */
/* With shared keys (kHead 0) each key row is loaded once for 4 heads; with shared values (vHead 0) each
 * value chunk once for 4 heads. */
#define KEY(j) ((ptrdiff_t)(sr ? sr[j] : (j)))
/* Keys are gathered rows (the DSA selection), which the hardware prefetcher cannot follow: the rows
 * PF_KEYS ahead in the list are prefetched while the current ones are used (n floats from each). 24 rather
 * than 8: after a 12000-token prompt the selected rows come from memory, and attention took ~10% less
 * (decode, bench model, 4 alternated runs). */
#define PF_KEYS 24
static inline void pf_floats(const float *a, int n) {
  for (int i = 0; i < n; i += 16) __builtin_prefetch(a + i);
}
/* Softmax of ng (≤ 4) score rows p + i·stride of n[i] (> 0) entries each: max-subtracted, f32 exp (hb_expm:
 * vectorised, the same bits at every level), double sum in key order, each entry divided by it; st (may be
 * NULL): st[2i] = max, st[2i+1] = sum. The rows' sums run side by side (independent chains, each in key order). */
static void softmax4(float *p, size_t stride, int ng, const int n[4], float *st) {
  float mx[4];
  double sum[4] = { 0.0, 0.0, 0.0, 0.0 };
  int nmin = n[0];
  for (int i = 0; i < ng; i++) {
    float *pg = p + (size_t)i * stride;
    mx[i] = hb_maxf(pg, n[i]);
    hb_expm(pg, n[i], mx[i]);
    if (n[i] < nmin) nmin = n[i];
  }
  const float *p0 = p, *p1 = p + (size_t)(ng > 1) * stride, *p2 = p + (size_t)(ng > 2 ? 2 : 0) * stride,
              *p3 = p + (size_t)(ng > 3 ? 3 : 0) * stride;
  for (int j = 0; j < nmin; j++) { sum[0] += p0[j]; sum[1] += p1[j]; sum[2] += p2[j]; sum[3] += p3[j]; }
  for (int i = 0; i < ng; i++) {
    float *pg = p + (size_t)i * stride;
    for (int j = nmin; j < n[i]; j++) sum[i] += pg[j];
    hb_divd(pg, n[i], sum[i]);
    if (st) { st[2 * i] = mx[i]; st[2 * i + 1] = (float)sum[i]; }
  }
}

/* Four query rows s..s+3 of head h with per-head keys, each over keys 0..n_r-1 (no selection, or one that is the
 * identity): scores 4 rows × 4 keys per dot4x4 call (each key row loaded once for the four; per pair the sum
 * of dot1x4), the softmax per row, then o_r = Σ_j p_r[j] v_j with each value row loaded once for the four up to
 * the smallest key count (wsum's shared-values form) and each longer row's chains continued alone with the
 * level's multiply-add. The same bits as hb_attn_quad on each row. p: scratch [4, maxn]. */
static void attn_rows4(const hb_attn_ops *c, int s, int h, float *p) {
  int n[4], nmax = 0, nmin = INT32_MAX;
  const float *a[4], *pp[4], *vb[4];
  float *oo[4];
  const float *kh = c->k + (ptrdiff_t)h * c->kHead, *vh = c->v + (ptrdiff_t)h * c->vHead;
  for (int r = 0; r < 4; r++) {
    n[r] = c->nsel[s + r];
    if (n[r] > nmax) nmax = n[r];
    if (n[r] < nmin) nmin = n[r];
    a[r] = c->q + (ptrdiff_t)(s + r) * c->qRow + (ptrdiff_t)h * c->qHead;
    pp[r] = p + (size_t)r * c->maxn;
    vb[r] = vh;
    oo[r] = c->out + (ptrdiff_t)(s + r) * c->oRow + (ptrdiff_t)h * c->oHead;
  }
  float d[16];
  for (int j = 0; j < nmax; j += 4) {
    const int m = nmax - j < 4 ? nmax - j : 4;
    const float *b[4];
    for (int t = 0; t < 4; t++) b[t] = kh + (ptrdiff_t)(j + (t < m ? t : m - 1)) * c->kRow;
    c->kn.dot4x4(a, b, c->dk, d);
    for (int r = 0; r < 4; r++)
      for (int t = 0; t < m && j + t < n[r]; t++) p[(size_t)r * c->maxn + j + t] = c->scale * d[4 * r + t];
  }
  softmax4(p, c->maxn, 4, n, NULL);
  c->kn.wsum(pp, vb, 1, c->vRow, NULL, nmin, c->dv, oo);
  for (int r = 0; r < 4; r++)
    if (n[r] > nmin) c->kn.wcont(pp[r] + nmin, vh + (ptrdiff_t)nmin * c->vRow, c->vRow, n[r] - nmin, c->dv, oo[r]);
}

/* rows s..s+3 can take attn_rows4: per-head keys, every row with keys, none selected other than 0..n-1 in order */
static int rows4_ok(const hb_attn_ops *c, int s) {
  if (c->kHead == 0 || c->vHead == 0) return 0;
  for (int r = 0; r < 4; r++) {
    const int n = c->nsel[s + r];
    if (n <= 0) return 0;
    if (c->sel) {
      const int32_t *sr = c->sel + (ptrdiff_t)(s + r) * c->selRow;
      for (int j = 0; j < n; j++) if (sr[j] != j) return 0;
    }
  }
  return 1;
}

void hb_attn_quad(const hb_attn_ops *c, int s, int h0, int ng, float *p, float *st, int pf) {
  const int n = c->nsel[s];
  const int32_t *sr = c->sel ? c->sel + (ptrdiff_t)s * c->selRow : NULL;
  const float *qs = c->q + (ptrdiff_t)s * c->qRow;
  float *os = c->out + (ptrdiff_t)s * c->oRow;
  int hh[4];
  for (int i = 0; i < 4; i++) hh[i] = h0 + (i < ng ? i : ng - 1); /* unused lanes repeat the last head */
  /* pass 1: p[g][j] = scale · q_h·k_t */
  if (c->kHead == 0 && ng >= 3) {
    const float *a[4] = { qs + (ptrdiff_t)hh[0] * c->qHead, qs + (ptrdiff_t)hh[1] * c->qHead,
                          qs + (ptrdiff_t)hh[2] * c->qHead, qs + (ptrdiff_t)hh[3] * c->qHead };
    float d[16];
    for (int j = 0; j < n; j += 4) {   /* 4 keys at a time (past n: the last key again, its duplicates unused) */
      const int m = n - j < 4 ? n - j : 4;
      if (pf) for (int a2 = j + PF_KEYS; a2 < j + PF_KEYS + 4 && a2 < n; a2++) pf_floats(c->k + KEY(a2) * c->kRow, c->dk);
      const float *b[4];
      for (int r = 0; r < 4; r++) b[r] = c->k + KEY(j + (r < m ? r : m - 1)) * c->kRow;
      c->kn.dot4x4(a, b, c->dk, d);
      for (int i = 0; i < ng; i++) {
        float *pg = p + (size_t)i * c->maxn;
        for (int r = 0; r < m; r++) pg[j + r] = c->scale * d[4 * i + r];
      }
    }
  } else {
    for (int i = 0; i < ng; i++) {
      const float *a = qs + (ptrdiff_t)hh[i] * c->qHead, *kh = c->k + (ptrdiff_t)hh[i] * c->kHead;
      float *pg = p + (size_t)i * c->maxn, d[4];
      for (int j = 0; j < n; j += 4) {
        const int m = n - j < 4 ? n - j : 4;
        const float *b[4];
        for (int r = 0; r < 4; r++) b[r] = kh + KEY(j + (r < m ? r : m - 1)) * c->kRow;
        c->kn.dot1x4(a, b, c->dk, d);
        for (int r = 0; r < m; r++) pg[j + r] = c->scale * d[r];
      }
    }
  }
  const int nn[4] = { n, n, n, n };
  softmax4(p, c->maxn, ng, nn, st);
  /* pass 2: o_h = Σ_j p_j · v_t, j in list order */
  const float *pp[4], *vb[4];
  float *oo[4];
  for (int i = 0; i < 4; i++) {
    pp[i] = p + (size_t)(hh[i] - h0) * c->maxn;
    vb[i] = c->v + (ptrdiff_t)hh[i] * c->vHead;
    oo[i] = os + (ptrdiff_t)hh[i] * c->oHead;
  }
  c->kn.wsum(pp, vb, c->vHead == 0, c->vRow, sr, n, c->dv, oo);
}
#undef KEY

/* ---------------- hb_attn, hb_attn_segs ---------------- */
/* Work item = (segment, block of `blk` rows, group of G consecutive heads). With per-head keys (the naive MLA
 * form: prefill) blocks are 4 rows, run by attn_rows4 when they qualify (else row by row); with shared keys
 * (absorbed) 1 row, run as quads of heads. Items are numbered segment by segment, head group by head group,
 * so that neighbouring items (a thread's next claim) read the same heads' keys and values (prefill of 128 rows,
 * bench shape: ~8% faster than row-major numbering). */
typedef struct {
  const hb_attn_ops *seg;              /* [nseg] (maxn: the largest key count of all rows, the scratch width) */
  const int *first;                    /* [nseg + 1] first item of each segment; first[nseg] = all items */
  const int *rows;                     /* [nseg] rows of each segment */
  int nseg, H, G, ngroups, blk;
  unsigned long long gen;              /* this call's id: widened keys are reused only within one call */
} attn_ctx;

/* A thread's scratch: scores p, widened keys kb [n, kRow] of row `row` of segment op in call gen (without a
 * selection a row's keys are 0..n-1, so kb serves every row of op with at most n keys). Kept between calls while
 * each fits SCRATCH_KEEP bytes, or while calls need that much (a long context's, until a call needs less). */
#define SCRATCH_KEEP ((size_t)32 << 20)
typedef struct { float *p, *kb; size_t pcap, kcap; unsigned long long gen; const hb_attn_ops *op; int row, n; } attn_scratch;
static _Thread_local attn_scratch tl_scr;
static atomic_ullong attn_gen;   /* calls so far (64 bits: never wraps back to a thread's last id) */

/* *buf holding n floats: grown, or shrunk when it holds more than SCRATCH_KEEP bytes (its contents then lost; the
 * size asked for is the same for every item of a call) */
static float *scratch(float **buf, size_t *cap, size_t n) {
  if (n > *cap || (*cap > n && *cap * sizeof(float) > SCRATCH_KEEP)) {
    free(*buf);
    *buf = malloc(sizeof(float) * n);
    *cap = *buf ? n : 0;
  }
  return *buf;
}

/* keys [from, to) of row s (its selection, or 0..n-1) of a cache in op->kfmt widened into kb [n, kRow], list order */
static void widen_keys(const hb_attn_ops *op, int s, int from, int to, float *kb) {
  const int32_t *sr = op->sel ? op->sel + (ptrdiff_t)s * op->selRow : NULL;
  const size_t rb = hb_kv_row_bytes(op->kfmt, op->kRow);
  for (int j = from; j < to; j++) {
    if (j + 8 < to) __builtin_prefetch(op->kc + (size_t)(sr ? sr[j + 8] : j + 8) * rb);
    hb_kv_widen(op->kfmt, op->kc + (size_t)(sr ? sr[j] : j) * rb, op->kRow, kb + (ptrdiff_t)j * op->kRow);
  }
}

/* row r's keys widened into this thread's kb, reusing what the call's previous items left there */
static const float *widened(const hb_attn_ops *op, int r, unsigned long long gen) {
  attn_scratch *t = &tl_scr;
  const int n = op->nsel[r], same = t->gen == gen && t->op == op;
  const int have = !same ? 0 : !op->sel ? t->n : t->row == r ? n : 0;
  if (have < n) widen_keys(op, r, have, n, t->kb);
  t->gen = gen; t->op = op; t->row = r;
  t->n = have > n ? have : n;
  return t->kb;
}

static void attn_item(const hb_attn_ops *op, int s, int nr, int h0, int G, float *p /* [max(G, 4), maxn] */,
                      unsigned long long gen) {
  if (op->kc) { /* f16 / q8 keys and values: each row over its keys widened (the same bits as an f32 cache of them) */
    for (int r = s; r < s + nr; r++) {
      hb_attn_ops w = *op;
      w.kc = NULL; w.sel = NULL;
      w.k = w.v = op->nsel[r] > 0 ? widened(op, r, gen) : tl_scr.kb;
      w.vRow = w.kRow;
      attn_item(&w, r, 1, h0, G, p, gen);   /* (no keys: zeros) */
    }
    return;
  }
  if (nr == 4 && rows4_ok(op, s)) {
    for (int g = 0; g < G; g++) attn_rows4(op, s, h0 + g, p);
    return;
  }
  for (int r = s; r < s + nr; r++) {
    if (op->nsel[r] <= 0) {
      float *os = op->out + (ptrdiff_t)r * op->oRow;
      for (int g = 0; g < G; g++) memset(os + (ptrdiff_t)(h0 + g) * op->oHead, 0, sizeof(float) * (size_t)op->dv);
      continue;
    }
    for (int g0 = 0; g0 < G; g0 += 4)
      hb_attn_quad(op, r, h0 + g0, G - g0 < 4 ? G - g0 : 4, p + (size_t)g0 * op->maxn, NULL, g0 == 0);
  }
}

/* rows s..s+nr-1 of op, heads h0..h0+G-1: NaN (out of memory: the failure visible instead of silent), or run on this
 * thread's scratch (maxn keys at most) */
static void nan_item(const hb_attn_ops *op, int s, int nr, int h0, int G) {
  for (int r = s; r < s + nr; r++)
    for (int k = 0; k < G; k++) {
      float *o = op->out + (ptrdiff_t)r * op->oRow + (ptrdiff_t)(h0 + k) * op->oHead;
      for (int e = 0; e < op->dv; e++) o[e] = NAN;
    }
}
static void run_item(const hb_attn_ops *op, int s, int nr, int h0, int G, unsigned long long gen) {
  attn_scratch *t = &tl_scr;
  const size_t maxn = op->maxn > 0 ? (size_t)op->maxn : 1;
  float *p = scratch(&t->p, &t->pcap, (size_t)(G > 4 ? G : 4) * maxn);
  if (p && (!op->kc || scratch(&t->kb, &t->kcap, maxn * (size_t)op->kRow))) attn_item(op, s, nr, h0, G, p, gen);
  else nan_item(op, s, nr, h0, G);
}

/* Items of a widened segment are numbered row by row (a row's head groups in turn, so a thread's next claim finds
 * that row's keys widened); the others head group by head group (see above). */
static void attn_task(void *ctx, int lo, int hi) {
  const attn_ctx *c = ctx;
  attn_scratch *t = &tl_scr;
  const size_t maxn = c->seg[0].maxn > 0 ? (size_t)c->seg[0].maxn : 1;
  const int wide = c->seg[0].kc != NULL;
  float *p = scratch(&t->p, &t->pcap, (size_t)(c->G > 4 ? c->G : 4) * maxn);
  const int ok = p && (!wide || scratch(&t->kb, &t->kcap, maxn * (size_t)c->seg[0].kRow));
  int a = 0, b = c->nseg - 1;          /* the segment holding item lo */
  while (a < b) { const int m = (a + b + 1) / 2; if (c->first[m] <= lo) a = m; else b = m - 1; }
  for (int it = lo, g = a; it < hi; it++) {
    while (it >= c->first[g + 1]) g++;
    const hb_attn_ops *op = &c->seg[g];
    const int local = it - c->first[g], blocks = (c->first[g + 1] - c->first[g]) / c->ngroups;
    const int s = (wide ? local / c->ngroups : local % blocks) * c->blk;
    const int h0 = (wide ? local % c->ngroups : local / blocks) * c->G;
    const int G = c->H - h0 < c->G ? c->H - h0 : c->G, nr = c->rows[g] - s < c->blk ? c->rows[g] - s : c->blk;
    if (ok) attn_item(op, s, nr, h0, G, p, c->gen);
    else nan_item(op, s, nr, h0, G);
  }
}

/* every segment's maxn: the most keys of any row of any of them (the scratch width); returns the rows in all */
static int set_maxn(hb_attn_ops *segs, const int *rows, int nseg) {
  int S = 0, maxn = 0;
  for (int g = 0; g < nseg; g++) {
    S += rows[g];
    for (int s = 0; s < rows[g]; s++) if (segs[g].nsel[s] > maxn) maxn = segs[g].nsel[s];
  }
  for (int g = 0; g < nseg; g++) segs[g].maxn = maxn;
  return S;
}

/* run segs[0..nseg) (rows[g] rows each) as one pool job */
static void attn_jobs(hb_attn_ops *segs, const int *rows, int nseg, int H) {
  const int S = set_maxn(segs, rows, nseg);
  if (S <= 0) return;
  const int blk = segs[0].kHead != 0 && segs[0].vHead != 0 ? 4 : 1;
  /* groups of 8 heads (two quads), or 4, while that still leaves >= 2 items per thread */
  int G = H < 8 ? H : 8;
  while (G > 4 && (long)((S + blk - 1) / blk) * ((H + G - 1) / G) < 2L * hb_nthreads()) G = 4;
  const int ngroups = (H + G - 1) / G;
  int one[2], *first = nseg == 1 ? one : malloc(sizeof(int) * (size_t)(nseg + 1));
  if (!first) return;
  first[0] = 0;
  for (int g = 0; g < nseg; g++) first[g + 1] = first[g] + (rows[g] + blk - 1) / blk * ngroups;
  attn_ctx c = { segs, first, rows, nseg, H, G, ngroups, blk, atomic_fetch_add(&attn_gen, 1) + 1 };
  hb_parallel_for(first[nseg], 1, attn_task, &c);
  if (first != one) free(first);
}

static void attn_run(hb_attn_kern kn, int S, int H, int dk, int dv, const float *q, int qRow, int qHead, const float *k,
                     int kRow, int kHead, const float *v, int vRow, int vHead, const int32_t *sel,
                     const int32_t *nsel, int selRow, float scale, float *out, int oRow, int oHead) {
  if (S <= 0 || H <= 0 || dk < 0 || dv <= 0 || !q || !k || !v || !nsel || !out) return;
  hb_attn_ops op = { dk, dv, 0, q, k, v, qRow, qHead, kRow, kHead, vRow, vHead, sel, nsel, selRow, scale, out, oRow,
                     oHead, kn };
  attn_jobs(&op, &S, 1, H);
}

int hb_attn_set_make(hb_attn_set *set, int nseg, const double *desc, int H, int dk, int dv, const float *q, int qRow,
                     int qHead, int kRow, int kHead, int vRow, int vHead, const int32_t *sel, const int32_t *nsel, int selRow,
                     float scale, float *out, int oRow, int oHead, int kvfmt) {
  *set = (hb_attn_set){ 0 };
  const int widen = kvfmt == HB_KV_F16 || kvfmt == HB_KV_Q8;
  if (widen && (kRow != vRow || kHead != 0 || vHead != 0)) return 0;
  if (nseg <= 0 || !desc || H <= 0 || dk < 0 || dv <= 0 || !q || !nsel || !out) return 0;
  hb_attn_ops *segs = malloc(sizeof *segs * (size_t)nseg);
  int *r0 = malloc(sizeof(int) * 2 * (size_t)nseg), n = 0;
  if (!segs || !r0) { free(segs); free(r0); return 0; }
  const hb_attn_kern kn = hb_attn_kern_for(hb_simd_level());
  for (int g = 0; g < nseg; g++) {
    const double *d = desc + 4 * g;
    const int b0 = (int)d[0], rn = (int)d[1];
    const float *k = (const float *)(uintptr_t)d[2], *v = (const float *)(uintptr_t)d[3];
    if (rn <= 0 || b0 < 0 || !k || !v || (widen && k != v)) continue;
    segs[n] = (hb_attn_ops){ dk, dv, 0, q + (ptrdiff_t)b0 * qRow, k, v, qRow, qHead, kRow, kHead, vRow, vHead,
                             sel ? sel + (ptrdiff_t)b0 * selRow : NULL, nsel + b0, selRow, scale,
                             out + (ptrdiff_t)b0 * oRow, oRow, oHead, kn, widen ? (const uint8_t *)k : NULL, kvfmt };
    r0[n] = b0;
    r0[nseg + n++] = rn;
  }
  *set = (hb_attn_set){ segs, r0, r0 + nseg, n, H, atomic_fetch_add(&attn_gen, 1) + 1 };
  if (n > 0) set_maxn(segs, set->rows, n);
  return n;
}

void hb_attn_set_free(hb_attn_set *set) { free(set->segs); free(set->r0); *set = (hb_attn_set){ 0 }; }

void hb_attn_set_row(const hb_attn_set *set, int row, int h0, int G) {
  for (int g = 0; g < set->nseg; g++)
    if (row >= set->r0[g] && row < set->r0[g] + set->rows[g]) { run_item(&set->segs[g], row - set->r0[g], 1, h0, G, set->gen); return; }
}

/* hb_attn over several segments in one pool job: segment g = rows [r0, r0 + n) of q, sel, nsel and out (the
 * strides of hb_attn) against its own keys and values (addresses k, v: each conversation has its cache).
 * desc: f64[4] per segment: r0, n, k address, v address. Every row equals hb_attn of its segment alone,
 * bit for bit. A segment with n <= 0 or a null k / v is left out. kvfmt (HB_KV_F16 / HB_KV_Q8): the caches hold
 * rows in that format, keys and values the same rows (k = v, kRow = vRow, heads shared: the absorbed form); each row's
 * keys are widened first, so a row equals hb_attn over an f32 cache of the widened values, bit for bit. */
void hb_attn_segs(int nseg, const double *desc, int H, int dk, int dv, const float *q, int qRow, int qHead,
                  int kRow, int kHead, int vRow, int vHead, const int32_t *sel, const int32_t *nsel, int selRow,
                  float scale, float *out, int oRow, int oHead, int kvfmt) {
  hb_attn_set set;
  if (hb_attn_set_make(&set, nseg, desc, H, dk, dv, q, qRow, qHead, kRow, kHead, vRow, vHead, sel, nsel, selRow, scale,
                       out, oRow, oHead, kvfmt) > 0)
    attn_jobs(set.segs, set.rows, set.nseg, H);
  hb_attn_set_free(&set);
}

/* Scalar reference: same contract as hb_attn, plain sequential sums. */
void hb_attn_ref(int S, int H, int dk, int dv, const float *q, int qRow, int qHead, const float *k, int kRow,
                 int kHead, const float *v, int vRow, int vHead, const int32_t *sel, const int32_t *nsel, int selRow,
                 float scale, float *out, int oRow, int oHead) {
  attn_run(hb_attn_kern_for(HB_SCALAR), S, H, dk, dv, q, qRow, qHead, k, kRow, kHead, v, vRow, vHead, sel, nsel,
           selRow, scale, out, oRow, oHead);
}

/* q [..,dk] · k [..,dk] -> softmax -> · v [..,dv] -> out [..,dv]; operand (s|t, h) at base + row·(s|t) + head·h;
 * keys of row s: sel ? sel[s*selRow + j] : j, j < nsel[s] (0 keys -> zeros). out must not alias q/k/v. */
void hb_attn(int S, int H, int dk, int dv, const float *q, int qRow, int qHead, const float *k, int kRow, int kHead,
             const float *v, int vRow, int vHead, const int32_t *sel, const int32_t *nsel, int selRow, float scale,
             float *out, int oRow, int oHead) {
  attn_run(hb_attn_kern_for(hb_simd_level()), S, H, dk, dv, q, qRow, qHead, k, kRow, kHead, v, vRow, vHead, sel,
           nsel, selRow, scale, out, oRow, oHead);
}
