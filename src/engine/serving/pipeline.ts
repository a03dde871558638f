// One request's per-token pipeline, the same for `serve`, `chat` (through the scheduler: job.ts) and `generate`
// (through engine/generate.ts's TokenRules): one row of logits in — penalties and logit_bias, bad_words, the grammar
// (behind its <think> gate), min_tokens, the thinking budget, allowed_token_ids, then the sampler's draw (or a draft's
// check), the stop ids, the detokenizer with stop strings (detok.ts), the length limit — the token out with its text.
// State: TokenPipeline, one request's (sampler, penalties, grammar, budget, detokenizer, tokens out); PipelineMaker
// (built from a GenRequest with what a model's requests share: end ids, think tags, grammar cache, DRY breakers).
import { Sampler } from "../sampler.ts";
import { ThinkBudget } from "../think-budget.ts";
import { badWordIds, banBadWords, penaltiesFor, type Penalties } from "../penalties.ts";
import { verifyDraft, type TokenRules } from "../speculative.ts";
import type { GrammarState } from "../grammar/index.ts";
import type { TextCodec } from "../../model/tokenizer.ts";
import { Detok, thinkIds, type Piece, type ThinkIds } from "./detok.ts";
import { GrammarCache } from "./grammar-cache.ts";
import type { GenRequest } from "./protocol.ts";

/** One token's outcome: the id drawn (−1: the rules left none), its text (null: not emitted — a stop id, or none) and
 *  how the output ends there (null: it goes on). */
export interface Outcome { id: number; piece: Piece | null; end: "stop" | "length" | null }

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

export class TokenPipeline implements TokenRules {
  emitted = 0;
  /** a grammar's phase: the first token may open <think>, inside it, in force */
  gate: "maybe" | "think" | "grammar";
  private out: number[] = []; // the ids emitted (with bad words: their matching needs the output's tail)

  constructor(readonly sampler: Sampler, readonly detok: Detok, private readonly o: {
    limit: number;             // tokens it may emit
    pen: Penalties | null;     // penalties / logit_bias (null: none asked)
    grammar: GrammarState | null; // kept at the state after the last emitted token
    thinking: boolean;         // a chat prompt's thinking (thinkingOf)
    promptThinks: boolean;     // the prompt leaves <think> open
    think: ThinkIds;
    stops: Set<number>;        // ids that end it (not emitted)
    minTokens: number;         // end and stop ids banned until this many are out
    allowed: Int32Array | null; // the only ids it may sample, or null
    bad: number[][] | null;    // bad_words as token sequences, or null
    budget: ThinkBudget | null; // the thinking budget (null: none)
    scratch: Float32Array;     // keepOnly's (shared by a model's pipelines)
  }) {
    const t = o.think;
    this.gate = !o.grammar || t.open < 0 || t.close < 0 ? "grammar" : o.promptThinks ? "think" : o.thinking ? "maybe" : "grammar";
  }

  get limit(): number { return this.o.limit; }
  get thinking(): boolean { return this.o.thinking; }
  get grammar(): GrammarState | null { return this.o.grammar; }
  /** the grammar in force now (null: none, or before and inside a thinking block) */
  get inForce(): GrammarState | null { return this.gate === "grammar" ? this.o.grammar : null; }

  /** One row of logits (processed in place) → the token, its text and whether the output ends; with `draft` ≥ 0 the
   *  row verifies that draft token (the id is the draft when it holds). Throws only where a grammar fails to follow
   *  a token its mask allowed (the caller fails the request). */
  next(logits: Float32Array, draft = -1, q: Float64Array | null = null): Outcome {
    const o = this.o, th = o.think, g = this.inForce; // (before and inside a thinking block: free)
    o.pen?.apply(logits);
    if (o.bad) banBadWords(logits, o.bad, this.out);
    if (this.gate === "maybe") { // the grammar's first tokens, or <think>
      const open = logits[th.open];
      if (o.grammar!.mask(logits) === 0 && open === -Infinity) return { id: -1, piece: null, end: "stop" };
      logits[th.open] = open;
    } else if (g && g.mask(logits) === 0) return { id: -1, piece: null, end: "stop" }; // nothing can continue the grammar
    if (this.emitted < o.minTokens) { // min_tokens: no end yet (and when nothing else is left, it ends here)
      for (const t of o.stops) if (t < logits.length) logits[t] = -Infinity;
      if (g && !logits.some((v) => v > -Infinity)) return { id: -1, piece: null, end: "stop" }; // (only a grammar leaves none)
    }
    if (o.budget && !o.budget.mask(logits)) return { id: -1, piece: null, end: "stop" }; // another rule banned the forced token
    if (o.allowed) {
      keepOnly(logits, o.allowed, o.scratch);
      if (!logits.some((v) => v > -Infinity)) return { id: -1, piece: null, end: "stop" }; // the other rules banned every allowed id
    }
    const id = draft < 0 ? this.sampler.sample(logits) : verifyDraft(logits, draft, q, this.sampler).token;
    o.pen?.accept(id);
    o.budget?.accept(id);
    if (o.stops.has(id)) return { id, piece: null, end: "stop" };
    g?.accept(id); // (cannot throw: the mask allowed it; if it did, the caller fails the request)
    if (this.gate === "maybe") { if (id === th.open) this.gate = "think"; else { this.gate = "grammar"; o.grammar!.accept(id); } }
    else if (this.gate === "think" && id === th.close) this.gate = "grammar";
    const piece = this.detok.push(id);
    if (o.bad) this.out.push(id);
    this.emitted++;
    const end = this.detok.stopped || (this.gate === "grammar" && o.grammar?.isDone()) ? "stop" : this.emitted >= o.limit ? "length" : null;
    return { id, piece, end };
  }
}

