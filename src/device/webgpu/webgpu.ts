// The WebGPU backend (../backend.ts's Gpu) on Dawn, the npm `webgpu` package. Dawn runs in a child process
// (dawn-host.ts), so that a crash in Dawn or the driver is a lost device, not a dead server (so is a host that
// dies or stops answering); every call here is a request over the link (dawn-link.ts: two FIFOs,
// webgpu-channel.ts's frames) answered synchronously, as the chain needs (it runs inside forward). Needs the
// source tree (the compiled binary has the Vulkan backend only).
// State per Wgpu: the link, the device's limits, the id counters, the injected-fault countdown.
import { resolve } from "node:path";
import type { Binding, Buf, BufKind, Cmd, Gpu, Pipeline } from "../backend.ts";
import { chunkLimit } from "../backend.ts";
import { DawnLink } from "./dawn-link.ts";
import { type DeviceInfo, DeviceType, isCpuDevice } from "../vulkan/probe.ts";
import { pushBytes, type Shader, SHADERS } from "../push.ts";
import type { Op, Reply, Req } from "./webgpu-channel.ts";
import { DeviceLost, VkError } from "../vulkan/vklib.ts";

class WBuf implements Buf {
  freed = false;
  constructor(readonly g: Wgpu, readonly id: number, readonly bytes: number, readonly chunk: number, readonly kind: BufKind) {}
  get nchunks(): number { return Math.ceil(this.bytes / this.chunk); }
  private range(off: number, n: number, what: string, word = true): void {
    if (this.freed) throw new VkError(`webgpu ${what}: buffer ${this.id} was freed`, -10001);
    if (!Number.isSafeInteger(off) || off < 0 || (word && off % 4)) throw new VkError(`webgpu ${what}: offset ${off}${word ? " (must be a multiple of 4)" : ""}`, -10001);
    if (off + n > this.bytes) throw new VkError(`webgpu ${what} [${off}, +${n}) past ${this.bytes} bytes`, -10005);
  }
  write(off: number, data: ArrayBufferView): void {
    const n = data.byteLength;
    this.range(off, n, "buffer write");
    if (n % 4 && off + n < this.bytes - 3) throw new VkError(`webgpu buffer write: ${n} bytes at ${off}: a partial last word only at the buffer's end`, -10001);
    if (n) this.g.post({ op: "write", id: this.id, off, n }, new Uint8Array(data.buffer, data.byteOffset, n));
  }
  read(off: number, out: ArrayBufferView): void { this.g.readMany([{ buf: this, off, out }]); }
  /** a read's wire item, checked */
  item(off: number, n: number): { id: number; off: number; n: number } {
    this.range(off, n, "buffer read", false);
    return { id: this.id, off, n };
  }
  free(): void {
    if (this.freed) return;
    this.freed = true;
    if (!this.g.closed && !this.g.lost) this.g.post({ op: "free", id: this.id });
  }
}

class WPipeline implements Pipeline {
  constructor(readonly id: number, readonly name: string, readonly nbind: number, readonly pushBytes: number) {}
}

