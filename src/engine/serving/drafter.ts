// Speculative decoding for the scheduler's jobs (serve --draft): which drafts a job appends to its pending token
// — what its grammar forces next, else n-gram prompt lookup or chained MTP-head drafts — and each job's
// AcceptGate, set from the model's cost of a round (engine/draft-cost.ts). Whether a job drafts depends only on
// that job (its history, its gate, its own draft stream), so a greedy or seeded request decodes the same
// whatever runs beside it. State: the options, the gate thresholds and the server-wide draft counters.
import type { Model } from "../model.ts";
import type { Session } from "../session.ts";
import type { Sampler } from "../sampler.ts";
import { AcceptGate, type Draft, type DraftContext, draftContext, type GateOpts, MtpDrafts } from "../speculative.ts";
import { costGate } from "../draft-cost.ts";
import { forcedDraft, type GrammarState } from "../grammar/index.ts";
import { lookup } from "../ngram.ts";

/** Speculative decoding: up to `len` draft tokens per step from n-gram prompt lookup or the MTP head (len 0: off). */
export interface DraftOptions { kind: "ngram" | "mtp"; len: number }

export const NO_DRAFT: Draft = { tokens: [] };

/** A job's drafting state: its gate, and how its MTP drafts are drawn (speculative.ts draftContext). */
export interface JobDrafts { gate: AcceptGate; ctx: DraftContext }

export class Drafter {
  drafted = 0;   // draft tokens verified
  accepted = 0;  // of which kept
  readonly gateOpts: Partial<GateOpts>;
  private readonly mtp = new MtpDrafts();

  constructor(m: Model, readonly o: DraftOptions, private readonly encode: (text: string) => number[]) {
    if (o.kind === "mtp" && !m.w.mtp) throw new Error("--draft mtp: this model has no MTP layer");
    this.gateOpts = costGate(m.cfg, m.w, o.len, o.kind === "mtp");
  }

  /** One line for the server's log: the kind, and the kept fraction from which a round pays on this model. */
  describe(): string {
    const off = this.gateOpts.off!;
    return `drafting: ${this.o.kind}, up to ${this.o.len} per step; ${off >= 1 ? "a round costs more than it can yield on this model, so it stays off" : `pays once ${Math.ceil(100 * off)}% of drafts are kept (engine/draft-cost.ts)`}`;
  }

  /** `target`: the job's sampler */
  forJob(target: Sampler): JobDrafts {
    return { gate: new AcceptGate(this.gateOpts), ctx: draftContext(target) };
  }

  /** Drafts to follow `next` (the pending token) in `sess`, at most `room`; none while the gate pauses drafting.
   *  A grammar's forced tokens first (as the tokenizer encodes those bytes: the model may pick another
   *  tokenization). */
  propose(jd: JobDrafts, sess: Session, next: number, grammar: GrammarState | null, room: number): Draft {
    const k = Math.min(this.o.len, room);
    if (k <= 0 || !jd.gate.wants()) return NO_DRAFT;
    if (grammar) {
      const forced = forcedDraft(grammar, k, this.encode);
      if (forced.length > 0) return { tokens: forced };
    }
    if (this.o.kind === "mtp") return this.mtp.propose(sess, next, k, jd.ctx);
    sess.tokens.push(next);
    try { return { tokens: lookup(sess.tokens, k) }; } finally { sess.tokens.pop(); }
  }

  /** A verified round: `kept` of `proposed` drafts held. */
  verified(jd: JobDrafts, kept: number, proposed: number): void {
    jd.gate.update(kept, proposed);
    this.drafted += proposed;
    this.accepted += kept;
  }
}
