// Quantized matrix formats (formats.md fmt 1-4): sizes, quantize (in libhb) and a TypeScript dequantizer used for
// verification; the geometry and the names come from formats.ts (re-exported here for the converter's callers). No state.
import { hb } from "../native/hb.ts";
import { FORMATS, fmtName, isGrouped, rowBytes, scalesPerRow, type QFormat } from "./formats.ts";

export { fmtName, isGroupSize, parseFmt, type QFormat } from "./formats.ts";

/** (bytes of `name`, scales in `name.qs`) of a quantized W [O, I]. */
export function quantCounts(f: QFormat, O: number, I: number): [number, number] {
  if ((FORMATS[f.fmt]?.scales ?? "none") === "none") throw new Error(`format ${f.fmt} is not quantized`);
  return [O * rowBytes(f.fmt, I), O * scalesPerRow(f.fmt, I, f.gs)];
}

/** W [O, I] f32 -> packed bytes + f32 scales (symmetric absmax, rint half-even), in libhb. */
export function quantize(f: QFormat, W: Float32Array, O: number, I: number): { q: Uint8Array; scales: Float32Array } {
  const [nb, ns] = quantCounts(f, O, I);
  const q = new Uint8Array(nb), scales = new Float32Array(ns);
  if (hb().hb_quantize(f.fmt, W, O, I, f.gs, q, scales) !== 0) throw new Error(`quantize: bad format ${fmtName(f)}`);
  return { q, scales };
}

/** The value of element (o, i) (formats.md's table), as a TypeScript reference. */
export function dequantize(f: QFormat, q: Uint8Array, scales: Float32Array, O: number, I: number): Float32Array {
  const out = new Float32Array(O * I);
  const rb = quantCounts(f, 1, I)[0], ng = scalesPerRow(f.fmt, I, f.gs), grouped = isGrouped(f.fmt), bits = FORMATS[f.fmt].bits;
  for (let o = 0; o < O; o++) {
    for (let i = 0; i < I; i++) {
      const b = q[o * rb + (bits === 8 ? i : bits === 2 ? i >> 2 : i >> 1)];
      const v = bits === 8 ? (b << 24) >> 24
        : bits === 2 ? ((b >> ((i & 3) * 2)) & 3) - 2
        : ((b >> ((i & 1) * 4)) & 15) - 8;
      const s = grouped ? scales[o * ng + Math.floor(i / f.gs)] : scales[o];
      out[o * I + i] = v * s;
    }
  }
  return out;
}
