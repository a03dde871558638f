// Quality policies (issue #31 item 6): opt-in router changes that trade the model's quality for speed (fewer experts
// per token, router top-p) — not the model as trained, so off by default, announced loudly and reported in /props
// and /metrics. Absent (RunState.quality null) the forward takes exactly its default path (moe.ts -> ffi/route.c);
// at K' = num_experts_per_tok and P = 1 the policy path is an identity (the same bits). The exact rules: QualityPolicy.
// State: `policyCount`, rows routed under a policy and the experts they kept (read by bench/quality.ts).
import type { Config } from "../model/config.ts";
import { moeRoute } from "../native/hb.ts";

/** Rows routed under a policy (every MoE layer's) and the routed experts they kept, since the start: reset freely. */
export const policyCount = { rows: 0, experts: 0 };

/**
 * The opt-in quality policies a model runs with (absent fields: off). Plain data (structured-cloned to the worker).
 *
 *   expertsPerToken K' (1 ≤ K' ≤ num_experts_per_tok): the router chooses the top K' of the biased scores
 *     c = sigmoid(z) + bias (the same choice rule as ffi/route.c: descending c, ties to the lower expert id, group
 *     limits first) instead of the top num_experts_per_tok; the K' chosen gates are normalized over those K' as
 *     norm_topk_prob says (g = s / Σ_chosen s, else g = s) and scaled by routed_scaling_factor as usual.
 *   routerTopP P (0 < P ≤ 1): after that choice (of K' or num_experts_per_tok experts), order the chosen by their
 *     unbiased score s = sigmoid(z) descending (ties: the choice order), and keep the shortest prefix whose shares
 *     w_k = s_k / Σ_chosen s sum to ≥ P (at least one expert). The kept gates are renormalized over the kept:
 *     g_k = s_k / Σ_kept s · (norm_topk_prob ? 1 : Σ_chosen s) · routed_scaling_factor — the chosen experts' total
 *     gate mass is kept. A row that keeps all its chosen experts keeps their gates bit for bit.
 */
export interface QualityPolicy {
  expertsPerToken?: number; // K' in [1, num_experts_per_tok]: experts chosen per token
  routerTopP?: number;      // P in (0, 1]: keep the smallest set of the chosen whose normalized weights reach P
}

/** A policy with at least one field set, or null (off: the exact path). */
export function activePolicy(q: QualityPolicy | null | undefined): QualityPolicy | null {
  return q && (q.expertsPerToken !== undefined || q.routerTopP !== undefined) ? q : null;
}

/** Why a policy does not fit a model whose num_experts_per_tok is `topk` (null: it does), naming the CLI flags. */
export function policyError(q: QualityPolicy, topk: number): string | null {
  const K = q.expertsPerToken, P = q.routerTopP;
  if (K !== undefined && !(Number.isInteger(K) && K >= 1 && K <= topk))
    return `--experts-per-token must be an integer in [1, ${topk}] (the model's num_experts_per_tok), got ${K}`;
  if (P !== undefined && !(Number.isFinite(P) && P > 0 && P <= 1)) return `--router-top-p must be in (0, 1], got ${P}`;
  return null;
}

/** The loud start-up warning lines of an active policy ([] when off). */
export function policyWarnings(q: QualityPolicy | null | undefined, topk?: number): string[] {
  const out: string[] = [];
  if (q?.expertsPerToken !== undefined)
    out.push(`WARNING: --experts-per-token ${q.expertsPerToken} runs ${q.expertsPerToken} of the model's ${topk ?? "routed"} experts per token: ` +
      "output quality drops (not the model as trained)");
  if (q?.routerTopP !== undefined)
    out.push(`WARNING: --router-top-p ${q.routerTopP} drops each token's chosen experts past ${q.routerTopP} of the routing weight: ` +
      "output quality drops (not the model as trained)");
  return out;
}

/** The policy as /props reports it (null: off). */
export function policyReport(q: QualityPolicy | null | undefined): { experts_per_token: number | null; router_top_p: number | null } {
  return { experts_per_token: q?.expertsPerToken ?? null, router_top_p: q?.routerTopP ?? null };
}

