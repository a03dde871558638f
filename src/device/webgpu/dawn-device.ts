// The Dawn host's device work (dawn-host.ts answers the requests, this does them): buffers as one GPUBuffer per
// chunk, pipelines from shaders/<name>.wgsl with explicit layouts (read-only storage for the bindings a shader does
// not write, the push block as a dynamic-offset uniform), command lists replayed as passes, copies and fills, reads
// through one mapped staging buffer; a written binding overlapping another in one dispatch (which WebGPU refuses,
// Vulkan allows and the chain does) gets a snapshot copy (aliased()). State: the device, the buffers, pipelines, bind
// groups by (pipeline, bindings), per command buffer a push-block uniform, snapshots and last submission's completion.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Op } from "./webgpu-channel.ts";

interface WBuf { bytes: number; chunk: number; chunks: GPUBuffer[]; keys: string[] }
interface WPipe { pipeline: GPUComputePipeline; bgl: GPUBindGroupLayout; writes: number[] }
interface WCmd {
  ubuf: GPUBuffer | null; ubg: GPUBindGroup | null; usize: number; done: number; work: Promise<void>;
  scratch: GPUBuffer[]; // snapshots of aliased bindings (see aliased())
}
/** bytes bound for one push block (the longest, attn's, is 92) */
const PUSH_SLOT = 128;
let shaderDir = "";
const FILL_WGSL = `struct F { off: u32, n: u32, v: u32 }
@group(0) @binding(0) var<storage, read_write> b: array<u32>;
@group(1) @binding(0) var<uniform> f: F;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x + g.y * 4194240u; // 65535 groups · 64
  if (i < f.n) { b[f.off + i] = f.v; }
}`;

let device: GPUDevice;
let G: typeof globalThis & { GPUBufferUsage: Record<string, number>; GPUMapMode: Record<string, number>; GPUShaderStage: Record<string, number> };
const bufs = new Map<number, WBuf>();
const pipes = new Map<number, WPipe>();
const groups = new Map<string, GPUBindGroup>();
const cmds = new Map<number, WCmd>();
const modules = new Map<string, GPUShaderModule>();
let pushLayout: GPUBindGroupLayout, fillPipe: WPipe, uAlign = 256;

export class Fail extends Error { constructor(msg: string, readonly code: number) { super(msg); } }

/** Run `f` inside validation and out-of-memory error scopes; the first error becomes a Fail. */
export async function scoped<T>(what: string, f: () => T | Promise<T>): Promise<T> {
  device.pushErrorScope("out-of-memory");
  device.pushErrorScope("validation");
  let v: T, thrown: unknown = null;
  try { v = await f(); } catch (e) { thrown = e; }
  const val = await device.popErrorScope(), oom = await device.popErrorScope();
  if (thrown) throw thrown;
  if (oom) throw new Fail(`${what}: out of device memory (${oom.message})`, -2);
  if (val) throw new Fail(`${what}: ${val.message}`, -10001);
  return v!;
}

const buf = (id: number): WBuf => {
  const b = bufs.get(id);
  if (!b) throw new Fail(`buffer ${id} does not exist (freed?)`, -10001);
  return b;
};

/** [chunk index, offset inside it, length] pieces of the byte range [off, off + n) */
function pieces(b: WBuf, off: number, n: number): [number, number, number][] {
  const out: [number, number, number][] = [];
  for (let p = off; p < off + n;) {
    const ci = Math.floor(p / b.chunk), lo = p - ci * b.chunk, len = Math.min(b.chunk - lo, off + n - p);
    out.push([ci, lo, len]);
    p += len;
  }
  return out;
}

async function makePipe(module: GPUShaderModule, name: string, nbind: number, writes: number[], defs: Record<string, number>): Promise<WPipe> {
  const bgl = device.createBindGroupLayout({
    entries: Array.from({ length: nbind }, (_, i) => ({
      binding: i, visibility: G.GPUShaderStage.COMPUTE, buffer: { type: writes.includes(i) ? "storage" as const : "read-only-storage" as const },
    })),
  });
  const layout = device.createPipelineLayout({ bindGroupLayouts: [bgl, pushLayout] });
  try {
    const pipeline = await device.createComputePipelineAsync({ layout, compute: { module, entryPoint: "main", constants: defs } });
    return { pipeline, bgl, writes };
  } catch (e) {
    throw new Fail(`pipeline ${name}${JSON.stringify(defs)}: ${e instanceof Error ? e.message : String(e)}`, -10001);
  }
}