/** What every request's pipeline on one model shares, and how a GenRequest becomes a TokenPipeline. */
export class PipelineMaker {
  readonly stopIds: Set<number>;
  readonly think: ThinkIds;
  readonly grammars: GrammarCache;
  private budgetMsg: number[] | null = null; // the budget message's tokens (made on first use)
  private texts: string[] | null = null;   // every token's text, made on DRY's first use (its sequence breakers)
  private breakerSets = new Map<string, ReadonlySet<number>>();
  private scratch = new Float32Array(1 << 16); // keepOnly's (allowed_token_ids holds at most 65536 ids)

  constructor(private m: { cfg: { vocab_size: number; stop_ids: number[] } }, private codec: TextCodec,
    private o: { ctx: number; thinkBudget?: number; budgetMessage?: string; maxTokens?: number; seed?: number; lazyVocab?: boolean }) {
    const stops = codec.stopIds(m.cfg.stop_ids);
    this.stopIds = new Set(stops);
    this.think = thinkIds(codec);
    // ONE TokenVocab per model, built now (lazyVocab: on a grammar's first use, for `generate`): grammar masks and the
    // mux token bytes (TextCodec.tokenBytes) share it. An unsupported tokenizer only disables constrained output
    // (BAD_REQUEST per request).
    if (!o.lazyVocab) try { codec.tokenVocab(stops); } catch { /* reported by GrammarCache */ }
    this.grammars = new GrammarCache(() => codec.tokenVocab(stops));
  }

  /** The pipeline of request `rid` over its prompt ids, or why not (its grammar did not compile). */
  make(rid: number, req: GenRequest, ids: number[]): TokenPipeline | { detail: string } {
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
    const t = this.think;
    return new TokenPipeline(sampler, new Detok(this.codec, req.stop, t, req.keepSpecial, req.min_tokens ?? 0), {
      limit: Math.min(req.max_tokens ?? this.o.maxTokens ?? Infinity, this.o.ctx - ids.length),
      pen: penaltiesFor(req.penalties, ids, this.breakerIds), grammar, thinking: thinkingOf(req, ids, t), promptThinks: openThink(ids, t), think: t,
      stops: req.ignore_eos || req.stop_ids?.length ? new Set([...(req.ignore_eos ? [] : this.stopIds), ...(req.stop_ids ?? [])]) : this.stopIds,
      minTokens: req.min_tokens ?? 0,
      allowed: req.allowed_ids ? Int32Array.from(new Set(req.allowed_ids)) : null,
      bad: req.bad_words?.length ? badWordIds(req.bad_words, (x) => this.codec.encode(x)) : null,
      budget: this.budgetFor(req.think_budget ?? this.o.thinkBudget ?? -1, ids), scratch: this.scratch,
    });
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

  /** A thinking budget over a request's output (null: none asked, or the model has no single-token think tags). */
  private budgetFor(budget: number, prompt: number[]): ThinkBudget | null {
    const t = this.think;
    if (budget < 0 || t.open < 0 || t.close < 0) return null;
    this.budgetMsg ??= this.o.budgetMessage ? this.codec.encode(this.o.budgetMessage) : [];
    return new ThinkBudget({ budget, open: t.open, close: t.close, forced: [...this.budgetMsg, t.close], bytes: (id) => this.codec.tokenBytes(id, false) },
      openThink(prompt, t));
  }
}
