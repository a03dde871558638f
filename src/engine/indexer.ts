// The DSA lightning indexer (spec §3.3): on `full` layers it scores every visible key and selects
// `index_topk` of them per query row (tie rule in hb_dsa_select); `shared` layers reuse the last
// selection left in RunState.sel. Stores the new rows' indexer keys in the conversation's KVCache (indexerKeys,
// every new row) before the query rows select (indexerQueries: all of them, or a prompt's last rows). Fast
// mode on quantized weights scores over int8 keys (ikq.ts) where the SIMD level has that kernel.
import type { Config } from "../model/config.ts";
import type { Indexer } from "../model/weights.ts";
import { isQuant } from "../model/formats.ts";
import { dsaSelect, type IdxKeys, indexQ8Ok, indexScores, indexScoresQ8, rope } from "../native/hb.ts";
import { ikQ8 } from "./ikq.ts";
import { mm } from "./mat.ts";
import type { RunState } from "./state.ts";
import type { Segment, SelectHook } from "./batch.ts";

const K_NORM_EPS = 1e-6;
const dr = (cfg: Config) => cfg.qk_rope_head_dim; // the roped leading dims of each indexer head

/**
 * The new rows' indexer keys (all S rows of the batch), for mlaKv to store in each segment's KVCache in the call that
 * writes its MLA rows: kI = LN(W_wk h) (st.kI = W_wk h already, batched with the attention's projections), the
 * first dr dims roped. One descriptor, reused.
 */
export function indexerKeys(cfg: Config, st: RunState, w: Indexer): IdxKeys {
  keys.kI = st.kI; keys.hd = cfg.index_head_dim; keys.w = w.k_norm_w; keys.b = w.k_norm_b;
  return keys;
}
const keys: IdxKeys = { kI: new Float32Array(0), hd: 0, w: new Float32Array(0), b: new Float32Array(0), eps: K_NORM_EPS };

/**
 * Fill st.sel/st.nsel for the query rows: the rows of `qs` (each the last rows of the segment written, `written`
 * its counterpart: a prompt's last layer asks only for the rows that get logits), their h = st.xb, c_q = st.c_q and
 * positions st.pos/st.nk at the query rows. projected: the caller already wrote st.qI = W_wq_b c_q (roped) and
 * st.iw = W_weights_proj h. The keys (indexerKeys) are in the caches first.
 */
export function indexerQueries(cfg: Config, st: RunState, w: Indexer, layer: number, kvLayer: number,
  qs: Segment[], written: Segment[], n: number, hook?: SelectHook, projected = false): void {
  const nh = cfg.index_n_heads, hd = cfg.index_head_dim, topk = cfg.index_topk;
  // qI = W_wq_b c_q -> [n, nh*hd], first dr dims of each head roped (projected: both done in the caller's mlaQ call)
  if (!projected) {
    mm(w.wq_b, st.c_q, n, st.qI, st.exact);
    rope(st.qI, n, nh * hd, nh, hd, dr(cfg), st.pos, cfg.rope_theta);
  }
  // w = W_weights_proj h · nh^(-1/2) -> [n, nh]
  if (!projected) mm(w.weights_proj, st.xb, n, st.iw, st.exact);
  const wscale = Math.fround(1 / Math.sqrt(nh));
  for (let i = 0; i < n * nh; i++) st.iw[i] *= wscale;

  // scores per segment (its own keys) into st.scores rows; rows that see at most topk keys need none
  // int8 keys where fast mode approximates anyway (quantized indexer weights; float weights stay exact)
  const q8 = !st.exact && isQuant(w.wk.fmt) && (st.indexQ8 ??= indexQ8Ok(hd)), scale = Math.fround(1 / Math.sqrt(hd));
  qs.forEach((g, i) => {
    if (g.pos0 + g.n <= topk) return;
    const ik = g.kv.ik[kvLayer]!, wr = written[i];
    const qI = st.qI.subarray(g.r0 * nh * hd), iw = st.iw.subarray(g.r0 * nh), nk = st.nk.subarray(g.r0, g.r0 + g.n);
    const out = st.scores.subarray(g.r0 * st.ctx);
    if (q8) indexScoresQ8(g.n, nh, hd, qI, iw, ikQ8(g.kv, kvLayer, wr.pos0, wr.pos0 + wr.n), nk, out, st.ctx, scale);
    else indexScores(g.n, nh, hd, qI, iw, ik, nk, out, st.ctx, scale);
  });
  // then every row's selection in one call (rows are independent)
  dsaSelect(n, st.scores, st.ctx, st.nk, topk, st.sel, st.nsel);
  if (hook)
    for (const g of qs)
      for (let j = 0; j < g.n; j++) {
        const r = g.r0 + j;
        hook(layer, g.pos0 + j, st.sel.subarray(r * topk, r * topk + st.nsel[r]));
      }
}
