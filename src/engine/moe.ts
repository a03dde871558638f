// The FFNs (spec §3.4): the dense SwiGLU MLP, and the MoE with the sigmoid router (bias only for
// choosing, optional group-limited routing, norm_topk_prob, routed_scaling_factor), batch-union
// expert execution (each chosen expert runs once over all its rows) and the ungated shared expert.
// Reads x = st.xb [S, D], writes st.ao [S, D]. Stateless apart from RunState scratch.
import type { Config } from "../model/config.ts";
import type { Mlp, Moe } from "../model/weights.ts";
import { axpy, add, swiglu } from "./hb.ts";
import { mm } from "./mat.ts";
import type { RunState } from "./state.ts";

/** y [S,D] = W_down (silu(W_gate x) ⊙ W_up x) for S rows of x [S,D] */
export function mlp(st: RunState, w: Mlp, x: Float32Array, S: number, y: Float32Array): void {
  const F = w.gate.O;
  mm(w.gate, x, S, st.hg);
  mm(w.up, x, S, st.hu);
  swiglu(st.hg, st.hu, st.hg, S * F);
  mm(w.down, st.hg, S, y);
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
  const D = cfg.hidden_size, E = cfg.n_routed_experts, K = cfg.num_experts_per_tok;
  mm(w.router, x, S, st.z); // [S, E] in f32
  const rows: number[][] = Array.from({ length: E }, () => []);
  const gates: number[][] = Array.from({ length: E }, () => []);
  const r: Route = { experts: new Int32Array(K), weights: new Float32Array(K) };
  for (let s = 0; s < S; s++) {
    route(cfg, st.z.subarray(s * E, (s + 1) * E), w.bias, r);
    for (let k = 0; k < K; k++) { rows[r.experts[k]].push(s); gates[r.experts[k]].push(r.weights[k]); }
  }
  y.fill(0, 0, S * D);
  for (let e = 0; e < E; e++) {
    const n = rows[e].length;
    if (n === 0) continue;
    for (let j = 0; j < n; j++) st.xe.set(x.subarray(rows[e][j] * D, (rows[e][j] + 1) * D), j * D);
    mlp(st, w.expert(e), st.xe, n, st.ye);
    for (let j = 0; j < n; j++) axpy(y.subarray(rows[e][j] * D), gates[e][j], st.ye.subarray(j * D), D);
  }
  if (w.shared) {
    mlp(st, w.shared, x, S, st.ye);
    add(y, st.ye, S * D);
  }
}
