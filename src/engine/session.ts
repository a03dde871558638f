// A conversation on one model: its KV caches (main + MTP), its token history and one RunState.
// `feed` appends tokens (one forward), `truncate(n)` drops everything past position n, `reuse(prompt)` keeps the
// longest common prefix; `rows` / `install` / `copyPrefix` move histories between sessions (the prompt cache).
// MTP (spec §3.5), incremental: MTP row p holds the pair (tokens[p+1], hidden[p]); see mtpSync / mtpAbsorb / mtpChain.
// State: `tokens` (fed ids; invariant tokens.length === kv.len), `kv`, `hidden` (main residual of every fed
// position: the MTP head's input) and the incremental MTP state (`mtpKV` + which of its rows are real pairs).
import { forward, type ForwardOpts } from "./forward.ts";
import { mtpForward } from "./mtp.ts";
import { activePolicy } from "./quality.ts";
import { newKV, newMtpKV, type Model } from "./model.ts";
import { RunState } from "./state.ts";
import { argmax } from "./sampler.ts";
import type { KVCache } from "./kv.ts";
import type { KvDtype, KvRows } from "../native/hb.ts";

export { argmax };

/** The length of the longest common prefix of two token sequences. */
export function lcp(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** Positions [0, n) of a conversation (Session.rows): what a prefix copy or the prompt cache moves. */
export interface PrefixRows {
  m: Model;
  dtype: KvDtype;
  tokens: number[];                // [n]
  kv: KvRows[];                    // per layer [n, rowElems]: c_kv ‖ k_pe in the cache's dtype
  ik: (Float32Array | null)[];     // per layer [n, index_head_dim] indexer keys (null: not a full DSA layer)
  hidden: Float32Array;            // [n, D] main residual rows, or empty (none recorded)
}

export class Session {
  readonly kv: KVCache;
  readonly st: RunState;
  readonly tokens: number[] = [];
  /** Main residual (after layer L-1) of every position: the MTP head's input. [cap, D] */
  hidden = new Float32Array(0);
  /** The MTP layer's cache (null without an MTP layer). Rows [0, mtpReal) are real pairs. */
  readonly mtpKV: KVCache | null;
  private mtpReal = 0;
  /** token paired with hidden[p] in MTP row p (checked against the history at each sync) */
  private mtpToks: number[] = [];
  /** raw u' of the last MTP row run (the input of the next chained step) [D] */
  private mtpU: Float32Array;

  /** `share`: a RunState to use instead of one of its own (a server's slots share the step's), and a KV cache
   *  made by the caller (preallocated). `opts.hidden`: record every fed row's hidden state (the MTP head's
   *  input; a KV file keeps them) — by default when the model has an MTP layer; `false` lets a prompt's last layer
   *  skip the FFN of rows without logits, and MTP drafting is then refused. */
  constructor(readonly m: Model, readonly opts: ForwardOpts = {}, share: { st?: RunState; kv?: KVCache } = {}) {
    this.kv = share.kv ?? newKV(m);
    this.st = share.st ?? new RunState(m.cfg);
    this.st.exact = opts.exact ?? false;
    this.st.quality = activePolicy(opts.quality);
    this.mtpKV = m.w.mtp ? newMtpKV(m, 64, this.kv.dtype) : null; // (the main cache's dtype)
    this.mtpU = new Float32Array(m.cfg.hidden_size);
  }

  /** Append tokens; returns the logits [V] after the last one (a view into RunState: copy to keep). */
  feed(ids: number[], all = false): Float32Array {
    if (ids.length === 0) throw new Error("feed: no tokens");
    const pos0 = this.tokens.length, n = ids.length, D = this.m.cfg.hidden_size, V = this.m.cfg.vocab_size;
    const hidden = this.opts.hidden ?? this.mtpKV !== null;
    forward(this.m, this.st, [{ kv: this.kv, r0: 0, n, pos0 }], ids, { ...this.opts, hidden, logits: all ? "all" : "last" });
    if (hidden) this.record(this.st.x.subarray(0, n * D), pos0, n);
    this.tokens.push(...ids);
    return all ? this.st.logits.subarray(0, n * V) : this.st.logits.subarray(0, V);
  }

  /** Keep the main residual rows x [n, D] of positions pos0.. (a forward that fed them: the MTP head's input). */
  record(x: Float32Array, pos0: number, n: number): void {
    const D = this.m.cfg.hidden_size;
    this.ensureHidden(pos0 + n);
    this.hidden.set(x.subarray(0, n * D), pos0 * D);
  }

  /** Grow `hidden` to hold `rows` positions (keeping its contents). */
  ensureHidden(rows: number): void {
    const D = this.m.cfg.hidden_size;
    if (this.hidden.length >= rows * D) return;
    const h = new Float32Array(Math.max(rows * D, this.hidden.length * 2));
    h.set(this.hidden);
    this.hidden = h;
  }

  /** Drop tokens, KV rows, hidden rows and MTP pairs past position n (0 ≤ n ≤ tokens.length). */
  truncate(n: number): void {
    if (!Number.isInteger(n) || n < 0 || n > this.tokens.length) throw new RangeError(`Session.truncate(${n}) outside [0, ${this.tokens.length}]`);
    // MTP: pairs past n go, and so do chained (draft) rows past the real pairs
    this.mtpReal = Math.min(this.mtpReal, n);
    if (this.mtpKV && this.mtpKV.len > this.mtpReal) this.mtpKV.truncate(this.mtpReal);
    if (n === this.tokens.length) return;
    this.tokens.length = n;
    this.kv.truncate(n);
  }

  /**
   * Prefix reuse: keep the longest common prefix of the history and `prompt`, but leave at least one
   * prompt token to feed (its logits are needed). Truncates there; returns the cached count c — the
   * caller feeds prompt.slice(c).
   */
  reuse(prompt: number[]): number {
    if (prompt.length === 0) throw new Error("reuse: empty prompt");
    const c = Math.min(lcp(this.tokens, prompt), prompt.length - 1);
    this.truncate(c);
    return c;
  }

  /** Positions [0, n) of this history as views (no copy): tokens, each layer's MLA rows (this cache's dtype) and
   *  indexer keys, and the main residual's rows where recorded (MTP drafting; else empty). */
  rows(n = this.tokens.length): PrefixRows {
    if (!Number.isInteger(n) || n < 0 || n > this.tokens.length || this.kv.len < n) throw new RangeError(`rows(${n}) outside [0, ${this.tokens.length}]`);
    const a = this.kv, D = this.m.cfg.hidden_size;
    return {
      m: this.m, dtype: a.dtype, tokens: this.tokens.slice(0, n),
      kv: a.kv.map((x) => x.subarray(0, n * a.rowElems)), // (rowElems: a q8 row is its codes and its scales)
      ik: a.ik.map((x) => x?.subarray(0, n * a.ikWidth) ?? null),
      hidden: this.hidden.length >= n * D ? this.hidden.subarray(0, n * D) : new Float32Array(0),
    };
  }

  /** Take positions [0, n) of another Session on the same model — its KV rows, indexer keys, hidden rows and
   *  tokens — in place of this history (a server's slot sharing a prompt prefix another slot holds: a copy, no
   *  forward). The MTP rows are re-derived from the pairs at the next sync, as after a restore. */
  copyPrefix(src: Session, n: number): void {
    this.install(src.rows(n));
  }

  /** Replace this history with positions [0, n) of `r` (rows of a Session on the same model with a cache of the same
   *  dtype: copied). */
  install(r: PrefixRows, n = r.tokens.length): void {
    if (r.m !== this.m) throw new Error("install: rows of another model");
    const b = this.kv, D = this.m.cfg.hidden_size;
    if (r.dtype !== b.dtype) throw new Error(`install: rows of an ${r.dtype} cache into an ${b.dtype} one`);
    if (!Number.isInteger(n) || n < 0 || n > r.tokens.length) throw new RangeError(`install(${n}) outside [0, ${r.tokens.length}]`);
    this.truncate(0);
    b.truncate(0);
    b.reserve(n);
    for (let i = 0; i < b.nLayers; i++) {
      b.kv[i].set(r.kv[i].subarray(0, n * b.rowElems) as never);
      const ik = r.ik[i];
      if (ik) b.ik[i]!.set(ik.subarray(0, n * b.ikWidth));
    }
    b.len = n;
    b.wrote(0);
    this.adopt(r.tokens.slice(0, n), r.hidden.subarray(0, r.hidden.length ? n * D : 0)); // (hidden rows only where recorded)
  }

  /** Install a history whose KV rows are already in `kv` (kvfile load, a prefix copy): tokens + hidden [n, D] (empty:
   *  none recorded — a session that does not draft with the MTP head never reads them). */
  adopt(tokens: number[], hidden: Float32Array | null): void {
    if (this.kv.len !== tokens.length) throw new Error(`adopt: ${tokens.length} tokens but ${this.kv.len} KV rows`);
    const D = this.m.cfg.hidden_size;
    this.tokens.length = 0;
    this.tokens.push(...tokens);
    if (hidden?.length) { this.ensureHidden(tokens.length); this.hidden.set(hidden.subarray(0, tokens.length * D)); }
    else if (!hidden && this.mtpKV) throw new Error("adopt: this model has an MTP layer: the hidden rows are required");
    this.mtpReal = 0; // MTP rows are re-derived from (token, hidden) pairs at the next mtpSync
  }

  /**
   * Bring the MTP cache in line with the history plus `next` (the token after it) and run the MTP
   * head at position T-1: returns the first draft's logits [V] (a copy). Batched over every pair
   * not yet absorbed; invalid and chained rows are truncated first.
   */
  mtpSync(next: number): Float32Array {
    this.mtpUpdate(next);
    return this.st.logits.slice(0, this.m.cfg.vocab_size);
  }

  /** Absorb the pairs whose token the history already holds (rows up to T-2) into the MTP cache, no logits.
   *  Ahead of time: a server does it after each prefill chunk so that no later step carries a whole prompt's MTP rows. */
  mtpAbsorb(): void {
    if (this.tokens.length >= 2) this.mtpUpdate(null);
  }

  /** MTP rows [keep, end) for the pairs not yet absorbed: end = T with `next` (logits of row T-1), else T-1. */
  private mtpUpdate(next: number | null): void {
    const kv = this.mtpKV;
    if (!kv) throw new Error("this model has no MTP layer");
    if (this.opts.hidden === false) throw new Error("MTP drafts need every fed row's hidden state: this Session was made with hidden: false");
    const m = this.m, D = m.cfg.hidden_size, T = this.tokens.length, end = next === null ? T - 1 : T;
    if (T === 0) throw new Error("mtpSync: feed at least one token first");
    const tokAt = (p: number) => (p + 1 < T ? this.tokens[p + 1] : next!);
    let keep = Math.min(this.mtpReal, T - 1);
    while (keep > 0 && this.mtpToks[keep - 1] !== tokAt(keep - 1)) keep--;
    kv.truncate(Math.min(keep, kv.len));
    this.mtpReal = this.mtpToks.length = keep;
    if (end <= keep) return;
    const toks: number[] = [];
    for (let p = keep; p < end; p++) toks.push(tokAt(p));
    mtpForward(m, this.st, kv, keep, toks, this.hidden.subarray(keep * D, end * D), false, { ...this.opts, logits: next === null ? "none" : "last" });
    this.mtpToks.push(...toks);
    this.mtpReal = end;
    this.mtpU.set(this.st.x.subarray((toks.length - 1) * D, toks.length * D));
  }

  /** One chained MTP step after `mtpSync`/`mtpChain`: token d with the previous raw u'. Logits [V] (copy).
   *  Chained rows (past T-1) are speculative: the next `mtpSync` truncates them (and any row whose token no longer
   *  matches the history). */
  mtpChain(d: number): Float32Array {
    const kv = this.mtpKV;
    if (!kv) throw new Error("this model has no MTP layer");
    if (this.mtpReal !== this.tokens.length || kv.len < this.mtpReal) throw new Error("mtpChain: call mtpSync first");
    const D = this.m.cfg.hidden_size, V = this.m.cfg.vocab_size;
    mtpForward(this.m, this.st, kv, kv.len, [d], this.mtpU, true, { ...this.opts, logits: "last" });
    this.mtpU.set(this.st.x.subarray(0, D));
    return this.st.logits.slice(0, V);
  }

  /**
   * Chained MTP drafts after the history (spec §3.5), from scratch (reference for tests): `next` is
   * the token after the history; a fresh MTP cache absorbs every (token, hidden) pair, then each
   * step feeds its argmax and its raw u'. Returns the drafts and each step's logits.
   */
  mtpDrafts(next: number, steps: number): { drafts: number[]; logits: Float32Array[] } {
    const m = this.m, D = m.cfg.hidden_size, V = m.cfg.vocab_size, T = this.tokens.length;
    const kv = newMtpKV(m, T + steps);
    const toks = [...this.tokens.slice(1), next];
    const out = { drafts: [] as number[], logits: [] as Float32Array[] };
    mtpForward(m, this.st, kv, 0, toks, this.hidden.subarray(0, T * D), false, { ...this.opts, logits: "last" });
    const u = new Float32Array(D);
    for (let s = 0; s < steps; s++) {
      const l = this.st.logits.slice(0, V);
      const d = argmax(l);
      out.drafts.push(d); out.logits.push(l);
      if (s === steps - 1) break;
      const last = s === 0 ? T - 1 : 0; // row of u' in st.x: the absorb pass had T rows, steps have 1
      u.set(this.st.x.subarray(last * D, (last + 1) * D));
      mtpForward(m, this.st, kv, T + s, [d], u, true, { ...this.opts, logits: "last" });
    }
    return out;
  }
}
