// Test support for the GPU suites: one shared device per backend per test process (or the reason there is
// none), seeded random data and small upload/run helpers. State: the opened devices (closed at process exit).
import type { Api, Buf, Cmd, Gpu } from "../../src/device/backend.ts";
import { shadersMissing } from "../../src/device/vulkan/shaders.ts";
import { probe, Vk } from "../../src/device/vulkan/vk.ts";
import { Wgpu } from "../../src/device/webgpu/webgpu.ts";

const opened = new Map<Api, Gpu | null>();
const why = new Map<Api, string>();

/** The test device of `api`, or null (with `skipReason(api)`, said once on stderr) when it cannot be had:
 *  Vulkan or the shaders (glslc or prebuilt SPIR-V) missing; for WebGPU, Dawn or an adapter missing. */
export function testDevice(api: Api = "vulkan"): Gpu | null {
  if (opened.has(api)) return opened.get(api)!;
  let g: Gpu | null = null;
  try {
    if (api === "vulkan") {
      const p = probe(), s = shadersMissing();
      if (!p.ok || s) throw new Error(!p.ok ? p.reason : s!);
      g = Vk.open();
    } else g = Wgpu.open();
  } catch (e) {
    why.set(api, e instanceof Error ? e.message : String(e));
    console.warn(`[skip] ${api} GPU suites: ${why.get(api)}`);
  }
  opened.set(api, g);
  if (g) process.on("exit", () => g.close());
  return g;
}
export const skipReason = (api: Api = "vulkan") => why.get(api) ?? "";

/** Deterministic uniform(-1, 1) data. */
export function rand(n: number, seed: number, scale = 1): Float32Array {
  let s = seed >>> 0 || 1;
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    a[i] = ((s / 4294967296) * 2 - 1) * scale;
  }
  return a;
}

export function upload(vk: Gpu, a: Float32Array | Int32Array | Uint16Array | Uint8Array): Buf {
  const b = vk.buffer(Math.max(4, a.byteLength));
  b.write(0, a);
  return b;
}
export function download(b: Buf, n: number): Float32Array {
  const out = new Float32Array(n);
  b.read(0, out);
  return out;
}
export function downloadI(b: Buf, n: number): Int32Array {
  const out = new Int32Array(n);
  b.read(0, out);
  return out;
}

/** Record with `f`, submit and wait. */
export function runFrame(vk: Gpu, f: (c: Cmd) => void): void {
  const c = (cmdCache.get(vk) ?? cmdCache.set(vk, vk.cmd()).get(vk))!;
  c.begin();
  f(c);
  c.submit();
  c.wait();
}
const cmdCache = new WeakMap<Gpu, Cmd>();

/** max |a − b| / max |b| */
export function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0, den = 0;
  for (let i = 0; i < b.length; i++) { num = Math.max(num, Math.abs(a[i] - b[i])); den = Math.max(den, Math.abs(b[i])); }
  return num / Math.max(den, 1e-30);
}
