// safetensors header reader, hostile-safe (formats.md): opens one file, reads the 8-byte length and the
// JSON header only, and validates every entry (dtype, shape × dtype = span, spans inside the data and
// disjoint, no duplicate names) into a SafeFile. Errors are ModelErrors naming file / tensor / field /
// offset. Holds no state of its own (the SafeFile returned owns the fd).
import * as fs from "node:fs";
import { z } from "zod";
import { findDuplicateKey, fromZod, ModelError, show } from "../errors.ts";
import { type Dtype, DTYPE_SIZE, MAX_HEADER, Metadata, preadExact, SafeFile, type TensorInfo } from "./file.ts";

const DTYPES = Object.keys(DTYPE_SIZE) as [Dtype, ...Dtype[]];
const MAX_RANK = 32;

const SafeInt = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const Entry = z.strictObject({
  dtype: z.enum(DTYPES),
  shape: z.array(SafeInt).max(MAX_RANK),
  data_offsets: z.tuple([SafeInt, SafeInt]),
});
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

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
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK); // (a FIFO opens at once, then is refused)
  } catch (e) {
    throw new ModelError(`cannot open: ${(e as Error).message}`, { file: path }, { cause: e });
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new ModelError(`not a regular file (${st.isFIFO() ? "a FIFO" : st.isDirectory() ? "a directory" : "a device or socket"})`, { file: path });
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
