// Lossless speculative decoding on one Session. A DraftSource proposes k tokens after the pending token n
// (sampled, not yet fed); ONE forward verifies [n, d1..dk] (k+1 rows, all logits); `accept` keeps the longest
// valid prefix and adds one token from the target, so every round emits ≥ 1 token, with exactly the target's
// distribution. Rejected rows are dropped with Session.truncate (main KV, hidden, MTP pairs). An AcceptGate turns
// drafting off when acceptance stops paying (EMA with hysteresis, periodic probes).
// State: SpecDecoder holds the pending token, the gate and the counters; sources hold none.
import { argmax, type Session } from "./session.ts";
import type { Penalties } from "./penalties.ts";
import { Sampler } from "./sampler.ts";
import { forcedDraft, maskDraftRows, type GrammarState } from "./grammar/index.ts";

/** Draft tokens per round by source (the defaults of `generate --draft` and `serve --draft`). */
export const DRAFT_LEN = { ngram: 4, mtp: 3 } as const;

/** Proposed tokens; q[j] is the draft distribution [V] d_j was drawn from (absent/null: one-hot). */
export interface Draft { tokens: number[]; q?: (Float64Array | null)[] }

/** What a source may use to draw stochastic drafts (which then must report q). */
export interface DraftContext {
  /** the target is greedy: draw drafts by argmax, q is irrelevant */
  greedy: boolean;
  /** draw from the target's sampling transform of `logits` with the drafting PRNG: token and q [V] */
  sample(logits: Float32Array): { token: number; q: Float64Array };
}

/**
 * A proposer of draft tokens (MTP head, n-gram lookup, later grammar-forced tokens). `propose` sees
 * the Session (history and its KV, read-only apart from the MTP cache) and `next`, the token that
 * will be fed first; it returns at most k tokens to follow `next`. Deterministic sources (forced
 * tokens) return no q.
 */
export interface DraftSource {
  readonly name: string;
  propose(s: Session, next: number, k: number, ctx: DraftContext): Draft;
}

/** How drafts are drawn for a target sampler: argmax when it is greedy, else its sampling transform on a stream
 *  of their own, seeded from the target's seed (reproducible with a seed; the target's stream is left exactly as
 *  plain decoding uses it). */
export function draftContext(target: Sampler): DraftContext {
  const seed = target.params.seed === undefined ? undefined : (target.params.seed ^ 0x5bd1e995) >>> 0;
  const ds = new Sampler({ ...target.params, seed });
  return { greedy: target.greedy, sample: (logits) => { const q = ds.dense(logits); return { token: ds.pick(q), q }; } };
}

/** Chained MTP drafts from the Session's incremental MTP cache (spec §3.5). */
export class MtpDrafts implements DraftSource {
  readonly name = "mtp";
  propose(s: Session, next: number, k: number, ctx: DraftContext): Draft {
    const out: Draft = { tokens: [], q: [] };
    if (k <= 0) return out;
    let logits = s.mtpSync(next);
    for (let j = 0; j < k; j++) {
      if (ctx.greedy) { out.tokens.push(argmax(logits)); out.q!.push(null); }
      else { const d = ctx.sample(logits); out.tokens.push(d.token); out.q!.push(d.q); }
      if (j < k - 1) logits = s.mtpChain(out.tokens[j]);
    }
    return out;
  }
}

/**
 * Verification of one draft token d at one position: `row` is the target's (processed) logits there. Greedy:
 * kept iff d is the argmax, else the argmax replaces it. Sampled: kept with probability min(1, p(d)/q(d)),
 * else a draw from norm(max(0, p − q)) (one-hot q: p without d) replaces it.
 */
export function verifyDraft(row: Float32Array, d: number, q: Float64Array | null, sampler: Sampler): { kept: boolean; token: number } {
  if (sampler.greedy) {
    const t = argmax(row);
    return { kept: t === d, token: t };
  }
  const p = sampler.dense(row), qd = q && q[d] > 0 ? q[d] : 1;
  if (sampler.random() < Math.min(1, p[d] / qd)) return { kept: true, token: d };
  const w = p;
  if (q && q[d] > 0) for (let i = 0; i < w.length; i++) w[i] = Math.max(0, p[i] - q[i]);
  else w[d] = 0;
  let sum = 0;
  for (let i = 0; i < w.length; i++) sum += w[i];
  return { kept: false, token: sum > 0 ? sampler.pick(w) : sampler.pick(sampler.dense(row)) };
}

/**
 * Verification of one round. rows = logits [k+1, V] of [n, d1..dk]; row j is the target at the
 * position of d_{j+1}. Returns how many drafts were accepted and the token that follows them.
 *  - temperature 0: d_j is kept iff it is the argmax of row j-1 → token-identical to plain greedy;
 *  - temperature > 0: Leviathan et al. rejection sampling — keep d with prob min(1, p(d)/q(d)),
 *    else draw from norm(max(0, p − q)); all kept → draw the bonus from the last row. The output
 *    has exactly the target's (temperature/top-k/top-p/min-p processed) distribution.
 */
