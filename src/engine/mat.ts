// Matrix helpers over weights.ts's `Mat` views: the matmul in either activation mode (exact: f32
// activations; fast: int8 activations for quantized weights), row slices (for per-head blocks of kv_b),
// the dequantized transpose (for the absorbed MLA form) and MmCall, a batched call's descriptor kept across
// steps. Stateless (an MmCall holds its own descriptor).
import { ManyBuilder, matmul, matmulMany, matmulQ8 } from "../native/hb.ts";
import { rowUnits, scalesPerRow } from "../model/formats.ts";
import type { Mat } from "../model/weights.ts";
import type { RunState } from "./state.ts";

/** Rows [r0, r0+n) of W as a Mat view (no copy): W[r0:r0+n, :] [n, I]. */
export function rowsOf(m: Mat, r0: number, n: number): Mat {
  if (r0 < 0 || n < 0 || r0 + n > m.O) throw new Error(`${m.name}: rows [${r0}, ${r0 + n}) outside [0, ${m.O})`);
  const u = rowUnits(m.fmt, m.I);
  const data = m.data.subarray(r0 * u, (r0 + n) * u);
  let scales = m.scales;
  if (scales) {
    const per = scalesPerRow(m.fmt, m.I, m.gs);
    scales = scales.subarray(r0 * per, (r0 + n) * per);
  }
  return { ...m, O: n, data, scales };
}

/** y [S,O] = W · x for S rows. exact: f32 activations; otherwise fast mode (x rows quantized to int8
 *  when W is quantized — float W is always exact). Callers pass RunState.exact. */
export function mm(W: Mat, x: Float32Array, S: number, y: Float32Array, exact = false): void {
  (exact ? matmul : matmulQ8)(W.fmt, W.data, W.scales, W.gs, W.O, W.I, x, S, y);
}

/** ys[k] [S, W_k.O] = W_k · x for matrices that share x [S, I] (one call: one pool job; x quantized once). */
export function mmMany(Ws: readonly Mat[], x: Float32Array, S: number, ys: readonly Float32Array[], exact = false): void {
  const I = Ws[0].I;
  for (const W of Ws) if (W.I !== I) throw new Error(`${W.name}: I = ${W.I}, expected ${I} (mmMany shares x)`);
  matmulMany(exact, Ws, ys, I, x, S);
}

/**
 * `mmMany` of a call that repeats step after step with the same matrices on buffers of one RunState (a layer's
 * projections): its descriptor made by `set` and run again while `fits` (the same RunState buffers — st.gen, unique
 * in the process, so no reference to st is kept —, x, S and caller's tag; the matrices are the caller's key's, never
 * changed). The same descriptor: the same bits.
 */
export class MmCall {
  private readonly b = new ManyBuilder();
  private x: Float32Array | null = null;
  private gen = -1;
  private S = -1;
  private tag = -1;
  private I = 0;
  fits(st: RunState, x: Float32Array, S: number, tag = 0): boolean {
    return this.gen === st.gen && this.x === x && this.S === S && this.tag === tag;
  }
  /** ys[k] [S, W_k.O] = W_k · x [S, I], as mmMany; every y a buffer of st */
  set(st: RunState, Ws: readonly Mat[], x: Float32Array, S: number, ys: readonly Float32Array[], tag = 0): void {
    const I = Ws[0].I;
    if (ys.length !== Ws.length) throw new Error(`MmCall: ${Ws.length} matrices and ${ys.length} outputs`);
    this.gen = -1;
    const b = this.b.reset();
    for (let k = 0; k < Ws.length; k++) {
      if (Ws[k].I !== I) throw new Error(`${Ws[k].name}: I = ${Ws[k].I}, expected ${I} (mmMany shares x)`);
      b.add(Ws[k], I, x, 0, S, ys[k], 0);
    }
    this.x = x; this.gen = st.gen; this.S = S; this.tag = tag; this.I = I;
  }
  run(exact: boolean): void { this.b.run(exact, this.I); }
  /** its descriptor (for fused entries such as ManyBuilder.runMlaQ, runMlaKv, runMoeLayer) */
  get builder(): ManyBuilder { return this.b; }
}

/** Wᵀ [I, O] in f32, dequantized through the kernel itself (W · e_i for each unit vector e_i). */
export function transposeF32(m: Mat): Float32Array {
  const eye = new Float32Array(m.I * m.I);
  for (let i = 0; i < m.I; i++) eye[i * m.I + i] = 1;
  const t = new Float32Array(m.I * m.O);
  mm(m, eye, m.I, t, true); // row i of the result = W · e_i = column i of W
  return t;
}
