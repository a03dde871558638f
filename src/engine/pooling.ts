// Embeddings of a prompt from the model's hidden states (POST /v1/embeddings; vLLM's pooling runner, llama-server's
// --pooling): each prompt row's last hidden state through the final RMSNorm (the vector lm_head reads), pooled over
// the prompt — the last token's (vLLM's default for decoder-only models), the mean of all, or the first's (cls) — and
// L2-normalized unless asked not to. Fed chunk by chunk as the prompt is prefilled. State: per prompt, the running
// f64 sum or the chosen row, and one chunk's normed rows.
import { rmsnorm } from "./hb.ts";
import type { Model } from "./model.ts";

export type Pooling = "last" | "mean" | "cls";
export const POOLINGS = ["last", "mean", "cls"] as const satisfies readonly Pooling[];

export class Pooler {
  private readonly D: number;
  private readonly acc: Float64Array;  // [D] the sum of the normed rows so far (mean), or the chosen row
  private xb = new Float32Array(0);    // [n, D] one chunk's normed rows
  private rows = 0;                    // rows in acc

  /** total: the prompt's length (its last row is at total − 1) */
  constructor(private readonly m: Model, readonly pooling: Pooling, private readonly total: number) {
    this.D = m.cfg.hidden_size;
    this.acc = new Float64Array(this.D);
  }

  /** Whether every prompt row must be computed (mean, cls), so none may come from a cached prefix. */
  get needsAll(): boolean { return this.pooling !== "last"; }

  /** x [n, D]: the final hidden states (before the final norm) of prompt positions pos0 .. pos0 + n − 1. */
  add(x: Float32Array, pos0: number, n: number): void {
    const D = this.D;
    if (x.length < n * D) throw new RangeError(`pooling: ${n} rows of ${D} need ${n * D} values, got ${x.length}`);
    const [lo, hi] = this.pooling === "mean" ? [0, n] : this.pooling === "cls" ? (pos0 === 0 ? [0, 1] : [0, 0])
      : pos0 + n === this.total ? [n - 1, n] : [0, 0];
    if (hi <= lo) return;
    if (this.xb.length < (hi - lo) * D) this.xb = new Float32Array((hi - lo) * D);
    rmsnorm(x.subarray(lo * D, hi * D), this.m.w.norm, this.xb, hi - lo, D, this.m.cfg.rms_norm_eps);
    for (let r = 0; r < hi - lo; r++) for (let i = 0; i < D; i++) this.acc[i] += this.xb[r * D + i];
    this.rows += hi - lo;
  }

  /** The embedding [D]: the pooled vector, divided by its L2 norm when `normalize` (a zero vector stays zero). */
  result(normalize: boolean): Float32Array {
    if (this.rows === 0) throw new Error(`pooling (${this.pooling}): no prompt rows were seen`);
    const v = this.acc.map((s) => s / this.rows);
    let ss = 0;
    for (const e of v) ss += e * e;
    const k = normalize && ss > 0 ? 1 / Math.sqrt(ss) : 1;
    return Float32Array.from(v, (e) => e * k);
  }
}
