// safetensors reader/writer, hostile-safe (formats.md). Owns the open file descriptors of a model:
// a SafeFile holds one fd + its validated header; a TensorStore holds the SafeFiles of one model
// (single file or shards via model.safetensors.index.json). Only headers are read at open time;
// tensor bytes are read on demand with pread into the caller's buffer (models are 370+ GB).
import * as fs from "node:fs";
import { basename, join } from "node:path";
import { z } from "zod";
import { Conv, convert, pread } from "../engine/hb.ts";
import { findDuplicateKey, fromZod, ModelError, readJsonFile, show } from "./errors.ts";

/** Bytes per element of every dtype we accept in a header (only the float ones and U8/I8 are used). */
export const DTYPE_SIZE = {
  F64: 8, F32: 4, F16: 2, BF16: 2, F8_E4M3: 1, F8_E5M2: 1,
  I64: 8, I32: 4, I16: 2, I8: 1, U64: 8, U32: 4, U16: 2, U8: 1, BOOL: 1,
} as const;
export type Dtype = keyof typeof DTYPE_SIZE;
const DTYPES = Object.keys(DTYPE_SIZE) as [Dtype, ...Dtype[]];

export const MAX_HEADER = 100 * 1024 * 1024; // formats.md: N must be sane
const MAX_RANK = 32;
const READ_CHUNK = 1 << 30; // Linux caps one pread at ~2 GiB

export interface TensorInfo {
  name: string;
  dtype: Dtype;
  shape: number[];
  numel: number;
  file: string; // path of the owning file
  owner: SafeFile;
  offset: number; // absolute byte offset in the file
  nbytes: number;
}

const SafeInt = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const Entry = z.strictObject({
  dtype: z.enum(DTYPES),
  shape: z.array(SafeInt).max(MAX_RANK),
  data_offsets: z.tuple([SafeInt, SafeInt]),
});
const Metadata = z.record(z.string(), z.string());
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** One open .safetensors file: fd + validated header. close() releases the fd (idempotent). */
export class SafeFile {
  readonly tensors = new Map<string, TensorInfo>();
  metadata: Record<string, string> = {};
  dataStart = 0;
  closed = false;
  constructor(readonly path: string, readonly fd: number, readonly size: number) {}
  close(): void {
    if (this.closed) return;
    this.closed = true;
    fs.closeSync(this.fd);
  }
}

type EntryT = z.infer<typeof Entry>;
const isSafeNat = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
/** Fast structural check equal to `Entry` for well-formed entries (zod only runs on failure, for the message). */
function fastEntry(v: unknown): EntryT | null {
  if (!isObject(v)) return null;
  let n = 0;
  for (const _ in v) n++;
  const { dtype, shape, data_offsets: off } = v as Record<string, unknown>;
  if (n !== 3 || typeof dtype !== "string" || !Object.hasOwn(DTYPE_SIZE, dtype)) return null;
  if (!Array.isArray(shape) || shape.length > MAX_RANK || !shape.every(isSafeNat)) return null;
  if (!Array.isArray(off) || off.length !== 2 || !isSafeNat(off[0]) || !isSafeNat(off[1])) return null;
  return v as EntryT;
}

/** Product of the dims, exact (numbers while they stay safe, BigInt past 2^53). */
function shapeNumel(shape: number[]): bigint {
  let p = 1;
  for (let k = 0; k < shape.length; k++) {
    const q = p * shape[k];
    if (!Number.isSafeInteger(q)) {
      let b = BigInt(p);
      for (let j = k; j < shape.length; j++) b *= BigInt(shape[j]);
      return b;
    }
    p = q;
  }
  return BigInt(p);
}

/** Open and validate one file. Reads the 8-byte length and the header only. */
export function openSafetensors(path: string): SafeFile {
  let fd: number;
  try {
    fd = fs.openSync(path, "r");
  } catch (e) {
    throw new ModelError(`cannot open: ${(e as Error).message}`, { file: path }, { cause: e });
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new ModelError("not a regular file", { file: path });
    const sf = new SafeFile(path, fd, st.size);
    parseHeader(sf);
    return sf;
  } catch (e) {
    fs.closeSync(fd);
    throw e;
  }
}