/** routePolicy's top-p scratch (unbiased scores, their order, the experts reordered), grown to Kp once: no allocation
 *  per call in the forward */
let cut = { s: new Float64Array(0), o: new Int32Array(0), e0: new Int32Array(0) };

/**
 * Route S rows of router logits z [S, E] under policy q: row r's chosen experts and gates in experts / gates
 * [r·Kp, r·Kp + kept[r]) (Kp = q.expertsPerToken ?? num_experts_per_tok; router order, then, for rows top-p cut,
 * descending s), kept[r] ≤ Kp. Returns Kp.
 */
export function routePolicy(cfg: Config, q: QualityPolicy, S: number, z: Float32Array, bias: Float32Array | null,
  experts: Int32Array, gates: Float32Array, kept: Int32Array): number {
  const E = cfg.n_routed_experts, Kp = q.expertsPerToken ?? cfg.num_experts_per_tok;
  moeRoute(S, E, Kp, z, bias, cfg.n_group, cfg.topk_group, cfg.norm_topk_prob, cfg.routed_scaling_factor, experts, gates);
  kept.fill(Kp, 0, S);
  policyCount.rows += S; policyCount.experts += S * Kp;
  const P = q.routerTopP;
  if (P === undefined || P >= 1) return Kp;
  if (cut.s.length < Kp) cut = { s: new Float64Array(Kp), o: new Int32Array(Kp), e0: new Int32Array(Kp) };
  const { s, o, e0 } = cut;
  for (let r = 0; r < S; r++) {
    const b = r * Kp;
    let sum = 0;
    for (let k = 0; k < Kp; k++) { s[k] = 1 / (1 + Math.exp(-z[r * E + experts[b + k]])); sum += s[k]; }
    for (let k = 0; k < Kp; k++) { // o: 0..Kp-1 by descending s, ties in choice order (a stable insertion sort)
      let j = k;
      for (; j > 0 && s[o[j - 1]] < s[k]; j--) o[j] = o[j - 1];
      o[j] = k;
    }
    let n = 0, acc = 0, keptSum = 0;
    while (n < Kp) { acc += s[o[n]] / (sum + 1e-20); keptSum += s[o[n]]; n++; if (acc >= P) break; }
    if (n === Kp) continue; // everything kept: the gates stay as routed
    const mass = cfg.norm_topk_prob ? 1 : sum;
    for (let k = 0; k < n; k++) e0[k] = experts[b + o[k]];
    for (let k = 0; k < n; k++) {
      experts[b + k] = e0[k];
      gates[b + k] = s[o[k]] / (keptSum + 1e-20) * mass * cfg.routed_scaling_factor;
    }
    kept[r] = n;
    policyCount.experts -= Kp - n;
  }
  return Kp;
}

/** Group routed (row, gate) pairs by expert as ffi/route.c's hb_moe_route does (ascending expert, rows ascending
 *  within each): off [E+1], rows / rgates, and the union with its row counts (uni / cnt); returns the union's size.
 *  Row r's pairs: experts / gates [r·Kp, r·Kp + kept[r]). */
export function groupRoutes(S: number, E: number, Kp: number, experts: Int32Array, gates: Float32Array, kept: Int32Array,
  off: Int32Array, rows: Int32Array, rgates: Float32Array, uni: Int32Array, cnt: Int32Array): number {
  off.fill(0, 0, E + 1);
  for (let r = 0; r < S; r++) for (let k = 0; k < kept[r]; k++) off[experts[r * Kp + k] + 1]++;
  for (let e = 0; e < E; e++) off[e + 1] += off[e];
  for (let r = 0; r < S; r++)
    for (let k = 0; k < kept[r]; k++) {
      const e = experts[r * Kp + k], at = off[e]++;
      rows[at] = r; rgates[at] = gates[r * Kp + k];
    }
  for (let e = E; e > 0; e--) off[e] = off[e - 1];
  off[0] = 0;
  let nu = 0;
  for (let e = 0; e < E; e++) if (off[e + 1] > off[e]) { uni[nu] = e; cnt[nu] = off[e + 1] - off[e]; nu++; }
  return nu;
}
