// One generation on one Session: prefill the prompt, then decode token by token with a Sampler until
// max tokens or a stop id. Reports prefill and decode throughput. Stateless beyond its Session.
import { Sampler, type SamplingParams } from "./sampler.ts";
import { Session } from "./session.ts";
import type { Model } from "./model.ts";
import type { ForwardOpts } from "./forward.ts";

export interface GenerateOpts extends SamplingParams {
  maxTokens: number;
  stopIds?: number[];
  forward?: ForwardOpts;
  onToken?: (id: number) => void;
}
export interface GenerateResult {
  prompt_ids: number[];
  gen_ids: number[];
  finish_reason: "stop" | "length";
  timing: { prefill_tok_s: number; decode_tok_s: number; prefill_ms: number; decode_ms: number };
}

export function generate(m: Model, prompt: number[], o: GenerateOpts): GenerateResult {
  if (prompt.length === 0) throw new Error("empty prompt");
  const s = new Session(m, o.forward);
  const sampler = new Sampler(o);
  const stop = new Set(o.stopIds ?? m.cfg.stop_ids);
  const t0 = performance.now();
  let logits = s.feed(prompt);
  const t1 = performance.now();
  const gen: number[] = [];
  let finish: "stop" | "length" = "length";
  while (gen.length < o.maxTokens) {
    const id = sampler.sample(logits);
    gen.push(id);
    o.onToken?.(id);
    if (stop.has(id)) { finish = "stop"; break; }
    if (gen.length === o.maxTokens) break;
    logits = s.feed([id]);
  }
  const t2 = performance.now();
  const decodeSteps = Math.max(gen.length - 1, 0);
  return {
    prompt_ids: prompt, gen_ids: gen, finish_reason: finish,
    timing: {
      prefill_ms: t1 - t0, decode_ms: t2 - t1,
      prefill_tok_s: prompt.length / ((t1 - t0) / 1000),
      decode_tok_s: decodeSteps > 0 ? decodeSteps / ((t2 - t1) / 1000) : 0,
    },
  };
}
