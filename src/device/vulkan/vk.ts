// The Vulkan backend (../backend.ts's Gpu) over libhbvk (ffi/vk/*.c) with bun:ffi: buffers, pipelines, descriptor sets
// (cached per binding list) and command buffers; the binding itself and the error types are in
// vklib.ts, device discovery and choice in probe.ts (both re-exported here). TypedArrays go to the shim
// directly. Errors: every failing call throws VkError (with the shim's message); a lost device throws
// DeviceLost, after which the context refuses all work. State per Vk: the native context, the
// descriptor-set cache and the list of live objects (freed by close()).
import type { Pointer } from "bun:ffi";
import { type Binding, type Buf, type BufKind, chunkLimit, type Cmd, type Gpu, type Pipeline } from "../backend.ts";
import { type DeviceInfo, isCpuDevice, pickDevice, probe } from "./probe.ts";
import { type Shader, pushBytes, SHADERS } from "../push.ts";
import { spirv } from "./shaders.ts";
import { DeviceLost, SHIM_ERRORS, VK_ERROR_DEVICE_LOST, VK_TIMEOUT, VkError, vklib } from "./vklib.ts";

export { apiString, type DeviceInfo, DeviceType, isCpuDevice, pickDevice, type Probe, probe } from "./probe.ts";
export { DeviceLost, SHIM_ERRORS, VK_ERROR_DEVICE_LOST, VK_TIMEOUT, VkError } from "./vklib.ts";
export { type Binding, type Buf, type BufKind, type Cmd, type Gpu, type Pipeline, push } from "../backend.ts";
/** hbvk.h HBVK_DEVICE / HBVK_HOST / HBVK_DEVICE_NOMAP */
export const BUF_KIND: Record<BufKind, number> = { device: 0, host: 1, "device-nomap": 2 };

/** A logical buffer: `bytes` long, stored in chunks of `chunk` bytes (one VkBuffer each). */
class VkBuf implements Buf {
  freed = false;
  constructor(readonly vk: Vk, readonly h: number, readonly bytes: number, readonly chunk: number, readonly kind: BufKind) {}
  get nchunks(): number { return Math.ceil(this.bytes / this.chunk); }
  write(off: number, data: ArrayBufferView): void {
    const u8 = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (u8.byteLength) this.vk.check(vklib().hbvk_buf_write(this.vk.ctx, this.h, off, u8, u8.byteLength), "buffer write");
  }
  read(off: number, out: ArrayBufferView): void {
    const u8 = new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
    if (u8.byteLength) this.vk.check(vklib().hbvk_buf_read(this.vk.ctx, this.h, off, u8, u8.byteLength), "buffer read");
  }
  free(): void { this.vk.freeBuf(this); }
}

class VkPipeline implements Pipeline {
  constructor(readonly h: number, readonly name: string, readonly nbind: number, readonly pushBytes: number) {}
}

/** A command buffer with its own fence (hbvk_cmd_*). */
class VkCmd implements Cmd {
  constructor(readonly vk: Vk, readonly h: number) {}
  begin(): this { this.vk.check(vklib().hbvk_cmd_begin(this.vk.ctx, this.h), "begin"); return this; }
  dispatch(p: Pipeline, binds: Binding[], pc: Uint8Array, gx: number, gy = 1, gz = 1): this {
    const set = this.vk.set(p as VkPipeline, binds);
    this.vk.check(vklib().hbvk_cmd_dispatch(this.vk.ctx, this.h, (p as VkPipeline).h, set, pc, pc.byteLength, gx, gy, gz), `dispatch ${p.name}`);
    this.vk.stats.dispatches++;
    return this;
  }
  barrier(): this { this.vk.check(vklib().hbvk_cmd_barrier(this.vk.ctx, this.h), "barrier"); return this; }
  copy(src: Buf, soff: number, dst: Buf, doff: number, n: number): this { // split over chunks by the shim
    if (n > 0) this.vk.check(vklib().hbvk_cmd_copy(this.vk.ctx, this.h, (src as VkBuf).h, soff, (dst as VkBuf).h, doff, n), "copy");
    return this;
  }
  fill(b: Buf, off: number, n: number, value = 0): this {
    if (n > 0) this.vk.check(vklib().hbvk_cmd_fill(this.vk.ctx, this.h, (b as VkBuf).h, off, n, value >>> 0), "fill");
    return this;
  }
  submit(): this { this.vk.check(vklib().hbvk_cmd_submit(this.vk.ctx, this.h), "submit"); this.vk.stats.submits++; return this; }
  wait(timeoutMs = -1): boolean {
    const rc = vklib().hbvk_cmd_wait(this.vk.ctx, this.h, timeoutMs < 0 ? -1 : Math.round(timeoutMs * 1e6));
    if (rc === VK_TIMEOUT) return false;
    this.vk.check(rc, "wait");
    return true;
  }
  get pending(): boolean { return vklib().hbvk_cmd_pending(this.vk.ctx, this.h) === 1; }
}

export class Vk implements Gpu {
  readonly api = "vulkan";
  readonly stats = { dispatches: 0, submits: 0, sets: 0 };
  private sets = new Map<string, number>();
  private setsOfBuf = new Map<number, string[]>();
  private bufs = new Set<VkBuf>();
  private closed = false;

