/* libhb DSA family (spec §3.3): the lightning-indexer scores (hb_index_scores, on the attention
 * micro-kernels of attn.h) and the top-k key selection with the spec's tie rule (hb_dsa_select).
 * Holds no state; select needs no scratch beyond a stack histogram. */
#include "attn.h"
#include <string.h>

/* ---------------- hb_index_scores ---------------- */
/* Work item = (s, block of IDX_TB keys); 4 heads × 2 keys per micro-kernel call, heads summed ascending. */
#define IDX_TB 256
typedef struct {
  int S, nh, hd, nblk; const float *qI, *w, *kI; const int32_t *nk; float *out; int outRow; float scale; hb_attn_kern kn;
} idx_ctx;

static void idx_task(void *ctx, int lo, int hi) {
  const idx_ctx *c = ctx;
  for (int it = lo; it < hi; it++) {
    const int s = it / c->nblk, t0 = (it % c->nblk) * IDX_TB, n = c->nk[s];
    const int t1 = t0 + IDX_TB < n ? t0 + IDX_TB : n;
    const float *qs = c->qI + (ptrdiff_t)s * c->nh * c->hd, *ws = c->w + (ptrdiff_t)s * c->nh;
    float *o = c->out + (ptrdiff_t)s * c->outRow;
    for (int t = t0; t < t1; t += 2) {
      const int tb = t + 1 < t1 ? t + 1 : t;
      const float *b[2] = { c->kI + (ptrdiff_t)t * c->hd, c->kI + (ptrdiff_t)tb * c->hd };
      float acc0 = 0.0f, acc1 = 0.0f, d[8];
      for (int h = 0; h < c->nh; h += 4) {
        const int m = c->nh - h < 4 ? c->nh - h : 4;
        const float *a[4];
        for (int r = 0; r < 4; r++) a[r] = qs + (ptrdiff_t)(h + (r < m ? r : m - 1)) * c->hd;
        c->kn.dot4x2(a, b, c->hd, d);
        for (int r = 0; r < m; r++) {
          float x0 = c->scale * d[2 * r], x1 = c->scale * d[2 * r + 1];
          acc0 += ws[h + r] * (x0 > 0.0f ? x0 : 0.0f);
          acc1 += ws[h + r] * (x1 > 0.0f ? x1 : 0.0f);
        }
      }
      o[t] = acc0;
      if (tb != t) o[tb] = acc1;
    }
  }
}

/* qI [S, nh*hd], w [S, nh], kI [T, hd] -> out[s*outRow + t] = Σ_h w[s,h]·ReLU(scale·qI[s,h]·kI[t]), t < nk[s] */
void hb_index_scores(int S, int nh, int hd, const float *qI, const float *w, const float *kI, const int32_t *nk,
                     float *out, int outRow, float scale) {
  if (S <= 0 || nh <= 0 || hd < 0 || !qI || !w || !kI || !nk || !out) return;
  int maxn = 0;
  for (int s = 0; s < S; s++) if (nk[s] > maxn) maxn = nk[s];
  if (maxn == 0) return;
  idx_ctx c = { S, nh, hd, (maxn + IDX_TB - 1) / IDX_TB, qI, w, kI, nk, out, outRow, scale,
                hb_attn_kern_for(hb_simd_level()) };
  hb_parallel_for(S * c.nblk, 1, idx_task, &c);
}

/* ---------------- hb_dsa_select ---------------- */
/* Order-preserving float -> uint32 key (-0 mapped to +0 so key equality == float equality, NaN aside). */
static inline uint32_t fkey(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Radix select of the topk-th largest key in 3 passes (11+11+10 bits), then one ascending collection pass:
 * every key > thr, and the first `need` keys == thr, so rows come out sorted and the tie rule is exact. */
static void select_row(const float *x, int n, int topk, int32_t *sel, int32_t *nsel) {
  if (n <= topk) {
    for (int t = 0; t < n; t++) sel[t] = t;
    *nsel = n;
    return;
  }
  static const int shift[3] = { 21, 10, 0 }, width[3] = { 11, 11, 10 };
  uint32_t prefix = 0, hist[2048];
  int need = topk; /* rank of thr among the keys that share `prefix` (1 = largest) */
  for (int pass = 0; pass < 3; pass++) {
    const int sh = shift[pass], nb = 1 << width[pass], hs = sh + width[pass]; /* bits >= hs already fixed */
    memset(hist, 0, sizeof(uint32_t) * (size_t)nb);
    for (int t = 0; t < n; t++) {
      uint32_t kk = fkey(x[t]);
      if (hs == 32 || (kk >> hs) == (prefix >> hs)) hist[(kk >> sh) & (uint32_t)(nb - 1)]++;
    }
    int b = nb - 1;
    for (; b > 0; b--) { if ((int)hist[b] >= need) break; need -= (int)hist[b]; }
    prefix |= (uint32_t)b << sh;
  }
  int m = 0;
  for (int t = 0; t < n && m < topk; t++) {
    uint32_t kk = fkey(x[t]);
    if (kk > prefix) sel[m++] = t;
    else if (kk == prefix && need > 0) { sel[m++] = t; need--; }
  }
  *nsel = m;
}

typedef struct { const float *scores; int scoreRow; const int32_t *nk; int topk; int32_t *sel, *nsel; } sel_ctx;

static void sel_task(void *ctx, int lo, int hi) {
  const sel_ctx *c = ctx;
  for (int s = lo; s < hi; s++)
    select_row(c->scores + (ptrdiff_t)s * c->scoreRow, c->nk[s] > 0 ? c->nk[s] : 0, c->topk,
               c->sel + (ptrdiff_t)s * c->topk, c->nsel + s);
}

/* scores [S, scoreRow], nk [S] -> sel [S, topk] ascending, nsel [S] = min(nk, topk); spec §3.3 tie rule */
void hb_dsa_select(int S, const float *scores, int scoreRow, const int32_t *nk, int topk, int32_t *sel,
                   int32_t *nsel) {
  if (S <= 0 || !scores || !nk || !sel || !nsel) return;
  if (topk <= 0) { for (int s = 0; s < S; s++) nsel[s] = 0; return; }
  sel_ctx c = { scores, scoreRow, nk, topk, sel, nsel };
  hb_parallel_for(S, 1, sel_task, &c);
}
