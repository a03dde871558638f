// The host half of a MoE layer in the Vulkan chain: router + routed experts on the CPU (the shared expert
// runs on the device). Same arithmetic and order as src/engine/moe.ts `moe` without the shared term:
// y = Σ_k g_k E_k(x), each chosen expert computed once over all its rows. Reads x [S,D], writes y [S,D].
import type { Config } from "../src/model/config.ts";
import type { Moe } from "../src/model/weights.ts";
import { axpy } from "../src/engine/hb.ts";
import { mm } from "../src/engine/mat.ts";
import { mlp, route, type Route } from "../src/engine/moe.ts";
import type { RunState } from "../src/engine/state.ts";

export function routedExperts(cfg: Config, st: RunState, w: Moe, x: Float32Array, S: number, y: Float32Array): void {
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
}
