// Where one routed expert's bytes are and how to read them (formats.md "Rows of an expert"): its six
// tensors (gate, gate.qs, up, up.qs, down, down.qs) grouped per file, sorted by offset and merged into
// spans when the gaps between them are small (one coalesced pread for the converter's layout,
// several otherwise), each span placed in a slab; then the Mats as views into a filled slab (or into
// mapped files). Buffered spans keep the file's alignment mod 64; O_DIRECT spans are 4096-aligned in
// file and slab. Stateless.
import { Conv, Fmt, convert } from "../../native/hb.ts";
import type { Mat, MatPlan, Mlp, MlpPlan } from "../../model/weights.ts";
import type { TensorInfo } from "../../model/safetensors.ts";
import { DIRECT_ALIGN } from "./io.ts";

/** Gaps up to this many bytes between an expert's tensors are read through rather than split. */
export const MAX_GAP = 64 * 1024;

/** One read: [off, off+len) of file `file` into slab position pos; `need` bytes must arrive. */
export interface Span { file: string; off: number; len: number; need: number; pos: number }
export interface ExpertLayout {
  spans: Span[];
  /** slab position of each tensor's first byte, by tensor name */
  at: Map<string, number>;
  /** slab bytes this expert needs (from the slab's aligned base) */
  bytes: number;
  /** bytes of the tensors themselves */
  dataBytes: number;
}

const up = (x: number, a: number) => Math.ceil(x / a) * a;
export const mlpTensors = (m: MlpPlan): TensorInfo[] =>
  [m.gate, m.up, m.down].flatMap((p) => (p.qs ? [p.w, p.qs] : [p.w]));

/** Can this expert be viewed from raw bytes? (FP8 weights need dequantization: read through readMat.) */
export const viewable = (m: MlpPlan): boolean =>
  [m.gate, m.up, m.down].every((p) => p.w.dtype !== "F8_E4M3" && (!p.qs || ["F32", "BF16", "F16"].includes(p.qs.dtype)));

/** Plan the reads of one expert. direct: O_DIRECT alignment of offsets, lengths and slab positions. */
export function layoutExpert(m: MlpPlan, direct: boolean, maxGap = MAX_GAP): ExpertLayout {
  const ts = mlpTensors(m).filter((t) => t.nbytes > 0);
  const byFile = new Map<string, TensorInfo[]>();
  for (const t of ts) byFile.set(t.file, [...(byFile.get(t.file) ?? []), t]);
  const spans: Span[] = [], at = new Map<string, number>();
  let cursor = 0, dataBytes = 0;
  for (const [file, list] of byFile) {
    list.sort((a, b) => a.offset - b.offset);
    const runs: TensorInfo[][] = [];
    for (const t of list) {
      const run = runs[runs.length - 1];
      const end = run ? run[run.length - 1].offset + run[run.length - 1].nbytes : -Infinity;
      if (run && t.offset - end <= maxGap && t.offset >= end) run.push(t);
      else runs.push([t]);
    }
    for (const run of runs) {
      const lo = run[0].offset, hi = run[run.length - 1].offset + run[run.length - 1].nbytes;
      const a = direct ? Math.floor(lo / DIRECT_ALIGN) * DIRECT_ALIGN : lo;
      const len = direct ? up(hi, DIRECT_ALIGN) - a : hi - lo;
      const pos = direct ? up(cursor, DIRECT_ALIGN) : up(cursor, 64) + (lo % 64);
      spans.push({ file, off: a, len, need: hi - a, pos });
      for (const t of run) { at.set(t.name, pos + (t.offset - a)); dataBytes += t.nbytes; }
      cursor = pos + len;
    }
  }
  for (const t of ts) if (!at.has(t.name)) at.set(t.name, 0);
  return { spans, at, bytes: direct ? up(cursor, DIRECT_ALIGN) : cursor, dataBytes };
}

/** bytes -> an element view of `T`, or a copy when the offset is not a multiple of the element size. */
function typed<T extends Float32Array | Uint16Array>(C: { new (b: ArrayBuffer, o: number, n: number): T; new (n: number): T; BYTES_PER_ELEMENT: number }, b: Uint8Array): T {
  const n = b.byteLength / C.BYTES_PER_ELEMENT;
  if (b.byteOffset % C.BYTES_PER_ELEMENT === 0) return new C(b.buffer as ArrayBuffer, b.byteOffset, n);
  const out = new C(n);
  new Uint8Array(out.buffer).set(b);
  return out;
}

function scalesOf(info: TensorInfo, b: Uint8Array): Float32Array {
  if (info.dtype === "F32") return typed(Float32Array, b);
  const out = new Float32Array(info.numel);
  if (info.numel > 0) convert(info.dtype === "BF16" ? Conv.bf16 : Conv.f16, typed(Uint16Array, b), out, info.numel);
  return out;
}

function matOf(p: MatPlan, bytes: (t: TensorInfo) => Uint8Array): Mat {
  const base = { name: p.name, fmt: p.fmt, O: p.O, I: p.I, gs: p.gs };
  const w = bytes(p.w);
  if (p.qs) return { ...base, data: w, scales: scalesOf(p.qs, bytes(p.qs)) };
  if (p.fmt === Fmt.f32) return { ...base, data: typed(Float32Array, w), scales: null };
  return { ...base, data: typed(Uint16Array, w), scales: null };
}

/** The expert's Mats as views into a filled slab (`slab` starts at the layout's position 0). */
export function materialize(m: MlpPlan, lay: ExpertLayout, slab: Uint8Array): Mlp {
  const bytes = (t: TensorInfo) => slab.subarray(lay.at.get(t.name)!, lay.at.get(t.name)! + t.nbytes);
  return { gate: matOf(m.gate, bytes), up: matOf(m.up, bytes), down: matOf(m.down, bytes) };
}

/** The expert's Mats as views into mapped files (file path -> mapping address). */
export function materializeMapped(m: MlpPlan, maps: Map<string, number>, view: (addr: number, len: number) => Uint8Array): Mlp {
  const bytes = (t: TensorInfo) => view(maps.get(t.file)! + t.offset, t.nbytes);
  return { gate: matOf(m.gate, bytes), up: matOf(m.up, bytes), down: matOf(m.down, bytes) };
}
