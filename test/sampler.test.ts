// Sampler: seeded determinism, greedy = argmax without drawing, the processed distribution
// (temperature, top-k, top-p, min-p) and the dense/pick helpers used by speculative decoding.
import { describe, expect, test } from "bun:test";
import { Rng, Sampler } from "../src/engine/sampler.ts";

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

  test("pick draws in proportion to the weights and never a zero weight", () => {
    const s = new Sampler({ seed: 11 }), w = [0, 3, 1, 0], cnt = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) cnt[s.pick(w)]++;
    expect(cnt[0] + cnt[3]).toBe(0);
    expect(cnt[1] / 4000).toBeGreaterThan(0.72);
    expect(cnt[1] / 4000).toBeLessThan(0.78);
    expect(() => s.pick([0, 0])).toThrow(/zero/);
  });
});
