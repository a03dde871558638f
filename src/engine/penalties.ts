// Logit processors of the OpenAI / vLLM / llama-server request fields (logit_bias, repetition / presence /
// frequency penalties and their window, bad_words, DRY), applied in place to one row of logits before sampling
// (and before a grammar mask), in llama.cpp's and vLLM's order; the formulas are on `Penalties`.
// State (one request): the output counts, the set of tokens seen in the prompt and output, the token sequence
// (DRY, a window) and the window's counts, and the log of accepted tokens that lets speculative decoding try drafts
// and roll them back.

export interface PenaltyParams {
  presence?: number;          // [-2, 2]; 0 = off
  frequency?: number;         // [-2, 2]; 0 = off
  repetition?: number;        // > 0; 1 = off
  bias?: [number, number][];  // (token id, added logit)
  dry?: DryParams;            // multiplier 0 = off
  window?: number;            // llama.cpp's penalty window (see above); absent: vLLM's / OpenAI's rules
}

/** DRY ("don't repeat yourself"), llama-server's fields: breakers are strings; a token whose text holds one ends runs */
export interface DryParams { multiplier: number; base: number; allowed: number; lastN: number; breakers: string[] }
export const DRY_BREAKERS = ["\n", ":", "\"", "*"]; // llama-server's default dry_sequence_breakers
const DRY_MAX = 64;

/** true when the params change nothing (then no processor is needed) */
export function penaltiesOff(p: PenaltyParams | undefined): boolean {
  return !p || ((p.presence ?? 0) === 0 && (p.frequency ?? 0) === 0 && (p.repetition ?? 1) === 1 && !(p.bias?.length) &&
    !((p.dry?.multiplier ?? 0) > 0));
}

/** The processor of `p` for a request with this prompt, or null when `p` changes nothing. breakerIds: the token ids
 *  whose text holds one of these strings (DRY; without it no token breaks a run). */
export function penaltiesFor(p: PenaltyParams | undefined, prompt: readonly number[],
  breakerIds?: (breakers: string[]) => ReadonlySet<number>): Penalties | null {
  if (!p || penaltiesOff(p)) return null;
  return new Penalties(p, prompt, p.dry && p.dry.multiplier > 0 && breakerIds ? breakerIds(p.dry.breakers) : new Set());
}

/**
 * In order:
 *   logit_bias:          l[t] += bias[t]
 *   repetition_penalty:  over the prompt and the output (vLLM, HF): a seen token's l becomes l / r when
 *                        l > 0, else l · r (r > 1 discourages repeats)
 *   presence_penalty,    over the output only (OpenAI): l[t] −= presence · [c_t > 0] + frequency · c_t,
 *   frequency_penalty:   c_t = how often t was emitted so far
 *   window (llama.cpp's penalty_last_n, llama-server's repeat_last_n): instead, all three over the last `window`
 *                        tokens of prompt + output (−1: all of them; 0: none), c_t counted there: l[t] is divided
 *                        (l > 0) or multiplied by r, then l[t] −= frequency · c_t + presence, for every t with c_t > 0
 *   bad_words (vLLM's):  the last token of a listed word's tokens is banned where the output ends with the others
 *   DRY (llama-server's dry_*), over the prompt and the output: where the context's last m tokens (no sequence
 *                        breaker among them) also stand earlier, followed by t, and m ≥ allowed_length:
 *                        l[t] −= multiplier · base^(m − allowed_length), with m the longest such run (capped at
 *                        DRY_MAX, where the penalty is already ~10^15 at base 1.75); the last last_n tokens (≤ 0: all)
 */
export class Penalties {
  private readonly counts = new Map<number, number>(); // output token -> times emitted
  private readonly seen: Set<number>;                  // prompt ∪ output (repetition_penalty)
  private readonly log: number[] = [];                 // accepted ids, negated when new to `seen` (for rollback)
  private readonly seq: number[];                      // prompt + output (DRY or a window only; else empty)
  private readonly win = new Map<number, number>();    // window: token -> times in the last `window` tokens of seq
  private readonly dry: DryParams | null;
  private readonly tracks: boolean;                    // seq is kept
  private z = new Int32Array(0);                       // DRY's scratch (the reversed sequence, its Z-function)

  constructor(readonly p: PenaltyParams, prompt: readonly number[], private readonly breakers: ReadonlySet<number> = new Set()) {
    this.seen = new Set((p.repetition ?? 1) !== 1 && p.window === undefined ? prompt : []);
    this.dry = p.dry && p.dry.multiplier > 0 ? p.dry : null;
    this.tracks = this.dry !== null || p.window !== undefined;
    this.seq = this.tracks ? prompt.slice() : [];
    const w = p.window;
    if (w !== undefined && w !== 0) for (let i = w < 0 ? 0 : Math.max(0, prompt.length - w); i < prompt.length; i++) this.count(prompt[i], 1);
  }

  /** l [V] <- the processed logits (in place) */
  apply(l: Float32Array): void {
    for (const [t, b] of this.p.bias ?? []) if (t >= 0 && t < l.length) l[t] += b;
    const r = this.p.repetition ?? 1, pres = this.p.presence ?? 0, freq = this.p.frequency ?? 0;
    if (this.p.window !== undefined) { // (counted as tokens come and go: a pass costs the window's distinct tokens, not its length)
      for (const [t, k] of this.win) {
        if (t >= l.length) continue;
        if (r !== 1) l[t] = l[t] > 0 ? l[t] / r : l[t] * r;
        l[t] -= freq * k + pres;
      }
    } else {
      if (r !== 1) for (const t of this.seen) if (t < l.length) l[t] = l[t] > 0 ? l[t] / r : l[t] * r;
      if (pres !== 0 || freq !== 0) for (const [t, c] of this.counts) if (t < l.length) l[t] -= pres + freq * c;
    }
    if (this.dry) this.applyDry(l, this.dry);
  }

