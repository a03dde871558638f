// A thread's CPU priority through libc (Linux): the tokenizer helpers run niced, so that a flood of tokenize work (an
// 8 MB prompt bound, /tokenize calls) takes what the decoding threads leave rather than a share of the cores beside
// them. Holds no state but the libc handle (opened on first use; null where there is no glibc).
import { dlopen, FFIType } from "bun:ffi";

type Libc = { gettid(): number; getpriority(which: number, who: number): number; setpriority(which: number, who: number, prio: number): number };
let libc: Libc | null | undefined;
function open(): Libc | null {
  if (libc !== undefined) return libc;
  try {
    libc = process.platform !== "linux" ? null : dlopen("libc.so.6", {
      gettid: { args: [], returns: FFIType.i32 },
      getpriority: { args: [FFIType.i32, FFIType.u32], returns: FFIType.i32 },
      setpriority: { args: [FFIType.i32, FFIType.u32, FFIType.i32], returns: FFIType.i32 },
    }).symbols as unknown as Libc;
  } catch { libc = null; } // (musl, another libc name: the thread keeps its priority)
  return libc;
}

/** Raise the calling thread's nice value to at least n (lowering needs no privilege); the value now in effect, or null
 *  where this platform has no per-thread priority through glibc. (PRIO_PROCESS with a thread id names that thread.) */
export function niceThread(n: number): number | null {
  const c = open();
  if (!c) return null;
  const tid = c.gettid(), now = c.getpriority(0, tid);
  if (now < n) c.setpriority(0, tid, n);
  return c.getpriority(0, tid);
}
