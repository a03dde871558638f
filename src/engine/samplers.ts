// llama.cpp's samplers beyond top-k / top-p / min-p, as transforms of a distribution (ids, probs summing to 1):
// locally typical sampling (typical_p), XTC ("exclude top choices") and mirostat's step (v1: the top k from a Zipf
// estimate, v2: the tokens under a surprise bound), plus mirostat's learning rule and a temperature applied last.
// No state: the Sampler holds mu.

export type Dist = { ids: Int32Array; probs: Float64Array; n: number };

/**
 * Locally typical sampling (llama.cpp's typical_p): with H = −Σ p ln p, the tokens in ascending |−ln p − H| (as f32;
 * ties: the lower id) until their mass reaches t (at least one), renormalised, in d's order. No sort: the score at
 * which the mass reaches t is found by a two-pass radix select over the scores' bits (non-negative floats order as
 * their bits), 16 bits a pass, weighing each bucket by its mass; only the tokens tied at that score are ordered (by
 * id). Sorting the scores cost 5-6 ms of the 11-23 ms a token this took at V = 154,880 (bench/sampler.ts). The mass
 * is summed a bucket at a time, in ascending score: the kept set can differ from a token-by-token sum only where t
 * lies within rounding (~1e-16 relative) of a partial sum.
 */
export function typical(d: Dist, t: number): Dist {
  if (!(t < 1) || d.n <= 1) return d;
  const n = d.n, probs = d.probs, ids = d.ids;
  if (score.length < n) { lnp = new Float64Array(n); score = new Float32Array(n); bits = new Uint32Array(score.buffer); }
  let H = 0;
  for (let j = 0; j < n; j++) { lnp[j] = Math.log(probs[j]); if (probs[j] > 0) H -= probs[j] * lnp[j]; }
  // the scores, and the high 16 bits' bucket where their mass reaches t; then the low 16 bits' within it (the last
  // one holding mass when rounding keeps the sum under t). `mass` is all zeros between calls: each pass clears the
  // range of buckets it used, so a small vocabulary costs its own range, not 65,536 buckets
  let lo = 65535, hi = 0;
  for (let j = 0; j < n; j++) {
    score[j] = Math.abs(-lnp[j] - H);
    const b = bits[j] >>> 16;
    mass[b] += probs[j]; lo = Math.min(lo, b); hi = Math.max(hi, b);
  }
  const top = crossing(0, t, lo, hi);
  let acc = reached;
  lo = 65535; hi = 0;
  for (let j = 0; j < n; j++) if (bits[j] >>> 16 === top) { const b = bits[j] & 0xffff; mass[b] += probs[j]; lo = Math.min(lo, b); hi = Math.max(hi, b); }
  const cut = (top * 65536 + crossing(acc, t, lo, hi)) >>> 0; // the score's bits at which the mass reaches t
  acc = reached;
  const tied: number[] = [];
  let keep = 0;
  for (let j = 0; j < n; j++) if (bits[j] < cut) keep++; else if (bits[j] === cut) tied.push(j);
  for (let k = 1; k < tied.length; k++) if (ids[tied[k]] < ids[tied[k - 1]]) { tied.sort((a, b) => ids[a] - ids[b]); break; }
  let last = 0; // the tied tokens kept: the first ones by id until the mass reaches t
  while (last < tied.length) { acc += probs[tied[last++]]; if (acc >= t) break; }
  const lastId = ids[tied[last - 1]], out = { ids: new Int32Array(keep + last), probs: new Float64Array(keep + last), n: keep + last };
  for (let j = 0, k = 0; j < n; j++)
    if (bits[j] < cut || (bits[j] === cut && ids[j] <= lastId)) { out.ids[k] = ids[j]; out.probs[k++] = probs[j] / acc; }
  return out;
}

/** the first bucket of `mass` [lo, hi] at which acc plus the buckets up to it reaches t (hi when none does); `reached`:
 *  acc plus the buckets before it. Clears mass [lo, hi]. */
function crossing(acc: number, t: number, lo: number, hi: number): number {
  let b = lo;
  for (; b < hi && !(acc + mass[b] >= t); b++) acc += mass[b];
  reached = acc;
  mass.fill(0, lo, hi + 1);
  return b;
}

