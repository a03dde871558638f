// Bindings of the expert I/O pool (ffi/iopool.c): submit a job of reads (or mmap page touches),
// poll / wait per job, cancel; O_DIRECT opens with a fallback; page-cache drops; mmap views.
// State: one reusable Float64Array for the pool's counters; everything else lives in C.
import { constants } from "node:os";
import { toArrayBuffer, type Pointer } from "bun:ffi";
import { hb } from "../../native/hb.ts";

/** hb_io_wait's code for "the file ended before the needed bytes" (negated). */
export const ESHORT = 10000;
export const Kind = { read: 0, touch: 1 } as const;
export const Advice = { normal: 0, random: 1, sequential: 2, willneed: 3, dontneed: 4 } as const;
/** O_DIRECT alignment of file offsets, lengths and buffers (covers 512 and 4096-byte sectors). */
export const DIRECT_ALIGN = 4096;

/** One read of a job: len bytes at file offset off into base + bufOff; at least `need` must arrive. */
export interface ReadPart { fd: number; off: number; len: number; need: number; bufOff: number }

const errnoName = new Map<number, string>(Object.entries(constants.errno).map(([k, v]) => [v as number, k]));

/** A readable name for a negative hb_io result: "EIO (errno 5)", "short read". */
export function ioErrorText(r: number): string {
  if (r === -ESTALE_CODE) return "stale I/O handle (ESTALE)";
  if (r === -ESHORT) return "short read: the file ends before the expert's bytes (truncated or replaced?)";
  const name = errnoName.get(-r);
  return name ? `${name} (errno ${-r})` : `error ${r}`;
}
const ESTALE_CODE = (constants.errno as Record<string, number>).ESTALE ?? 116;
/** what hb_io_wait returns (negated) for a job cancelled before it completed */
export const ECANCELED = (constants.errno as Record<string, number>).ECANCELED ?? 125;

/** Start the pool (idempotent): threads = HB_IO_THREADS or 8 unless given. */
export function startPool(threads = 0): number {
  return hb().hb_io_start(threads);
}

/** Submit one job; returns its handle (> 0). base: the slab, or null for touches of absolute addresses. */
export function submit(parts: ReadPart[], base: Uint8Array | null, kind: number): number {
  const n = parts.length;
  const fds = new Int32Array(n), offs = new BigInt64Array(n), lens = new BigInt64Array(n);
  const needs = new BigInt64Array(n), bufs = new BigInt64Array(n);
  parts.forEach((p, i) => {
    fds[i] = p.fd; offs[i] = BigInt(p.off); lens[i] = BigInt(p.len); needs[i] = BigInt(p.need); bufs[i] = BigInt(p.bufOff);
  });
  const h = Number(hb().hb_io_submit(n, fds, offs, lens, needs, base, bufs, kind));
  if (h <= 0) throw new Error(`I/O pool: submit failed: ${ioErrorText(h)}`);
  return h;
}

/** 1 done, 0 pending. */
export const poll = (h: number): number => hb().hb_io_poll(h);
/** Bytes read, or a negative code (see ioErrorText). Frees the handle. */
export const wait = (h: number): number => Number(hb().hb_io_wait(h));
export const cancel = (h: number): number => hb().hb_io_cancel(h);

export interface PoolCounters { busySeconds: number; bytes: number; chunks: number; jobs: number; errors: number; inflight: number; threads: number; queued: number }
const statsBuf = new Float64Array(8);
export function poolCounters(): PoolCounters {
  hb().hb_io_stats(statsBuf);
  const s = statsBuf;
  return { busySeconds: s[0], bytes: s[1], chunks: s[2], jobs: s[3], errors: s[4], inflight: s[5], threads: s[6], queued: s[7] };
}

/** Fault injection (tests): the nth chunk read from now fails with errno (0 = a short read); 0 disarms. */
export function injectFailure(nth: number, errno = 5): void {
  hb().hb_io_fail(nth, errno);
}

const cstr = (s: string) => Buffer.from(s + "\0");

/** open(path, O_RDONLY [| O_DIRECT]) -> fd, or a negative errno. */
export function openRaw(path: string, direct: boolean): number {
  return hb().hb_io_open(cstr(path), direct ? 1 : 0);
}
export const closeFd = (fd: number) => hb().hb_io_close(fd);

/** Drop (or advise) the page cache of [off, off+len) of fd (len 0 = to the end). */
export function fadvise(fd: number, advice: number, off = 0, len = 0): number {
  return hb().hb_io_fadvise(fd, off, len, advice);
}

/** Map a whole file read-only (shared). Returns the address or null. */
export function mapFile(fd: number, len: number): number | null {
  const p = hb().hb_io_mmap(fd, len);
  return p ? Number(p) : null;
}
export const unmapFile = (addr: number, len: number) => hb().hb_io_munmap(addr as unknown as Pointer, len);
export const madvise = (addr: number, len: number, advice: number) => hb().hb_io_madvise(addr as unknown as Pointer, len, advice);

/** A Uint8Array over mapped memory [addr, addr+len) (no copy; valid while mapped). */
export function mappedBytes(addr: number, len: number): Uint8Array {
  if (len === 0) return new Uint8Array(0);
  return new Uint8Array(toArrayBuffer(addr as unknown as Pointer, 0, len));
}
