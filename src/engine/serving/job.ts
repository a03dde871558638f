// A request inside the scheduler: the Job record (its token pipeline — sampler, detokenizer, constraints, penalties:
// pipeline.ts — its drafting state and progress) and JobMaker, which builds one from a GenRequest over the pipeline
// maker every job of a model shares. State: none of its own (the PipelineMaker's caches).
import type { Session } from "../session.ts";
import type { Model } from "../model.ts";
import { Pooler } from "../pooling.ts";
import type { TextCodec } from "../../model/tokenizer.ts";
import type { ThinkIds } from "./detok.ts";
import { PipelineMaker, type TokenPipeline } from "./pipeline.ts";
import type { Drafter, JobDrafts } from "./drafter.ts";
import type { GenRequest, PromptTok } from "./protocol.ts";

/** A KV slot: a conversation (its KV rows, token history and MTP state; shares the scheduler's RunState). `embedded`:
 *  its history is an embedding's input (not a conversation: never parked in the prompt cache). */
export interface Slot { id: number; sess: Session; job: Job | null; used: number; embedded: boolean }

export interface Job {
  rid: number; req: GenRequest; ids: number[];
  p: TokenPipeline;         // its per-token rules: sampler, penalties, grammar, budgets, detokenizer, limit, tokens out
  state: "queued" | "prefill" | "decode";
  slot: Slot | null;
  fed: number;              // prompt tokens in the slot's KV
  cached: number;
  next: number;             // sampled, not yet fed
  drafts: JobDrafts | null; // its drafting state (null: no drafting)
  plp: PromptTok[] | null;  // echo with logprobs, or prompt_logprobs: the prompt tokens' entries so far
  pool: Pooler | null;      // an embedding request's pooling (null: a generation)
  resume: number[] | null;  // preempted while decoding: the history to prefill again (prompt + output fed), then on
                            // with `next` (null: not preempted, or back in a slot)
  held: number;             // since when its client has not been taking its output (performance.now(); 0: it is):
                            // not decoded, and after the scheduler's holdGraceMs its slot goes to a waiting job
  tAdmit: number; tFirst: number; tLast: number; // (performance.now(): admitted, prefill done, last token)
}

/** The alternatives each prompt token's logprob entry carries (echo with logprobs, or vLLM's prompt_logprobs: the
 *  larger), or null when req asks for none. */
export const promptLpK = (req: GenRequest): number | null =>
  (req.echo && req.logprobs !== undefined) || req.prompt_logprobs !== undefined ? Math.max(req.logprobs ?? 0, req.prompt_logprobs ?? 0) : null;

/** The tokens j's prefill feeds: its prompt, or after a preemption its history (prompt and output so far). */
export const toFeed = (j: Job): number[] => j.resume ?? j.ids;

export class JobMaker {
  readonly rules: PipelineMaker;
  readonly think: ThinkIds;

  constructor(private m: Model, codec: TextCodec, o: { ctx: number; thinkBudget?: number; budgetMessage?: string; maxTokens?: number; seed?: number },
    private drafter: Drafter | null) {
    this.rules = new PipelineMaker(m, codec, o);
    this.think = this.rules.think;
  }

  /** A queued Job for req over its prompt ids, or why not (its grammar did not compile). */
  make(rid: number, req: GenRequest, ids: number[]): Job | { detail: string } {
    const p = this.rules.make(rid, req, ids);
    if ("detail" in p) return p;
    return {
      rid, req, ids, p, state: "queued", slot: null, fed: 0, cached: 0, next: -1, tAdmit: 0, tFirst: 0, tLast: 0, resume: null, held: 0,
      drafts: p.sampler.stateful ? null : this.drafter?.forJob(p.sampler) ?? null, // (mirostat: each draw moves the next distribution)
      plp: promptLpK(req) === null ? null : [],
      pool: req.embed ? new Pooler(this.m, req.embed.pooling, ids.length) : null,
    };
  }
}
