// The slot KV file format (`slot-N.kv`, written by kvfile.ts), defined once, little-endian: header field offsets
// (HEADER), the record layout (RECORD, RecordLayout), the model shape stored in the header (Shape) and the checks a
// file must pass (checkHeader: a file from another model or cache dtype is refused naming the first mismatching
// field). Holds no state.
import { z } from "zod";
import { ModelError } from "../model/errors.ts";
import type { Model } from "./model.ts";
import { KV_DTYPES, kvRowElems, type KvDtype, type KvRows } from "../native/hb.ts";

export const KV_VERSION = 1;
const MAGIC = 0x564b4248; // "HBKV"
/** Byte offsets of the header fields; `bytes` = the whole header (one page). All u32 but `count` (u64, 8-aligned so
 *  it is rewritten in one write): magic "HBKV", version, header bytes, record bytes, count (records committed), JSON
 *  length, then the JSON shape (Shape). */
export const HEADER = { magic: 0, version: 4, headerBytes: 8, recordBytes: 12, count: 16, jsonLength: 24, json: 28, bytes: 4096 } as const;
/** Byte offsets inside a record; records are fixed size, record i at HEADER.bytes + i·recordBytes: u32 token,
 *  u32 crc32(payload), payload = per layer: c_kv‖k_pe row [kv_lora+rope] in the cache's dtype (kv_dtype: f32, f16,
 *  or q8 — its bytes then its block scales; hb.ts KvDtype), (+ indexer key row [index_head_dim] f32 on `full` DSA
 *  layers), then (MTP models) the main hidden row [D] f32. */
export const RECORD = { token: 0, crc: 4, payload: 8 } as const;

/** The header's JSON: the model's shape, the cache dtype (absent: f32, as files written before it) and a weights
 *  fingerprint. */
const Shape = z.object({
  model_type: z.string(), vocab_size: z.number().int(), hidden_size: z.number().int(),
  num_hidden_layers: z.number().int(), kv_lora_rank: z.number().int(), qk_rope_head_dim: z.number().int(),
  index_head_dim: z.number().int(), indexed_layers: z.array(z.number().int()), hidden_rows: z.boolean(),
  kv_dtype: z.enum(KV_DTYPES as [KvDtype, ...KvDtype[]]).default("f32"),
  weights: z.string(),
});
export type Shape = z.infer<typeof Shape>;

/** A cheap fingerprint of the weights: wyhash of the first 64 KiB of embed and lm_head. */
function fingerprint(m: Model): string {
  const bytes = (d: ArrayBufferView) => new Uint8Array(d.buffer, d.byteOffset, Math.min(d.byteLength, 65536));
  return Bun.hash.wyhash(bytes(m.w.embed.data), Bun.hash.wyhash(bytes(m.w.lm_head.data))).toString(16);
}

export function modelShape(m: Model, kv_dtype: KvDtype = "f32"): Shape {
  const c = m.cfg;
  return {
    model_type: c.model_type, vocab_size: c.vocab_size, hidden_size: c.hidden_size, num_hidden_layers: c.num_hidden_layers,
    kv_lora_rank: c.kv_lora_rank, qk_rope_head_dim: c.qk_rope_head_dim, index_head_dim: c.index_head_dim,
    indexed_layers: c.indexer_types.flatMap((t, i) => (c.has_dsa && t === "full" ? [i] : [])),
    hidden_rows: m.w.mtp !== null, kv_dtype, weights: fingerprint(m),
  };
}

/** The rows of one record's payload, in file order. */
export class RecordLayout {
  readonly bytes: number;
  private readonly row: number; // array elements of a cache row
  private readonly indexed: Set<number>;

  constructor(readonly sh: Shape) {
    const W = sh.kv_lora_rank + sh.qk_rope_head_dim, bpe = sh.kv_dtype === "f32" ? 4 : sh.kv_dtype === "f16" ? 2 : 1;
    this.row = kvRowElems(sh.kv_dtype, W);
    this.indexed = new Set(sh.indexed_layers);
    this.bytes = RECORD.payload + sh.num_hidden_layers * this.row * bpe + 4 * (sh.indexed_layers.length * sh.index_head_dim + (sh.hidden_rows ? sh.hidden_size : 0));
  }

  /** fn(the bytes of each row of position t, in file order: kv[i] (+ ik[i]) per layer, then hidden) — views into the arrays */
  rows(kv: KvRows[], ik: (Float32Array | null)[], hidden: Float32Array | null, t: number, fn: (bytes: Uint8Array) => void): void {
    const { row, sh } = this, hw = sh.index_head_dim, D = sh.hidden_size;
    // (a row past the array's end — hidden rows a session without MTP drafting never recorded — reads as zeros)
    const bytes = (a: KvRows, off: number, n: number) => ((off + n) * a.BYTES_PER_ELEMENT > a.length * a.BYTES_PER_ELEMENT
      ? new Uint8Array(n * a.BYTES_PER_ELEMENT) : new Uint8Array(a.buffer, a.byteOffset + off * a.BYTES_PER_ELEMENT, n * a.BYTES_PER_ELEMENT));
    for (let i = 0; i < sh.num_hidden_layers; i++) {
      fn(bytes(kv[i], t * row, row));
      if (this.indexed.has(i)) fn(bytes(ik[i]!, t * hw, hw));
    }
    if (sh.hidden_rows && hidden) fn(bytes(hidden, t * D, D));
  }