export function accept(rows: Float32Array, V: number, draft: Draft, sampler: Sampler): { accepted: number; next: number } {
  const k = draft.tokens.length;
  if (rows.length < (k + 1) * V) throw new Error(`accept: ${rows.length / V} logit rows for ${k} drafts`);
  const row = (j: number) => rows.subarray(j * V, (j + 1) * V);
  for (let j = 0; j < k; j++) {
    const v = verifyDraft(row(j), draft.tokens[j], draft.q?.[j] ?? null, sampler);
    if (!v.kept) return { accepted: j, next: v.token };
  }
  return { accepted: k, next: sampler.greedy ? argmax(row(k)) : sampler.pick(sampler.dense(row(k))) };
}

/**
 * Grammar-forced drafts: the tokens for the bytes the grammar forces next; when it forces nothing,
 * the fallback source (e.g. MTP) drafts instead.
 */
export class GrammarDrafts implements DraftSource {
  readonly name: string;
  /** `gs`: the grammar, or where it is now (null: not in force yet, as inside a thinking block) */
  constructor(readonly gs: GrammarState | (() => GrammarState | null), readonly encode: (text: string) => number[], readonly fallback: DraftSource | null) {
    this.name = fallback ? `grammar+${fallback.name}` : "grammar";
  }
  propose(s: Session, next: number, k: number, ctx: DraftContext): Draft {
    const gs = typeof this.gs === "function" ? this.gs() : this.gs;
    const forced = gs ? forcedDraft(gs, k, this.encode) : [];
    if (forced.length > 0) return { tokens: forced };
    return this.fallback ? this.fallback.propose(s, next, k, ctx) : { tokens: [] };
  }
}

export interface GateOpts {
  alpha: number;      // EMA weight of the newest round's acceptance fraction
  off: number;        // switch drafting off when the EMA falls below this
  on: number;         // switch back on when a probe lifts the EMA to at least this
  probeEvery: number; // while off, draft once every this many rounds
}
export const GATE_DEFAULTS: GateOpts = { alpha: 0.3, off: 0.3, on: 0.5, probeEvery: 8 };

/** On/off rule with hysteresis over the EMA of accepted/proposed per round. */
export class AcceptGate {
  readonly o: GateOpts;
  ema: number;
  on = true;
  private idle = 0;
  constructor(o: Partial<GateOpts> = {}) {
    this.o = { ...GATE_DEFAULTS, ...o };
    this.ema = Math.min(this.o.on, 1); // optimistic start: drafting begins on (unless no acceptance could pay)
    this.on = this.o.off < 1;
  }
  /** Should this round draft? (counts rounds while off, probing every probeEvery) */
  wants(): boolean {
    if (this.on) return true;
    if (++this.idle >= this.o.probeEvery) { this.idle = 0; return true; }
    return false;
  }
  update(accepted: number, proposed: number): void {
    if (proposed <= 0) return;
    this.ema += this.o.alpha * (accepted / proposed - this.ema);
    if (this.on && this.ema < this.o.off) { this.on = false; this.idle = 0; }
    else if (!this.on && this.ema >= this.o.on) this.on = true;
  }
}

/** A request's per-token rules (engine/serving/pipeline.ts: penalties, grammar, budgets, the draw, the detokenizer and
 *  its stop strings): one row of logits in, processed in place, the token drawn — with `draft` ≥ 0 that draft verified
 *  (verifyDraft) — taken in; `end`: the output ends there ("stop" | "length"; id −1: with no token). */
export interface TokenRules {
  next(logits: Float32Array, draft?: number, q?: Float64Array | null): { id: number; end: string | null };
  /** the grammar in force now, for grammar-forced drafts (null: none, or not yet) */
  readonly inForce: GrammarState | null;
  /** the request's grammar, in force or not (null: none) */
  readonly grammar: GrammarState | null;
}

export interface SpecStats {
  forwards: number;   // main-model verify/decode forwards (after the prefill)
  drafted: number;    // draft tokens verified
  accepted: number;   // draft tokens accepted
  rounds: number;     // rounds that verified at least one draft
}

export class SpecDecoder {
  readonly gate: AcceptGate;
  readonly stats: SpecStats = { forwards: 0, drafted: 0, accepted: 0, rounds: 0 };
  /** sampled, emitted, not yet fed (-1 before `first`) */
  pending = -1;
  /** the grammar allows nothing more (or is complete with nothing to follow): stop */
  done = false;
  private ctx: DraftContext;

  /** how the rules ended the output (null: they did not; with `rules` only) */
  end: string | null = null;

