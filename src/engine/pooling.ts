// Embeddings of a prompt from the model's hidden states (POST /v1/embeddings and llama-server's /embedding; vLLM's
// pooling runner, llama-server's --pooling): each prompt row's last hidden state through the final RMSNorm (the vector
// lm_head reads), pooled over the prompt — the last token's (vLLM's default for decoder-only models), the mean of all,
// the first's (cls), or none (llama-server's: every token's row, not normalized) — and normalized as llama-server's
// embd_normalize asks (L2 unless told otherwise). Fed chunk by chunk as the prompt is prefilled. State: per prompt,
// the running f64 sum or the chosen row (or every row for none), and one chunk's normed rows.
import { rmsnorm } from "../native/hb.ts";
import type { Model } from "./model.ts";

export type Pooling = "last" | "mean" | "cls" | "none";
export const POOLINGS = ["last", "mean", "cls", "none"] as const satisfies readonly Pooling[];

/** llama-server's embd_normalize: −1 none, 0 max absolute scaled to ±32760 (int16), 1 taxicab, 2 L2, p > 2 p-norm.
 *  A zero vector stays zero. */
export function normalizeEmbedding(v: ArrayLike<number>, p: number): Float32Array {
  let s = 1;
  if (p === 0) { s = 0; for (let i = 0; i < v.length; i++) s = Math.max(s, Math.abs(v[i])); s /= 32760; }
  else if (p === 2) { s = 0; for (let i = 0; i < v.length; i++) s += v[i] * v[i]; s = Math.sqrt(s); }
  else if (p > 0) { s = 0; for (let i = 0; i < v.length; i++) s += Math.abs(v[i]) ** p; s = s ** (1 / p); }
  const k = p < 0 ? 1 : s > 0 ? 1 / s : 0;
  return Float32Array.from(v, (e) => e * k);
}

export class Pooler {
  private readonly D: number;
  private readonly acc: Float64Array;  // [D] the sum of the normed rows so far (mean), or the chosen row
  private all = new Float32Array(0);   // [total, D] every normed row (none; made at the first rows, not while queued)
  private xb = new Float32Array(0);    // [n, D] one chunk's normed rows
  private rows = 0;                    // rows in acc (all)

  /** total: the prompt's length (its last row is at total − 1) */
  constructor(private readonly m: Model, readonly pooling: Pooling, private readonly total: number) {
    this.D = m.cfg.hidden_size;
    this.acc = new Float64Array(this.D);
  }

  /** Whether every prompt row must be computed (mean, cls, none), so none may come from a cached prefix. */
  get needsAll(): boolean { return this.pooling !== "last"; }

  /** x [n, D]: the final hidden states (before the final norm) of prompt positions pos0 .. pos0 + n − 1. */
  add(x: Float32Array, pos0: number, n: number): void {
    const D = this.D;
    if (x.length < n * D) throw new RangeError(`pooling: ${n} rows of ${D} need ${n * D} values, got ${x.length}`);
    if (this.pooling === "none") {
      if (pos0 + n > this.total) throw new RangeError(`pooling: rows ${pos0}..${pos0 + n - 1} past the prompt's ${this.total}`);
      if (this.all.length === 0) this.all = new Float32Array(this.total * D);
      rmsnorm(x.subarray(0, n * D), this.m.w.norm, this.all.subarray(pos0 * D), n, D, this.m.cfg.rms_norm_eps);
      this.rows += n;
      return;
    }
    const [lo, hi] = this.pooling === "mean" ? [0, n] : this.pooling === "cls" ? (pos0 === 0 ? [0, 1] : [0, 0])
      : pos0 + n === this.total ? [n - 1, n] : [0, 0];
    if (hi <= lo) return;
    if (this.xb.length < (hi - lo) * D) this.xb = new Float32Array((hi - lo) * D);
    rmsnorm(x.subarray(lo * D, hi * D), this.m.w.norm, this.xb, hi - lo, D, this.m.cfg.rms_norm_eps);
    for (let r = 0; r < hi - lo; r++) for (let i = 0; i < D; i++) this.acc[i] += this.xb[r * D + i];
    this.rows += hi - lo;
  }

  /** The embedding: the pooled vector [D] normalized by `norm` (embd_normalize), or for none every row [total, D]
   *  as it is (llama-server normalizes only pooled vectors). */
  result(norm: number): Float32Array {
    if (this.pooling === "none") {
      if (this.rows !== this.total) throw new Error(`pooling (none): ${this.rows} of the prompt's ${this.total} rows were seen`);
      return this.all;
    }
    if (this.rows === 0) throw new Error(`pooling (${this.pooling}): no prompt rows were seen`);
    return normalizeEmbedding(this.acc.map((s) => s / this.rows), norm);
  }
}