function parseHeader(sf: SafeFile): void {
  const file = sf.path;
  if (sf.size < 8) throw new ModelError(`file is ${sf.size} bytes, shorter than the 8-byte header length`, { file, field: "header_length", offset: 0 });
  const lenBuf = preadExact(sf, new Uint8Array(8), 8, 0, { file, field: "header_length" });
  const N = new DataView(lenBuf.buffer).getBigUint64(0, true);
  if (N < 2n) throw new ModelError(`header length ${N} is too small`, { file, field: "header_length", offset: 0 });
  if (N > BigInt(MAX_HEADER)) throw new ModelError(`header length ${N} exceeds the ${MAX_HEADER}-byte limit`, { file, field: "header_length", offset: 0 });
  if (N > BigInt(sf.size - 8)) throw new ModelError(`header length ${N} runs past the end of the file (${sf.size} bytes)`, { file, field: "header_length", offset: 0 });
  const n = Number(N);
  const bytes = preadExact(sf, new Uint8Array(n), n, 8, { file, field: "header" });
  let text: string;
  let raw: unknown;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new ModelError("header is not valid UTF-8", { file, field: "header", offset: 8 });
  }
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new ModelError(`header is not valid JSON (${(e as Error).message})`, { file, field: "header", offset: 8 });
  }
  if (!isObject(raw)) throw new ModelError(`header must be a JSON object (got ${show(raw)})`, { file, field: "header", offset: 8 });
  const dup = findDuplicateKey(text);
  if (dup) {
    const [top, ...rest] = dup;
    if (rest.length === 0) throw new ModelError("duplicate tensor name", { file, tensor: top, field: "name" });
    throw new ModelError(`duplicate key ${JSON.stringify(rest[rest.length - 1])}`, { file, tensor: top, field: rest.join(".") });
  }
  sf.dataStart = 8 + n;
  const dataSize = sf.size - sf.dataStart;
  const spans: TensorInfo[] = [];
  for (const [name, v] of Object.entries(raw)) {
    if (name === "__metadata__") {
      const m = Metadata.safeParse(v);
      if (!m.success) throw fromZod(m.error, { file }, ["__metadata__"]);
      sf.metadata = Object.assign(Object.create(null), m.data);
      continue;
    }
    if (name === "") throw new ModelError("empty tensor name", { file, tensor: name, field: "name" });
    let e = fastEntry(v);
    if (!e) {
      const r = Entry.safeParse(v); // the slow path names the bad field
      if (!r.success) throw fromZod(r.error, { file, tensor: name });
      e = r.data;
    }
    const { dtype, shape, data_offsets: [begin, end] } = e;
    const where = { file, tensor: name, field: "data_offsets" };
    if (begin > end) throw new ModelError(`begin ${begin} is after end ${end}`, where);
    if (end > dataSize) throw new ModelError(`end ${end} beyond data size ${dataSize}`, where);
    const numel = shapeNumel(shape);
    const want = numel * BigInt(DTYPE_SIZE[dtype]);
    if (want !== BigInt(end - begin))
      throw new ModelError(`shape [${shape.join(", ")}] × ${dtype} needs ${want} bytes but data_offsets span ${end - begin}`, { file, tensor: name, field: "shape" });
    const info: TensorInfo = { name, dtype, shape, numel: Number(numel), file, owner: sf, offset: sf.dataStart + begin, nbytes: end - begin };
    sf.tensors.set(name, info);
    if (info.nbytes > 0) spans.push(info);
  }
  spans.sort((a, b) => a.offset - b.offset);
  for (let i = 1; i < spans.length; i++) {
    const p = spans[i - 1], c = spans[i];
    if (c.offset < p.offset + p.nbytes)
      throw new ModelError(`overlaps tensor ${JSON.stringify(p.name)}`, { file, tensor: c.name, field: "data_offsets" });
  }
}

// ---- reading tensor bytes --------------------------------------------------------------------

