// The MTP head (spec §3.5): u = W_eh [RMS(E[t]; enorm) ‖ RMS(h'; hnorm)], one MoE decoder layer with
// its own KV rows (dense attention over MTP positions), then lm_head · RMS(u'; shared_head.norm).
// h' = RMS(h; model.norm) for a main hidden state, or the previous step's raw u' when chaining.
// State: the MTP KVCache passed in (one layer); scratch in RunState.
import { rmsnorm } from "../native/hb.ts";
import { mm } from "./mat.ts";
import { block, embedRow, type ForwardOpts } from "./forward.ts";
import { reserveNaive } from "./attention.ts";
import { activePolicy } from "./quality.ts";
import type { Model } from "./model.ts";
import type { RunState } from "./state.ts";
import type { KVCache } from "./kv.ts";

/**
 * n MTP rows at MTP positions pos0.. of `kv`: tokens[j] with hidden[j] ([n, D]). `raw`: hidden is a
 * previous u' (chained drafts) rather than a main residual. Writes logits [n, V] to st.logits for
 * the rows selected by opts.logits ("all" | "last"); leaves u' [n, D] in st.x.
 */
export function mtpForward(m: Model, st: RunState, kv: KVCache, pos0: number, tokens: ArrayLike<number>,
  hidden: Float32Array, raw: boolean, opts: ForwardOpts = {}): number {
  const mt = m.w.mtp;
  if (!mt) throw new Error("this model has no MTP layer");
  const c = m.cfg, D = c.hidden_size, eps = c.rms_norm_eps, n = tokens.length;
  if (opts.exact !== undefined) st.exact = opts.exact;
  if (opts.quality !== undefined) st.quality = activePolicy(opts.quality);
  st.ensure(n, pos0 + n);
  if (pos0 > kv.len) throw new Error(`MTP position ${pos0} leaves a gap after ${kv.len} rows`);
  kv.reserve(pos0 + n);
  const segs = [{ kv, r0: 0, n, pos0 }];
  reserveNaive(c, st, segs, opts.attn ?? "auto");
  for (let j = 0; j < n; j++) {
    const t = tokens[j];
    if (!Number.isInteger(t) || t < 0 || t >= c.vocab_size) throw new RangeError(`MTP token ${t} outside [0, ${c.vocab_size})`);
    st.pos[j] = pos0 + j; st.nk[j] = pos0 + j + 1;
    const e = st.ecat.subarray(j * 2 * D, j * 2 * D + D), g = st.ecat.subarray(j * 2 * D + D, (j + 1) * 2 * D);
    embedRow(m.w.embed, t, D, st.xb.subarray(0, D));
    rmsnorm(st.xb, mt.enorm, e, 1, D, eps);
    const h = hidden.subarray(j * D, (j + 1) * D);
    if (raw) rmsnorm(h, mt.hnorm, g, 1, D, eps);
    else { rmsnorm(h, m.w.norm, st.xb, 1, D, eps); rmsnorm(st.xb, mt.hnorm, g, 1, D, eps); }
  }
  mm(mt.eh_proj, st.ecat, n, st.x, st.exact); // u = W_eh [e ‖ g] -> [n, D]
  block(m, st, mt.layer, c.num_hidden_layers, 0, segs, n, "dense", opts);
  kv.len = pos0 + n; kv.wrote(pos0);
  const which = opts.logits ?? "all";
  if (which === "none") return 0;
  const r0 = which === "all" ? 0 : n - 1, rows = n - r0;
  rmsnorm(st.x.subarray(r0 * D), mt.head_norm, st.xb, rows, D, eps);
  mm(m.w.lm_head, st.xb, rows, st.logits, st.exact);
  return rows;
}
