// A conversation on one model: its KV caches (main + MTP), its token history and one RunState.
// `prefill`/`step` advance it; `mtpDrafts` runs the chained MTP head after the last token.
import { forward, type ForwardOpts } from "./forward.ts";
import { mtpForward } from "./mtp.ts";
import { newKV, newMtpKV, type Model } from "./model.ts";
import { RunState } from "./state.ts";
import type { KVCache } from "./kv.ts";

export function argmax(x: Float32Array, n = x.length): number {
  let best = 0;
  for (let i = 1; i < n; i++) if (x[i] > x[best]) best = i;
  return best;
}

export class Session {
  readonly kv: KVCache;
  readonly st: RunState;
  readonly tokens: number[] = [];
  /** Main residual (after layer L-1) of every position: the MTP head's input. [cap, D] */
  hidden = new Float32Array(0);

  constructor(readonly m: Model, readonly opts: ForwardOpts = {}) {
    this.kv = newKV(m);
    this.st = new RunState(m.cfg);
  }

  /** Append tokens; returns the logits [V] after the last one (a view into RunState: copy to keep). */
  feed(ids: number[], all = false): Float32Array {
    if (ids.length === 0) throw new Error("feed: no tokens");
    const pos0 = this.tokens.length, n = ids.length, D = this.m.cfg.hidden_size, V = this.m.cfg.vocab_size;
    forward(this.m, this.st, [{ kv: this.kv, r0: 0, n, pos0 }], ids, { ...this.opts, logits: all ? "all" : "last" });
    if (this.hidden.length < (pos0 + n) * D) {
      const h = new Float32Array(Math.max((pos0 + n) * D, this.hidden.length * 2));
      h.set(this.hidden);
      this.hidden = h;
    }
    this.hidden.set(this.st.x.subarray(0, n * D), pos0 * D);
    this.tokens.push(...ids);
    return all ? this.st.logits.subarray(0, n * V) : this.st.logits.subarray(0, V);
  }

  /**
   * Chained MTP drafts after the history (spec §3.5): `next` is the token after the history; the MTP
   * cache absorbs every (token, hidden) pair, then each step feeds its argmax and its raw u'.
   * Returns the drafts and each step's logits.
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