class WCmd implements Cmd {
  private ops: Op[] | null = null;
  private gen = 0;
  private done = 0;
  constructor(readonly g: Wgpu, readonly id: number) {}
  private rec(what: string): Op[] {
    if (!this.ops) throw new VkError(`webgpu ${what}: command buffer ${this.id} is not recording`, -10008);
    return this.ops;
  }
  begin(): this {
    this.g.live();
    if (this.pending) this.wait();
    this.ops = [];
    return this;
  }
  dispatch(p: Pipeline, binds: Binding[], pc: Uint8Array, gx: number, gy = 1, gz = 1): this {
    const ops = this.rec("dispatch"), wp = p as WPipeline;
    if (binds.length !== wp.nbind) throw new VkError(`webgpu dispatch: pipeline ${wp.name} wants ${wp.nbind} bindings, got ${binds.length}`, -10001);
    if (pc.byteLength !== wp.pushBytes) throw new VkError(`webgpu dispatch: pipeline ${wp.name} takes ${wp.pushBytes} push bytes, got ${pc.byteLength}`, -10001);
    if (gx < 0 || gy < 0 || gz < 0) throw new VkError("webgpu dispatch: negative group count", -10001);
    const max = this.g.info.maxWG;
    if (gx > max[0] || gy > max[1] || gz > max[2]) throw new VkError(`webgpu dispatch (${gx}, ${gy}, ${gz}) exceeds maxComputeWorkGroupCount`, -10007);
    const words = Array.from(new Uint32Array(pc.buffer.slice(pc.byteOffset, pc.byteOffset + pc.byteLength)));
    ops.push({ t: "d", pipe: wp.id, binds: binds.map((b, i) => this.g.bind(wp, b, i)), pc: words, g: [gx, gy, gz] });
    this.g.stats.dispatches++;
    return this;
  }
  barrier(): this { this.rec("barrier"); return this; } // WebGPU orders every dispatch and copy of a submission
  copy(src: Buf, soff: number, dst: Buf, doff: number, n: number): this {
    const ops = this.rec("copy");
    if (src.freed || dst.freed || soff < 0 || doff < 0 || n < 0 || soff % 4 || doff % 4 || n % 4) throw new VkError("webgpu copy: bad arguments", -10001);
    if (soff + n > src.bytes || doff + n > dst.bytes) throw new VkError(`webgpu copy of ${n} bytes past a buffer end`, -10005);
    if (n > 0) ops.push({ t: "c", src: (src as WBuf).id, soff, dst: (dst as WBuf).id, doff, n });
    return this;
  }
  fill(b: Buf, off: number, n: number, value = 0): this {
    const ops = this.rec("fill");
    if (b.freed || off < 0 || n < 0 || off % 4 || n % 4) throw new VkError("webgpu fill: bad arguments", -10001);
    if (off + n > b.bytes) throw new VkError("webgpu fill past the buffer end", -10005);
    if (n > 0) ops.push({ t: "f", buf: (b as WBuf).id, off, n, value: value >>> 0 });
    return this;
  }
  submit(): this {
    const ops = this.rec("submit");
    this.ops = null;
    this.g.countSubmit();
    this.g.post({ op: "submit", cmd: this.id, gen: ++this.gen, ops });
    this.g.stats.submits++;
    return this;
  }
  wait(timeoutMs = -1): boolean {
    if (this.done >= this.gen) return true;
    const r = this.g.request({ op: "wait", cmd: this.id, gen: this.gen, timeoutMs: timeoutMs < 0 ? -1 : timeoutMs });
    if (r.status === 1) return false;
    this.done = this.gen;
    return true;
  }
  /** submitted and not yet waited for */
  get pending(): boolean { return this.done < this.gen; }
}

/** Writes, frees and submits are posted without waiting (their failure is the answer to the next request); command
 *  buffers record here and travel whole at submit; wait() asks the host for their completion, so the CPU works while
 *  the device runs, as with Vulkan. The shim's checks are repeated here, with its messages, so both backends fail
 *  alike. */
export class Wgpu implements Gpu {
  readonly api = "webgpu";
  readonly stats = { dispatches: 0, submits: 0, sets: 0 };
  closed = false;
  readonly info!: DeviceInfo;
  private ids = 0;
  private cmds = 0;
  private faultAt = 0;
  private faked = false;
  private sets = new Set<string>();
  private constructor(private readonly link: DawnLink) {}

  /** Start the Dawn host and open its adapter's device. Throws VkError when there is none. */
  static open(): Wgpu {
    const link = DawnLink.start();
    try {
      const g = new Wgpu(link);
      const d = JSON.parse(link.request({ op: "init", shaders: resolve(import.meta.dir, "..", "..", "..", "shaders") }).text);
      (g as { info: DeviceInfo }).info = {
        index: 0, name: d.name, type: d.fallback ? DeviceType.cpu : DeviceType.other, api: 0, vendor: 0, device: 0, driver: 0,
        computeQueue: 0, maxAlloc: d.maxAlloc, maxStorageRange: d.maxStorageRange, maxPush: 256, maxWG: d.maxWG,
        maxInvocations: d.maxInvocations, maxShared: d.maxShared, minStorageAlign: d.minStorageAlign, nonCoherentAtom: 4, heaps: [],
      };
      return g;
    } catch (e) {
      link.close();
      throw e;
    }
  }

  /** the Dawn host's process id, and the folder of its FIFOs and log */
  get hostPid(): number { return this.link.pid; }
  get linkDir(): string { return this.link.dir; }
  get lost(): boolean { return this.closed || this.faked || this.link.dead !== ""; }
  /** Dawn's fallback adapter (a CPU device such as lavapipe) */
  get isCpu(): boolean { return isCpuDevice(this.info); }
  get maxChunk(): number { return chunkLimit(this.info); }

