// Token sampling from logits: greedy at temperature 0, else temperature, top-n-sigma, top-k, top-p, min-p, then
// locally typical sampling (typical_p) and XTC (llama.cpp's "exclude top choices") — the temperature, possibly
// dynamic, last in llama.cpp's chain — or instead of all of these mirostat (v1 / v2, its target surprise learnt over
// the output), with a seeded PRNG (the same seed gives the same tokens). `dense`/`pick`/`random` expose the same
// distribution and PRNG to speculative decoding (rejection sampling).
// State: the PRNG, mirostat's mu and scratch buffers of [V].

import { argmaxf, expm, sortKeys } from "../native/hb.ts";
import { mirostat, mirostatK, mirostatMu, typical, withTemperature, xtc, type Dist } from "./samplers.ts";

const NO_TOKEN = "sampling: no token has a positive probability (non-finite logits)";

/** index of the largest of x[0..n) (the first on ties): greedy decoding. As the scan `if (x[i] > x[best]) best = i`
 *  finds it (0 when x[0] is NaN; NaN elsewhere never wins; −0 and +0 tie): hb_maxf gives that scan's maximum (SIMD),
 *  then the first element equal to it is the scan's index (an earlier equal one would have stopped the scan taking
 *  a later one), both in C (hb_argmaxf). */
