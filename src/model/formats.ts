// The weight formats the engine stores, one row each (../shared/spec/formats.md's table: the code libhb and the
// shaders take, the name convert and the `quant.<name>` stamps use, the stored dtype, bits per value, where the
// scales live, the kernels that serve it), and the geometry every reader and writer takes from it. Stateless.
// Adding a format: the checklist on FORMATS.
import { Fmt, type FmtCode } from "../native/hb.ts";

export interface WeightFormat {
  code: FmtCode;
  /** Fmt's key; a grouped format is named with its group size appended (int4g64) */
  name: string;
  /** the safetensors dtype of the stored values (`name`); U8: packed, with F32 scales in `name.qs` */
  dtype: "F32" | "BF16" | "F16" | "U8";
  /** bits of one stored value: a row of I values is ⌈I·bits/8⌉ bytes */
  bits: number;
  /** bytes of one element of the typed array a loaded Mat's data is (Float32Array 4, Uint16Array 2, Uint8Array 1) */
  unit: 4 | 2 | 1;
  /** scales in `name.qs` (f32): "none", one per row, or one per group of gs values of a row ([O, ⌈I/gs⌉]) */
  scales: "none" | "row" | "group";
  /** a name `convert --experts/--dense/--mtp` takes (parseFmt) */
  convertible: boolean;
  /** the libhb entry points that take it (all through hb_matmul's dispatch in ffi/matmul.c) and the device shader */
  kernels: { cpu: readonly string[]; device: string | null };
}

const MATMUL = ["hb_matmul", "hb_matmul_q8", "hb_matmul_many", "hb_mla_heads"] as const;
const QMATMUL = [...MATMUL, "hb_quantize"] as const;
const row = (code: FmtCode, name: string, dtype: WeightFormat["dtype"], bits: number, scales: WeightFormat["scales"],
  convertible: boolean): WeightFormat =>
  ({ code, name, dtype, bits, unit: bits >= 32 ? 4 : bits === 16 ? 2 : 1, scales, convertible,
    kernels: { cpu: scales === "none" ? MATMUL : QMATMUL, device: `matmul FMT=${code}` } });

/** Every weight format, in code order (hb.h's enum).
 *  Adding a format: its code in Fmt (src/native/hb.ts) and ffi/hb.h's enum; its row below; libhb: the C twin of this
 *  geometry (ffi/matmul.h hb_mm_row_bytes), ffi/quant.c (quantize), matmul.c + matmul_x86.c / matmul_neon.c (exact
 *  rows), matmul_q8*.c (fast mode), mla.c (absorbed heads); quant.ts's dequantize (the TS reference) and, for a
 *  quantized kv_b, src/engine/attention.ts's repacking; shaders/matmul.comp and its twin matmul.wgsl (an FMT branch
 *  each). Then test/formats.test.ts checks the table against the writers, hb.h and the shaders; quant, kernels,
 *  fast-mode and gpu.kernels tests run it. */
export const FORMATS: readonly WeightFormat[] = [
  row(Fmt.f32, "f32", "F32", 32, "none", true),
  row(Fmt.int8, "int8", "U8", 8, "row", true),
  row(Fmt.int4, "int4", "U8", 4, "row", true),
  row(Fmt.int2, "int2", "U8", 2, "row", true),
  row(Fmt.int4g, "int4g", "U8", 4, "group", true),
  row(Fmt.bf16, "bf16", "BF16", 16, "none", true),
  row(Fmt.f16, "f16", "F16", 16, "none", false),
];

/** int4g's group size when the name gives none */
export const DEFAULT_GS = 64;

export function format(fmt: number): WeightFormat {
  const f = FORMATS[fmt];
  if (!f || f.code !== fmt) throw new Error(`unknown format ${fmt}`);
  return f;
}

/** A format with its group size (gs 0 unless grouped). */
export interface QFormat { fmt: FmtCode; gs: number }

export const isGroupSize = (gs: number) => Number.isSafeInteger(gs) && gs >= 8 && (gs & (gs - 1)) === 0 && gs <= 1 << 30;
export const isQuant = (fmt: number) => format(fmt).scales !== "none";
export const isGrouped = (fmt: number) => format(fmt).scales === "group";

/** bytes of one stored row of I values */
export const rowBytes = (fmt: number, I: number) => Math.ceil((I * format(fmt).bits) / 8);
/** elements of a loaded Mat's data array per row (bytes for packed formats) */
export const rowUnits = (fmt: number, I: number) => rowBytes(fmt, I) / format(fmt).unit;
/** scales of one row: 0 (float), 1 (per row) or ⌈I/gs⌉ (grouped) */
export function scalesPerRow(fmt: number, I: number, gs: number): number {
  const s = format(fmt).scales;
  return s === "none" ? 0 : s === "row" ? 1 : Math.ceil(I / gs);
}
/** scales of W [O, I] */
export const scaleCount = (fmt: number, O: number, I: number, gs: number) => O * scalesPerRow(fmt, I, gs);

/** A convertible name ("f32" | "bf16" | "int8" | "int4" | "int2" | "int4g<gs>", "int4g" = int4g64) -> format; null if unknown */
export function parseFmt(name: string): QFormat | null {
  const f = FORMATS.find((x) => x.convertible && x.scales !== "group" && x.name === name);
  if (f) return { fmt: f.code, gs: 0 };
  const g = FORMATS.find((x) => x.convertible && x.scales === "group" && name.startsWith(x.name));
  const m = g && /^(\d*)$/.exec(name.slice(g.name.length));
  if (!g || !m) return null;
  const gs = m[1] ? Number(m[1]) : DEFAULT_GS;
  return isGroupSize(gs) ? { fmt: g.code, gs } : null;
}

export function fmtName(f: QFormat): string {
  const x = format(f.fmt);
  return x.scales === "group" ? `${x.name}${f.gs}` : x.name;
}

/** The quantized formats a U8 W [O, I] of `bytes` bytes with `scales` scales fits: the row formats in code order, then
 *  the one group size (a power of two ≥ 8, below 2I) giving ⌈I/gs⌉ = scales/O ≥ 2 groups a row. */
export function fitting(O: number, I: number, bytes: number, scales: number): QFormat[] {
  const found: QFormat[] = [];
  for (const f of FORMATS) {
    if (f.scales === "row" && O * rowBytes(f.code, I) === bytes && O === scales) found.push({ fmt: f.code, gs: 0 });
    if (f.scales !== "group") continue;
    const g = scales / O; // groups per row; g == 1 is the same as the row format
    if (!Number.isInteger(g) || g < 2 || bytes !== O * rowBytes(f.code, I)) continue;
    for (let gs = 8; gs <= 1 << 30 && gs < 2 * I; gs *= 2) if (Math.ceil(I / gs) === g) found.push({ fmt: f.code, gs });
  }
  return found;
}

/** The float format a stored dtype is loaded as (F8_E4M3: dequantised to f32 as it is read); undefined: none */
export function floatFormat(dtype: string): FmtCode | undefined {
  if (dtype === "F8_E4M3") return Fmt.f32;
  return FORMATS.find((f) => f.scales === "none" && f.dtype === dtype)?.code;
}
