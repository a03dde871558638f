// Both backends (src/device/backend.ts) through the same calls: the Vulkan shim (src/device/vulkan/vk.ts) and Dawn (src/device/webgpu/webgpu.ts):
// device discovery (Vulkan), buffers (mapped, staged, split over chunks), copies and fills across chunk
// boundaries, dispatch limits, bad arguments as errors (never a crash), and device loss (injected) turning
// every later call into DeviceLost. Each backend's suite skips, saying why, without its device.
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { APIS } from "../src/device/backend.ts";
import { DeviceLost, pickDevice, probe, push, Vk, VkError } from "../src/device/vulkan/vk.ts";
import { Wgpu } from "../src/device/webgpu/webgpu.ts";
import { pushOf } from "../src/device/push.ts";
import { rand, testDevice } from "./helpers/device.ts";
import type { Buf } from "../src/device/backend.ts";

const readBack = (b: Buf, n: number) => { const o = new Int32Array(n); b.read(0, o); return o.buffer; };

describe.skipIf(!testDevice("vulkan"))("vulkan discovery", () => {
  const vk = testDevice("vulkan");
  test("device discovery: a named device with a compute queue; choice policy", () => {
    const p = probe();
    expect(p.ok).toBe(true);
    if (!p.ok) return;
    expect(vk!.info.name.length).toBeGreaterThan(0);
    expect(vk!.info.maxStorageRange).toBeGreaterThan(0);
    const fake = (index: number, type: number) => ({ ...p.devices[0], index, type, name: `dev${index}` });
    expect(pickDevice([fake(0, 4), fake(1, 1), fake(2, 2)], "")?.index).toBe(2); // discrete first, CPU last
    expect(pickDevice([fake(0, 4), fake(1, 1)], "")?.index).toBe(1);
    expect(pickDevice([fake(0, 4), fake(1, 1)], "DEV0")?.index).toBe(0);
    expect(pickDevice([fake(0, 4)], 3)).toBeNull();
  });
});

