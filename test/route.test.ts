// The router (spec §3.4, ffi/route.c) against a direct implementation: sigmoid scores, bias only for choosing,
// group-limited selection, ties to the lower expert id, norm_topk_prob and the routed scale.
import { expect, test } from "bun:test";
import { route } from "../src/engine/moe.ts";
import { moeRoute, moeRouteGrouped } from "../src/native/hb.ts";
import type { Config } from "../src/model/config.ts";

function direct(c: Pick<Config, "n_routed_experts" | "num_experts_per_tok" | "n_group" | "topk_group" | "norm_topk_prob" | "routed_scaling_factor">,
  z: number[], bias: number[]) {
  const E = c.n_routed_experts, per = E / c.n_group;
  const s = z.map((v) => 1 / (1 + Math.exp(-v)));
  let cands = s.map((v, e) => v + bias[e]);
  if (c.n_group > 1) {
    const groups = Array.from({ length: c.n_group }, (_, g) => {
      const top2 = cands.slice(g * per, (g + 1) * per).sort((a, b) => b - a).slice(0, 2);
      return { g, score: top2.reduce((a, b) => a + b, 0) };
    });
    // brute force: best topk_group groups by score, ties to lower group id
    groups.sort((a, b) => b.score - a.score || a.g - b.g);
    const keep = new Set(groups.slice(0, c.topk_group).map((x) => x.g));
    cands = cands.map((v, e) => (keep.has(Math.floor(e / per)) ? v : -Infinity));
  }
  const chosen: number[] = [];
  for (let k = 0; k < c.num_experts_per_tok; k++) {
    let best = -1;
    for (let e = 0; e < E; e++) if (!chosen.includes(e) && (best < 0 || cands[e] > cands[best])) best = e;
    chosen.push(best);
  }
  const sum = chosen.reduce((a, e) => a + s[e], 0);
  const w = chosen.map((e) => (c.norm_topk_prob ? s[e] / (sum + 1e-20) : s[e]) * c.routed_scaling_factor);
  return { chosen, w };
}

test("route matches the direct §3.4 implementation, grouped and ungrouped, with ties", () => {
  let seed = 1;
  const rnd = () => ((seed = (seed * 48271) % 2147483647) / 2147483647);
  let grouped = 0;
  for (let trial = 0; trial < 400; trial++) {
    const n_group = [1, 2, 4, 8][trial % 4], E = n_group * (2 + (trial % 3));
    const c = {
      n_routed_experts: E, num_experts_per_tok: 1 + (trial % Math.min(E, 6)), n_group, topk_group: 1 + (trial % n_group),
      norm_topk_prob: trial % 2 === 0, routed_scaling_factor: trial % 3 === 0 ? 1 : 2.5,
    };
    // quantized logits make exact ties common
    const z = Array.from({ length: E }, () => Math.round((rnd() - 0.5) * 8) / 2);
    const bias = Array.from({ length: E }, () => (trial % 5 === 0 ? 0 : Math.round((rnd() - 0.5) * 4) / 8));
    const want = direct(c, z, bias);
    const out = { experts: new Int32Array(c.num_experts_per_tok), weights: new Float32Array(c.num_experts_per_tok) };
    route(c as Config, new Float32Array(z), new Float32Array(bias), out);
    expect([...out.experts]).toEqual(want.chosen);
    want.w.forEach((w, k) => expect(out.weights[k]).toBeCloseTo(w, 6));
    if (n_group > 1 && c.topk_group < n_group) grouped++;
  }
  expect(grouped).toBeGreaterThan(50);
});

test("moeRoute over S rows: each row as route alone; pairs grouped by expert (rows ascending) and the union", () => {
  let seed = 7;
  const rnd = () => ((seed = (seed * 48271) % 2147483647) / 2147483647);
  const c = { n_routed_experts: 16, num_experts_per_tok: 3, n_group: 4, topk_group: 2, norm_topk_prob: true, routed_scaling_factor: 2.5 } as Config;
  const E = 16, K = 3, S = 9, z = Float32Array.from({ length: S * E }, () => Math.round((rnd() - 0.5) * 8) / 2);
  const bias = Float32Array.from({ length: E }, () => Math.round((rnd() - 0.5) * 4) / 8);
  const ex = new Int32Array(S * K), g = new Float32Array(S * K);
  const grp = { off: new Int32Array(E + 1), rows: new Int32Array(S * K), gates: new Float32Array(S * K), uni: new Int32Array(E), cnt: new Int32Array(E) };
  const nu = moeRouteGrouped(S, E, K, z, bias, c.n_group, c.topk_group, true, 2.5, ex, g, grp.off, grp.rows, grp.gates, grp.uni, grp.cnt);
  const pairs: [number, number, number][] = []; // (expert, row, gate) in expert then row order
  for (let s = 0; s < S; s++) {
    const out = { experts: new Int32Array(K), weights: new Float32Array(K) };
    route(c, z.subarray(s * E, (s + 1) * E), bias, out);
    expect(ex.subarray(s * K, (s + 1) * K)).toEqual(out.experts);
    expect(g.subarray(s * K, (s + 1) * K)).toEqual(out.weights);
    for (let k = 0; k < K; k++) pairs.push([out.experts[k], s, out.weights[k]]);
  }
  pairs.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  expect([...grp.rows]).toEqual(pairs.map((p) => p[1]));
  expect([...grp.gates]).toEqual(pairs.map((p) => p[2]));
  const uni = [...new Set(pairs.map((p) => p[0]))];
  expect(nu).toBe(uni.length);
  expect([...grp.uni.subarray(0, nu)]).toEqual(uni);
  expect([...grp.cnt.subarray(0, nu)]).toEqual(uni.map((e) => pairs.filter((p) => p[0] === e).length));
  for (let e = 0; e < E; e++) expect(grp.off[e + 1] - grp.off[e]).toBe(pairs.filter((p) => p[0] === e).length);
  expect(() => moeRoute(S, E, 17, z, bias, 1, 1, true, 1, new Int32Array(S * 17), new Float32Array(S * 17))).toThrow("bad sizes");
  expect(() => moeRoute(S, E, K, z.subarray(1), bias, 1, 1, true, 1, ex, g)).toThrow("buffers too small");
});
