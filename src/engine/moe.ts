// The FFNs (spec §3.4): the dense SwiGLU MLP, and the MoE with the sigmoid router (bias only for
// choosing, optional group-limited routing, norm_topk_prob, routed_scaling_factor), batch-union
// expert execution (each chosen expert runs once over all its rows) and the ungated shared expert.
// A streamed Moe (src/engine/experts/) resolves the union first and hands experts out resident-first;
// outputs are still added in ascending expert order, so results do not depend on the cache.
// Reads x = st.xb [S, D], writes st.ao [S, D]. Stateless apart from RunState scratch.
import type { Config } from "../model/config.ts";
import type { ExpertBatch, Mlp, Moe } from "../model/weights.ts";
import { axpy, add, swiglu } from "./hb.ts";
import { mm, mmMany } from "./mat.ts";
import type { RunState } from "./state.ts";

/** y [S,D] = W_down (silu(W_gate x) ⊙ W_up x) for S rows of x [S,D] */
export function mlp(st: RunState, w: Mlp, x: Float32Array, S: number, y: Float32Array): void {
  const F = w.gate.O;
  mmMany([w.gate, w.up], x, S, [st.hg, st.hu], st.exact); // one call: x quantized once in fast mode
  swiglu(st.hg, st.hu, st.hg, S * F);
  mm(w.down, st.hg, S, y, st.exact);
}

export interface Route { experts: Int32Array; weights: Float32Array } // [K] each

/** Router for one row: z [E] logits -> the K chosen experts and their gates (spec §3.4). */
export function route(cfg: Config, z: Float32Array, bias: Float32Array | null, out: Route): void {
  const E = cfg.n_routed_experts, K = cfg.num_experts_per_tok;
  const s = new Float64Array(E), c = new Float64Array(E);
  for (let e = 0; e < E; e++) {
    s[e] = 1 / (1 + Math.exp(-z[e]));
    c[e] = s[e] + (bias ? bias[e] : 0);
  }
  if (cfg.n_group > 1) limitGroups(cfg, c);
  // top-K of c, ties -> lower expert id
  const order = Array.from({ length: E }, (_, e) => e);
  order.sort((a, b) => (c[b] - c[a]) || (a - b));
  let sum = 0;
  for (let k = 0; k < K; k++) { out.experts[k] = order[k]; sum += s[order[k]]; }
  for (let k = 0; k < K; k++) {
    let g = s[order[k]];
    if (cfg.norm_topk_prob) g /= sum + 1e-20;
    out.weights[k] = g * cfg.routed_scaling_factor;
  }
}

/** Group-limited routing: keep the topk_group groups with the largest sum of their top-2 c. */
export function limitGroups(cfg: Config, c: Float64Array): void {
  const E = cfg.n_routed_experts, G = cfg.n_group, per = E / G;
  const gscore: number[] = [];
  for (let g = 0; g < G; g++) {
    let m1 = -Infinity, m2 = -Infinity;
    for (let e = g * per; e < (g + 1) * per; e++) {
      if (c[e] > m1) { m2 = m1; m1 = c[e]; } else if (c[e] > m2) m2 = c[e];
    }
    gscore.push(per > 1 ? m1 + m2 : m1);
  }
  const keep = gscore.map((v, g) => g).sort((a, b) => (gscore[b] - gscore[a]) || (a - b)).slice(0, cfg.topk_group);
  const kept = new Set(keep);
  for (let g = 0; g < G; g++) if (!kept.has(g)) for (let e = g * per; e < (g + 1) * per; e++) c[e] = -Infinity;
}

/** MoE over S rows: y = Σ_k g_k E_k(x) + shared(x), each unique expert computed once for its rows. */
export function moe(cfg: Config, st: RunState, w: Moe, x: Float32Array, S: number, y: Float32Array): void {
  routed(cfg, st, w, x, S, y);
  if (w.shared) {
    mlp(st, w.shared, x, S, st.ye);
    add(y, st.ye, S * cfg.hidden_size);
  }
}

/** y [S,D] = Σ_k g_k E_k(x) over the routed experts only (streamed through w.resolve when it has one). */
export function routed(cfg: Config, st: RunState, w: Moe, x: Float32Array, S: number, y: Float32Array): void {
  const D = cfg.hidden_size, E = cfg.n_routed_experts, K = cfg.num_experts_per_tok;
  mm(w.router, x, S, st.z, true); // [S, E], always exact (f32 router)
  const rows: number[][] = Array.from({ length: E }, () => []);
  const gates: number[][] = Array.from({ length: E }, () => []);
  const r: Route = { experts: new Int32Array(K), weights: new Float32Array(K) };
  for (let s = 0; s < S; s++) {
    route(cfg, st.z.subarray(s * E, (s + 1) * E), w.bias, r);
    for (let k = 0; k < K; k++) { rows[r.experts[k]].push(s); gates[r.experts[k]].push(r.weights[k]); }
  }
  y.fill(0, 0, S * D);
  const union: number[] = [], counts: number[] = [];
  for (let e = 0; e < E; e++) if (rows[e].length > 0) { union.push(e); counts.push(rows[e].length); }
  const batch = w.resolve?.(union, counts);
  if (!batch) {
    for (const e of union) {
      expertRows(st, w.expert(e), x, rows[e], D, st.ye);
      accumulate(y, rows[e], gates[e], st.ye, D);
    }
  } else {
    try { streamed(st, batch, union, rows, gates, x, D, y); } finally { batch.end(); }
  }
}

/** ye [n,D] = E(x rows) for the n rows routed to one expert. */
function expertRows(st: RunState, w: Mlp, x: Float32Array, rows: number[], D: number, ye: Float32Array): void {
  for (let j = 0; j < rows.length; j++) st.xe.set(x.subarray(rows[j] * D, (rows[j] + 1) * D), j * D);
  mlp(st, w, st.xe, rows.length, ye);
}

/** y[row] += gate · ye[j] for the expert's rows. */
function accumulate(y: Float32Array, rows: number[], gates: number[], ye: Float32Array, D: number): void {
  for (let j = 0; j < rows.length; j++) axpy(y.subarray(rows[j] * D), gates[j], ye.subarray(j * D), D);
}

/**
 * A streamed batch: experts computed in the batch's order (resident first, misses as they arrive),
 * their outputs added to y in ascending expert order all the same (outputs computed ahead of that
 * order wait in the batch's stage), so y is bit-identical whatever was cached.
 */
function streamed(st: RunState, batch: ExpertBatch, union: number[], rows: number[][], gates: number[][], x: Float32Array, D: number, y: Float32Array): void {
  const ahead = new Set<number>();
  let need = 0;
  for (let c = 0, k = 0; k < batch.order.length; k++) {
    const e = batch.order[k];
    if (e === union[c]) { c++; while (c < union.length && ahead.has(union[c])) c++; }
    else { ahead.add(e); need += rows[e].length * D; }
  }
  const stage = need > 0 ? batch.stage(need) : st.ye;
  const at = new Map<number, number>();
  let next = 0, top = 0;
  for (const e of batch.order) {
    const inOrder = e === union[next];
    const out = inOrder ? st.ye : stage.subarray(top, top + rows[e].length * D);
    expertRows(st, batch.get(e), x, rows[e], D, out);
    batch.release(e);
    if (!inOrder) { at.set(e, top); top += rows[e].length * D; continue; }
    accumulate(y, rows[e], gates[e], st.ye, D);
    for (next++; next < union.length && at.has(union[next]); next++) {
      const u = union[next];
      accumulate(y, rows[u], gates[u], stage.subarray(at.get(u)!), D);
    }
  }
}