  /** `grammar`: constrains every sampled token; it is kept at the state after `pending`. `pen`: penalties and
   * logit_bias on every row before sampling (before the grammar's mask), having seen the tokens before it. `rules`:
   * a request's whole per-token pipeline instead (its sampler is `sampler`; grammar and pen then null): every row
   * goes through it in turn, as the scheduler's do. */
  constructor(readonly s: Session, readonly sampler: Sampler, readonly source: DraftSource | null,
    readonly draftLen = 3, gate: Partial<GateOpts> = {}, readonly grammar: GrammarState | null = null,
    readonly pen: Penalties | null = null, readonly rules: TokenRules | null = null) {
    this.gate = new AcceptGate(gate);
    this.ctx = draftContext(sampler);
  }

  /** The token after the prompt, from the prefill's last logits; it becomes pending. */
  first(logits: Float32Array): number {
    if (this.rules) return (this.pending = this.ruled(logits, -1, null));
    this.pending = this.sample(logits);
    return this.pending;
  }

  /** One row through the rules: the token (−1: none), `done` where they end the output. */
  private ruled(row: Float32Array, draft: number, q: Float64Array | null): number {
    const r = this.rules!.next(row, draft, q);
    if (r.end !== null) { this.done = true; this.end = r.end; }
    return r.id;
  }

  /** Sample from one row under the grammar (and advance the grammar past the token). */
  private sample(logits: Float32Array): number {
    this.pen?.apply(logits);
    if (this.grammar && this.grammar.mask(logits) === 0) throw new Error("grammar: no token can continue the output");
    const id = this.sampler.sample(logits);
    this.advance([id]);
    return id;
  }

  /** Advance the grammar (and the penalties) over ids; returns the ids up to the one that completes the
   * grammar (the rest are dropped). */
  private advance(ids: number[]): number[] {
    const g = this.grammar;
    let out = ids;
    if (g)
      for (let i = 0; i < ids.length; i++) {
        g.accept(ids[i]);
        if (g.isDone()) { this.done = true; out = ids.slice(0, i + 1); break; }
      }
    if (this.pen) for (const id of out) this.pen.accept(id);
    return out;
  }

  /**
   * One round: feed the pending token (+ up to min(draftLen, limit-1) drafts) in one forward and
   * return the tokens it yields (1..k+1; the last one is the new pending token).
   */
  step(limit = Infinity): number[] {
    if (this.pending < 0) throw new Error("SpecDecoder.step before first");
    const s = this.s, V = s.m.cfg.vocab_size, n = this.pending, T = s.tokens.length;
    const k = Math.max(0, Math.min(this.draftLen, limit - 1));
    let draft: Draft = { tokens: [] };
    if (this.source && k > 0 && this.gate.wants()) draft = this.source.propose(s, n, k, this.ctx);
    if (draft.tokens.length > k) draft = { tokens: draft.tokens.slice(0, k), q: draft.q?.slice(0, k) };
    const kd = draft.tokens.length;
    this.stats.forwards++;
    if (this.rules) return this.ruledStep(n, T, draft);
    if (kd === 0) {
      const id = this.sample(s.feed([n]));
      this.pending = id;
      return [id];
    }
    const rows = s.feed([n, ...draft.tokens], true);
    if (this.pen) { // row j has seen drafts 0..j-1: accept them on trial, then roll back
      const mark = this.pen.mark();
      for (let j = 0; j <= kd; j++) {
        this.pen.apply(rows.subarray(j * V, (j + 1) * V));
        if (j < kd) this.pen.accept(draft.tokens[j]);
      }
      this.pen.rollback(mark);
    }
    if (this.grammar) maskDraftRows(this.grammar, draft.tokens, rows, V);
    const { accepted, next } = accept(rows, V, draft, this.sampler);
    const out = this.advance([...draft.tokens.slice(0, accepted), next]);
    s.truncate(T + 1 + accepted);
    this.stats.drafted += kd; this.stats.accepted += accepted; this.stats.rounds++;
    this.gate.update(accepted, kd);
    this.pending = next;
    return out;
  }

  /** `step` through the rules: each row in turn while the drafts hold (a draft kept iff the rules' token is it). */
  private ruledStep(n: number, T: number, draft: Draft): number[] {
    const s = this.s, V = s.m.cfg.vocab_size, kd = draft.tokens.length;
    const rows = kd === 0 ? s.feed([n]) : s.feed([n, ...draft.tokens], true);
    const out: number[] = [];
    let accepted = 0;
    for (let j = 0; j <= kd; j++) {
      const d = j < kd ? draft.tokens[j] : -1, id = this.ruled(rows.subarray(j * V, (j + 1) * V), d, j < kd ? draft.q?.[j] ?? null : null);
      if (id >= 0) { out.push(id); this.pending = id; }
      if (this.done || id !== d) break;
      accepted++;
    }
    if (kd > 0) {
      s.truncate(T + 1 + accepted);
      this.stats.drafted += kd; this.stats.accepted += accepted; this.stats.rounds++;
      this.gate.update(accepted, kd);
    }
    return out;
  }
}