/** pread exactly len bytes at off into buf[0, len); a short read or an error is a ModelError. */
function preadExact(sf: SafeFile, buf: Uint8Array, len: number, off: number, where: { file: string; tensor?: string; field?: string }): Uint8Array {
  if (sf.closed) throw new ModelError("file is closed", where);
  let done = 0;
  while (done < len) {
    const want = Math.min(len - done, READ_CHUNK);
    const n = pread(sf.fd, done === 0 ? buf : buf.subarray(done), want, off + done);
    if (n < 0) throw new ModelError(`read failed (errno ${-n})`, { ...where, offset: off + done });
    if (n === 0) throw new ModelError(`short read: file ends after ${done} of ${len} bytes (truncated?)`, { ...where, offset: off + done });
    done += n;
  }
  return buf;
}

/** The raw bytes of a tensor, into out[0, nbytes) (returned as that view) or a fresh buffer. */
export function readBytes(info: TensorInfo, out?: Uint8Array): Uint8Array {
  const where = { file: info.file, tensor: info.name };
  const buf = out ?? new Uint8Array(info.nbytes);
  if (buf.byteLength < info.nbytes) throw new ModelError(`output buffer holds ${buf.byteLength} bytes, need ${info.nbytes}`, where);
  if (info.nbytes === 0) return buf.subarray(0, 0);
  preadExact(info.owner, buf, info.nbytes, info.offset, where);
  return buf.byteLength === info.nbytes ? buf : buf.subarray(0, info.nbytes);
}

const CONV: Partial<Record<Dtype, number>> = { BF16: Conv.bf16, F16: Conv.f16, F8_E4M3: Conv.f8e4m3 };
export const FP8_BLOCK = 128;

/**
 * A float tensor as f32 (F32 / BF16 / F16 / F8_E4M3), into out[0, numel) or a fresh array.
 * F8_E4M3: block scales `<name>_scale_inv` F32 [⌈O/128⌉, ⌈I/128⌉] are applied when given — either
 * directly as a TensorInfo or looked up in a store (absent there → no scaling).
 */
export function readF32(info: TensorInfo, out?: Float32Array | null, scale?: TensorStore | TensorInfo | null): Float32Array {
  const where = { file: info.file, tensor: info.name };
  const n = info.numel;
  const dst = out ?? new Float32Array(n);
  if (dst.length < n) throw new ModelError(`output array holds ${dst.length} floats, need ${n}`, where);
  const y = dst.length === n ? dst : dst.subarray(0, n);
  if (info.dtype === "F32") {
    readBytes(info, new Uint8Array(y.buffer, y.byteOffset, info.nbytes));
    return y;
  }
  const kind = CONV[info.dtype];
  if (kind === undefined) throw new ModelError(`dtype ${info.dtype} cannot be read as f32`, { ...where, field: "dtype" });
  let sInfo: TensorInfo | null = null;
  if (scale instanceof TensorStore) {
    if (info.dtype === "F8_E4M3" && scale.has(info.name + "_scale_inv")) sInfo = scale.get(info.name + "_scale_inv");
  } else if (scale) {
    if (info.dtype !== "F8_E4M3") throw new ModelError(`block scales given for a ${info.dtype} tensor`, { ...where, field: "dtype" });
    sInfo = scale;
  }
  if (n > 0) convert(kind, readBytes(info), y, n);
  if (sInfo) applyBlockScales(info, sInfo, y);
  return y;
}

/** w[o,i] *= s[o/128][i/128] for an FP8 [O,I] matrix. */
function applyBlockScales(info: TensorInfo, sInfo: TensorInfo, w: Float32Array): void {
  if (info.shape.length !== 2) throw new ModelError(`FP8 block scales need a 2-D tensor, shape is [${info.shape.join(", ")}]`, { file: info.file, tensor: info.name, field: "shape" });
  const [O, I] = info.shape;
  const bo = Math.ceil(O / FP8_BLOCK), bi = Math.ceil(I / FP8_BLOCK);
  const where = { file: sInfo.file, tensor: sInfo.name };
  if (sInfo.dtype !== "F32") throw new ModelError(`scale_inv must be F32, got ${sInfo.dtype}`, { ...where, field: "dtype" });
  if (sInfo.shape.length !== 2 || sInfo.shape[0] !== bo || sInfo.shape[1] !== bi)
    throw new ModelError(`shape [${sInfo.shape.join(", ")}] should be [${bo}, ${bi}] for weight [${O}, ${I}]`, { ...where, field: "shape" });
  const s = readF32(sInfo);
  for (let o = 0; o < O; o++) {
    const row = o * I, srow = (o >> 7) * bi;
    for (let b = 0; b < bi; b++) {
      const f = s[srow + b], i1 = Math.min(I, (b + 1) * FP8_BLOCK);
      for (let i = b * FP8_BLOCK; i < i1; i++) w[row + i] *= f;
    }
  }
}