export async function pipe(id: number, shader: string, nbind: number, writes: number[], defs: Record<string, number>): Promise<void> {
  let module = modules.get(shader);
  if (!module) {
    let code: string;
    try { code = readFileSync(join(shaderDir, `${shader}.wgsl`), "utf8"); } catch (e) { throw new Fail(`shaders/${shader}.wgsl: ${String(e)}`, -10001); }
    module = device.createShaderModule({ code });
    const errs = (await module.getCompilationInfo()).messages.filter((m) => m.type === "error");
    if (errs.length) throw new Fail(`shaders/${shader}.wgsl: ${errs.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join("; ")}`, -10001);
    modules.set(shader, module);
  }
  pipes.set(id, await makePipe(module, shader, nbind, writes, defs));
}

/** a binding's GPUBuffer, offset and size */
function resolve([id, off, range]: [number, number, number]): { buffer: GPUBuffer; offset: number; size: number } {
  const b = buf(id), ci = Math.floor(off / b.chunk), lo = off - ci * b.chunk;
  return { buffer: b.chunks[ci], offset: lo, size: range > 0 ? range : b.chunks[ci].size - lo };
}

/**
 * The bindings of a dispatch that WebGPU refuses together: a written range overlapping another binding
 * (Vulkan allows it; the engine binds whole buffers, in place, and one dummy buffer for unused slots). Each
 * returned binding gets a snapshot copy taken just before the dispatch: a read-only one whenever it meets a
 * written one, else the later of two written ones — only when that is the kernels' 16-byte dummy (an unused
 * output, whose writes are dropped); two real outputs overlapping cannot run here and fail, naming them.
 */
function aliased(p: WPipe, r: { buffer: GPUBuffer; offset: number; size: number }[]): number[] {
  const out: number[] = [];
  for (let j = 0; j < r.length; j++)
    for (let i = 0; i < j; i++) {
      if (out.includes(i) || out.includes(j) || r[i].buffer !== r[j].buffer) continue;
      if (r[i].offset >= r[j].offset + r[j].size || r[j].offset >= r[i].offset + r[i].size) continue;
      const wi = p.writes.includes(i), wj = p.writes.includes(j);
      if (wi && wj && r[j].size > 16) throw new Fail(`bindings ${i} and ${j} are both written and overlap: WebGPU cannot run this dispatch`, -10001);
      if (wi || wj) out.push(wi && !wj ? j : !wi && wj ? i : j);
    }
  return out;
}

function bindGroup(pid: number, p: WPipe, binds: [number, number, number][]): GPUBindGroup {
  const key = `${pid}|${binds.map((b) => b.join(":")).join(",")}`;
  let g = groups.get(key);
  if (g) return g;
  g = device.createBindGroup({ layout: p.bgl, entries: binds.map((b, i) => ({ binding: i, resource: resolve(b) })) });
  groups.set(key, g);
  for (const [id] of binds) buf(id).keys.push(key);
  return g;
}

/** The push blocks of one submission, each in its own aligned slot of the command buffer's uniform buffer. */
function uniforms(cid: number, ops: Op[]): WCmd {
  let c = cmds.get(cid);
  if (!c) cmds.set(cid, (c = { ubuf: null, ubg: null, usize: 0, done: 0, work: Promise.resolve(), scratch: [] }));
  let n = 0;
  for (const o of ops) n += o.t === "d" ? 1 : o.t === "f" && o.value !== 0 ? pieces(buf(o.buf), o.off, o.n).length : 0;
  const need = Math.max(1, n) * uAlign;
  if (c.usize < need) {
    c.ubuf?.destroy();
    c.usize = Math.max(need, 2 * c.usize);
    c.ubuf = device.createBuffer({ size: c.usize, usage: G.GPUBufferUsage.UNIFORM | G.GPUBufferUsage.COPY_DST });
    c.ubg = device.createBindGroup({ layout: pushLayout, entries: [{ binding: 0, resource: { buffer: c.ubuf, size: PUSH_SLOT } }] });
  }
  return c;
}

