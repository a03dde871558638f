// Token sampling from logits: greedy at temperature 0, else temperature, top-k, top-p, min-p with a
// seeded PRNG (the same seed gives the same tokens). Holds the PRNG state and one scratch buffer.
// `dense`/`pick`/`random` expose the same distribution and PRNG to speculative decoding (rejection
// sampling needs p as a dense [V] vector and uniform draws from the seeded stream).

export interface SamplingParams { temperature?: number; top_k?: number; top_p?: number; min_p?: number; seed?: number }

/** splitmix32-seeded xoshiro128** : small, fast and reproducible across platforms. */
export class Rng {
  private s = new Uint32Array(4);
  constructor(seed: number) {
    let z = seed >>> 0;
    for (let i = 0; i < 4; i++) {
      z = (z + 0x9e3779b9) >>> 0;
      let t = z;
      t = Math.imul(t ^ (t >>> 16), 0x85ebca6b) >>> 0;
      t = Math.imul(t ^ (t >>> 13), 0xc2b2ae35) >>> 0;
      this.s[i] = (t ^ (t >>> 16)) >>> 0;
    }
  }
  /** uniform in [0, 1) */
  next(): number {
    const s = this.s, r = Math.imul(((Math.imul(s[1], 5) << 7) | (Math.imul(s[1], 5) >>> 25)) >>> 0, 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t;
    s[3] = (s[3] << 11) | (s[3] >>> 21);
    return r / 4294967296;
  }
}

export class Sampler {
  private rng: Rng;
  private idx: Int32Array = new Int32Array(0);
  private p: Float64Array = new Float64Array(0);

  constructor(readonly params: SamplingParams = {}) {
    this.rng = new Rng(params.seed ?? (Math.random() * 2 ** 32) >>> 0);
  }

  /** The next-token distribution after temperature/top-k/top-p/min-p: ids and probabilities (sum 1). */
  distribution(logits: Float32Array): { ids: Int32Array; probs: Float64Array; n: number } {
    const V = logits.length, T = this.params.temperature ?? 1;
    if (this.idx.length < V) { this.idx = new Int32Array(V); this.p = new Float64Array(V); }
    let max = -Infinity;
    for (let i = 0; i < V; i++) if (logits[i] > max) max = logits[i];
    let n = 0;
    for (let i = 0; i < V; i++) { this.idx[n] = i; this.p[i] = Math.exp((logits[i] - max) / T); n++; }
    const ids = this.idx.subarray(0, n);
    ids.sort((a, b) => this.p[b] - this.p[a] || a - b);
    const k = this.params.top_k && this.params.top_k > 0 ? Math.min(this.params.top_k, n) : n;
    let sum = 0;
    for (let j = 0; j < k; j++) sum += this.p[ids[j]];
    // top-p: smallest prefix with mass >= top_p; min-p: drop p < min_p · p_max
    const topP = this.params.top_p ?? 1, minP = this.params.min_p ?? 0, pmax = this.p[ids[0]];
    let keep = 0, acc = 0;
    while (keep < k) {
      const q = this.p[ids[keep]];
      if (keep > 0 && q < minP * pmax) break;
      acc += q; keep++;
      if (acc >= topP * sum) break;
    }
    const probs = new Float64Array(keep);
    for (let j = 0; j < keep; j++) probs[j] = this.p[ids[j]] / acc;
    return { ids: ids.slice(0, keep), probs, n: keep };
  }

  /** true at temperature 0: `sample` is argmax and draws nothing from the PRNG. */
  get greedy(): boolean { return (this.params.temperature ?? 1) <= 0; }

  /** A uniform draw in [0, 1) from this sampler's seeded stream. */
  random(): number { return this.rng.next(); }

  /** The processed next-token distribution as a dense vector p [V] (zeros outside the kept set). */
  dense(logits: Float32Array): Float64Array {
    const d = this.distribution(logits), p = new Float64Array(logits.length);
    for (let j = 0; j < d.n; j++) p[d.ids[j]] = d.probs[j];
    return p;
  }

  /** Draw an index from unnormalised non-negative weights w [n] (sum > 0) with this PRNG. */
  pick(w: ArrayLike<number>, n = w.length): number {
    let sum = 0;
    for (let i = 0; i < n; i++) sum += w[i];
    if (!(sum > 0)) throw new Error("Sampler.pick: weights sum to zero");
    let u = this.rng.next() * sum, last = -1;
    for (let i = 0; i < n; i++) {
      if (w[i] <= 0) continue;
      last = i;
      u -= w[i];
      if (u < 0) return i;
    }
    return last; // rounding: the mass ran out on the last positive weight
  }

  sample(logits: Float32Array): number {
    if ((this.params.temperature ?? 1) <= 0) {
      let best = 0;
      for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
      return best;
    }
    const d = this.distribution(logits);
    let u = this.rng.next(), j = 0;
    for (; j < d.n - 1; j++) { u -= d.probs[j]; if (u < 0) break; }
    return d.ids[j];
  }
}