// ---- a model's tensors: one file or shards ---------------------------------------------------

/** All tensors of one model. get() throws a ModelError naming a missing tensor. */
export class TensorStore {
  constructor(
    readonly path: string,
    readonly files: SafeFile[],
    private readonly map: Map<string, TensorInfo>,
    readonly metadata: Record<string, string>,
  ) {}
  has(name: string): boolean { return this.map.has(name); }
  get(name: string): TensorInfo {
    const t = this.map.get(name);
    if (!t) throw new ModelError("missing tensor", { file: this.path, tensor: name });
    return t;
  }
  names(): string[] { return [...this.map.keys()]; }
  close(): void { for (const f of this.files) f.close(); }
}

export const INDEX_FILE = "model.safetensors.index.json";
export const SINGLE_FILE = "model.safetensors";
const MAX_INDEX = 256 * 1024 * 1024;
const IndexJson = z.looseObject({
  metadata: z.unknown().optional(),
  weight_map: z.record(z.string().min(1), z.string().min(1)),
});

/** Open a model directory (model.safetensors, or shards via the index), or a single .safetensors path. */
export function openModel(path: string): TensorStore {
  let st: fs.Stats;
  try {
    st = fs.statSync(path);
  } catch (e) {
    throw new ModelError(`cannot open: ${(e as Error).message}`, { file: path }, { cause: e });
  }
  if (st.isFile()) return storeOf(path, [openSafetensors(path)]);
  const index = join(path, INDEX_FILE);
  if (fs.existsSync(index)) return openSharded(path, index);
  const single = join(path, SINGLE_FILE);
  if (fs.existsSync(single)) return storeOf(path, [openSafetensors(single)]);
  throw new ModelError(`neither ${SINGLE_FILE} nor ${INDEX_FILE} found`, { file: path });
}

function openSharded(dir: string, index: string): TensorStore {
  const raw = readJsonFile(index, MAX_INDEX);
  const r = IndexJson.safeParse(raw);
  if (!r.success) throw fromZod(r.error, { file: index });
  const wm = r.data.weight_map;
  const shards = [...new Set(Object.values(wm))];
  for (const s of shards) {
    if (s !== basename(s) || s === "." || s === ".." || s.includes("\\") || s.includes("\0"))
      throw new ModelError(`shard ${show(s)} is not a plain file name`, { file: index, field: "weight_map" });
  }
  const files: SafeFile[] = [];
  try {
    for (const s of shards) {
      const p = join(dir, s);
      if (!fs.existsSync(p)) {
        const t = Object.keys(wm).find((k) => wm[k] === s);
        throw new ModelError(`mapped file ${s} does not exist`, { file: index, tensor: t, field: "weight_map" });
      }
      files.push(openSafetensors(p));
    }
    const store = storeOf(dir, files);
    for (const [name, s] of Object.entries(wm)) {
      const t = store.has(name) ? store.get(name) : null;
      if (!t) throw new ModelError(`not found in ${s}, where the index maps it`, { file: index, tensor: name, field: "weight_map" });
      if (basename(t.file) !== s) throw new ModelError(`index maps it to ${s} but it is in ${basename(t.file)}`, { file: index, tensor: name, field: "weight_map" });
    }
    return store;
  } catch (e) {
    for (const f of files) f.close();
    throw e;
  }
}

