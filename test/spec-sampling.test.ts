// Rejection sampling (temperature > 0) is lossless: over many seeded draws on small fixed
// distributions, tokens produced through speculative rounds (drafts from q, verified with `accept`)
// follow the target's processed distribution — chi-square tests at p = 0.001, per position and
// jointly over two positions — and match direct sampling. Runs `accept` on synthetic logit rows.
import { describe, expect, test } from "bun:test";
import { accept, type Draft } from "../src/engine/speculative.ts";
import { Rng, Sampler, type SamplingParams } from "../src/engine/sampler.ts";

const V = 5;
// per-position target logits (history-independent, so positions can be simulated without a model)
const P_LOGITS = [
  Float32Array.from([2.0, 1.2, 0.3, -0.5, 0.9]),
  Float32Array.from([0.1, 0.4, 2.2, 1.0, -1.0]),
  Float32Array.from([1.0, 1.0, 0.2, 0.8, 1.5]),
];
// draft distributions: deliberately different from the targets
const Q = [
  Float64Array.from([0.1, 0.5, 0.2, 0.1, 0.1]),
  Float64Array.from([0.4, 0.1, 0.1, 0.3, 0.1]),
  Float64Array.from([0.2, 0.2, 0.2, 0.2, 0.2]),
];
/** chi-square critical value at p = 0.001 (Wilson–Hilferty; 16.27 for df 3, 37.70 for df 15) */
function crit(df: number): number {
  const a = 2 / (9 * df);
  return df * (1 - a + 3.0902 * Math.sqrt(a)) ** 3;
}

function chi2(counts: number[], probs: number[], n: number): { stat: number; df: number } {
  let stat = 0, df = -1;
  counts.forEach((c, i) => {
    const e = probs[i] * n;
    if (e <= 0) { expect(c).toBe(0); return; }
    stat += (c - e) ** 2 / e; df++;
  });
  return { stat, df };
}

function drawFrom(rng: Rng, q: Float64Array): number {
  let u = rng.next(), i = 0;
  for (; i < q.length - 1; i++) { u -= q[i]; if (u < 0) break; }
  return i;
}

/**
 * Generate `len` tokens speculatively with drafts of length k (stochastic from Q, or one-hot on a
 * fixed token when `oneHot`); returns the tokens of positions 0..len-1.
 */
function specRun(target: Sampler, draftRng: Rng, len: number, k: number, oneHot: boolean): number[] {
  const out: number[] = [];
  while (out.length < len) {
    const pos = out.length, kk = Math.min(k, len - pos - 1);
    const draft: Draft = { tokens: [], q: [] };
    for (let j = 0; j < kk; j++) {
      const q = Q[pos + j];
      if (oneHot) { draft.tokens.push((pos + j + 1) % V); draft.q!.push(null); }
      else { draft.tokens.push(drawFrom(draftRng, q)); draft.q!.push(q); }
    }
    const rows = new Float32Array((kk + 1) * V);
    for (let j = 0; j <= kk; j++) rows.set(P_LOGITS[pos + j], j * V);
    const { accepted, next } = accept(rows, V, draft, target);
    out.push(...draft.tokens.slice(0, accepted), next);
  }
  return out.slice(0, len);
}

const cases: { name: string; params: SamplingParams; oneHot: boolean; k: number }[] = [
  { name: "T=1, stochastic drafts q ≠ p, k=2", params: { temperature: 1 }, oneHot: false, k: 2 },
  { name: "T=0.7 top-k 4 top-p 0.9, stochastic drafts, k=2", params: { temperature: 0.7, top_k: 4, top_p: 0.9 }, oneHot: false, k: 2 },
  { name: "T=1.3 min-p 0.1, deterministic (one-hot) drafts, k=2", params: { temperature: 1.3, min_p: 0.1 }, oneHot: true, k: 2 },
  { name: "T=1 typical-p 0.9 and XTC 0.5 over 0.15, stochastic drafts, k=2", params: { temperature: 1, typical_p: 0.9, xtc_probability: 0.5, xtc_threshold: 0.15 }, oneHot: false, k: 2 },
];

describe("rejection sampling matches the target distribution (chi-square, p = 0.001)", () => {
  for (const c of cases) {
    test(c.name, () => {
      const N = 12000, target = new Sampler({ ...c.params, seed: 1234 }), draftRng = new Rng(99);
      const p = P_LOGITS.map((l) => Array.from(target.dense(l)));
      const marg = P_LOGITS.map(() => new Array(V).fill(0)), joint = new Array(V * V).fill(0);
      for (let i = 0; i < N; i++) {
        const t = specRun(target, draftRng, 3, c.k, c.oneHot);
        t.forEach((x, pos) => marg[pos][x]++);
        joint[t[0] * V + t[1]]++;
      }
      for (let pos = 0; pos < 3; pos++) {
        const { stat, df } = chi2(marg[pos], p[pos], N);
        expect(stat).toBeLessThan(crit(df));
      }
      const pj = p[0].flatMap((a) => p[1].map((b) => a * b));
      const { stat, df } = chi2(joint, pj, N);
      expect(stat).toBeLessThan(crit(df));

      // and direct sampling from the same processed distribution passes the same test
      const direct = new Sampler({ ...c.params, seed: 77 }), cnt = new Array(V).fill(0);
      for (let i = 0; i < N; i++) cnt[direct.sample(P_LOGITS[0])]++;
      const d = chi2(cnt, p[0], N);
      expect(d.stat).toBeLessThan(crit(d.df));
    });
  }

  test("the test has power: accepting drafts without the p/q test is detected", () => {
    const N = 12000, draftRng = new Rng(5), cnt = new Array(V).fill(0);
    const p = Array.from(new Sampler({ temperature: 1 }).dense(P_LOGITS[0]));
    for (let i = 0; i < N; i++) cnt[drawFrom(draftRng, Q[0])]++; // output = draft always
    expect(chi2(cnt, p, N).stat).toBeGreaterThan(crit(4));
  });

  test("greedy sampler: accept keeps exactly the argmax prefix", () => {
    const g = new Sampler({ temperature: 0 });
    const rows = new Float32Array(3 * V);
    P_LOGITS.forEach((l, j) => rows.set(l, j * V));
    expect(accept(rows, V, { tokens: [0, 2] }, g)).toEqual({ accepted: 2, next: 4 });
    expect(accept(rows, V, { tokens: [0, 3] }, g)).toEqual({ accepted: 1, next: 2 });
    expect(accept(rows, V, { tokens: [1, 2] }, g)).toEqual({ accepted: 0, next: 0 });
  });
});
