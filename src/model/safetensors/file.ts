// safetensors basics shared by the reader, store and writer (formats.md): the dtype table, the open-file
// object (SafeFile: one fd + its validated header, filled by header.ts) and exact positioned reads.
// State: a SafeFile owns its fd until close().
import * as fs from "node:fs";
import { z } from "zod";
import { pread } from "../../native/hb.ts";
import { ModelError } from "../errors.ts";

/** Bytes per element of every dtype we accept in a header (only the float ones and U8/I8 are used). */
export const DTYPE_SIZE = {
  F64: 8, F32: 4, F16: 2, BF16: 2, F8_E4M3: 1, F8_E5M2: 1,
  I64: 8, I32: 4, I16: 2, I8: 1, U64: 8, U32: 4, U16: 2, U8: 1, BOOL: 1,
} as const;
export type Dtype = keyof typeof DTYPE_SIZE;

/** The header length we read (formats.md: N must be sane). safetensors' own limit is 100 MB, but parsing costs ~20×
 *  the header's bytes (a 62 MB header took 1.3 GB); 16 MiB holds ~100k tensor entries (a 4 GiB shard of GLM-5 holds
 *  a few thousand, < 1 MiB) and bounds the parse to a few hundred MB. Longer claims are refused before any read. */
export const MAX_HEADER = 16 * 1024 * 1024;
export const READ_CHUNK = 1 << 30; // Linux caps one pread (and write) at ~2 GiB

/** `__metadata__`: string → string */
export const Metadata = z.record(z.string(), z.string());

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

export interface Where { file: string; tensor?: string; field?: string }

/** pread exactly len bytes at off into buf[0, len); a short read or an error is a ModelError. */
export function preadExact(sf: SafeFile, buf: Uint8Array, len: number, off: number, where: Where): Uint8Array {
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
