// Micro-benchmark of token sampling (mitata): Sampler.sample over a vocabulary of the bench preset's size
// (8192) and GLM-5's (154880), greedy and with the usual filters, on logits shaped like a language model's
// (a few likely tokens, a long tail) and on a flat worst case. Reports ms per sampled token. Holds no state.
// Usage: bun bench/sampler.ts
import { bench, do_not_optimize, group, run } from "mitata";
import { Rng, Sampler, type SamplingParams } from "../src/engine/sampler.ts";

const r = new Rng(1);
const shaped = (V: number) => Float32Array.from({ length: V }, (_, i) => (i % 997 === 0 ? 10 : 0) + (r.next() - 0.5) * 6);
const flat = (V: number) => Float32Array.from({ length: V }, () => (r.next() - 0.5) * 16);
const params: [string, SamplingParams][] = [
  ["greedy", { temperature: 0 }],
  ["T=1 (no filter)", { temperature: 1 }],
  ["T=0.7 top-k 40 top-p 0.95 min-p 0.05", { temperature: 0.7, top_k: 40, top_p: 0.95, min_p: 0.05 }],
  ["T=1 top-p 0.9", { temperature: 1, top_p: 0.9 }],
];

for (const V of [8192, 154880])
  for (const [shape, make] of [["lm-shaped", shaped], ["flat", flat]] as const) {
    const logits = make(V);
    group(`V=${V} ${shape}`, () => {
      for (const [name, p] of params) {
        const s = new Sampler({ ...p, seed: 1 });
        bench(`${name}`, () => do_not_optimize(s.sample(logits)));
      }
    });
  }

await run();