  private constructor(readonly ctx: Pointer, readonly info: DeviceInfo) {}

  /** Open a device (see pickDevice for `want`). Throws VkError when none is usable. */
  static open(want?: string | number): Vk {
    const p = probe();
    if (!p.ok) throw new VkError(p.reason, -10003);
    const d = pickDevice(p.devices, want);
    if (!d) throw new VkError(`no Vulkan device matches ${JSON.stringify(want)} (have: ${p.devices.map((x) => `${x.index}: ${x.name}`).join(", ")})`, -10003);
    const rc = new Int32Array(1);
    const ctx = vklib().hbvk_create(d.index, rc);
    if (!ctx || typeof ctx === "bigint" || rc[0] !== 0) throw new VkError(`cannot create a device on ${d.name}: ${SHIM_ERRORS[rc[0]] ?? `VkResult ${rc[0]}`}`, rc[0]);
    return new Vk(ctx, d);
  }

  get lost(): boolean { return this.closed || vklib().hbvk_lost(this.ctx) === 1; }
  get isCpu(): boolean { return isCpuDevice(this.info); }

  /** Throw for a failing status (DeviceLost when the device is gone). */
  check(rc: number, what: string): number {
    if (rc >= 0) return rc;
    const msg = `vulkan ${what}: ${vklib().hbvk_error(this.ctx)?.toString() || SHIM_ERRORS[rc] || `VkResult ${rc}`}`;
    if (rc === VK_ERROR_DEVICE_LOST || this.lost) throw new DeviceLost(msg);
    throw new VkError(msg, rc);
  }

  /** Fake a device loss at the n-th submit from now (0 = off). */
  fault(n: number): void { this.check(vklib().hbvk_fault(this.ctx, n), "fault"); }

  /** Largest chunk for a storage buffer on this device (maxMemoryAllocationSize, maxStorageBufferRange, 4 GiB). */
  get maxChunk(): number { return chunkLimit(this.info); }

  buffer(bytes: number, kind: BufKind = "device", chunk = 0): Buf {
    if (!Number.isSafeInteger(bytes) || bytes < 0) throw new VkError(`buffer size ${bytes}`, -10001);
    const size = Math.max(4, Math.ceil(bytes / 4) * 4);
    const ch = Math.min(chunk > 0 ? chunk : size, this.maxChunk, size);
    if (ch % 4 !== 0) throw new VkError(`chunk ${ch} is not a multiple of 4`, -10001);
    const h = this.check(vklib().hbvk_buf_new(this.ctx, size, ch, BUF_KIND[kind]), `buffer(${size} bytes)`);
    const b = new VkBuf(this, h, size, ch, kind);
    this.bufs.add(b);
    return b;
  }

  freeBuf(b: VkBuf): void {
    if (b.freed) return;
    b.freed = true;
    this.bufs.delete(b);
    for (const key of this.setsOfBuf.get(b.h) ?? []) {
      const s = this.sets.get(key);
      if (s !== undefined) { vklib().hbvk_set_free(this.ctx, s); this.sets.delete(key); }
    }
    this.setsOfBuf.delete(b.h);
    vklib().hbvk_buf_free(this.ctx, b.h);
  }

  pipeline(s: Shader, defs: Record<string, number> = {}): Pipeline {
    const code = spirv(s, defs), name = `${s}${JSON.stringify(defs)}`, nbind = SHADERS[s].bind, pb = pushBytes(s);
    const h = this.check(vklib().hbvk_pipe_new(this.ctx, code, code.byteLength, nbind, pb), `pipeline ${name}`);
    return new VkPipeline(h, name, nbind, pb);
  }

  /** Descriptor set for (pipeline, bindings), created once and cached until one of its buffers is freed. */
  set(p: VkPipeline, binds: Binding[]): number {
    const h = (b: Binding) => (b.buf as VkBuf).h;
    const key = `${p.h}|${binds.map((b) => `${h(b)}@${b.off ?? 0}+${b.range ?? 0}`).join(",")}`;
    const hit = this.sets.get(key);
    if (hit !== undefined) return hit;
    for (const b of binds) if (b.buf.freed) throw new VkError(`pipeline ${p.name}: binding a freed buffer`, -10001);
    const n = binds.length;
    const s = this.check(vklib().hbvk_set_new(this.ctx, p.h, n, Int32Array.from(binds, h),
      BigInt64Array.from(binds, (b) => BigInt(b.off ?? 0)), BigInt64Array.from(binds, (b) => BigInt(b.range ?? 0))), `descriptor set for ${p.name}`);
    this.sets.set(key, s);
    for (const b of binds) {
      const l = this.setsOfBuf.get(h(b)) ?? [];
      l.push(key);
      this.setsOfBuf.set(h(b), l);
    }
    this.stats.sets++;
    return s;
  }

  readMany(list: { buf: Buf; off?: number; out: ArrayBufferView }[]): void { for (const r of list) r.buf.read(r.off ?? 0, r.out); }

  cmd(): Cmd { return new VkCmd(this, this.check(vklib().hbvk_cmd_new(this.ctx), "command buffer")); }

  /** Free everything (waits for the device unless it is lost). Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    vklib().hbvk_destroy(this.ctx);
    this.sets.clear(); this.setsOfBuf.clear(); this.bufs.clear();
  }
}