  /** the window's count of t += d */
  private count(t: number, d: number): void {
    const k = (this.win.get(t) ?? 0) + d;
    if (k > 0) this.win.set(t, k); else this.win.delete(t);
  }

  /**
   * DRY (see the module header): the run before place i is the longest common suffix of seq[start..i) and seq. Runs
   * are first measured one by one where seq[i − 1] is the context's last token (a few places in most text); once that
   * has compared more than 4n tokens (a context of one token repeated: 15 ms a token at 128k), one Z-function of the
   * reversed sequence gives every run in O(n) instead.
   */
  private applyDry(l: Float32Array, d: DryParams): void {
    const c = this.seq, n = c.length, brk = this.breakers;
    if (n === 0 || brk.has(c[n - 1])) return;
    const start = d.lastN > 0 ? Math.max(0, n - d.lastN) : 0, longest = new Map<number, number>();
    for (let i = start + 1, work = 0; i < n; i++) {
      if (c[i - 1] !== c[n - 1]) continue;
      let m = 0;
      while (m < DRY_MAX && i - 1 - m >= start && c[i - 1 - m] === c[n - 1 - m] && !brk.has(c[i - 1 - m])) m++;
      if (m >= d.allowed && m > (longest.get(c[i]) ?? -1)) longest.set(c[i], m);
      if ((work += m) > 4 * n) { this.dryRuns(start, i + 1, d.allowed, longest); break; }
    }
    for (const [t, m] of longest) if (t < l.length) l[t] -= d.multiplier * d.base ** (m - d.allowed);
  }

  /** The runs before places [from, n) into `longest`, by one Z-function over s = P ‖ −1 ‖ T: P the context's last
   *  min(DRY_MAX, tokens back to a breaker) tokens reversed, T seq[start..n−1) reversed (place i at s[L + n − i]);
   *  the sentinel caps every match at P's length */
  private dryRuns(start: number, from: number, allowed: number, longest: Map<number, number>): void {
    const c = this.seq, n = c.length, brk = this.breakers;
    let L = 0;
    while (L < DRY_MAX && n - 1 - L >= start && !brk.has(c[n - 1 - L])) L++;
    const S = L + n - start;
    if (this.z.length < 2 * S) this.z = new Int32Array(Math.max(2 * S, 2 * this.z.length));
    const s = this.z.subarray(0, S), z = this.z.subarray(S, 2 * S);
    for (let k = 0; k < L; k++) s[k] = c[n - 1 - k];
    s[L] = -1;
    for (let k = L + 1; k < S; k++) s[k] = c[n - 1 - (k - L)];
    let lo = 0, hi = 0; // the Z-box [lo, hi)
    for (let k = 1; k < S; k++) {
      let m = k < hi ? Math.min(hi - k, z[k - lo]) : 0;
      while (k + m < S && s[k + m] === s[m]) m++;
      z[k] = m;
      if (k + m > hi) { lo = k; hi = k + m; }
      const i = n - (k - L);
      if (k > L && i >= from && m >= 1 && m >= allowed && m > (longest.get(c[i]) ?? -1)) longest.set(c[i], m);
    }
  }

  /** record an emitted token */
  accept(id: number): void {
    if (this.tracks) this.seq.push(id);
    const w = this.p.window;
    if (w !== undefined && w !== 0) {
      this.count(id, 1);
      if (w > 0 && this.seq.length > w) this.count(this.seq[this.seq.length - 1 - w], -1);
    }
    this.counts.set(id, (this.counts.get(id) ?? 0) + 1);
    const fresh = (this.p.repetition ?? 1) !== 1 && this.p.window === undefined && !this.seen.has(id);
    if (fresh) this.seen.add(id);
    this.log.push(fresh ? -id - 1 : id);
  }

  /** a point to roll back to (speculative decoding accepts draft tokens on trial) */
  mark(): number { return this.log.length; }

  /** forget every token accepted since `mark` */
  rollback(mark: number): void {
    while (this.log.length > mark) {
      const v = this.log.pop()!, id = v < 0 ? -v - 1 : v, c = this.counts.get(id)! - 1, w = this.p.window;
      if (this.tracks) this.seq.pop();
      if (w !== undefined && w !== 0) {
        this.count(id, -1);
        if (w > 0 && this.seq.length >= w) this.count(this.seq[this.seq.length - w], 1); // back into the window
      }
      if (c > 0) this.counts.set(id, c); else this.counts.delete(id);
      if (v < 0) this.seen.delete(id);
    }
  }
}

/**
 * vLLM's bad_words as token sequences: each word encoded as written (leading spaces dropped) and, where that gives a
 * different first token and the same length, with one leading space (the word inside a sentence).
 */
export function badWordIds(words: readonly string[], encode: (text: string) => number[]): number[][] {
  const out: number[][] = [];
  for (const w of words) {
    const bare = encode(w.trimStart()), spaced = encode(` ${w.trimStart()}`);
    if (bare.length > 0) out.push(bare);
    if (spaced.length > 0 && spaced.length === bare.length && spaced[0] !== bare[0]) out.push(spaced);
  }
  return out;
}

/** l [V]: −∞ at the last token of every bad sequence whose other tokens end the output so far (one-token ones: always) */
export function banBadWords(l: Float32Array, seqs: readonly number[][], out: readonly number[]): void {
  for (const s of seqs) {
    const k = s.length - 1, t = s[k];
    if (t >= l.length || k > out.length) continue;
    let match = true;
    for (let i = 0; i < k && match; i++) match = out[out.length - k + i] === s[i];
    if (match) l[t] = -Infinity;
  }
}
