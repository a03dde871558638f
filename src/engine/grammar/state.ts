// Grammar (compiled once, shareable across requests) and GrammarState (one per generation): the
// current DState of the lazily determinized matcher plus a finished flag. mask() / accept() /
// isComplete() / forcedBytes() are what the sampler loop calls; clone() is O(1) (a state is one
// pointer), so speculative drafts can be checked and rolled back. Each call is one budgeted matcher
// operation (stacks.ts): a grammar too ambiguous to follow throws GrammarError from mask / accept.
import { compile, type CompiledGrammar } from "./compile.ts";
import { GrammarError } from "./errors.ts";
import { parseGbnf } from "./gbnf.ts";
import { applyMask, tokenMask } from "./mask.ts";
import { Matcher, type DState } from "./stacks.ts";
import type { TokenVocab } from "../../model/vocab.ts";

const enc = new TextEncoder();

export class Grammar {
  readonly matcher: Matcher;
  constructor(readonly compiled: CompiledGrammar, readonly source: string) {
    this.matcher = new Matcher(compiled);
  }

  /** A fresh state at the start of the grammar, masking over `vocab`. */
  state(vocab: TokenVocab): GrammarState {
    return new GrammarState(this, vocab, this.matcher.initial(), false);
  }

  /** Does the whole of `text` (string or bytes) match the grammar? */
  matches(text: string | Uint8Array): boolean {
    const m = this.matcher, bytes = typeof text === "string" ? enc.encode(text) : text;
    let st = m.initial();
    for (const b of bytes) { m.budget(); st = m.step(st, b); if (st === m.dead) return false; }
    return st.complete;
  }

  /** Is `text` a prefix of some string of the grammar? */
  isPrefix(text: string | Uint8Array): boolean {
    const m = this.matcher, bytes = typeof text === "string" ? enc.encode(text) : text;
    let st = m.initial();
    for (const b of bytes) { m.budget(); st = m.step(st, b); if (st === m.dead) return false; }
    return true;
  }
}

/** Parse + compile GBNF text (start rule `root` unless `opts.root`). Throws GrammarError. */
export function compileGrammar(gbnf: string, opts: { root?: string } = {}): Grammar {
  return new Grammar(compile(parseGbnf(gbnf), opts.root ?? "root"), gbnf);
}

export class GrammarState {
  constructor(readonly grammar: Grammar, readonly vocab: TokenVocab, private st: DState, private finished: boolean) {}

  private get m(): Matcher { return this.grammar.matcher; }

  /** Allowed-token bitset (bit id set = id may be sampled next). Cached per grammar state. */
  allowedBits(): Uint32Array {
    if (this.finished) return new Uint32Array((this.vocab.size + 31) >>> 5);
    return tokenMask(this.m, this.st, this.vocab);
  }

  /** Set −Infinity on every logit whose token cannot continue the grammar. Returns how many remain allowed (0: stop). */
  mask(logits: Float32Array): number {
    return applyMask(this.allowedBits(), this.vocab.size, logits);
  }

  isAllowed(id: number): boolean {
    if (!Number.isInteger(id) || id < 0 || id >= this.vocab.size) return false;
    return ((this.allowedBits()[id >>> 5] >>> (id & 31)) & 1) === 1;
  }

  /** Advance by one sampled token; an end id finishes the grammar. Throws GrammarError if not allowed. */
  accept(id: number): void {
    if (this.finished) throw new GrammarError(`token ${id} after the grammar finished`);
    if (this.vocab.eosIds.includes(id)) {
      if (!this.st.complete) throw new GrammarError(`end token ${id} before the grammar is complete`);
      this.finished = true;
      return;
    }
    const bytes = id >= 0 && id < this.vocab.size ? this.vocab.bytes[id] : null;
    if (!bytes || bytes.length === 0) throw new GrammarError(`token ${id} has no text the grammar can match (special or unknown)`);
    const nx = this.walk(bytes);
    if (nx === this.m.dead) throw new GrammarError(`token ${id} (${JSON.stringify(new TextDecoder().decode(bytes))}) does not continue the grammar`);
    this.st = nx;
  }

  /** Advance by raw bytes (e.g. a forced prefix); false (state unchanged) if the grammar rejects them. */
  acceptBytes(bytes: Uint8Array | string): boolean {
    if (this.finished) return false;
    const nx = this.walk(typeof bytes === "string" ? enc.encode(bytes) : bytes);
    if (nx === this.m.dead) return false;
    this.st = nx;
    return true;
  }

  private walk(bytes: Uint8Array): DState {
    let st = this.st;
    this.m.budget();
    for (let i = 0; i < bytes.length && st !== this.m.dead; i++) st = this.m.step(st, bytes[i]);
    return st;
  }

  /** The grammar may end here (an end id is allowed). */
  isComplete(): boolean { return this.finished || this.st.complete; }

  /** Generation is over: an end id was accepted, or the grammar is complete and nothing can follow. */
  isDone(): boolean { return this.finished || this.st.final; }

  /**
   * The bytes the grammar forces next, whatever is sampled (a grammar-forced draft): follows
   * single-choice bytes until a choice, a possible end, or `max` bytes (or the work budget: then the
   * bytes so far; mask / accept report the grammar). Does not change the state.
   */
  forcedBytes(max = 256): Uint8Array {
    const out: number[] = [];
    let st = this.st;
    this.m.budget();
    try {
      while (!this.finished && out.length < max) {
        const b = this.m.forcedByte(st);
        if (b < 0) break;
        st = this.m.step(st, b);
        out.push(b);
      }
    } catch (e) {
      if (!(e instanceof GrammarError)) throw e;
    }
    return Uint8Array.from(out);
  }

  /** An independent copy (O(1)) for speculative checks. */
  clone(): GrammarState {
    return new GrammarState(this.grammar, this.vocab, this.st, this.finished);
  }
}
