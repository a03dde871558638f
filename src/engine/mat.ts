// Matrix helpers over weights.ts's `Mat` views: the matmul in either activation mode (exact: f32
// activations; fast: int8 activations for quantized weights), row slices (for per-head blocks of kv_b)
// and the dequantized transpose (for the absorbed MLA form). Stateless.
import { matmul, matmulMany, matmulQ8 } from "../native/hb.ts";
import { rowUnits, scalesPerRow } from "../model/formats.ts";
import type { Mat } from "../model/weights.ts";

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

/** Wᵀ [I, O] in f32, dequantized through the kernel itself (W · e_i for each unit vector e_i). */
export function transposeF32(m: Mat): Float32Array {
  const eye = new Float32Array(m.I * m.I);
  for (let i = 0; i < m.I; i++) eye[i * m.I + i] = 1;
  const t = new Float32Array(m.I * m.O);
  mm(m, eye, m.I, t, true); // row i of the result = W · e_i = column i of W
  return t;
}
