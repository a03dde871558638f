// Quantized matrix formats (formats.md fmt 1-4): names, sizes, quantize (in libhb) and a TypeScript
// dequantizer used for verification. The one definition of the packing that TS code relies on. No state.
import { Fmt, type FmtCode, hb } from "../engine/hb.ts";

export interface QFormat { fmt: FmtCode; gs: number } // gs only for int4g

/** "f32" | "bf16" | "int8" | "int4" | "int2" | "int4g64" (int4g = int4g64) -> format; null if unknown */
export function parseFmt(name: string): QFormat | null {
  if (name === "f32") return { fmt: Fmt.f32, gs: 0 };
  if (name === "bf16") return { fmt: Fmt.bf16, gs: 0 };
  if (name === "int8") return { fmt: Fmt.int8, gs: 0 };
  if (name === "int4") return { fmt: Fmt.int4, gs: 0 };
  if (name === "int2") return { fmt: Fmt.int2, gs: 0 };
  const m = /^int4g(\d*)$/.exec(name);
  if (!m) return null;
  const gs = m[1] ? Number(m[1]) : 64;
  return isGroupSize(gs) ? { fmt: Fmt.int4g, gs } : null;
}

export const isGroupSize = (gs: number) => Number.isSafeInteger(gs) && gs >= 8 && (gs & (gs - 1)) === 0 && gs <= 1 << 30;

export function fmtName(f: QFormat): string {
  switch (f.fmt) {
    case Fmt.f32: return "f32";
    case Fmt.bf16: return "bf16";
    case Fmt.f16: return "f16";
    case Fmt.int8: return "int8";
    case Fmt.int4: return "int4";
    case Fmt.int2: return "int2";
    case Fmt.int4g: return `int4g${f.gs}`;
  }
  throw new Error(`unknown format ${f.fmt}`);
}

/** (bytes of `name`, scales in `name.qs`) of a quantized W [O, I]. */
export function quantCounts(f: QFormat, O: number, I: number): [number, number] {
  if (f.fmt === Fmt.int8) return [O * I, O];
  if (f.fmt === Fmt.int2) return [O * Math.ceil(I / 4), O];
  if (f.fmt === Fmt.int4) return [O * Math.ceil(I / 2), O];
  if (f.fmt === Fmt.int4g) return [O * Math.ceil(I / 2), O * Math.ceil(I / f.gs)];
  throw new Error(`format ${f.fmt} is not quantized`);
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
  const rb = quantCounts(f, 1, I)[0], ng = f.fmt === Fmt.int4g ? Math.ceil(I / f.gs) : 1;
  for (let o = 0; o < O; o++) {
    for (let i = 0; i < I; i++) {
      const b = q[o * rb + (f.fmt === Fmt.int8 ? i : f.fmt === Fmt.int2 ? i >> 2 : i >> 1)];
      const v = f.fmt === Fmt.int8 ? (b << 24) >> 24
        : f.fmt === Fmt.int2 ? ((b >> ((i & 3) * 2)) & 3) - 2
        : ((b >> ((i & 1) * 4)) & 15) - 8;
      const s = f.fmt === Fmt.int4g ? scales[o * ng + Math.floor(i / f.gs)] : scales[o];
      out[o * I + i] = v * s;
    }
  }
  return out;
}