  /** throw DeviceLost once the device is gone */
  live(): void {
    if (this.closed) throw new VkError("webgpu: the device is closed", -10001);
    if (this.lost) throw new DeviceLost(this.faked ? "webgpu: fault injected" : `webgpu: ${this.link.dead}`);
  }

  /** A request without a reply (write, free, submit): its failure is the answer to the next request. */
  post(r: Req, payload?: Uint8Array): void {
    this.live();
    this.link.post(r, payload);
  }

  /** One request and its reply, or a thrown VkError / DeviceLost. */
  request(r: Req, payload?: Uint8Array): Reply {
    this.live();
    return this.link.request(r, payload);
  }

  /** a binding as the wire carries it, checked as the shim checks a descriptor set */
  bind(p: WPipeline, b: Binding, i: number): [number, number, number] {
    const wb = b.buf as WBuf, off = b.off ?? 0, range = b.range ?? 0;
    if (wb.freed) throw new VkError(`pipeline ${p.name}: binding a freed buffer`, -10001);
    if (off < 0 || off >= wb.bytes) throw new VkError(`binding ${i}: buffer ${wb.id} / offset ${off}`, -10001);
    const ci = Math.floor(off / wb.chunk), lo = off - ci * wb.chunk, size = Math.min(wb.chunk, wb.bytes - ci * wb.chunk);
    if (lo + (range > 0 ? range : size - lo) > size) throw new VkError(`binding ${i}: [${off}, +${range}) crosses chunk ${ci} of buffer ${wb.id}`, -10005);
    if (lo % this.info.minStorageAlign) throw new VkError(`binding ${i}: offset ${lo} not aligned to ${this.info.minStorageAlign}`, -10006);
    const key = `${p.id}|${wb.id}@${off}+${range}`;
    if (!this.sets.has(key)) { this.sets.add(key); this.stats.sets++; }
    return [wb.id, off, range];
  }

  countSubmit(): void {
    this.live();
    if (this.faultAt > 0 && --this.faultAt === 0) {
      this.faked = true;
      throw new DeviceLost("webgpu submit: fault injected");
    }
  }

  fault(n: number): void { this.live(); this.faultAt = Math.max(0, n); }

  buffer(bytes: number, kind: BufKind = "device", chunk = 0): Buf {
    if (!Number.isSafeInteger(bytes) || bytes < 0) throw new VkError(`buffer size ${bytes}`, -10001);
    const size = Math.max(4, Math.ceil(bytes / 4) * 4);
    const ch = Math.min(chunk > 0 ? chunk : size, this.maxChunk, size);
    if (ch % 4 !== 0) throw new VkError(`chunk ${ch} is not a multiple of 4`, -10001);
    const id = ++this.ids;
    this.request({ op: "buf", id, bytes: size, chunk: ch });
    return new WBuf(this, id, size, ch, kind);
  }

  readMany(list: { buf: Buf; off?: number; out: ArrayBufferView }[]): void {
    const items = list.map((r) => (r.buf as WBuf).item(r.off ?? 0, r.out.byteLength)).filter((x) => x.n > 0);
    if (items.length === 0) return;
    const back = this.request({ op: "read", items }).payload;
    const want = items.reduce((t, x) => t + x.n, 0);
    if (back.byteLength !== want) throw new VkError(`webgpu buffer read: ${back.byteLength} bytes back, asked ${want}`, -10001);
    let o = 0;
    for (const r of list) {
      const n = r.out.byteLength;
      new Uint8Array(r.out.buffer, r.out.byteOffset, n).set(back.subarray(o, o + n));
      o += n;
    }
  }

  cmd(): Cmd {
    this.live();
    return new WCmd(this, ++this.cmds);
  }

  pipeline(s: Shader, defs: Record<string, number> = {}): Pipeline {
    const id = ++this.ids, nbind = SHADERS[s].bind;
    this.request({ op: "pipe", id, shader: s, nbind, writes: [...SHADERS[s].writes], defs });
    return new WPipeline(id, `${s}${JSON.stringify(defs)}`, nbind, pushBytes(s));
  }

  /** Free everything and stop the host. Idempotent. */
  close(): void {
    if (this.closed) return;
    try { if (!this.lost) this.request({ op: "close" }); } catch { /* the host went away meanwhile */ }
    this.closed = true;
    this.link.close();
  }
}
