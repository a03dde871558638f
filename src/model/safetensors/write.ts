// safetensors writer: header padded to a multiple of 8, tensors streamed in the given order (a tensor's bytes
// whole, or as chunks from an iterable) into a temp file that is renamed over the target when complete. No state.
import * as fs from "node:fs";
import { ModelError, show } from "../errors.ts";
import { type Dtype, DTYPE_SIZE, Metadata, READ_CHUNK } from "./file.ts";

export interface TensorOut {
  name: string;
  dtype: Dtype;
  shape: number[];
  /** the bytes, or a thunk called once when this tensor is written (lets converters stream): its bytes whole, or
   *  chunks in order (so a tensor larger than RAM can be written) */
  data: ArrayBufferView | (() => ArrayBufferView | Iterable<ArrayBufferView>);
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
      let n = 0;
      for (const c of ArrayBuffer.isView(v) ? [v] : v) {
        n += c.byteLength;
        if (n > sizes[k]) break;
        writeAll(fd, bytesOf(c));
      }
      if (n !== sizes[k]) throw new ModelError(`data has ${n}${n > sizes[k] ? "+" : ""} bytes, shape × dtype needs ${sizes[k]}`, { file: path, tensor: t.name, field: "data" });
    });
    fs.closeSync(fd);
    fs.renameSync(tmp, path);
  } catch (e) {
    try { fs.closeSync(fd); } catch { /* already closed */ }
    try { fs.unlinkSync(tmp); } catch { /* not there */ }
    throw e;
  }
}
