// Logit processors of the OpenAI / vLLM / llama-server request fields, applied in place to one row of
// logits before sampling (and before a grammar mask), in llama.cpp's and vLLM's order:
//   logit_bias:          l[t] += bias[t]
//   repetition_penalty:  over the prompt and the output (vLLM, HF): a seen token's l becomes l / r when
//                        l > 0, else l · r (r > 1 discourages repeats)
//   presence_penalty,    over the output only (OpenAI): l[t] −= presence · [c_t > 0] + frequency · c_t,
//   frequency_penalty:   c_t = how often t was emitted so far
// State (one request): the output counts, the set of tokens seen in the prompt and output, and the log of
// accepted tokens that lets speculative decoding try drafts and roll them back.

export interface PenaltyParams {
  presence?: number;          // [-2, 2]; 0 = off
  frequency?: number;         // [-2, 2]; 0 = off
  repetition?: number;        // > 0; 1 = off
  bias?: [number, number][];  // (token id, added logit)
}

/** true when the params change nothing (then no processor is needed) */
export function penaltiesOff(p: PenaltyParams | undefined): boolean {
  return !p || ((p.presence ?? 0) === 0 && (p.frequency ?? 0) === 0 && (p.repetition ?? 1) === 1 && !(p.bias?.length));
}

/** The processor of `p` for a request with this prompt, or null when `p` changes nothing. */
export function penaltiesFor(p: PenaltyParams | undefined, prompt: readonly number[]): Penalties | null {
  return p && !penaltiesOff(p) ? new Penalties(p, prompt) : null;
}

export class Penalties {
  private readonly counts = new Map<number, number>(); // output token -> times emitted
  private readonly seen: Set<number>;                  // prompt ∪ output (repetition_penalty)
  private readonly log: number[] = [];                 // accepted ids, negated when new to `seen` (for rollback)

  constructor(readonly p: PenaltyParams, prompt: readonly number[]) {
    this.seen = new Set((p.repetition ?? 1) !== 1 ? prompt : []);
  }

  /** l [V] <- the processed logits (in place) */
  apply(l: Float32Array): void {
    for (const [t, b] of this.p.bias ?? []) if (t >= 0 && t < l.length) l[t] += b;
    const r = this.p.repetition ?? 1;
    if (r !== 1) for (const t of this.seen) if (t < l.length) l[t] = l[t] > 0 ? l[t] / r : l[t] * r;
    const pres = this.p.presence ?? 0, freq = this.p.frequency ?? 0;
    if (pres !== 0 || freq !== 0) for (const [t, c] of this.counts) if (t < l.length) l[t] -= pres + freq * c;
  }

  /** record an emitted token */
  accept(id: number): void {
    this.counts.set(id, (this.counts.get(id) ?? 0) + 1);
    const fresh = (this.p.repetition ?? 1) !== 1 && !this.seen.has(id);
    if (fresh) this.seen.add(id);
    this.log.push(fresh ? -id - 1 : id);
  }

  /** a point to roll back to (speculative decoding accepts draft tokens on trial) */
  mark(): number { return this.log.length; }

  /** forget every token accepted since `mark` */
  rollback(mark: number): void {
    while (this.log.length > mark) {
      const v = this.log.pop()!, id = v < 0 ? -v - 1 : v, c = this.counts.get(id)! - 1;
      if (c > 0) this.counts.set(id, c); else this.counts.delete(id);
      if (v < 0) this.seen.delete(id);
    }
  }
}
