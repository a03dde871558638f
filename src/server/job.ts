// A request inside the scheduler: the Job record (its sampler, detokenizer, constraints, penalties, drafting state and
// progress) and JobMaker, which builds one from a GenRequest with what every job of a model shares — the end ids, the
// think tags, the grammar cache, the thinking budget's message, DRY's sequence-breaker ids — plus the logit helpers
// the scheduler's sampling applies. State: JobMaker's caches (grammars, the budget message's tokens, breaker ids).
import type { Session } from "../engine/session.ts";
import type { Model } from "../engine/model.ts";
import { Sampler } from "../engine/sampler.ts";
import { ThinkBudget } from "../engine/think-budget.ts";
import { badWordIds, penaltiesFor, type Penalties } from "../engine/penalties.ts";
import { Pooler } from "../engine/pooling.ts";
import type { GrammarState } from "../engine/grammar/index.ts";
import type { TextCodec } from "../model/tokenizer.ts";
import { Detok, thinkIds, type ThinkIds } from "./detok.ts";
import { GrammarCache } from "./grammar-cache.ts";
import type { Drafter, JobDrafts } from "./drafter.ts";
import type { GenRequest, PromptTok } from "./protocol.ts";

/** A KV slot: a conversation (its KV rows, token history and MTP state; shares the scheduler's RunState). `embedded`:
 *  its history is an embedding's input (not a conversation: never parked in the prompt cache). */
export interface Slot { id: number; sess: Session; job: Job | null; used: number; embedded: boolean }

export interface Job {
  rid: number; req: GenRequest; ids: number[];
  limit: number;            // tokens it may emit (max_tokens, capped by the context)
  sampler: Sampler; detok: Detok;
  pen: Penalties | null;    // penalties / logit_bias (null: none asked)
  grammar: GrammarState | null;  // kept at the state after the last emitted token
  thinking: boolean;        // a chat prompt's thinking (thinkingOf)
  gate: "maybe" | "think" | "grammar"; // a grammar's phase: the first token may open <think>, inside it, in force
  state: "queued" | "prefill" | "decode";
  slot: Slot | null;
  fed: number;              // prompt tokens in the slot's KV
  cached: number; emitted: number;
  next: number;             // sampled, not yet fed
  drafts: JobDrafts | null; // its drafting state (null: no drafting)
  plp: PromptTok[] | null;  // echo with logprobs, or prompt_logprobs: the prompt tokens' entries so far
  stops: Set<number>;       // ids that end it: the model's end ids (unless ignore_eos) and its stop_ids
  allowed: Int32Array | null; // the only ids it may sample (allowed_token_ids), or null
  bad: number[][] | null;   // bad_words as token sequences (vLLM's), or null
  out: number[];            // the ids emitted (with bad words: their matching needs the output's tail)
  budget: ThinkBudget | null; // the thinking budget (null: none)
  pool: Pooler | null;      // an embedding request's pooling (null: a generation)
  resume: number[] | null;  // preempted while decoding: the history to prefill again (prompt + output fed), then on
                            // with `next` (null: not preempted, or back in a slot)
  tAdmit: number; tFirst: number; tLast: number; // (performance.now(): admitted, prefill done, last token)
}

/** The tokens j's prefill feeds: its prompt, or after a preemption its history (prompt and output so far). */
export const toFeed = (j: Job): number[] => j.resume ?? j.ids;

/** logits of every id but `allowed` set to −∞ (saved into `tmp` first: a fill is much cheaper than a pass over V) */
export function keepOnly(logits: Float32Array, allowed: Int32Array, tmp: Float32Array): void {
  for (let i = 0; i < allowed.length; i++) tmp[i] = allowed[i] < logits.length ? logits[allowed[i]] : -Infinity;
  logits.fill(-Infinity);
  for (let i = 0; i < allowed.length; i++) if (allowed[i] < logits.length) logits[allowed[i]] = tmp[i];
}

/** whether ids leave a <think> block open (the last think tag in them is `open`) */
function openThink(ids: number[], t: ThinkIds): boolean {
  for (let i = ids.length - 1; i >= 0; i--) {
    if (ids[i] === t.close) return false;
    if (ids[i] === t.open) return true;
  }
  return false;
}

/** whether a chat prompt thinks: as asked (enable_thinking), else as its template rendered it: on for a model with think
 *  tags unless the prompt ends in a closed <think></think> (GLM's templates, asked nothing, think) */
function thinkingOf(req: GenRequest, ids: number[], t: ThinkIds): boolean {
  if (req.prompt.kind !== "chat") return false;
  if (req.prompt.enableThinking !== undefined) return req.prompt.enableThinking;
  const n = ids.length;
  return t.open >= 0 && t.close >= 0 && !(ids[n - 1] === t.close && ids[n - 2] === t.open);
}