/** Merge files into a store: a tensor in two files is an error; metadata merged (quant.* must agree). */
function storeOf(path: string, files: SafeFile[]): TensorStore {
  const map = new Map<string, TensorInfo>();
  const metadata: Record<string, string> = Object.create(null);
  try {
    for (const f of files) {
      for (const [name, t] of f.tensors) {
        const prev = map.get(name);
        if (prev) throw new ModelError(`also in ${prev.file}`, { file: f.path, tensor: name, field: "name" });
        map.set(name, t);
      }
      for (const [k, v] of Object.entries(f.metadata)) {
        if (!Object.hasOwn(metadata, k)) metadata[k] = v;
        else if (k.startsWith("quant.") && metadata[k] !== v)
          throw new ModelError(`${show(v)} disagrees with ${show(metadata[k])} in another shard`, { file: f.path, field: `__metadata__.${k}` });
      }
    }
  } catch (e) {
    for (const f of files) f.close();
    throw e;
  }
  return new TensorStore(path, files, map, metadata);
}

// ---- writing ---------------------------------------------------------------------------------

export interface TensorOut {
  name: string;
  dtype: Dtype;
  shape: number[];
  /** the bytes, or a thunk called once when this tensor is written (lets converters stream) */
  data: ArrayBufferView | (() => ArrayBufferView);
}

const bytesOf = (v: ArrayBufferView) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);

function writeAll(fd: number, b: Uint8Array): void {
  for (let done = 0; done < b.byteLength;) done += fs.writeSync(fd, b, done, Math.min(b.byteLength - done, READ_CHUNK));
}

/**
 * Write a .safetensors file: header padded with spaces to a multiple of 8, data in the given order.
 * Streams tensor by tensor into `path.tmp-<pid>` and renames it over `path` when complete.
 */
export function writeSafetensors(path: string, tensors: TensorOut[], metadata?: Record<string, string>): void {
  const header: Record<string, unknown> = Object.create(null);
  const seen = new Set<string>();
  if (metadata && Object.keys(metadata).length) header.__metadata__ = Metadata.parse(metadata);
  const sizes: number[] = [];
  let off = 0;
  for (const t of tensors) {
    const where = { file: path, tensor: t.name };
    if (typeof t.name !== "string" || t.name === "" || t.name === "__metadata__" || seen.has(t.name))
      throw new ModelError("bad or duplicate tensor name", where);
    seen.add(t.name);
    if (!Object.hasOwn(DTYPE_SIZE, t.dtype)) throw new ModelError(`unknown dtype ${show(t.dtype)}`, { ...where, field: "dtype" });
    let numel = 1;
    for (const d of t.shape) {
      if (!Number.isSafeInteger(d) || d < 0) throw new ModelError(`bad dimension ${show(d)}`, { ...where, field: "shape" });
      numel *= d;
    }
    const nbytes = numel * DTYPE_SIZE[t.dtype];
    if (!Number.isSafeInteger(nbytes)) throw new ModelError("tensor too large", { ...where, field: "shape" });
    if (typeof t.data !== "function" && t.data.byteLength !== nbytes)
      throw new ModelError(`data has ${t.data.byteLength} bytes, shape × dtype needs ${nbytes}`, { ...where, field: "data" });
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + nbytes] };
    sizes.push(nbytes);
    off += nbytes;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const N = Math.ceil(json.byteLength / 8) * 8;
  const head = new Uint8Array(8 + N).fill(0x20);
  new DataView(head.buffer).setBigUint64(0, BigInt(N), true);
  head.set(json, 8);
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = fs.openSync(tmp, "w");
  try {
    writeAll(fd, head);
    tensors.forEach((t, k) => {
      const v = typeof t.data === "function" ? t.data() : t.data;
      if (v.byteLength !== sizes[k]) throw new ModelError(`data has ${v.byteLength} bytes, shape × dtype needs ${sizes[k]}`, { file: path, tensor: t.name, field: "data" });
      writeAll(fd, bytesOf(v));
    });
    fs.closeSync(fd);
    fs.renameSync(tmp, path);
  } catch (e) {
    try { fs.closeSync(fd); } catch { /* already closed */ }
    try { fs.unlinkSync(tmp); } catch { /* not there */ }
    throw e;
  }
}
