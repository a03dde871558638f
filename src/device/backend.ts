// The device surface that the kernels, frames, mirrors and the chain record against, whatever the API:
// logical buffers split over chunks, pipelines by shader name (shaders/<name>.comp as SPIR-V for Vulkan,
// shaders/<name>.wgsl for WebGPU, the same bindings and push block: push.ts), command buffers with
// their own fence. Two backends implement it: vulkan/vk.ts (Vulkan: libhbvk over bun:ffi) and webgpu/webgpu.ts
// (WebGPU: Dawn, the npm `webgpu` package, in a child process). Both fail with VkError, and with DeviceLost once
// the device is gone (real or injected by fault()). Holds no state.
import type { DeviceInfo } from "./vulkan/probe.ts";
import type { Shader } from "./push.ts";

export type Api = "vulkan" | "webgpu";
export const APIS: readonly Api[] = ["vulkan", "webgpu"];

/** device-local / host-visible staging / device-local never mapped (tests the staged path of discrete GPUs);
 *  WebGPU has one kind of storage buffer and stages every transfer. */
export type BufKind = "device" | "host" | "device-nomap";

/** A logical buffer: `bytes` long, stored in chunks of `chunk` bytes. */
export interface Buf {
  readonly bytes: number;
  readonly chunk: number;
  readonly kind: BufKind;
  readonly freed: boolean;
  readonly nchunks: number;
  /** host -> buffer at byte offset `off` (synchronous; the caller keeps in-flight work away from it) */
  write(off: number, data: ArrayBufferView): void;
  /** buffer at byte offset `off` -> host */
  read(off: number, out: ArrayBufferView): void;
  free(): void;
}

/** byte offset / length inside one chunk (range 0: to the end of that chunk) */
export interface Binding { buf: Buf; off?: number; range?: number }

export interface Pipeline { readonly name: string; readonly nbind: number; readonly pushBytes: number }

/** A command buffer with its own fence: begin, record, submit, wait. */
export interface Cmd {
  /** waits if still pending, then starts recording */
  begin(): this;
  dispatch(p: Pipeline, binds: Binding[], pc: Uint8Array, gx: number, gy?: number, gz?: number): this;
  /** every earlier write visible to every later read */
  barrier(): this;
  /** byte copy src[soff, +n) -> dst[doff, +n) across chunks */
  copy(src: Buf, soff: number, dst: Buf, doff: number, n: number): this;
  /** 32-bit `value` over bytes [off, +n) (multiples of 4) */
  fill(b: Buf, off: number, n: number, value?: number): this;
  submit(): this;
  /** wait for the submitted work; false on timeout */
  wait(timeoutMs?: number): boolean;
  readonly pending: boolean;
}

export interface Gpu {
  readonly api: Api;
  readonly info: DeviceInfo;
  readonly lost: boolean;
  readonly isCpu: boolean;
  /** largest chunk of a storage buffer */
  readonly maxChunk: number;
  readonly stats: { dispatches: number; submits: number; sets: number };
  buffer(bytes: number, kind?: BufKind, chunk?: number): Buf;
  /** several buffer reads (each from byte `off`, default 0), as one transfer where the API can */
  readMany(list: { buf: Buf; off?: number; out: ArrayBufferView }[]): void;
  cmd(): Cmd;
  /** the pipeline of shaders/<s> with its compile-time constants (`FMT` of matmul) */
  pipeline(s: Shader, defs?: Record<string, number>): Pipeline;
  /** fake a device loss at the n-th submit from now (0 = off) */
  fault(n: number): void;
  close(): void;
}

/** Largest chunk for a storage buffer: the device's allocation and binding limits, 4 GiB, and
 *  HB_VK_MAX_CHUNK (tests: force splits). */
export function chunkLimit(info: DeviceInfo): number {
  const cap = Number(process.env.HB_VK_MAX_CHUNK ?? 0);
  const lim = Math.min(info.maxAlloc, info.maxStorageRange, 2 ** 32 - 4);
  return Math.floor((cap > 0 ? Math.min(cap, lim) : lim) / 4) * 4;
}

/** Push-constant encoder: ints and floats in declaration order (std430 scalars). Kernels name their
 * fields through the layout table in push.ts instead of calling this directly. */
export function push(fields: ([ "i" | "f", number ])[]): Uint8Array {
  const dv = new DataView(new ArrayBuffer(fields.length * 4));
  fields.forEach(([t, v], k) => (t === "i" ? dv.setInt32(k * 4, v, true) : dv.setFloat32(k * 4, v, true)));
  return new Uint8Array(dv.buffer);
}