export function argmax(x: Float32Array, n = x.length): number {
  if (n < 64) {
    let best = 0;
    for (let i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
  }
  return argmaxf(x, n);
}

export interface SamplingParams {
  temperature?: number; top_k?: number; top_p?: number; min_p?: number; seed?: number;
  typical_p?: number;        // (0, 1]; 1 or absent: off
  xtc_probability?: number;  // [0, 1]; 0 or absent: off
  xtc_threshold?: number;    // default 0.1; above 0.5 XTC never applies
  mirostat?: number;         // 0 (off), 1 or 2: replaces top-k / top-p / min-p / typical / XTC
  mirostat_tau?: number;     // target surprise in bits (default 5)
  mirostat_eta?: number;     // learning rate (default 0.1)
  temperature_last?: boolean; // the filters read the T = 1 distribution, the temperature comes last (llama.cpp's chain)
  top_n_sigma?: number;       // > 0: only logits ≥ max − n·σ (σ: their standard deviation), before top-k (llama.cpp's)
  dynatemp_range?: number;    // > 0: the temperature from the entropy (llama.cpp's dynamic temperature, see `dynTemp`)
  dynatemp_exponent?: number; // its exponent (default 1)
}

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
  private p: Float32Array = new Float32Array(0);     // [V] e^((l − max)/T)
  private bits: Uint32Array = new Uint32Array(0);    // the same memory: p's bit patterns (sort keys)
  private keys: Float64Array = new Float64Array(0);  // [V] packed (p, id) sort keys (u64 in f64 storage; also scratch)
  private words: Uint32Array = new Uint32Array(0);   // the same memory: the keys' 32-bit halves
  private tmp: Float64Array = new Float64Array(0);   // [V] the radix sort's scratch

  private mu: number;                                 // mirostat: the surprise bound, learnt (starts at 2·tau)

  constructor(readonly params: SamplingParams = {}) {
    this.rng = new Rng(params.seed ?? (Math.random() * 2 ** 32) >>> 0);
    this.mu = 2 * (params.mirostat_tau ?? 5);
  }

  /** mirostat is on: each draw changes the next distribution (speculative decoding cannot verify drafts against it) */
  get stateful(): boolean { return (this.params.mirostat ?? 0) > 0 && !this.greedy; }
  /** mirostat's current surprise bound (bits) */
  get mirostatMu(): number { return this.mu; }

  /**
   * The next-token distribution after temperature/top-n-sigma/top-k/top-p/min-p, then typical_p and XTC (samplers.ts):
   * ids and probabilities (sum 1). With temperature_last the filters read the T = 1 distribution and the temperature
   * (dynamic with dynatemp_range) comes last (llama.cpp's chain; its XTC still picks its tokens before the temperature).
   * p_i = e^((l_i − max)/T) in f32 (libhb's vectorised exp over the vocabulary). The kept tokens are the
   * longest prefix, in descending p (ties: lower id), of the top-k that stops at the first p < min_p (p of
   * the top token is 1) and once its mass reaches top_p of the top-k's. Only candidates above a threshold
   * are sorted (lowered until they provably hold that prefix), with a native sort of packed (p, id) keys:
   * sorting the whole vocabulary with a comparator measured 50 ms per token at V = 154880. With no filter,
   * every token with p > 0 is kept, in id order. T ≤ 0: the top token alone.
   */
  distribution(logits: Float32Array): Dist { return this.own(this.chain(logits)); }

  /** `distribution`, possibly in this sampler's scratch (`filtered` builds an unfiltered one there): valid until the
   *  next call. Two fresh arrays of the vocabulary a token were most of typical_p's time once its sort was gone. */
  private chain(logits: Float32Array): Dist {
    if (this.stateful) return this.mirostatDist(logits);
    const t = this.params.typical_p ?? 1, x = this.params.xtc_probability ?? 0, dyn = (this.params.dynatemp_range ?? 0) > 0;
    let T = this.params.temperature ?? 1;
    // (with no filter at all the order does not matter: temperature first, as `sample`'s fast path draws)
    const last = this.params.temperature_last === true && T > 0 && (T !== 1 || dyn) && !(this.unfiltered(logits.length) && t >= 1 && x <= 0);
    if (dyn && !last && T > 0) T = this.dynTemp(this.filtered(logits, 1, true)); // from the whole T = 1 distribution
    let d = this.filtered(logits, last ? 1 : T);
    if (d.n <= 1) return d;
    if (t < 1) d = typical(d, t);
    if (last && dyn) T = this.dynTemp(d); // from what the filters kept
    const dT = !last ? d : T > 0 ? withTemperature(d, T) : { ids: d.ids.slice(0, 1), probs: Float64Array.of(1), n: 1 };
    return x > 0 && dT.n > 1 ? xtc(dT, x, this.params.xtc_threshold ?? 0.1, d) : dT;
  }

  /** d with copies of the arrays that are this sampler's scratch */
  private own(d: Dist): Dist {
    const mine = (a: ArrayBufferView) => a.buffer === this.idx.buffer || a.buffer === this.keys.buffer;
    return { ids: mine(d.ids) ? d.ids.slice() : d.ids, probs: mine(d.probs) ? d.probs.slice() : d.probs, n: d.n };
  }

  /**
   * llama.cpp's dynamic temperature: with H the entropy of d and H_max = ln n its maximum over d's n tokens,
   * T = T_lo + (T_hi − T_lo)·(H / H_max)^exponent, T_lo = max(0, temperature − range), T_hi = temperature + range.
   */
  private dynTemp(d: Dist): number {
    const T = this.params.temperature ?? 1, r = this.params.dynatemp_range ?? 0, lo = Math.max(0, T - r), hi = T + r;
    if (d.n <= 1) return lo;
    let H = 0;
    for (let j = 0; j < d.n; j++) if (d.probs[j] > 0) H -= d.probs[j] * Math.log(d.probs[j]);
    return lo + (hi - lo) * (H / Math.log(d.n)) ** (this.params.dynatemp_exponent ?? 1);
  }

  /** dynTemp of the whole T = 1 distribution (`filtered(logits, 1, true)`), the same sums in the same order, without
   *  materializing it (two arrays of V a token: 8-18 ms at V = 154880) */
  private dynTempOf(logits: Float32Array): number {
    const V = logits.length, p = this.weights(logits, 1);
    let total = 0, n = 0;
    for (let i = 0; i < V; i++) if (p[i] > 0) { total += p[i]; n++; }
    const T = this.params.temperature ?? 1, r = this.params.dynatemp_range ?? 0, lo = Math.max(0, T - r), hi = T + r;
    if (n <= 1) return lo;
    let H = 0;
    for (let i = 0; i < V; i++) if (p[i] > 0) { const q = p[i] / total; if (q > 0) H -= q * Math.log(q); }
    return lo + (hi - lo) * (H / Math.log(n)) ** (this.params.dynatemp_exponent ?? 1);
  }

  /** mirostat's distribution at the current mu (samplers.ts): temperature, then its truncation of the sorted tokens */
  private mirostatDist(logits: Float32Array): Dist {
    const V = logits.length, p = this.weights(logits), v2 = this.params.mirostat === 2;
    let total = 0, nz = 0;
    for (let i = 0; i < V; i++) if (p[i] > 0) { total += p[i]; nz++; }
    const dist = (ids: Int32Array) => { // (mirostat copies what it keeps out of this sampler's scratch)
      if (ids.length === 0) throw new Error(NO_TOKEN);
      const probs = new Float64Array(ids.length);
      for (let j = 0; j < ids.length; j++) probs[j] = p[ids[j]] / total;
      return mirostat({ ids, probs, n: ids.length }, v2 ? 2 : 1, this.mu, V);
    };
    // v2 keeps only tokens of p ≥ 2^−mu: sort just those (a hair below, for rounding; the top one always)
    if (v2) return dist(this.sorted(V, Math.min(1, 0.999 * 2 ** -this.mu * total)));
    // v1 keeps the top k, k from the top 100 (sorting the whole vocabulary for them: 25.8 ms a token at V = 154880):
    // the candidates over a threshold lowered 16× at a time until they hold 100 give k; then, if k is more, the
    // threshold is lowered (counting, not sorting) until it holds k, and those are sorted once
    const lower = (tau: number) => (tau > 2 ** -60 ? tau / 16 : 0);
    let tau = 1 / 16, ids = this.sorted(V, tau);
    while (tau > 0 && ids.length < 100) ids = this.sorted(V, (tau = lower(tau)));
    const d = dist(ids);
    if (tau === 0 || d.n < ids.length) return d;
    const k = Math.min(nz, mirostatK(Float64Array.from(ids.subarray(0, 100), (i) => p[i] / total), this.mu, V)); // (d.n: capped at the candidates)
    if (ids.length >= k) return d; // (the candidates hold the top k, all kept: a flat distribution's whole vocabulary was sorted twice)
    while (tau > 0 && this.count(V, tau) < k) tau = lower(tau);
    return dist(this.sorted(V, tau));
  }

  /** how many tokens have p ≥ tau and p > 0 */
  private count(V: number, tau: number): number {
    const p = this.p;
    let n = 0;
    for (let i = 0; i < V; i++) if (p[i] >= tau && p[i] > 0) n++;
    return n;
  }

  /** the distribution after temperature, top-n-sigma, top-k, top-p and min-p (see `distribution`); bare: none of them */
  private filtered(logits: Float32Array, T: number, bare = false): { ids: Int32Array; probs: Float64Array; n: number } {
    const V = logits.length;
    if (!(T > 0)) return { ids: Int32Array.of(argmax(logits)), probs: Float64Array.of(1), n: 1 };
    const p = this.weights(logits, T), idx = this.idx;
    // top-n-sigma keeps a prefix of the descending order (the logits over its cut): a tighter top-k
    const K = bare ? V : Math.min(this.params.top_k && this.params.top_k > 0 ? Math.min(this.params.top_k, V) : V, this.sigmaCount(logits));
    const topP = bare ? 1 : this.params.top_p ?? 1, cut = bare ? 0 : this.params.min_p ?? 0;
    if (bare || this.unfiltered(V)) { // nothing filtered: every token that can be drawn, in id order
      let n = 0, total = 0;
      for (let i = 0; i < V; i++) if (p[i] > 0) { idx[n++] = i; total += p[i]; }
      const ids = idx.subarray(0, n), probs = this.keys.subarray(0, n); // (views: `distribution` copies what it keeps)
      for (let j = 0; j < n; j++) probs[j] = p[ids[j]] / total;
      return { ids, probs, n };
    }
    for (let tau = cut > 0 ? cut : 2 ** -12; ; tau = tau > 2 ** -60 ? tau / 4096 : 0) {
      // (past many candidates only those that hold the top k, or with no top-k the top-p's mass of all: `sorted`)
      const all = tau === 0, ids = all ? this.sorted(V, tau) : this.sorted(V, tau, K, K === V ? topP : 1), n = ids.length;
      if (!all && K < V && n < K && tau > cut) continue; // the top-k reaches below the candidates
      let sum = 0; // the top-k's mass: the candidates in order; with no top-k, all of it
      if (K === V) sum = this.mass;
      else for (let j = 0; j < Math.min(K, n); j++) sum += p[ids[j]];
      let keep = 0, acc = 0, stopped = false;
      while (keep < Math.min(K, n)) {
        const q = p[ids[keep]];
        if (keep > 0 && q < cut) { stopped = true; break; }
        acc += q; keep++;
        if (acc >= topP * sum) { stopped = true; break; }
      }
      // valid when the prefix ended inside the candidates, or nothing outside them could extend it
      if (!(stopped || keep === K || all || tau <= cut)) continue;
      const probs = new Float64Array(keep);
      for (let j = 0; j < keep; j++) probs[j] = p[ids[j]] / acc;
      return { ids: ids.slice(0, keep), probs, n: keep };
    }
  }

  /** true when no top-k / top-p / min-p / top-n-sigma filter applies to a vocabulary of V (typical / XTC: see `sample`) */
  private unfiltered(V: number): boolean {
    const k = this.params.top_k ?? 0;
    return (k <= 0 || k >= V) && (this.params.top_p ?? 1) >= 1 && (this.params.min_p ?? 0) <= 0 && !((this.params.top_n_sigma ?? 0) > 0);
  }

  /** top-n-sigma (llama.cpp's): how many logits are ≥ max − n·σ, σ the standard deviation of the finite ones (V when off) */
  private sigmaCount(l: Float32Array): number {
    const n = this.params.top_n_sigma ?? 0;
    if (!(n > 0)) return l.length;
    let max = -Infinity, sum = 0, k = 0;
    for (let i = 0; i < l.length; i++) { const x = l[i]; if (x - x === 0) { if (x > max) max = x; sum += x; k++; } } // (x − x = 0: finite)
    if (k === 0) return l.length;
    const mean = sum / k;
    let v = 0;
    for (let i = 0; i < l.length; i++) { const d = l[i] - mean; if (d - d === 0) v += d * d; }
    const bound = max - n * Math.sqrt(v / k);
    let c = 0;
    for (let i = 0; i < l.length; i++) if (l[i] >= bound) c++;
    return Math.max(1, c);
  }

  /** this.p [V] = e^((l − max)/T) (T > 0; the top token gets 1) */
  private weights(logits: Float32Array, T = this.params.temperature ?? 1): Float32Array {
    const V = logits.length;
    if (this.p.length < V) {
      this.p = new Float32Array(V); this.bits = new Uint32Array(this.p.buffer);
      this.keys = new Float64Array(V); this.words = new Uint32Array(this.keys.buffer); this.tmp = new Float64Array(V); this.idx = new Int32Array(V);
    }
    let max = -Infinity;
    for (let i = 0; i < V; i++) if (logits[i] > max) max = logits[i];
    const p = this.p;
    for (let i = 0; i < V; i++) p[i] = (logits[i] - max) / T;
    expm(p, V, 0);
    return p;
  }

  /** ids with p ≥ tau and p > 0 in descending p, ties to the lower id (a view into this.idx); given k or topP, when
   *  there are many, possibly only a prefix of them that holds the top k and the top topP of all the mass (topBuckets) */
  private sorted(V: number, tau: number, k = V, topP = 1): Int32Array {
    const p = this.p, bits = this.bits, idx = this.idx, words = this.words;
    let n = 0, all = 0;
    for (let i = 0; i < V; i++) if (p[i] > 0) { all += p[i]; if (p[i] >= tau) idx[n++] = i; }
    this.mass = all;
    // (the mass a little over topP's: sums in another order differ by rounding; falling short, `filtered` lowers tau)
    if (n > 1024 && (n > 2 * k || topP < 1)) n = this.topBuckets(n, k, topP < 1 ? Math.min(all, topP * all * (1 + 1e-9)) : Infinity);
    // key = ~bits(p) · 2^32 + id as a little-endian u64 (two words): ascending = p down, then id up; libhb's radix sort
    // (JavaScript's sort of such keys packed in doubles, and taking the ids back with %, cost 5.4 ms for 80k)
    for (let j = 0; j < n; j++) { words[2 * j] = idx[j]; words[2 * j + 1] = ~bits[idx[j]]; }
    sortKeys(this.keys, this.tmp, n);
    for (let j = 0; j < n; j++) idx[j] = words[2 * j];
    return idx.subarray(0, n);
  }

  /** Of the n candidates in this.idx, keep (in place, in order) those in the top buckets of p's top 16 bits down to
   *  the first that brings their count to k or their mass to `mass`: they hold the top k and the prefix of that
   *  mass, so a flat distribution's top-k 40 or top-p 0.9 no longer sorts most of the vocabulary (4.6 / 6.6 ms at
   *  V = 154880). Returns how many are kept. */
  private topBuckets(n: number, k: number, mass: number): number {
    const p = this.p, bits = this.bits, idx = this.idx;
    const count = (this.count16 ??= new Uint32Array(65536)), weight = (this.mass16 ??= new Float64Array(65536));
    count.fill(0); weight.fill(0);
    for (let j = 0; j < n; j++) { const b = bits[idx[j]] >>> 16; count[b]++; weight[b] += p[idx[j]]; }
    let b = 65535;
    for (let seen = 0, got = 0; b > 0 && (seen += count[b]) < k && (got += weight[b]) < mass; b--);
    let m = 0;
    for (let j = 0; j < n; j++) if (bits[idx[j]] >>> 16 >= b) idx[m++] = idx[j];
    return m;
  }
  private mass = 0;               // sorted's sum of every p > 0 (in id order)
  private count16?: Uint32Array; // topBuckets' counts and mass per 16-bit bucket
  private mass16?: Float64Array;

  /** true at temperature 0: `sample` is argmax and draws nothing from the PRNG. */
  get greedy(): boolean { return (this.params.temperature ?? 1) <= 0; }

  /** A uniform draw in [0, 1) from this sampler's seeded stream. */
  random(): number { return this.rng.next(); }

  /** The processed next-token distribution as a dense vector p [V] (zeros outside the kept set). */
  dense(logits: Float32Array): Float64Array {
    const d = this.chain(logits), p = new Float64Array(logits.length);
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
    if ((this.params.temperature ?? 1) <= 0) return argmax(logits);
    if (this.stateful) {
      const d = this.mirostatDist(logits), j = this.drawFrom(d);
      this.mu = mirostatMu(this.mu, d.probs[j], this.params.mirostat_tau ?? 5, this.params.mirostat_eta ?? 0.1);
      return d.ids[j];
    }
    if (this.unfiltered(logits.length) && (this.params.typical_p ?? 1) >= 1 && (this.params.xtc_probability ?? 0) <= 0) {
      // the distribution's draw without materializing it: p / Σp in id order (its dynamic temperature likewise)
      const V = logits.length, T = (this.params.dynatemp_range ?? 0) > 0 ? this.dynTempOf(logits) : this.params.temperature ?? 1;
      if (!(T > 0)) { this.rng.next(); return argmax(logits); } // (the draw from one token still takes its uniform)
      const p = this.weights(logits, T);
      let total = 0;
      for (let i = 0; i < V; i++) if (p[i] > 0) total += p[i];
      let u = this.rng.next(), last = -1;
      for (let i = 0; i < V; i++) {
        if (!(p[i] > 0)) continue;
        last = i;
        u -= p[i] / total;
        if (u < 0) return i;
      }
      if (last < 0) throw new Error(NO_TOKEN);
      return last;
    }
    const d = this.chain(logits);
    return d.ids[this.drawFrom(d)];
  }

  /** the index of one draw from d (one uniform from the stream) */
  private drawFrom(d: Dist): number {
    if (d.n === 0) throw new Error(NO_TOKEN);
    let u = this.rng.next(), j = 0;
    for (; j < d.n - 1; j++) { u -= d.probs[j]; if (u < 0) break; }
    return j;
  }
}