export function submit(cid: number, gen: number, ops: Op[]): void {
  const c = uniforms(cid, ops);
  const data = new Uint8Array(c.usize);
  const enc = device.createCommandEncoder();
  let pass: GPUComputePassEncoder | null = null, slot = 0, nscratch = 0;
  const compute = () => (pass ??= enc.beginComputePass());
  const endPass = () => { pass?.end(); pass = null; };
  for (const o of ops) {
    if (o.t === "d") {
      const p = pipes.get(o.pipe)!, r = o.binds.map(resolve), snap = aliased(p, r);
      new Uint32Array(data.buffer, slot * uAlign, o.pc.length).set(o.pc);
      let group: GPUBindGroup;
      if (snap.length === 0) group = bindGroup(o.pipe, p, o.binds);
      else {
        endPass();
        for (const i of snap) {
          const k = nscratch++;
          if (!c.scratch[k] || c.scratch[k].size < r[i].size) {
            c.scratch[k]?.destroy();
            c.scratch[k] = device.createBuffer({ size: r[i].size, usage: G.GPUBufferUsage.STORAGE | G.GPUBufferUsage.COPY_SRC | G.GPUBufferUsage.COPY_DST });
          }
          enc.copyBufferToBuffer(r[i].buffer, r[i].offset, c.scratch[k], 0, r[i].size);
          r[i] = { buffer: c.scratch[k], offset: 0, size: r[i].size };
        }
        group = device.createBindGroup({ layout: p.bgl, entries: r.map((x, i) => ({ binding: i, resource: x })) });
      }
      const cp = compute();
      cp.setPipeline(p.pipeline);
      cp.setBindGroup(0, group);
      cp.setBindGroup(1, c.ubg!, [slot++ * uAlign]);
      cp.dispatchWorkgroups(o.g[0], o.g[1], o.g[2]);
    } else if (o.t === "c") {
      endPass();
      const s = buf(o.src), d = buf(o.dst);
      for (let done = 0; done < o.n;) { // pieces inside one chunk of both buffers
        const sp = o.soff + done, dp = o.doff + done;
        const si = Math.floor(sp / s.chunk), di = Math.floor(dp / d.chunk);
        const len = Math.min(o.n - done, (si + 1) * s.chunk - sp, (di + 1) * d.chunk - dp);
        enc.copyBufferToBuffer(s.chunks[si], sp - si * s.chunk, d.chunks[di], dp - di * d.chunk, len);
        done += len;
      }
    } else {
      const b = buf(o.buf);
      for (const [ci, lo, len] of pieces(b, o.off, o.n)) {
        if (o.value === 0) { endPass(); enc.clearBuffer(b.chunks[ci], lo, len); continue; }
        new Uint32Array(data.buffer, slot * uAlign, 3).set([lo / 4, len / 4, o.value >>> 0]); // struct F { off, n, v }
        const cp = compute(), groupsX = Math.ceil(len / 4 / 64);
        cp.setPipeline(fillPipe.pipeline);
        cp.setBindGroup(0, device.createBindGroup({ layout: fillPipe.bgl, entries: [{ binding: 0, resource: { buffer: b.chunks[ci] } }] }));
        cp.setBindGroup(1, c.ubg!, [slot++ * uAlign]);
        cp.dispatchWorkgroups(Math.min(groupsX, 65535), Math.ceil(groupsX / 65535));
      }
    }
  }
  endPass();
  if (slot > 0) device.queue.writeBuffer(c.ubuf!, 0, data, 0, slot * uAlign);
  device.queue.submit([enc.finish()]);
  c.work = device.queue.onSubmittedWorkDone().then(() => { c.done = Math.max(c.done, gen); });
}

