// vLLM's periodic engine stats on the server's log: every interval in which there was work (requests ran, waited or
// produced tokens), the prompt and generation throughput over it, requests running and waiting, the KV slots' fill,
// the prefix reuse rate of the interval's prompts, and the expert cache's hit rate when experts are streamed.
// State: the totals at the previous line, and the timer.
import type { EngineClient } from "./engine-client.ts";
import { kvUsage } from "./metrics.ts";

export function statsLine(engine: EngineClient, prev: { prompt: number; cached: number; gen: number; t: number }, now: number): string {
  const t = engine.totals, s = engine.stats, sec = Math.max(1e-3, (now - prev.t) / 1000);
  const prompt = t.prompt_tokens - prev.prompt, cached = t.cached_tokens - prev.cached;
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  return `Avg prompt throughput: ${(prompt / sec).toFixed(1)} tokens/s, Avg generation throughput: ${((t.generated_tokens - prev.gen) / sec).toFixed(1)} tokens/s, `
    + `Running: ${s.busy} reqs, Waiting: ${s.queue} reqs, KV cache usage: ${pct(kvUsage(engine, true).share)}, `
    + `Prefix cache hit rate: ${pct(prompt > 0 ? cached / prompt : 0)}${s.experts ? `, Expert cache hit rate: ${pct(s.experts.hitRate)}` : ""}`;
}

/** Log `statsLine` every `everyMs` while requests run, wait or moved since the last line; returns stop(). */
export function startStatsLog(engine: EngineClient, log: (line: string) => void, everyMs = 10_000): () => void {
  const snap = (t: number) => ({ prompt: engine.totals.prompt_tokens, cached: engine.totals.cached_tokens, gen: engine.totals.generated_tokens, t });
  let prev = snap(performance.now());
  const timer = setInterval(() => {
    const now = performance.now(), moved = engine.totals.prompt_tokens !== prev.prompt || engine.totals.generated_tokens !== prev.gen;
    if (moved || engine.stats.busy > 0 || engine.stats.queue > 0) log(statsLine(engine, prev, now));
    prev = snap(now);
  }, everyMs);
  timer.unref?.();
  return () => clearInterval(timer);
}
