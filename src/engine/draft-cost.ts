// When speculative decoding pays for itself, from the model's shapes: decode reads weights, so a round's cost is
// the weight bytes it reads (forwardBytes, roundCost). A round that keeps j of its k drafts yields j + 1 tokens, so
// it pays when the mean kept fraction j/k exceeds (c − 1)/k for a cost of c plain steps (costGate). Deterministic
// (no timing), so a seeded request decodes the same way every run. Holds no state.
import type { Config } from "../model/config.ts";
import type { Layer, Mat, Weights } from "../model/weights.ts";
import { GATE_DEFAULTS, type GateOpts } from "./speculative.ts";

/** The bench preset with a drafting MTP head, one stream: verifying 4 rows took 2.2-2.5× a one-row forward
 *  where the bytes say 2.06× (in-engine, 2.8-3.6 ms for one row), and 74% of 3 MTP drafts kept (3.05 tokens per
 *  round, 10.3 ms) decoded slower than plain steps (3.1 ms): the margin makes that case stay off. */
export const PAY_MARGIN = 1.2;

const bytes = (w: Mat | null | undefined) => (w ? w.data.byteLength + (w.scales?.byteLength ?? 0) : 0);

/** bytes of a layer's dense part (everything but the routed experts; its indexer when it runs one) and of one
 *  routed expert (0: none) */
function layerBytes(l: Layer, indexer: boolean): { dense: number; expert: number } {
  const a = l.attn, ix = indexer ? a.indexer : null;
  let dense = [a.q_a, a.q_b, a.q_proj, a.kv_a, a.kv_b, a.o, ix?.wq_b, ix?.wk, ix?.weights_proj].reduce((s, w) => s + bytes(w), 0);
  if (l.mlp) dense += bytes(l.mlp.gate) + bytes(l.mlp.up) + bytes(l.mlp.down);
  let expert = 0;
  if (l.moe) {
    const sh = l.moe.shared;
    dense += bytes(l.moe.router) + (sh ? bytes(sh.gate) + bytes(sh.up) + bytes(sh.down) : 0);
    // a streamed layer's experts are not all in memory: its shared expert has their shape (and, as converted, format)
    const e = l.moe.resolve ? sh : l.moe.expert(0);
    expert = e ? bytes(e.gate) + bytes(e.up) + bytes(e.down) : 0;
  }
  return { dense, expert };
}

/** Expected weight bytes of a forward of `rows` rows of one conversation (+ lm_head once): the main layers, or
 *  with `mtp` the MTP layer (dense attention: no indexer) and eh_proj. Every dense matrix is read once, but each MoE
 *  layer reads the union of the rows' experts (routing taken as uniform: E·(1 − (1 − K/E)^rows) of them). */
export function forwardBytes(cfg: Config, w: Weights, rows: number, mtp = false): number {
  const E = cfg.n_routed_experts, K = cfg.num_experts_per_tok;
  const union = E > 0 ? E * (1 - Math.pow(1 - K / E, rows)) : 0;
  const layers = mtp ? (w.mtp ? [w.mtp.layer] : []) : w.layers;
  let b = bytes(w.lm_head) + (mtp ? bytes(w.mtp?.eh_proj) : 0);
  layers.forEach((l, i) => {
    const x = layerBytes(l, !mtp && cfg.has_dsa && cfg.indexer_types[i] === "full");
    b += x.dense + union * x.expert;
  });
  return b;
}

/** A round of k drafts in plain decode steps: (verify forward of k+1 rows + k MTP steps) / one-row forward. */
export function roundCost(cfg: Config, w: Weights, k: number, mtp: boolean): number {
  const step = mtp && w.mtp ? forwardBytes(cfg, w, 1, true) : 0;
  return (forwardBytes(cfg, w, k + 1) + k * step) / forwardBytes(cfg, w, 1);
}

/** The acceptance gate's thresholds for rounds of k drafts (mtp: drafted by the MTP head): off below the kept
 *  fraction at which a round pays for itself, on again 0.15 above it; never drafts when nothing can pay. A round
 *  of cost c must pay for PAY_MARGIN·c, for what bytes leave out (the extra rows' arithmetic, their sampling). */
export function costGate(cfg: Config, w: Weights, k: number, mtp: boolean): Partial<GateOpts> {
  const off = (PAY_MARGIN * roundCost(cfg, w, k, mtp) - 1) / k;
  return off >= 1 ? { off, on: Infinity, probeEvery: Infinity } : { off, on: Math.min(1, off + 0.15), probeEvery: GATE_DEFAULTS.probeEvery };
}
