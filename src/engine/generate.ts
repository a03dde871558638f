// One generation on one Session: prefill the prompt (reusing the Session's cached prefix when one is
// given), then decode with a Sampler — one token per forward, or speculatively (draft "mtp" |
// "ngram" | "auto") with lossless verification — until max tokens or a stop id. Reports prefill and
// decode throughput plus tokens per forward and draft acceptance. Stateless beyond its Session.
import { Sampler, type SamplingParams } from "./sampler.ts";
import { penaltiesFor, type PenaltyParams } from "./penalties.ts";
import { Session } from "./session.ts";
import { DRAFT_LEN, GrammarDrafts, MtpDrafts, SpecDecoder, type DraftSource, type GateOpts, type TokenRules } from "./speculative.ts";
import type { GrammarState } from "./grammar/index.ts";
import { NgramDrafts } from "./ngram.ts";
import { costGate } from "./draft-cost.ts";
import type { Model } from "./model.ts";
import type { ForwardOpts } from "./forward.ts";

export type DraftKind = "auto" | "mtp" | "ngram" | "off";

export interface GenerateOpts extends SamplingParams {
  maxTokens: number;
  stopIds?: number[];
  forward?: ForwardOpts;
  /** called for each emitted token; returning false ends the generation (a stop string matched) */
  onToken?: (id: number) => boolean | void;
  /** draft source (default "off"; "auto" = mtp if the model has an MTP layer, else ngram) */
  draft?: DraftKind | DraftSource;
  /** draft tokens per round (default 3 for mtp, 4 otherwise) */
  draftLen?: number;
  gate?: Partial<GateOpts>;
  /** continue this conversation (its cached prefix is reused); a fresh Session otherwise */
  session?: Session;
  /** constrain the output (GBNF / JSON schema); with `encode`, the grammar's forced bytes are drafted */
  grammar?: GrammarState;
  encode?: (text: string) => number[];
  /** presence / frequency / repetition penalties and logit_bias (engine/penalties.ts) */
  penalties?: PenaltyParams;
  /** a request's whole per-token pipeline (engine/serving/pipeline.ts: the server's rules) with its `sampler`: every
   *  token goes through it, and it decides where the output ends; `penalties`, `grammar`, `stopIds` and the sampling
   *  parameters are then unused (its own grammar's forced bytes are drafted, with `encode`) */
  rules?: { rules: TokenRules; sampler: Sampler };
}
export interface GenerateResult {
  prompt_ids: number[];
  gen_ids: number[];
  finish_reason: "stop" | "length";
  cached_tokens: number;
  timing: { prefill_tok_s: number; decode_tok_s: number; prefill_ms: number; decode_ms: number };
  /** draft_pays_at: the kept fraction of drafts at which a round pays for itself on this model (≥ 1: never, so
   *  drafting stays off; engine/draft-cost.ts); absent without a draft source */
  stats: { draft: string; tokens_per_forward: number; draft_acceptance: number; forwards: number; drafted: number; accepted: number; draft_pays_at?: number };
}

/** `auto` takes the MTP head when its drafts pay once this fraction of them is kept (engine/draft-cost.ts): a
 *  trained head keeps most of its drafts, but where its steps cost nearly a main forward (a model of a few layers)
 *  it cannot pay, and keeping its cache in step costs on every token. The demo model: MTP needs 78% kept (it keeps
 *  25-39%); 1000 tokens after "The ", three alternated rounds: off 2000 / 2510 / 2165 tok/s, n-gram (now auto's
 *  choice) 2331 / 2510 / 2470, mtp 1942 / 1838 / 2133. */
export const AUTO_MTP_MAX = 0.6;

/** The DraftSource for a kind on this model (null = no drafting). */
export function draftSource(m: Model, kind: DraftKind | DraftSource | undefined): DraftSource | null {
  if (kind === undefined || kind === "off") return null;
  if (typeof kind !== "string") return kind;
  if (kind === "mtp" && !m.w.mtp) throw new Error("--draft mtp: this model has no MTP layer");
  const mtpPays = () => costGate(m.cfg, m.w, DRAFT_LEN.mtp, true).off! <= AUTO_MTP_MAX;
  if (kind === "mtp" || (kind === "auto" && m.w.mtp && mtpPays())) return new MtpDrafts();
  return new NgramDrafts();
}

