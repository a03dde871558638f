// Micro-benchmark of token sampling (mitata): Sampler.sample over a vocabulary of the bench preset's size
// (8192) and GLM-5's (154880), greedy, with the usual filters and with llama-server's others, on logits shaped like a language model's
// (a few likely tokens, a long tail) and on a flat worst case; then the logit processors whose cost grows with the
// context (llama.cpp's penalty window over all of it, DRY) at 4k and 128k tokens, on varied text and on one token
// repeated (DRY's worst case). Reports ms per sampled token. Holds no state.
// Usage: bun bench/sampler.ts
import { bench, do_not_optimize, group, run } from "mitata";
import { Rng, Sampler, type SamplingParams } from "../src/engine/sampler.ts";
import { DRY_BREAKERS, Penalties, type PenaltyParams } from "../src/engine/penalties.ts";

const r = new Rng(1);
const shaped = (V: number) => Float32Array.from({ length: V }, (_, i) => (i % 997 === 0 ? 10 : 0) + (r.next() - 0.5) * 6);
const flat = (V: number) => Float32Array.from({ length: V }, () => (r.next() - 0.5) * 16);
const params: [string, SamplingParams][] = [
  ["greedy", { temperature: 0 }],
  ["T=1 (no filter)", { temperature: 1 }],
  ["T=0.7 top-k 40 top-p 0.95 min-p 0.05", { temperature: 0.7, top_k: 40, top_p: 0.95, min_p: 0.05 }],
  ["T=1 top-p 0.9", { temperature: 1, top_p: 0.9 }],
  // llama-server's others (opt-in per request)
  ["typical_p 0.9", { temperature: 1, typical_p: 0.9 }],
  ["xtc 0.5 / 0.1", { temperature: 1, xtc_probability: 0.5, xtc_threshold: 0.1 }],
  ["mirostat 1", { temperature: 1, mirostat: 1, mirostat_tau: 5, mirostat_eta: 0.1 }],
  ["mirostat 2", { temperature: 1, mirostat: 2, mirostat_tau: 5, mirostat_eta: 0.1 }],
  ["top_n_sigma 1", { temperature: 1, top_n_sigma: 1 }],
  ["dynatemp 0.5", { temperature: 1, dynatemp_range: 0.5, dynatemp_exponent: 1 }],
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

const dry: PenaltyParams = { dry: { multiplier: 0.8, base: 1.75, allowed: 2, lastN: -1, breakers: DRY_BREAKERS } };
for (const n of [4096, 131072]) {
  const varied = Array.from({ length: n }, (_, i) => (i * 7919 + (i >> 3)) % 30000), same = new Array<number>(n).fill(42);
  const l = new Float32Array(154880);
  group(`penalties over a ${n}-token context, V=154880`, () => {
    for (const [name, p, ctx] of [["window -1 (repeat_last_n), varied", { repetition: 1.1, window: -1 }, varied],
      ["DRY, varied", dry, varied], ["DRY, one token repeated", dry, same]] as const) {
      const pen = new Penalties(p, ctx);
      bench(name, () => { pen.apply(l); pen.accept(ctx[n - 1]); pen.rollback(pen.mark() - 1); });
    }
  });
}

await run();
