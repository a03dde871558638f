// `--device auto`'s measurement: a short startup race on the loaded model between the Vulkan chain and the CPU
// (decode-shaped forwards: one token at a time on a small context, alternating the two paths, within a fixed
// budget), and the decision over its figures (pure: `pickFaster`, unit-tested with injected timings). Stateless.
import type { Model } from "../engine/model.ts";
import { newKV } from "../engine/model.ts";
import { forward, type ForwardOpts } from "../engine/forward.ts";
import { RunState } from "../engine/state.ts";
import type { DeviceChain } from "./chain.ts";
import { newStats } from "./chainopts.ts";

/** Best ms per decoded token of each path, and how many timed forwards each got. */
export interface AutoTiming { chainMs: number; cpuMs: number; runs: number }
export interface AutoPick { chain: boolean; why: string }

/** The faster path wins; ties and unusable figures (NaN, ≤ 0, infinite) keep the CPU (the exact reference). */
export function pickFaster(t: AutoTiming, device: string): AutoPick {
  const ok = (x: number) => Number.isFinite(x) && x > 0;
  const fig = `chain ${t.chainMs.toFixed(2)} ms/token vs CPU ${t.cpuMs.toFixed(2)} ms/token, best of ${t.runs}`;
  if (!ok(t.chainMs) || !ok(t.cpuMs)) return { chain: false, why: `auto: no usable measurement on ${device} (${fig}): the CPU` };
  if (t.chainMs < t.cpuMs) return { chain: true, why: `auto: ${device} measured faster (${fig})` };
  return { chain: false, why: `auto: the CPU measured faster than ${device} (${fig})` };
}

/**
 * Time decode-shaped forwards of the chain and of the CPU on `m`: one warm-up of each (a 4-token prompt),
 * then single-token steps alternating the two paths until `budgetMs` is spent (at least 1, at most `maxRuns`
 * each; one slow forward can overrun the budget). The chain's stats are reset afterwards.
 */
export function measureAuto(m: Model, chain: DeviceChain, budgetMs = 1000, maxRuns = 8, fo: ForwardOpts = {}): AutoTiming {
  const V = m.cfg.vocab_size, prompt = [1, 2, 3, 4].map((i) => i % V);
  const path = (dev: boolean) => {
    const kv = newKV(m, 16), st = new RunState(m.cfg), o: ForwardOpts = { ...fo, logits: "last", ...(dev ? { executor: chain } : {}) };
    let pos = 0;
    return () => {
      const ids = pos === 0 ? prompt : [(pos * 7) % V], t = performance.now();
      forward(m, st, [{ kv, r0: 0, n: ids.length, pos0: pos }], ids, o);
      pos += ids.length;
      return performance.now() - t;
    };
  };
  const dev = path(true), cpu = path(false), t0 = performance.now();
  dev(); cpu(); // warm-up: pipelines, caches, page faults
  let chainMs = Infinity, cpuMs = Infinity, runs = 0;
  while (runs < maxRuns && (runs === 0 || performance.now() - t0 < budgetMs)) {
    chainMs = Math.min(chainMs, dev());
    cpuMs = Math.min(cpuMs, cpu());
    runs++;
  }
  Object.assign(chain.stats, newStats(chain.n));
  return { chainMs, cpuMs, runs };
}