/** wait for a command buffer's submission `gen`: 0 done, 1 timed out (timeoutMs < 0: no limit) */
export async function wait(cid: number, gen: number, timeoutMs: number): Promise<number> {
  const c = cmds.get(cid);
  if (!c || c.done >= gen) return 0;
  if (timeoutMs < 0) { await c.work; return 0; }
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<number>((r) => { timer = setTimeout(() => r(1), timeoutMs); });
  const r = await Promise.race([c.work.then(() => 0), late]);
  clearTimeout(timer);
  return r;
}

/** byte ranges of buffers, copied into one staging buffer (whole words each) and mapped once: their bytes in order */
export async function read(items: { id: number; off: number; n: number }[]): Promise<Uint8Array> {
  const spans = items.map(({ id, off, n }) => ({ b: buf(id), off, n, lo: off & ~3, size: Math.ceil((off + n - (off & ~3)) / 4) * 4, at: 0 }));
  let total = 0;
  for (const s of spans) { s.at = total; total += s.size; }
  const st = device.createBuffer({ size: Math.max(4, total), usage: G.GPUBufferUsage.MAP_READ | G.GPUBufferUsage.COPY_DST });
  try {
    const enc = device.createCommandEncoder();
    for (const s of spans)
      for (const [ci, clo, len] of pieces(s.b, s.lo, s.size)) enc.copyBufferToBuffer(s.b.chunks[ci], clo, st, s.at + ci * s.b.chunk + clo - s.lo, len);
    device.queue.submit([enc.finish()]);
    await st.mapAsync(G.GPUMapMode.READ);
    const mapped = new Uint8Array(st.getMappedRange()), out = new Uint8Array(items.reduce((t, x) => t + x.n, 0));
    let o = 0;
    for (const s of spans) { out.set(mapped.subarray(s.at + s.off - s.lo, s.at + s.off - s.lo + s.n), o); o += s.n; }
    return out;
  } finally {
    st.destroy();
  }
}

export function write(id: number, off: number, src: Uint8Array): void {
  const b = buf(id), bytes = new Uint8Array(Math.ceil(src.byteLength / 4) * 4); // whole words; a short tail ends the buffer (checked by the caller)
  bytes.set(src);
  for (const [ci, lo, len] of pieces(b, off, bytes.byteLength)) device.queue.writeBuffer(b.chunks[ci], lo, bytes, ci * b.chunk + lo - off, len);
}

export function free(id: number): void {
  const b = bufs.get(id);
  if (!b) return;
  for (const k of b.keys) groups.delete(k);
  for (const c of b.chunks) c.destroy();
  bufs.delete(id);
}

/** Take the device: the push blocks' layout, the fill pipeline, the WGSL folder. */
export async function setup(d: GPUDevice, shaders: string): Promise<void> {
  device = d;
  G = globalThis as typeof G;
  shaderDir = shaders;
  uAlign = Math.max(256, d.limits.minUniformBufferOffsetAlignment);
  pushLayout = device.createBindGroupLayout({ entries: [{ binding: 0, visibility: G.GPUShaderStage.COMPUTE, buffer: { type: "uniform", hasDynamicOffset: true } }] });
  fillPipe = await makePipe(device.createShaderModule({ code: FILL_WGSL }), "fill", 1, [0], {});
}

/** buffer `id`: `bytes` in chunks of `chunk` */
export async function newBuffer(id: number, bytes: number, chunk: number): Promise<void> {
  const chunks: GPUBuffer[] = [];
  await scoped(`buffer(${bytes} bytes)`, () => {
    for (let p = 0; p < bytes; p += chunk)
      chunks.push(device.createBuffer({ size: Math.min(chunk, bytes - p), usage: G.GPUBufferUsage.STORAGE | G.GPUBufferUsage.COPY_SRC | G.GPUBufferUsage.COPY_DST }));
  }).catch((e) => { for (const c of chunks) c.destroy(); throw e; });
  bufs.set(id, { bytes, chunk, chunks, keys: [] });
}

/** every buffer freed, the device destroyed */
export function closeAll(): void {
  for (const id of [...bufs.keys()]) free(id);
  device.destroy();
}
