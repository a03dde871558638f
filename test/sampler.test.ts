// Sampler: seeded determinism, greedy = argmax without drawing, the processed distribution
// (temperature, top-k, top-p, min-p, typical_p, XTC; mirostat v1 / v2 and its learning) and the dense/pick helpers used
// by speculative decoding.
import { describe, expect, test } from "bun:test";
import { argmax, Rng, Sampler, type SamplingParams } from "../src/engine/sampler.ts";
import { mirostat } from "../src/engine/samplers.ts";
import { hb, Simd } from "../src/native/hb.ts";

function logits(n: number, seed: number): Float32Array {
  const r = new Rng(seed);
  return Float32Array.from({ length: n }, () => (r.next() - 0.5) * 8);
}

describe("Sampler", () => {
  test("the same seed gives the same tokens; another seed does not", () => {
    const l = logits(64, 1);
    const run = (seed: number) => { const s = new Sampler({ temperature: 1, seed }); return Array.from({ length: 50 }, () => s.sample(l)); };
    expect(run(7)).toEqual(run(7));
    expect(run(7)).not.toEqual(run(8));
    const r1 = new Rng(3), r2 = new Rng(3);
    for (let i = 0; i < 10; i++) expect(r1.next()).toBe(r2.next());
  });

  test("temperature 0 is argmax and leaves the PRNG stream untouched", () => {
    const l = logits(64, 2);
    let best = 0;
    for (let i = 1; i < l.length; i++) if (l[i] > l[best]) best = i;
    const s = new Sampler({ temperature: 0, seed: 5 });
    expect(s.greedy).toBe(true);
    for (let i = 0; i < 3; i++) expect(s.sample(l)).toBe(best);
    expect(s.random()).toBe(new Sampler({ seed: 5 }).random());
    expect(new Sampler({ temperature: 1, top_k: 1, seed: 9 }).sample(l)).toBe(best);
  });

  test("the processed distribution: top-k, top-p and min-p keep the right sets, sums to 1", () => {
    const l = Float32Array.from([0, Math.log(4), Math.log(2), Math.log(1), Math.log(1)]); // p ∝ 1,4,2,1,1
    const p = (params: ConstructorParameters<typeof Sampler>[0]) => Array.from(new Sampler(params).dense(l), (x) => +x.toFixed(6));
    expect(p({ temperature: 1 })).toEqual([1 / 9, 4 / 9, 2 / 9, 1 / 9, 1 / 9].map((x) => +x.toFixed(6)));
    expect(p({ temperature: 1, top_k: 2 })).toEqual([0, +(4 / 6).toFixed(6), +(2 / 6).toFixed(6), 0, 0]);
    expect(p({ temperature: 1, top_p: 0.6 })).toEqual([0, +(4 / 6).toFixed(6), +(2 / 6).toFixed(6), 0, 0]);
    expect(p({ temperature: 1, min_p: 0.45 })).toEqual([0, +(4 / 6).toFixed(6), +(2 / 6).toFixed(6), 0, 0]);
    const d = new Sampler({ temperature: 0.5 }).dense(logits(100, 4));
    expect(d.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
  });

  /** the processed distribution by its definition: sort every token (f64 p), prefix rules in that order */
  function reference(l: Float32Array, o: { temperature: number; top_k?: number; top_p?: number; min_p?: number; top_n_sigma?: number }): Float64Array {
    const V = l.length, max = Math.max(...l), p = Array.from(l, (x) => Math.exp((x - max) / o.temperature));
    const ids = Array.from({ length: V }, (_, i) => i).filter((i) => p[i] > 0).sort((a, b) => p[b] - p[a] || a - b);
    let k = o.top_k ? Math.min(o.top_k, ids.length) : ids.length;
    if (o.top_n_sigma) { // the logits ≥ max − n·σ (σ over the finite ones)
      const f = Array.from(l).filter(Number.isFinite), mean = f.reduce((a, b) => a + b, 0) / f.length;
      const sd = Math.sqrt(f.reduce((a, b) => a + (b - mean) ** 2, 0) / f.length);
      k = Math.min(k, Math.max(1, Array.from(l).filter((x) => x >= max - o.top_n_sigma! * sd).length));
    }
    let sum = 0;
    for (let j = 0; j < k; j++) sum += p[ids[j]];
    let keep = 0, acc = 0;
    while (keep < k) {
      const q = p[ids[keep]];
      if (keep > 0 && q < (o.min_p ?? 0)) break;
      acc += q; keep++;
      if (acc >= (o.top_p ?? 1) * sum) break;
    }
    const d = new Float64Array(V);
    for (let j = 0; j < keep; j++) d[ids[j]] = p[ids[j]] / acc;
    return d;
  }

  test("the distribution equals its definition (full sort) on flat, peaked, tied and masked logits", () => {
    const r = new Rng(21);
    const shapes: [string, (i: number) => number][] = [
      ["flat", () => (r.next() - 0.5) * 2], ["spread", () => (r.next() - 0.5) * 16], ["peaked", (i) => (i % 97 === 0 ? 12 : 0) + r.next() * 3],
      ["tied", (i) => Math.floor(r.next() * 4)], ["masked", (i) => (i % 3 === 0 ? -Infinity : (r.next() - 0.5) * 8)],
    ];
    const params = [{ temperature: 1 }, { temperature: 0.7, top_k: 40 }, { temperature: 1, top_p: 0.9 }, { temperature: 1.3, min_p: 0.05 },
      { temperature: 0.8, top_p: 0.95, min_p: 0.05, top_k: 40 }, { temperature: 1, top_k: 5000 }, { temperature: 0.5, top_p: 0.5, top_k: 3 },
      { temperature: 1, top_n_sigma: 1 }, { temperature: 0.7, top_n_sigma: 2, top_p: 0.9, top_k: 40 }];
    for (const V of [7, 3000])
      for (const [name, f] of shapes) {
        const l = Float32Array.from({ length: V }, (_, i) => f(i));
        for (const o of params) {
          const got = new Sampler(o).dense(l), want = reference(l, o);
          let worst = 0;
          for (let i = 0; i < V; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
          if (!(worst <= 1e-6)) throw new Error(`${name} V=${V} ${JSON.stringify(o)}: differs from the definition by ${worst}`);
        }
      }
    // prefixes that reach below the first candidate threshold (p < 2^-12 of the top): a top-p over a long tail,
    // and a top-k + top-p whose mass includes tokens under it
    const tail = Math.log(2 ** -13);
    const longTail = Float32Array.from({ length: 3000 }, (_, i) => (i % 1000 === 0 ? 0 : tail));
    const fewHeads = Float32Array.from({ length: 50 }, (_, i) => (i < 5 ? 0 : tail));
    for (const [l, o] of [[longTail, { temperature: 1, top_p: 0.9 }], [fewHeads, { temperature: 1, top_k: 40, top_p: 0.9999 }]] as const) {
      const got = new Sampler(o).dense(l), want = reference(l, o);
      expect(want.filter((x) => x > 0).length).toBeGreaterThan(5); // the prefix does reach into the tail
      for (let i = 0; i < l.length; i++) expect(Math.abs(got[i] - want[i])).toBeLessThan(1e-6);
    }
  });

  test("typical_p and XTC: hand-computed cases", () => {
    const l = Float32Array.from([0.4, 0.3, 0.2, 0.1], Math.log); // p = 0.4, 0.3, 0.2, 0.1 at temperature 1
    const p = (o: object) => Array.from(new Sampler({ temperature: 1, ...o }).dense(l), (x) => +x.toFixed(9));
    const r = (a: number[]) => a.map((x) => +x.toFixed(9));
    // H = 1.2799 nats; |−ln p − H| = 0.36, 0.08, 0.33, 1.02: the typical order is 0.3, 0.2, 0.4, 0.1
    expect(p({ typical_p: 0.5 })).toEqual(r([0, 0.6, 0.4, 0]));
    expect(p({ typical_p: 0.3 })).toEqual(r([0, 1, 0, 0]));
    expect(p({ typical_p: 1 })).toEqual(r([0.4, 0.3, 0.2, 0.1]));
    // p = 1/8 ×4, 1/2: H = 2 ln 2, every score ln 2; min-p orders them 1/2 first, but ties go to the lower ids
    const tied = (o: object) => Array.from(new Sampler({ temperature: 1, ...o }).dense(Float32Array.of(0, 0, 0, 0, Math.log(4))), (x) => +x.toFixed(9));
    expect(tied({ typical_p: 0.3, min_p: 0.01 })).toEqual(r([1 / 3, 1 / 3, 1 / 3, 0, 0]));
    expect(tied({ typical_p: 0.6, min_p: 0.01 })).toEqual(r([0.125, 0.125, 0.125, 0.125, 0.5]));
    // XTC: 0.4 and 0.3 pass 0.25, so the more probable of them goes: (1 − P)·p + P·[0, 0.3, 0.2, 0.1] / 0.6
    expect(p({ xtc_probability: 1, xtc_threshold: 0.25 })).toEqual(r([0, 0.5, 1 / 3, 1 / 6]));
    expect(p({ xtc_probability: 0.5, xtc_threshold: 0.25 })).toEqual(r([0.2, 0.4, 0.1 + 1 / 6, 0.05 + 1 / 12]));
    expect(p({ xtc_probability: 1, xtc_threshold: 0.35 })).toEqual(r([0.4, 0.3, 0.2, 0.1])); // one token over it
    expect(p({ xtc_probability: 1, xtc_threshold: 0.6 })).toEqual(r([0.4, 0.3, 0.2, 0.1])); // > 0.5: never
    expect(p({ typical_p: 0.5, xtc_probability: 1, xtc_threshold: 0.25 })).toEqual(r([0, 0, 1, 0])); // typical first
    expect(p({ top_k: 3, xtc_probability: 1, xtc_threshold: 0.3 })).toEqual(r([0, 0.6, 0.4, 0])); // on the top-3's 4/9, 3/9, 2/9
  });

  test("temperature last (llama.cpp's chain): the filters read the T = 1 distribution; XTC picks its tokens there", () => {
    const l = Float32Array.from([0, Math.log(4), Math.log(2), Math.log(1), Math.log(1)]); // p ∝ 1,4,2,1,1
    const p = (o: object, x = l) => Array.from(new Sampler(o).dense(x), (v) => +v.toFixed(9));
    const r = (a: number[]) => a.map((v) => +v.toFixed(9));
    // top-p 0.6 at T = 1 keeps 4/9 and 2/9, then T = 0.5 squares them: 16 : 4; first at T = 0.5 it keeps 16/23 alone
    expect(p({ temperature: 0.5, top_p: 0.6, temperature_last: true })).toEqual(r([0, 0.8, 0.2, 0, 0]));
    expect(p({ temperature: 0.5, top_p: 0.6 })).toEqual(r([0, 1, 0, 0, 0]));
    // no filter: the same either way
    expect(p({ temperature: 0.7, temperature_last: true })).toEqual(p({ temperature: 0.7 }));
    // XTC over 0.3 sees 0.4 and 0.3 at T = 1 (at T = 2 only the first would pass): the first goes, then T = 2
    const q = Float32Array.from([0.4, 0.3, 0.2, 0.1], Math.log), s = [0.3, 0.2, 0.1].map(Math.sqrt), z = s[0] + s[1] + s[2];
    expect(p({ temperature: 2, xtc_probability: 1, xtc_threshold: 0.3, temperature_last: true }, q)).toEqual(r([0, s[0] / z, s[1] / z, s[2] / z]));
  });

  test("top-n-sigma and dynamic temperature: hand-computed cases", () => {
    const r = (a: ArrayLike<number>) => Array.from(a, (v) => +v.toFixed(6)); // (weights in f32)
    // logits 0, −1, −2, −10: σ = 3.961, so n = 0.5 keeps those ≥ −1.98 (before top-k, whatever the temperature)
    const l = Float32Array.of(0, -1, -2, -10), e1 = Math.exp(-1);
    expect(r(new Sampler({ temperature: 1, top_n_sigma: 0.5 }).dense(l))).toEqual(r([1 / (1 + e1), e1 / (1 + e1), 0, 0]));
    expect(r(new Sampler({ temperature: 0.5, top_n_sigma: 0.5 }).dense(l))).toEqual(r([1 / (1 + e1 ** 2), e1 ** 2 / (1 + e1 ** 2), 0, 0]));
    expect(r(new Sampler({ temperature: 1, top_n_sigma: 0.5, temperature_last: true, top_k: 1 }).dense(l))).toEqual([1, 0, 0, 0]);
    expect(new Sampler({ temperature: 1, top_n_sigma: 3 }).dense(l)[3]).toBeGreaterThan(0); // n = 3: the bound −11.9 keeps all
    // dynamic temperature: p = 0.4, 0.3, 0.2, 0.1 has H = 1.2799 of ln 4 = 1.3863 nats: T = 0.5 + 1·0.9232
    const q = Float32Array.from([0.4, 0.3, 0.2, 0.1], Math.log), pw = (t: number, ps: number[]) => {
      const w = ps.map((x) => x ** (1 / t)), z = w.reduce((a, b) => a + b, 0);
      return w.map((x) => x / z);
    };
    const H = -[0.4, 0.3, 0.2, 0.1].reduce((a, x) => a + x * Math.log(x), 0), T = 0.5 + (H / Math.log(4));
    for (const last of [false, true])
      expect(r(new Sampler({ temperature: 1, dynatemp_range: 0.5, temperature_last: last }).dense(q))).toEqual(r(pw(T, [0.4, 0.3, 0.2, 0.1])));
    // temperature last: the entropy of what top-k 2 kept (4/7, 3/7), with exponent 2
    const k2 = [4 / 7, 3 / 7], H2 = -k2.reduce((a, x) => a + x * Math.log(x), 0), T2 = 0.5 + 1 * (H2 / Math.log(2)) ** 2;
    expect(r(new Sampler({ temperature: 1, dynatemp_range: 0.5, dynatemp_exponent: 2, top_k: 2, temperature_last: true }).dense(q)))
      .toEqual(r([...pw(T2, k2), 0, 0]));
  });

  /** typical_p then XTC by their definitions, on the distribution the other filters left (in its order) */
  function referenceTypicalXtc(d: { ids: Int32Array; probs: Float64Array; n: number }, V: number, o: { typical_p?: number; xtc_probability?: number; xtc_threshold?: number },
    lastT?: number): Float64Array {
    let ids = Array.from(d.ids.subarray(0, d.n)), p = Array.from(d.probs.subarray(0, d.n));
    const t = o.typical_p ?? 1;
    if (t < 1 && ids.length > 1) {
      let H = 0;
      for (const q of p) if (q > 0) H -= q * Math.log(q);
      const score = p.map((q) => Math.fround(Math.abs(-Math.log(q) - H)));
      const order = ids.map((_, j) => j).sort((a, b) => score[a] - score[b] || ids[a] - ids[b]);
      let keep = 0, acc = 0;
      while (keep < order.length) { acc += p[order[keep++]]; if (acc >= t) break; }
      const kept = new Set(order.slice(0, keep));
      ids = ids.filter((_, j) => kept.has(j)); p = p.filter((_, j) => kept.has(j)).map((q) => q / acc);
    }
    const out = new Float64Array(V), P = o.xtc_probability ?? 0, T = o.xtc_threshold ?? 0.1;
    const over = ids.map((_, j) => j).filter((j) => p[j] >= T).sort((a, b) => p[b] - p[a] || ids[a] - ids[b]); // chosen before a last temperature
    if (lastT !== undefined && ids.length > 1) { const w = p.map((q) => q ** (1 / lastT)), z = w.reduce((a, b) => a + b, 0); p = w.map((q) => q / z); }
    if (P > 0 && T <= 0.5 && over.length >= 2 && ids.length > 1) {
      const gone = new Set(over.slice(0, -1)), rest = 1 - over.slice(0, -1).reduce((a, j) => a + p[j], 0);
      ids.forEach((id, j) => { out[id] = (1 - P) * p[j] + (gone.has(j) ? 0 : (P * p[j]) / rest); });
    } else ids.forEach((id, j) => { out[id] = p[j]; });
    return out;
  }

  test("typical_p over a large vocabulary keeps exactly the definition's tokens", () => {
    const r = new Rng(34), V = 40000;
    // (equal logits: every score tied, the lowest ids kept; 2^-k steps: scores exactly mirrored around H)
    for (const f of [() => (r.next() - 0.5) * 2, (i: number) => (i % 997 === 0 ? 10 : 0) + (r.next() - 0.5) * 6, () => Math.floor(r.next() * 3),
      () => 0, (i: number) => (V - i) % 5 * Math.LN2])
      for (const t of [0.2, 0.9, 0.999]) {
        const l = Float32Array.from({ length: V }, (_, i) => f(i)), want = referenceTypicalXtc(new Sampler({ temperature: 1 }).distribution(l), V, { typical_p: t });
        const got = new Sampler({ temperature: 1, typical_p: t }).dense(l);
        for (let i = 0; i < V; i++) if (Math.abs(got[i] - want[i]) > 1e-12 || (got[i] > 0) !== (want[i] > 0)) throw new Error(`t=${t} token ${i}: ${got[i]} vs ${want[i]}`);
      }
  });

  test("typical_p and XTC equal their definitions on flat, spread, peaked, tied and masked logits, with the other filters", () => {
    const r = new Rng(33);
    const shapes: ((i: number) => number)[] = [() => (r.next() - 0.5) * 2, () => (r.next() - 0.5) * 16, (i) => (i % 97 === 0 ? 6 : 0) + r.next() * 3,
      () => Math.floor(r.next() * 4), (i) => (i % 3 === 0 ? -Infinity : (r.next() - 0.5) * 8)];
    const extra = [{ typical_p: 0.9 }, { typical_p: 0.2 }, { xtc_probability: 0.5, xtc_threshold: 0.1 }, { xtc_probability: 1, xtc_threshold: 0.01 },
      { typical_p: 0.95, xtc_probability: 0.3, xtc_threshold: 0.05 }];
    const base = [{ temperature: 1 }, { temperature: 0.7, top_k: 40 }, { temperature: 0.8, top_p: 0.95, min_p: 0.05, top_k: 40 }, { temperature: 0.3 }];
    for (const V of [7, 3000])
      for (const f of shapes) {
        const l = Float32Array.from({ length: V }, (_, i) => f(i));
        for (const b of base)
          for (const x of extra)
            for (const last of [false, true]) { // temperature last: the filters on the T = 1 distribution
              const want = last ? referenceTypicalXtc(new Sampler({ ...b, temperature: 1 }).distribution(l), V, x, b.temperature)
                : referenceTypicalXtc(new Sampler(b).distribution(l), V, x);
              const got = new Sampler({ ...b, ...x, temperature_last: last }).dense(l);
              let worst = 0, sum = 0;
              for (let i = 0; i < V; i++) { worst = Math.max(worst, Math.abs(got[i] - want[i])); sum += got[i]; }
              if (!(worst <= 1e-9 && Math.abs(sum - 1) <= 1e-9)) throw new Error(`V=${V} ${JSON.stringify({ ...b, ...x, last })}: off by ${worst} (sum ${sum})`);
            }
      }
  });

  test("mirostat v2: the tokens within the surprise bound mu = 2·tau, then mu learns from each draw", () => {
    const l = Float32Array.from([0.4, 0.3, 0.2, 0.1], Math.log);
    const s = new Sampler({ temperature: 1, mirostat: 2, mirostat_tau: 1.5, mirostat_eta: 0.1, top_k: 1, seed: 4 }); // (top_k ignored)
    expect(s.stateful).toBe(true);
    expect(s.mirostatMu).toBe(3);
    const d = s.dense(l); // surprises 1.32, 1.74, 2.32, 3.32 bits: the first three, renormalised
    expect(Array.from(d, (x) => +x.toFixed(9))).toEqual([4 / 9, 3 / 9, 2 / 9, 0].map((x) => +x.toFixed(9)));
    for (let i = 0; i < 5; i++) {
      const mu = s.mirostatMu, q = s.dense(l), t = s.sample(l);
      expect(s.mirostatMu).toBeCloseTo(mu - 0.1 * (-Math.log2(q[t]) - 1.5), 12);
    }
    expect(new Sampler({ temperature: 0, mirostat: 2 }).stateful).toBe(false); // greedy stays greedy
    // seeded: the same tokens (and mu) twice
    const run = () => { const r = new Sampler({ temperature: 1, mirostat: 2, mirostat_tau: 2, seed: 9 }); return Array.from({ length: 30 }, () => r.sample(logits(500, 5))); };
    expect(run()).toEqual(run());
  });

  test("mirostat v2 drives the truncated distribution's surprise to tau", () => {
    const l = Float32Array.from({ length: 2000 }, (_, i) => -1.1 * Math.log(i + 1) + Math.sin(i) * 0.3); // a long tail
    const H = (q: Float64Array) => { let h = 0; for (const x of q) if (x > 0) h -= x * Math.log2(x); return h; };
    for (const tau of [1.5, 2, 3]) { // where the start (mu = 2·tau) is 0.3-1.5 bits off
      const s = new Sampler({ temperature: 1, mirostat: 2, mirostat_tau: tau, mirostat_eta: 0.1, seed: 3 });
      expect(Math.abs(H(s.dense(l)) - tau)).toBeGreaterThan(0.3);
      for (let i = 0; i < 3000; i++) s.sample(l);
      expect(Math.abs(H(s.dense(l)) - tau)).toBeLessThan(0.1); // at the learnt mu, E[−log2 q] is tau
    }
  });

  test("mirostat v1: the top k of the Zipf estimate k = (ε·2^mu / (1 − V^−ε))^(1/s)", () => {
    const V = 1000, sz = 1.2, l = Float32Array.from({ length: V }, (_, i) => -sz * Math.log(i + 1)); // exactly Zipf: s = 1.2
    const mu = 2 * 5, e = sz - 1, k = Math.floor(((e * 2 ** mu) / (1 - V ** -e)) ** (1 / sz));
    expect(k).toBeGreaterThan(100); // ~107 (worked out by hand)
    expect(k).toBeLessThan(115);
    const d = new Sampler({ temperature: 1, mirostat: 1, mirostat_tau: 5 }).dense(l);
    expect(d.filter((x) => x > 0).length).toBe(k);
    expect(d.slice(0, k).every((x, i) => i === 0 || x <= d[i - 1])).toBe(true); // the top k
  });

  test("mirostat v1 over its sorted candidates equals the definition over the whole sorted vocabulary", () => {
    const r = new Rng(5);
    for (const V of [150, 5000, 40000])
      for (const shape of ["zipf", "flat", "peaked", ...(V > 150 ? ["masked"] : [])]) { // (masked: a flat half, the rest banned)
        const l = Float32Array.from({ length: V }, (_, i) => shape === "zipf" ? -1.1 * Math.log(i + 1) + (r.next() - 0.5) * 0.2
          : shape === "flat" ? (r.next() - 0.5) * 0.5 : shape === "masked" ? (i % 2 ? -Infinity : (r.next() - 0.5) * 0.5)
          : (i % 97 === 0 ? 8 : 0) + (r.next() - 0.5) * 4);
        const q = new Sampler({ temperature: 1 }).dense(l); // the whole distribution, as mirostat reads it
        const ids = Int32Array.from({ length: V }, (_, i) => i).sort((a, b) => q[b] - q[a] || a - b);
        const want = mirostat({ ids, probs: Float64Array.from(ids, (i) => q[i]), n: V }, 1, 10, V), dense = new Float64Array(V);
        for (let j = 0; j < want.n; j++) dense[want.ids[j]] = want.probs[j];
        expect(Array.from(new Sampler({ temperature: 1, mirostat: 1, mirostat_tau: 5 }).dense(l))).toEqual(Array.from(dense));
      }
  });

  test("dynamic temperature's draws (computed without the distribution) are the draws from its distribution", () => {
    const r = new Rng(8), V = 3000;
    const shapes = [Float32Array.from({ length: V }, (_, i) => -1.1 * Math.log(i + 1) + (r.next() - 0.5)),
      Float32Array.from({ length: V }, () => (r.next() - 0.5) * 4), Float32Array.from({ length: V }, (_, i) => (i === 7 ? 0 : -Infinity))];
    for (const p of [{ temperature: 1, dynatemp_range: 0.5 }, { temperature: 0.3, dynatemp_range: 0.5, dynatemp_exponent: 2 }]) {
      const a = new Sampler({ ...p, seed: 3 }), b = new Sampler({ ...p, seed: 3 });
      for (let k = 0; k < 60; k++) {
        const l = shapes[k % shapes.length], d = b.distribution(l);
        let u = b.random(), j = 0; // (the reference draw: one uniform walked down the distribution in its order)
        for (; j < d.n - 1; j++) { u -= d.probs[j]; if (u < 0) break; }
        expect(a.sample(l)).toBe(d.ids[j]);
      }
    }
  });

  test("every combination of the samplers: a distribution over unmasked ids summing to 1, and draws from it", () => {
    const r = new Rng(77), pick = <T,>(a: T[]) => a[Math.floor(r.next() * a.length)];
    for (let round = 0; round < 400; round++) {
      const V = pick([2, 5, 64, 700]), masked = r.next() < 0.3;
      const l = Float32Array.from({ length: V }, (_, i) => (masked && i % 3 === 1 ? -Infinity : (r.next() - 0.5) * pick([1, 8, 30])));
      const o: SamplingParams = {
        temperature: pick([0, 0.3, 1, 1.7]), seed: round, top_k: pick([0, 1, 3, 40]), top_p: pick([1, 0.9, 0.3]), min_p: pick([0, 0.05, 0.5]),
        typical_p: pick([1, 0.95, 0.2]), xtc_probability: pick([0, 0.5, 1]), xtc_threshold: pick([0.01, 0.1, 0.4]),
        top_n_sigma: pick([0, 0.5, 2]), dynatemp_range: pick([0, 0.5]), dynatemp_exponent: pick([1, 2]), temperature_last: r.next() < 0.5,
        mirostat: pick([0, 0, 0, 1, 2]), mirostat_tau: pick([1, 5]),
      };
      const sm = new Sampler(o), d = sm.dense(l);
      const sum = d.reduce((a, b) => a + b, 0);
      if (!(Math.abs(sum - 1) < 1e-9) || d.some((x, i) => x < 0 || (x > 0 && l[i] === -Infinity)))
        throw new Error(`${JSON.stringify(o)} V=${V}: sum ${sum}, or mass on a masked id`);
      for (let k = 0; k < 5; k++) {
        const q = sm.dense(l), t = sm.sample(l);
        if (!(t >= 0 && t < V && q[t] > 0)) throw new Error(`${JSON.stringify(o)} V=${V}: drew ${t} of probability ${q[t]}`);
      }
    }
  });

  test("sample draws each token with its probability (filtered or not) and never a masked one", () => {
    const l = Float32Array.from([0, Math.log(4), -Infinity, Math.log(2), Math.log(1)]);
    for (const o of [{ temperature: 1 }, { temperature: 1, top_p: 0.99 }, { temperature: 1, top_k: 3 }, { temperature: 1, typical_p: 0.8 },
      { temperature: 1, xtc_probability: 0.5, xtc_threshold: 0.2 }]) {
      const s = new Sampler({ ...o, seed: 13 }), d = s.dense(l), cnt = new Array(5).fill(0), N = 20000;
      for (let i = 0; i < N; i++) cnt[s.sample(l)]++;
      expect(cnt[2]).toBe(0);
      for (let i = 0; i < 5; i++) expect(Math.abs(cnt[i] / N - d[i])).toBeLessThan(0.015);
    }
  });

  test("non-finite logits: a clear error, never an id outside the vocabulary", () => {
    const bad = new Float32Array(16).fill(NaN);
    for (const o of [{ temperature: 1 }, { temperature: 1, top_p: 0.9 }, { temperature: 0.7, top_k: 4 }])
      expect(() => new Sampler({ ...o, seed: 1 }).sample(bad)).toThrow(/no token has a positive probability/);
  });

  test("pick draws in proportion to the weights and never a zero weight", () => {
    const s = new Sampler({ seed: 11 }), w = [0, 3, 1, 0], cnt = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) cnt[s.pick(w)]++;
    expect(cnt[0] + cnt[3]).toBe(0);
    expect(cnt[1] / 4000).toBeGreaterThan(0.72);
    expect(cnt[1] / 4000).toBeLessThan(0.78);
    expect(() => s.pick([0, 0])).toThrow(/zero/);
  });
});

test("argmax is the forward scan's index at every SIMD level: ties to the first, NaN at 0 wins, ±0 tie, tails", () => {
  const lib = hb(), best = lib.hb_simd_force(1), levels = [Simd.scalar, ...(best > Simd.avx2 ? [Simd.avx2] : []), ...(best > Simd.scalar ? [best] : [])];
  const scan = (x: Float32Array) => { let b = 0; for (let i = 1; i < x.length; i++) if (x[i] > x[b]) b = i; return b; };
  const r = new Rng(11), pick = [0, -0, 1, -1, 2, NaN, Infinity, -Infinity, 1e-30, -1e-30];
  const cases: Float32Array[] = [];
  for (let k = 0; k < 600; k++) cases.push(Float32Array.from({ length: 1 + Math.floor(r.next() * 300) }, () => pick[Math.floor(r.next() * pick.length)]));
  cases.push(Float32Array.from({ length: 200 }, (_, i) => (i === 0 ? NaN : i))); // NaN first: the scan keeps 0
  cases.push(Float32Array.from({ length: 200 }, (_, i) => (i === 150 ? 0 : i === 70 ? -0 : -5))); // -0 then +0: the first
  cases.push(Float32Array.from({ length: 199 }, (_, i) => (i === 198 ? 9 : 1))); // the maximum in the tail
  cases.push(logits(154880, 4));
  try {
    for (const level of levels) {
      expect(lib.hb_simd_force(level)).toBe(level);
      for (const x of cases) expect(argmax(x)).toBe(scan(x));
      expect(argmax(cases.at(-1)!, 1000)).toBe(scan(cases.at(-1)!.subarray(0, 1000)));
    }
  } finally { lib.hb_simd_force(1); }
});
