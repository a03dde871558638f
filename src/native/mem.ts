// Weight memory: the buffers the kernels stream (matrices, scales, expert slabs) on 2 MiB pages (ffi/mem.c:
// why). Big buffers get a mapping of their own; smaller ones are carved from a shared 32 MiB chunk. Every
// buffer starts on a 4 KiB boundary (O_DIRECT reads land in expert slabs) and is zeroed. A mapping is unmapped
// by its ArrayBuffer's deallocator when the last view of it is collected. Where the OS refuses a mapping the
// buffer is an ordinary (aligned) one, as it is everywhere with HB_HUGEPAGES=0 (for A/B runs).
// State: the chunk being carved and its fill.
import { type Pointer, ptr, toArrayBuffer } from "bun:ffi";
import { hb } from "./hb.ts";

export const WEIGHT_ALIGN = 4096;
const CHUNK = 32 << 20;
const disabled = process.env.HB_HUGEPAGES === "0";
let chunk: Uint8Array<ArrayBuffer> | null = null;
let used = 0;

/** Bun's toArrayBuffer with a deallocator (its context, a C function pointer): not in its typings */
const ownedArrayBuffer = toArrayBuffer as unknown as (p: Pointer | bigint, off: number, len: number, ctx: number, dealloc: number) => ArrayBuffer;

/** a zeroed mapping of `bytes` on huge pages, or null */
function mapping(bytes: number): Uint8Array<ArrayBuffer> | null {
  if (disabled) return null;
  const lib = hb(), p = lib.hb_huge_alloc(bytes);
  if (!p) return null;
  return new Uint8Array(ownedArrayBuffer(p, 0, bytes, bytes, (lib.hb_huge_free as unknown as { ptr: number }).ptr));
}

/** an ordinary buffer of `bytes`, its view starting on a WEIGHT_ALIGN boundary */
function plain(bytes: number): Uint8Array<ArrayBuffer> {
  const raw = new Uint8Array(bytes + WEIGHT_ALIGN), a = Number(ptr(raw)) % WEIGHT_ALIGN, at = a ? WEIGHT_ALIGN - a : 0;
  return raw.subarray(at, at + bytes);
}

/** `bytes` zeroed bytes for weights, starting on a WEIGHT_ALIGN boundary. */
export function weightBytes(bytes: number): Uint8Array<ArrayBuffer> {
  if (bytes >= CHUNK / 4) return mapping(bytes) ?? plain(bytes);
  const need = Math.ceil(Math.max(bytes, 1) / WEIGHT_ALIGN) * WEIGHT_ALIGN;
  if (!chunk || used + need > chunk.length) {
    chunk = mapping(CHUNK);
    used = 0;
    if (!chunk) return plain(bytes);
  }
  const v = chunk.subarray(used, used + bytes);
  used += need;
  return v;
}

/** `n` zeroed f32 for weights (a view of weightBytes). */
export function weightF32(n: number): Float32Array {
  const b = weightBytes(4 * n);
  return new Float32Array(b.buffer, b.byteOffset, n);
}