  /** Where the first NaN/Inf of positions [0, n) lies ("layer 3 kv row 17"), or null: every value (f16 halves, q8
   *  block scales) finite */
  nonFinite(kv: KvRows[], ik: (Float32Array | null)[], hidden: Float32Array | null, n: number): string | null {
    const { row, sh } = this, W = sh.kv_lora_rank + sh.qk_rope_head_dim;
    const f32 = (a: Float32Array, w: number) => { for (let i = 0; i < n * w; i++) if (a[i] - a[i] !== 0) return Math.floor(i / w); return -1; };
    for (let l = 0; l < sh.num_hidden_layers; l++) {
      const a = kv[l];
      let t = -1;
      if (a instanceof Float32Array) t = f32(a, row);
      else if (a instanceof Uint16Array) { for (let i = 0; i < n * row && t < 0; i++) if ((a[i] & 0x7c00) === 0x7c00) t = Math.floor(i / row); }
      else {
        const dv = new DataView(a.buffer, a.byteOffset, a.byteLength);
        for (let r = 0; r < n && t < 0; r++) for (let j = W; j < row; j += 4) { const x = dv.getFloat32(r * row + j, true); if (x - x !== 0) { t = r; break; } }
      }
      if (t >= 0) return `layer ${l} kv row ${t}`;
      if (this.indexed.has(l) && (t = f32(ik[l]!, sh.index_head_dim)) >= 0) return `layer ${l} indexer key row ${t}`;
    }
    const t = sh.hidden_rows && hidden ? f32(hidden, sh.hidden_size) : -1;
    return t >= 0 ? `hidden row ${t}` : null;
  }
}

/** A fresh header page (count 0) for `sh`. */
export function encodeHeader(path: string, sh: Shape, recordBytes: number): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify({ format: "hummingbird-kv", ...sh }));
  if (HEADER.json + json.length > HEADER.bytes) throw new Error(`${path}: header JSON too large`);
  const b = new Uint8Array(HEADER.bytes), dv = new DataView(b.buffer);
  dv.setUint32(HEADER.magic, MAGIC, true); dv.setUint32(HEADER.version, KV_VERSION, true);
  dv.setUint32(HEADER.headerBytes, HEADER.bytes, true); dv.setUint32(HEADER.recordBytes, recordBytes, true);
  dv.setBigUint64(HEADER.count, 0n, true); dv.setUint32(HEADER.jsonLength, json.length, true);
  b.set(json, HEADER.json);
  return b;
}

/**
 * Check a header page (`got` bytes of it read) against the model shape `want` and record size; returns
 * the committed record count. Errors name the file, the field and its offset.
 */
export function checkHeader(b: Uint8Array, got: number, file: string, want: Shape, recordBytes: number, modelDir: string): number {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength), u32 = (at: number) => dv.getUint32(at, true);
  if (got < HEADER.json || u32(HEADER.magic) !== MAGIC) throw new ModelError("not a hummingbird KV slot file (bad magic)", { file, offset: 0 });
  const ver = u32(HEADER.version);
  if (ver !== KV_VERSION) throw new ModelError(`version ${ver} is not supported (this build reads ${KV_VERSION})`, { file, field: "version", offset: HEADER.version });
  if (u32(HEADER.headerBytes) !== HEADER.bytes) throw new ModelError(`header size ${u32(HEADER.headerBytes)} != ${HEADER.bytes}`, { file, field: "header bytes", offset: HEADER.headerBytes });
  const jl = u32(HEADER.jsonLength);
  if (HEADER.json + jl > got) throw new ModelError(`shape JSON of ${jl} bytes overruns the header`, { file, field: "shape", offset: HEADER.jsonLength });
  let raw: unknown;
  try { raw = JSON.parse(new TextDecoder().decode(b.subarray(HEADER.json, HEADER.json + jl))); } catch (e) {
    throw new ModelError(`shape JSON does not parse: ${(e as Error).message}`, { file, field: "shape", offset: HEADER.json });
  }
  const r = Shape.safeParse(raw);
  if (!r.success) throw new ModelError(`shape JSON: ${r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`, { file, field: "shape", offset: HEADER.json });
  for (const k of Object.keys(want) as (keyof Shape)[]) {
    const a = JSON.stringify(r.data[k]), w = JSON.stringify(want[k]);
    if (a !== w) throw new ModelError(`written for another model: ${a} in the file, ${w} in ${modelDir}`, { file, field: k });
  }
  if (u32(HEADER.recordBytes) !== recordBytes) throw new ModelError(`record size ${u32(HEADER.recordBytes)} != ${recordBytes}`, { file, field: "record bytes", offset: HEADER.recordBytes });
  return Number(dv.getBigUint64(HEADER.count, true));
}