export function generate(m: Model, prompt: number[], o: GenerateOpts): GenerateResult {
  if (prompt.length === 0) throw new Error("empty prompt");
  const rules = o.rules?.rules ?? null, sampler = o.rules?.sampler ?? new Sampler(o);
  let source = sampler.stateful ? null : draftSource(m, o.draft); // (mirostat: each draw moves the next distribution)
  if (rules?.grammar && o.encode) source = new GrammarDrafts(() => rules.inForce, o.encode, source);
  else if (!rules && o.grammar && o.encode) source = new GrammarDrafts(o.grammar, o.encode, source);
  // hidden rows only for MTP drafts: without them the prompt's last layer runs its FFN for the last row alone
  const s = o.session ?? new Session(m, { hidden: source?.name.endsWith("mtp") ?? false, ...o.forward });
  const pen = rules ? null : penaltiesFor(o.penalties, prompt);
  const k = o.draftLen ?? (source?.name === "mtp" ? DRAFT_LEN.mtp : DRAFT_LEN.ngram);
  const gate = { ...(source ? costGate(m.cfg, m.w, k, source.name.endsWith("mtp")) : {}), ...o.gate }; // drafts that pay
  const dec = new SpecDecoder(s, sampler, source, k, gate, rules ? null : o.grammar ?? null, pen, rules);
  const stop = new Set(rules ? [] : o.stopIds ?? m.cfg.stop_ids); // (the rules keep their own)
  const t0 = performance.now();
  const cached = s.reuse(prompt);
  // every row this generation may write, reserved now: the cache never grows (a copy of every layer) mid-stream
  const rows = s.tokens.length + prompt.length - cached + o.maxTokens + k + 1;
  s.kv.reserve(rows);
  s.mtpKV?.reserve(rows);
  const base = s.tokens.length + prompt.length - cached; // history length once the prompt is fed
  const gen: number[] = [];
  let finish: "stop" | "length" = "length";
  const emit = (id: number): boolean => {
    if (id < 0) return false; // (the rules left no token)
    gen.push(id);
    if (o.onToken?.(id) === false) { finish = "stop"; return false; }
    if (stop.has(id)) { finish = "stop"; return false; }
    return gen.length < o.maxTokens;
  };
  let go = o.maxTokens > 0;
  const first = dec.first(s.feed(prompt.slice(cached)));
  const t1 = performance.now();
  if (go) go = emit(first) && !dec.done;
  while (go && !dec.done) {
    for (const id of dec.step(o.maxTokens - gen.length)) if (!(go = emit(id))) break;
  }
  if (dec.done) finish = dec.end === "length" ? "length" : "stop"; // the grammar is complete, or the rules ended it
  // like plain decoding, the history ends before the last emitted token (never fed)
  s.truncate(Math.min(s.tokens.length, base + Math.max(gen.length - 1, 0)));
  const t2 = performance.now();
  const decodeSteps = Math.max(gen.length - 1, 0), st = dec.stats;
  return {
    prompt_ids: prompt, gen_ids: gen, finish_reason: finish, cached_tokens: cached,
    timing: {
      prefill_ms: t1 - t0, decode_ms: t2 - t1,
      prefill_tok_s: (prompt.length - cached) / ((t1 - t0) / 1000),
      decode_tok_s: decodeSteps > 0 ? decodeSteps / ((t2 - t1) / 1000) : 0,
    },
    stats: {
      draft: source?.name ?? "off",
      tokens_per_forward: st.forwards > 0 ? decodeSteps / st.forwards : 1,
      draft_acceptance: st.drafted > 0 ? st.accepted / st.drafted : 0,
      forwards: st.forwards, drafted: st.drafted, accepted: st.accepted,
      ...(source ? { draft_pays_at: dec.gate.o.off } : {}),
    },
  };
}
