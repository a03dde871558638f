// Test support for the GPU suites: one shared device per test process (or the reason there is none),
// seeded random data and small upload/run helpers. State: the opened Vk (closed at process exit).
import { shadersMissing } from "./shaders.ts";
import { type Buf, type Cmd, probe, Vk } from "./vk.ts";

let opened: Vk | null | undefined;
let why = "";

/** The test device, or null (with `skipReason()`) when Vulkan or the shaders (glslc or prebuilt SPIR-V) are missing. */
export function testDevice(): Vk | null {
  if (opened !== undefined) return opened;
  const p = probe();
  const g = shadersMissing();
  if (!p.ok || g) {
    why = !p.ok ? p.reason : g!;
    console.warn(`[skip] GPU suites: ${why}`);
    return (opened = null);
  }
  opened = Vk.open();
  process.on("exit", () => opened?.close());
  return opened;
}
export const skipReason = () => why;

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

export function upload(vk: Vk, a: Float32Array | Int32Array | Uint16Array | Uint8Array): Buf {
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
export function runFrame(vk: Vk, f: (c: Cmd) => void): void {
  const c = (cmdCache.get(vk) ?? cmdCache.set(vk, vk.cmd()).get(vk))!;
  c.begin();
  f(c);
  c.submit();
  c.wait();
}
const cmdCache = new WeakMap<Vk, Cmd>();

/** max |a − b| / max |b| */
export function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0, den = 0;
  for (let i = 0; i < b.length; i++) { num = Math.max(num, Math.abs(a[i] - b[i])); den = Math.max(den, Math.abs(b[i])); }
  return num / Math.max(den, 1e-30);
}