export class JobMaker {
  readonly stopIds: Set<number>;
  readonly think: ThinkIds;
  readonly grammars: GrammarCache;
  private budgetMsg: number[] | null = null; // the budget message's tokens (made on first use)
  private texts: string[] | null = null;   // every token's text, made on DRY's first use (its sequence breakers)
  private breakerSets = new Map<string, ReadonlySet<number>>();

  constructor(private m: Model, private codec: TextCodec, private o: { ctx: number; thinkBudget?: number; budgetMessage?: string; maxTokens?: number; seed?: number },
    private drafter: Drafter | null) {
    const stops = codec.stopIds(m.cfg.stop_ids);
    this.stopIds = new Set(stops);
    this.think = thinkIds(codec);
    // ONE TokenVocab per model, built now: grammar masks and the mux token bytes (TextCodec.tokenBytes)
    // share it. An unsupported tokenizer only disables constrained output (BAD_REQUEST per request).
    try { codec.tokenVocab(stops); } catch { /* reported by GrammarCache */ }
    this.grammars = new GrammarCache(() => codec.tokenVocab(stops));
  }

  /** A queued Job for req over its prompt ids, or why not (its grammar did not compile). */
  make(rid: number, req: GenRequest, ids: number[]): Job | { detail: string } {
    let grammar: GrammarState | null = null;
    if (req.grammar) {
      const g = this.grammars.state(req.grammar);
      if (!g.ok) return { detail: g.detail };
      grammar = g.gs;
    }
    const seed = req.seed ?? (this.o.seed !== undefined ? this.o.seed + rid : undefined);
    const sampler = new Sampler({ temperature: req.temperature, top_p: req.top_p, min_p: req.min_p, top_k: req.top_k, seed,
      typical_p: req.typical_p, xtc_probability: req.xtc_probability, xtc_threshold: req.xtc_threshold,
      mirostat: req.mirostat, mirostat_tau: req.mirostat_tau, mirostat_eta: req.mirostat_eta, temperature_last: req.temperature_last,
      top_n_sigma: req.top_n_sigma, dynatemp_range: req.dynatemp_range, dynatemp_exponent: req.dynatemp_exponent });
    const t = this.think, thinking = thinkingOf(req, ids, t);
    return {
      rid, req, ids, limit: Math.min(req.max_tokens ?? this.o.maxTokens ?? Infinity, this.o.ctx - ids.length), sampler,
      detok: new Detok(this.codec, req.stop, t, req.keepSpecial, req.min_tokens ?? 0), grammar,
      pen: penaltiesFor(req.penalties, ids, this.breakerIds),
      state: "queued", slot: null, fed: 0, cached: 0, emitted: 0, next: -1, tAdmit: 0, tFirst: 0, tLast: 0, resume: null,
      drafts: sampler.stateful ? null : this.drafter?.forJob(sampler) ?? null, // (mirostat: each draw moves the next distribution)
      plp: (req.echo && req.logprobs !== undefined) || req.prompt_logprobs !== undefined ? [] : null,
      stops: req.ignore_eos || req.stop_ids?.length ? new Set([...(req.ignore_eos ? [] : this.stopIds), ...(req.stop_ids ?? [])]) : this.stopIds,
      allowed: req.allowed_ids ? Int32Array.from(new Set(req.allowed_ids)) : null,
      bad: req.bad_words?.length ? badWordIds(req.bad_words, (x) => this.codec.encode(x)) : null, out: [],
      budget: this.budgetFor(req.think_budget ?? this.o.thinkBudget ?? -1, ids),
      pool: req.embed ? new Pooler(this.m, req.embed.pooling, ids.length) : null,
      thinking, gate: !grammar || t.open < 0 || t.close < 0 ? "grammar" : openThink(ids, t) ? "think" : thinking ? "maybe" : "grammar",
    };
  }

  /** the ids whose text holds one of these strings (DRY's sequence breakers), cached per list */
  private breakerIds = (b: string[]): ReadonlySet<number> => {
    const key = JSON.stringify(b);
    let set = this.breakerSets.get(key);
    if (!set) {
      const texts = (this.texts ??= Array.from({ length: this.m.cfg.vocab_size }, (_, i) => this.codec.decode([i])));
      set = new Set(texts.flatMap((t, i) => (b.some((x) => t.includes(x)) ? [i] : [])));
      if (this.breakerSets.size < 64) this.breakerSets.set(key, set);
    }
    return set;
  };

  /** A thinking budget over a job's output (null: none asked, or the model has no single-token think tags). */
  private budgetFor(budget: number, prompt: number[]): ThinkBudget | null {
    const t = this.think;
    if (budget < 0 || t.open < 0 || t.close < 0) return null;
    this.budgetMsg ??= this.o.budgetMessage ? this.codec.encode(this.o.budgetMessage) : [];
    return new ThinkBudget({ budget, open: t.open, close: t.close, forced: [...this.budgetMsg, t.close], bytes: (id) => this.codec.tokenBytes(id, false) },
      openThink(prompt, t));
  }
}
