// The Dawn side of the WebGPU backend (webgpu.ts), run as a child process (Bun) so that a crash in Dawn or the
// driver is a lost device, not a dead server. It answers the requests of the channel (webgpu-channel.ts) in order,
// reading them from the FIFO `req` and writing each reply to the FIFO `rep` of the directory it is given;
// dawn-device.ts does the work. Errors of a request (validation, out of memory) are caught with error scopes and
// answered as that request's failure (a posted request's as the next answer); after a device loss every one fails.
// State: the instance and adapter, the device's loss, the posted requests' pending checks, the frame reader.
import { openSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { decodeReq, encodeReply, type Req } from "./webgpu-channel.ts";
import { closeAll, Fail, free, newBuffer, pipe, read, scoped, setup, submit, wait, write } from "./dawn-device.ts";

interface Answer { status: number; text?: string; payload?: Uint8Array }

/** The GPU instance and the adapter stay referenced for the process's life: Dawn's addon (the npm `webgpu` package,
 *  0.6.2) crashes at the garbage collection that frees them while their device lives (checked with Bun.gc(true)). */
let instance: GPU, adapter: GPUAdapter, device: GPUDevice;
let lost = "";

async function init(msg: Extract<Req, { op: "init" }>): Promise<Answer> {
  let mod: { create: (flags: string[]) => GPU; globals: object };
  try {
    mod = await import("webgpu");
  } catch (e) {
    return { status: -10002, text: `the npm package webgpu (Dawn) cannot be loaded: ${e instanceof Error ? e.message : String(e)}` };
  }
  Object.assign(globalThis, mod.globals);
  instance = mod.create([]);
  const a = await instance.requestAdapter({ powerPreference: "high-performance" });
  if (!a) return { status: -10003, text: "no WebGPU adapter" };
  adapter = a;
  const L = adapter.limits;
  if (L.maxStorageBuffersPerShaderStage < 9) return { status: -10003, text: `the adapter binds ${L.maxStorageBuffersPerShaderStage} storage buffers per stage; the attention shader needs 9` };
  device = await adapter.requestDevice({
    requiredLimits: {
      maxStorageBuffersPerShaderStage: Math.min(16, L.maxStorageBuffersPerShaderStage), maxBufferSize: L.maxBufferSize,
      maxStorageBufferBindingSize: L.maxStorageBufferBindingSize, maxComputeWorkgroupStorageSize: L.maxComputeWorkgroupStorageSize,
    },
  });
  device.lost.then((i) => { if (i.reason !== "destroyed") lost = i.message || "device lost"; });
  await setup(device, msg.shaders);
  const d = device.limits;
  const info = adapter.info;
  return {
    status: 0, text: JSON.stringify({
      name: [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(" ") || "WebGPU adapter",
      fallback: info.isFallbackAdapter, maxAlloc: d.maxBufferSize, maxStorageRange: d.maxStorageBufferBindingSize,
      maxWG: [d.maxComputeWorkgroupsPerDimension, d.maxComputeWorkgroupsPerDimension, d.maxComputeWorkgroupsPerDimension],
      maxInvocations: d.maxComputeInvocationsPerWorkgroup, maxShared: d.maxComputeWorkgroupStorageSize, minStorageAlign: d.minStorageBufferOffsetAlignment,
    }),
  };
}

async function handle(m: Req, payload: Uint8Array): Promise<Answer> {
  if (m.op === "init") return init(m);
  if (lost) return { status: -4, text: lost };
  switch (m.op) {
    case "buf": await newBuffer(m.id, m.bytes, m.chunk); return { status: 0 };
    case "free": case "write": case "submit": throw new Fail(`${m.op} is posted, not asked`, -10001);
    case "read": return { status: 0, payload: await scoped("buffer read", () => read(m.items)) };
    case "pipe": await pipe(m.id, m.shader, m.nbind, m.writes, m.defs); return { status: 0 };
    case "wait": return { status: await wait(m.cmd, m.gen, m.timeoutMs) };
    case "close": closeAll(); return { status: 0 };
  }
}

/** The posted requests (write, free, submit: no reply) run inside error scopes that are checked later: their
 *  first failure is the answer to the next request that has one (wait awaits them all first). */
const checks: Promise<void>[] = [];
let deferred: { status: number; text: string } | null = null;
const later = (status: number, text: string) => { deferred ??= { status, text }; };

function posted(m: Req, payload: Uint8Array): void {
  if (lost) return;
  device.pushErrorScope("out-of-memory");
  device.pushErrorScope("validation");
  try {
    if (m.op === "write") write(m.id, m.off, payload);
    else if (m.op === "free") free(m.id);
    else if (m.op === "submit") submit(m.cmd, m.gen, m.ops);
  } catch (e) {
    later(e instanceof Fail ? e.code : -10001, `${m.op}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const val = device.popErrorScope(), oom = device.popErrorScope();
  checks.push(Promise.all([val, oom]).then(([v, o]) => {
    if (o) later(-2, `${m.op}: out of device memory (${o.message})`);
    else if (v) later(-10001, `${m.op}: ${v.message}`);
  }));
}

async function answer(m: Req, payload: Uint8Array): Promise<Uint8Array> {
  await Promise.all(checks.splice(0));
  if (deferred) {
    const d = deferred;
    deferred = null;
    return encodeReply(lost ? -4 : d.status, `an earlier ${d.text}`);
  }
  try {
    const a = await handle(m, payload);
    return encodeReply(lost && a.status === 0 ? -4 : a.status, a.text ?? lost, a.payload);
  } catch (err) {
    if (err instanceof Fail) return encodeReply(err.code, err.message);
    return encodeReply(-10001, err instanceof Error ? err.message : String(err));
  }
}

// the FIFOs: replies written synchronously, requests parsed from the stream and answered one at a time
const dir = process.argv[2];
const rep = openSync(join(dir, "rep"), "w");
const leave = () => { rmSync(dir, { recursive: true, force: true }); process.exit(0); };
process.on("SIGTERM", leave); // the engine stopping (its exit takes its children down)
let parts: Uint8Array[] = [], have = 0, need = -1, queue = Promise.resolve();
const concat = (l: Uint8Array[]) => (l.length === 1 ? l[0] : Buffer.concat(l));
(async () => {
  // Bun.file's stream reads the FIFO with a third of createReadStream's latency (28 vs 82 us an echo)
  for await (const chunk of Bun.file(join(dir, "req")).stream()) { // whole frames out of the byte stream; a frame is copied once
    parts.push(chunk);
    have += chunk.byteLength;
    for (;;) {
      if (need < 0) {
        if (have < 4) break;
        if (parts[0].byteLength < 4) parts = [concat(parts)];
        need = 4 + new DataView(parts[0].buffer, parts[0].byteOffset).getUint32(0, true);
      }
      if (have < need) break;
      const all = concat(parts);
      const { req, payload } = decodeReq(all.subarray(4, need));
      queue = queue.then(async () => {
        if (req.op === "write" || req.op === "free" || req.op === "submit") return posted(req, payload);
        const f = await answer(req, payload);
        for (let w = 0; w < f.byteLength;) w += writeSync(rep, f, w);
        if (req.op === "close") process.exit(0);
      });
      parts = all.byteLength > need ? [all.subarray(need)] : [];
      have -= need;
      need = -1;
    }
  }
  await queue;
  leave(); // the engine closed its end, or died: the folder goes too
})().catch((e) => {
  console.error(`[dawn-host] ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