// typical's scratch (grown, never shrunk): ln p [n], the scores [n] and their bits, the mass per bucket of 16 bits
let lnp = new Float64Array(0), score = new Float32Array(0), bits = new Uint32Array(0);
const mass = new Float64Array(65536);
let reached = 0; // crossing's mass before its bucket

/**
 * XTC (llama.cpp's "exclude top choices"): with probability P, when two or more tokens have p ≥ threshold, all of them
 * but the least probable (ties: the higher id) are removed and the rest renormalised. As one distribution (what a
 * draw after the coin gives): (1 − P)·p + P·p_without_them. Threshold above 0.5, or fewer than two tokens over it:
 * unchanged. `select`: the distribution the tokens over the threshold are read from, when d is it after a temperature.
 */
export function xtc(d: Dist, P: number, threshold: number, select: Dist = d): Dist {
  if (!(P > 0) || threshold > 0.5) return d;
  const top: number[] = []; // chosen on `select` (the same tokens in the same order: d before a temperature)
  for (let j = 0; j < d.n; j++) if (select.probs[j] >= threshold) top.push(j);
  if (top.length < 2) return d;
  top.sort((a, b) => select.probs[b] - select.probs[a] || d.ids[a] - d.ids[b]).pop(); // the least probable stays
  let removed = 0;
  for (const j of top) removed += d.probs[j];
  const rest = 1 - removed, probs = new Float64Array(d.n);
  for (let j = 0; j < d.n; j++) probs[j] = (1 - P) * d.probs[j] + (P * d.probs[j]) / rest;
  for (const j of top) probs[j] = (1 - P) * d.probs[j]; // (a Set's lookup a token was most of XTC's time: 3.9 ms at V = 154,880)
  return { ids: d.ids, probs, n: d.n };
}

/**
 * Mirostat's truncation of d (in descending p, ties to the lower id), renormalised: v2 keeps the tokens whose surprise
 * −log2 p is at most mu (at least the top one); v1 keeps the top k, k = (ε·2^mu / (1 − V^−ε))^(1/s) with s the Zipf
 * exponent fitted to the top 100 (least squares through the origin of log(p_i / p_i+1) on log((i+2)/(i+1))) and
 * ε = s − 1 (k in [1, V]; V: the vocabulary).
 */
export function mirostat(d: Dist, version: 1 | 2, mu: number, V: number): Dist {
  let keep = 1;
  if (version === 2) while (keep < d.n && -Math.log2(d.probs[keep]) <= mu) keep++;
  else keep = Math.min(d.n, mirostatK(d.probs.subarray(0, d.n), mu, V));
  let sum = 0;
  for (let j = 0; j < keep; j++) sum += d.probs[j];
  const probs = new Float64Array(keep);
  for (let j = 0; j < keep; j++) probs[j] = d.probs[j] / sum;
  return { ids: d.ids.slice(0, keep), probs, n: keep };
}

/** mirostat v1's k from the top 100 of probs (in descending order; at least 1, V when the estimate is not finite) */
export function mirostatK(probs: Float64Array, mu: number, V: number): number {
  let tb = 0, tt = 0;
  for (let i = 0; i + 1 < Math.min(100, probs.length); i++) {
    const t = Math.log((i + 2) / (i + 1)), b = Math.log(probs[i] / probs[i + 1]);
    tb += t * b; tt += t * t;
  }
  const s = tt > 0 ? tb / tt : 1, e = s - 1, k = ((e * 2 ** mu) / (1 - V ** -e)) ** (1 / s);
  return Number.isFinite(k) ? Math.max(1, Math.floor(k)) : V;
}

/** mirostat's learning rule after drawing a token of probability p (in the truncated distribution) */
export const mirostatMu = (mu: number, p: number, tau: number, eta: number): number => mu - eta * (-Math.log2(p) - tau);

/** d at temperature T, for a d made at temperature 1: p_i^(1/T), renormalised (llama.cpp's temperature last) */
export function withTemperature(d: Dist, T: number): Dist {
  let max = 0;
  for (let j = 0; j < d.n; j++) max = Math.max(max, d.probs[j]);
  const probs = new Float64Array(d.n), lm = Math.log(max);
  for (let j = 0; j < d.n; j++) probs[j] = Math.exp((Math.log(d.probs[j]) - lm) / T);
  let sum = 0;
  for (const p of probs) sum += p;
  for (let j = 0; j < d.n; j++) probs[j] /= sum;
  return { ids: d.ids, probs, n: d.n };
}