for (const api of APIS) describe.skipIf(!testDevice(api))(`${api} backend`, () => {
  const vk = testDevice(api);

  test("buffers: mapped, staged (never-mapped, > the 8 MiB staging buffer) and chunked round trips", () => {
    const a = rand(2_400_000, 1); // 9.6 MB
    for (const [kind, chunk] of [["device", 0], ["host", 0], ["device-nomap", 0], ["device", 1 << 20], ["device-nomap", 3 << 20]] as const) {
      const b = vk!.buffer(a.byteLength, kind, chunk);
      b.write(0, a);
      const out = new Float32Array(a.length);
      b.read(0, out);
      expect({ kind, chunk, same: out.every((v, i) => v === a[i]) }).toEqual({ kind, chunk, same: true });
      b.free();
    }
  });

  test("copy and fill across chunk boundaries of both buffers", () => {
    const n = 5000, a = Float32Array.from({ length: n }, (_, i) => i);
    const src = vk!.buffer(4 * n, "device", 4096), dst = vk!.buffer(4 * n, "device-nomap", 3000 * 4);
    src.write(0, a);
    const c = vk!.cmd();
    c.begin().fill(dst, 0, 4 * n, 0x3f800000).barrier().copy(src, 4 * 1000, dst, 4 * 10, 4 * 3500).submit();
    expect(c.wait()).toBe(true);
    const out = new Float32Array(n);
    dst.read(0, out);
    const want = Float32Array.from({ length: n }, (_, i) => (i >= 10 && i < 3510 ? i + 990 : 1));
    expect(out).toEqual(want);
  });

  test("bad arguments come back as VkError, never a crash", () => {
    const b = vk!.buffer(64);
    expect(() => b.write(60, new Float32Array(4))).toThrow(VkError);
    expect(() => b.read(-4, new Float32Array(1))).toThrow(VkError);
    const p = vk!.pipeline("add");
    const pc = pushOf("add", { n: 1, yOff: 0, xOff: 0 });
    const c = vk!.cmd();
    expect(() => c.dispatch(p, [{ buf: b }, { buf: b }], pc, 1)).toThrow(/not recording|command state/);
    c.begin();
    expect(() => c.dispatch(p, [{ buf: b }], pc, 1)).toThrow(/bindings/);
    expect(() => c.dispatch(p, [{ buf: b }, { buf: b }], push([["i", 1]]), 1)).toThrow(/push bytes/);
    expect(() => c.dispatch(p, [{ buf: b }, { buf: b }], pc, vk!.info.maxWG[0] + 1)).toThrow(/maxComputeWorkGroupCount/);
    const chunked = vk!.buffer(4096, "device", 1024);
    expect(() => c.dispatch(p, [{ buf: b }, { buf: chunked, off: 512, range: 1024 }], pc, 1)).toThrow(/crosses chunk/);
    c.submit();
    c.wait();
    b.free();
    expect(() => c.begin().dispatch(p, [{ buf: b }, { buf: b }], pc, 1)).toThrow(/freed/);
    c.submit();
    c.wait();
  });

  if (api === "webgpu") test("a posted request (write, free, submit: no reply) that fails is the answer to the next request", () => {
    const g = vk as Wgpu;
    g.post({ op: "write", id: 1e6, off: 0, n: 4 }, new Uint8Array(4));
    expect(() => g.request({ op: "wait", cmd: 1e6, gen: 0, timeoutMs: -1 })).toThrow(/an earlier write: buffer 1000000 does not exist/);
    expect(g.request({ op: "wait", cmd: 1e6, gen: 0, timeoutMs: -1 }).status).toBe(0); // reported once
    expect(() => g.request({ op: "free", id: 1 })).toThrow(/posted/);
  });

  if (api === "webgpu") test("bindings WebGPU refuses together: a read one meeting a written one is snapshotted, two written ones only as the dummy", () => {
    const p = vk!.pipeline("dsa_select"), pc = pushOf("dsa_select", { s0: 0, scOff: 0, scRow: 4, topk: 2 }), c = vk!.cmd();
    const sc = vk!.buffer(64), big = vk!.buffer(64), dummy = vk!.buffer(16);
    big.write(0, Int32Array.from({ length: 16 }, () => 3)); // nk[0] = 3 > topk: the radix select runs over sc[0..3)
    sc.write(0, Float32Array.from([1, 5, 2, 0]));
    c.begin().dispatch(p, [{ buf: sc }, { buf: big }, { buf: big }, { buf: dummy }], pc, 1).submit(); // nk read, sel written: one buffer
    expect(c.wait()).toBe(true);
    expect(Array.from(new Int32Array(readBack(big, 3)))).toEqual([1, 2, 3]); // sel = the two largest, ascending; nk was read before
    c.begin().dispatch(p, [{ buf: sc }, { buf: dummy }, { buf: big }, { buf: big }], pc, 1).submit();
    expect(() => c.wait()).toThrow(/bindings 2 and 3 are both written and overlap/);
  });

  if (api === "webgpu") for (const end of ["exit", "SIGKILL"])
    test(`a process that ends (${end}) without closing leaves no Dawn host and no temporary folder`, () => {
      const code = `import { Wgpu } from ${JSON.stringify(`${import.meta.dir}/../src/device/webgpu/webgpu.ts`)};
        const g = Wgpu.open(); g.buffer(16); console.log(JSON.stringify({ pid: g.hostPid, dir: g.linkDir }));
        ${end === "SIGKILL" ? "process.kill(process.pid, 'SIGKILL');" : ""}`;
      const r = Bun.spawnSync({ cmd: [process.execPath, "-e", code], stdout: "pipe", stderr: "pipe", timeout: 60_000 });
      expect(r.exitCode === 0 || r.signalCode === "SIGKILL").toBe(true);
      const { pid, dir } = JSON.parse(r.stdout.toString());
      const running = () => { // a zombie (exited, not yet reaped by whoever adopted it) counts as gone
        try { const st = readFileSync(`/proc/${pid}/stat`, "utf8"); return st[st.lastIndexOf(")") + 2] !== "Z"; } catch { return false; }
      };
      for (let i = 0; i < 100 && (running() || existsSync(dir)); i++) Bun.sleepSync(20);
      expect({ running: running(), dir: existsSync(dir) }).toEqual({ running: false, dir: false });
    });

  if (api === "webgpu") test("the Dawn host killed: DeviceLost naming it, then every call refuses", () => {
    const d = Wgpu.open();
    try {
      const b = d.buffer(64), c = d.cmd();
      c.begin().fill(b, 0, 64, 3).submit();
      expect(c.wait()).toBe(true);
      process.kill(d.hostPid, "SIGKILL");
      expect(() => b.read(0, new Uint32Array(16))).toThrow(/Dawn host exited/);
      expect(d.lost).toBe(true);
      expect(() => d.buffer(16)).toThrow(DeviceLost);
    } finally {
      d.close();
    }
  });

  test("device loss (injected at the 2nd submit): DeviceLost, then every call refuses", () => {
    const d = api === "vulkan" ? Vk.open(vk!.info.index) : Wgpu.open();
    try {
      const b = d.buffer(16), c = d.cmd();
      d.fault(2);
      c.begin().fill(b, 0, 16, 7).submit();
      expect(c.wait()).toBe(true);
      expect(() => c.begin().fill(b, 0, 16, 8).submit()).toThrow(DeviceLost);
      expect(d.lost).toBe(true);
      expect(() => d.buffer(16)).toThrow(DeviceLost);
      expect(() => b.read(0, new Uint32Array(4))).toThrow(DeviceLost);
    } finally {
      d.close();
    }
  });
});
