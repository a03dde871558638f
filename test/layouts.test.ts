// Binary layouts shared by C, GLSL and TypeScript, each defined once per language and checked here:
// the C headers' enums (weight formats, conversion kinds, SIMD levels and their names, the Vulkan
// shim's buffer kinds and status codes) against the TS constants, every shader's push-constant block
// and storage bindings (which it writes) against the table in src/device/push.ts, in GLSL and in its WGSL twin,
// and the slot KV file's header table (TS-only,
// checked for shape). Pure text parsing: no GPU, no build.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pushBytes, pushOf, SHADERS, type Shader } from "../src/device/push.ts";
import { BUF_KIND, DeviceType, SHIM_ERRORS, VK_ERROR_DEVICE_LOST, VK_TIMEOUT } from "../src/device/vulkan/vk.ts";
import { Conv, Fmt, Simd } from "../src/native/hb.ts";
import { HEADER, RECORD } from "../src/engine/kvfile-format.ts";

const root = resolve(import.meta.dir, "..");
const read = (p: string) => readFileSync(join(root, p), "utf8");
const stripComments = (s: string) => s.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");

/** Every `enum { A = 1, B, ... }` of a C source, as [name, value] lists (implicit values count up). */
function cEnums(src: string): [string, number][][] {
  return [...stripComments(src).matchAll(/enum\s*\w*\s*\{([^}]*)\}/g)].map((m) => {
    let next = 0;
    return m[1].split(",").map((e) => e.trim()).filter(Boolean).map((e) => {
      const [name, value] = e.split("=").map((x) => x.trim());
      const v = value === undefined ? next : Number(value);
      if (!Number.isInteger(v)) throw new Error(`enum entry ${e}: not an integer literal`);
      next = v + 1;
      return [name, v] as [string, number];
    });
  });
}
/** The enum holding `member`, with `prefix` cut off and the rest lowercased: { f32: 0, ... }. */
function enumOf(src: string, member: string, prefix: string): Record<string, number> {
  const e = cEnums(src).find((l) => l.some(([n]) => n === member));
  if (!e) throw new Error(`no enum with ${member}`);
  return Object.fromEntries(e.map(([n, v]) => [n.slice(prefix.length).toLowerCase(), v]));
}

const hbH = read("ffi/hb.h");
describe("libhb enums (ffi/hb.h) = src/native/hb.ts", () => {
  test("weight formats HB_F32.. = Fmt", () => expect(enumOf(hbH, "HB_F32", "HB_")).toEqual({ ...Fmt }));
  test("conversion kinds HB_CONV_* = Conv", () => expect(enumOf(hbH, "HB_CONV_BF16", "HB_CONV_")).toEqual({ ...Conv }));
  test("SIMD levels HB_SCALAR.. = Simd, and cpu.c's names[] in level order", () => {
    expect(enumOf(hbH, "HB_SCALAR", "HB_")).toEqual({ ...Simd });
    const names = /names\[\]\s*=\s*\{([^}]*)\}/.exec(stripComments(read("ffi/cpu.c")))?.[1];
    expect([...(names ?? "").matchAll(/"([^"]*)"/g)].map((m) => m[1]))
      .toEqual(Object.entries(Simd).sort((a, b) => a[1] - b[1]).map(([k]) => k));
  });
});

describe("Vulkan shim (ffi/vk/*.h) = src/device/vulkan/vk.ts", () => {
  const hbvk = read("ffi/vk/hbvk.h");
  const vkDefines = new Map([...stripComments(read("ffi/vk/vk_min.h")).matchAll(/^#define\s+(VK_\w+)\s+\(?(-?\d+)\)?\s*$/gm)]
    .map((m) => [m[1], Number(m[2])]));
  test("buffer kinds HBVK_DEVICE.. = BUF_KIND", () => {
    expect(enumOf(hbvk, "HBVK_DEVICE", "HBVK_")).toEqual({ device: BUF_KIND.device, host: BUF_KIND.host, device_nomap: BUF_KIND["device-nomap"] });
  });
  test("every HBVK_E_* status has a message; VkResult names match their codes", () => {
    const codes = cEnums(hbvk).find((l) => l.some(([n]) => n === "HBVK_E_ARG"))!;
    expect(codes.length).toBeGreaterThan(0);
    for (const [name, v] of codes) expect([name, SHIM_ERRORS[v] !== undefined]).toEqual([name, true]);
    for (const [v, msg] of Object.entries(SHIM_ERRORS)) {
      const name = /^VK_\w+/.exec(msg)?.[0];
      if (name) expect([name, vkDefines.get(name)]).toEqual([name, Number(v)]);
    }
    expect(vkDefines.get("VK_TIMEOUT")).toBe(VK_TIMEOUT);
    expect(vkDefines.get("VK_ERROR_DEVICE_LOST")).toBe(VK_ERROR_DEVICE_LOST);
  });
  test("VkPhysicalDeviceType = DeviceType", () => {
    expect({
      other: vkDefines.get("VK_PHYSICAL_DEVICE_TYPE_OTHER"), integrated: vkDefines.get("VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU"),
      discrete: vkDefines.get("VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU"), virtual: vkDefines.get("VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU"),
      cpu: vkDefines.get("VK_PHYSICAL_DEVICE_TYPE_CPU"),
    }).toEqual({ ...DeviceType });
  });
});

/** A shader's push block as [field, "i" | "f"] in declaration order, its storage bindings and the writable ones. */
function shaderInterface(src: string): { push: [string, string][]; bindings: number[]; writes: number[] } {
  const s = stripComments(src);
  const block = /layout\s*\(\s*push_constant\s*\)\s*uniform\s+\w+\s*\{([^}]*)\}/.exec(s)?.[1] ?? "";
  const push = block.split(";").map((d) => d.trim()).filter(Boolean).flatMap((d) => {
    const [, type, names] = /^(\w+)\s+([\s\S]+)$/.exec(d) ?? [];
    const t = type === "int" ? "i" : type === "float" ? "f" : `unsupported type ${type}`;
    return names.split(",").map((n) => [n.trim(), t] as [string, string]);
  });
  const bufs = [...s.matchAll(/layout\s*\(([^)]*)\)\s*((?:\w+\s+)*)buffer\b/g)]
    .map((m) => ({ b: Number(/binding\s*=\s*(\d+)/.exec(m[1])?.[1] ?? NaN), ro: /\breadonly\b/.test(m[2]) }));
  const bindings = bufs.map((x) => x.b).sort((a, b) => a - b);
  return { push, bindings, writes: bufs.filter((x) => !x.ro).map((x) => x.b).sort((a, b) => a - b) };
}

/** The same of a WGSL twin: `struct P { name: i32|f32, ... }`, `@group(0) @binding(i) var<storage, read|read_write>`. */
function wgslInterface(src: string): { push: [string, string][]; bindings: number[]; writes: number[]; uniform: boolean } {
  const s = stripComments(src);
  const block = /struct\s+P\s*\{([^}]*)\}/.exec(s)?.[1] ?? "";
  const push = block.split(",").map((d) => d.trim()).filter(Boolean).map((d) => {
    const [name, type] = d.split(":").map((x) => x.trim());
    return [name, type === "i32" ? "i" : type === "f32" ? "f" : `unsupported type ${type}`] as [string, string];
  });
  const bufs = [...s.matchAll(/@group\(0\)\s*@binding\((\d+)\)\s*var<storage,\s*(read|read_write)>/g)].map((m) => ({ b: Number(m[1]), rw: m[2] === "read_write" }));
  return {
    push, bindings: bufs.map((x) => x.b).sort((a, b) => a - b), writes: bufs.filter((x) => x.rw).map((x) => x.b).sort((a, b) => a - b),
    uniform: /@group\(1\)\s*@binding\(0\)\s*var<uniform>\s*p\s*:\s*P\s*;/.test(s),
  };
}

describe("shader push constants and bindings (shaders/*.comp, shaders/*.wgsl) = src/device/push.ts", () => {
  const files = (ext: string) => readdirSync(join(root, "shaders")).filter((f) => f.endsWith(ext)).map((f) => f.slice(0, -ext.length)).sort();
  test("one table entry per shader, each in GLSL and WGSL", () => {
    expect(Object.keys(SHADERS).sort()).toEqual(files(".comp"));
    expect(files(".wgsl")).toEqual(files(".comp"));
  });
  for (const name of files(".comp").filter((f): f is Shader => Object.hasOwn(SHADERS, f)))
    test(name, () => {
      const want = { push: SHADERS[name].push.map(([n, t]) => [n, t] as [string, string]), bindings: Array.from({ length: SHADERS[name].bind }, (_, i) => i), writes: [...SHADERS[name].writes] as number[] };
      expect(shaderInterface(read(`shaders/${name}.comp`))).toEqual(want);
      expect(wgslInterface(read(`shaders/${name}.wgsl`))).toEqual({ ...want, uniform: true });
      expect(pushBytes(name)).toBe(4 * want.push.length);
    });
});

describe("pushOf", () => {
  test("encodes named fields in table order (ints and float bits)", () => {
    const b = pushOf("layernorm", { eps: 0.5, yRow: 5, yOff: 4, xRow: 3, xOff: 2, D: 1 });
    const dv = new DataView(b.buffer);
    expect([0, 1, 2, 3, 4].map((k) => dv.getInt32(4 * k, true))).toEqual([1, 2, 3, 4, 5]);
    expect(dv.getFloat32(20, true)).toBe(0.5);
    expect(b.byteLength).toBe(pushBytes("layernorm"));
  });
  test("a missing or unknown field is an error naming it", () => {
    expect(() => pushOf("add", { n: 1, yOff: 0 } as never)).toThrow(/missing field\(s\) xOff/);
    expect(() => pushOf("add", { n: 1, yOff: 0, xOff: 0, zOff: 0 } as never)).toThrow(/unknown field\(s\) zOff/);
  });
});

describe("slot KV file layout (src/engine/kvfile-format.ts)", () => {
  test("header fields packed in order (u32, count u64 8-aligned), the JSON after them, inside one page", () => {
    const order = ["magic", "version", "headerBytes", "recordBytes", "count", "jsonLength", "json"] as const;
    const width = (k: string) => (k === "count" ? 8 : 4);
    const at = (k: (typeof order)[number]): number => HEADER[k];
    for (let i = 1; i < order.length; i++) expect([order[i], at(order[i])]).toEqual([order[i], at(order[i - 1]) + width(order[i - 1])]);
    expect(HEADER.magic).toBe(0);
    expect(HEADER.count % 8).toBe(0);
    expect(HEADER.json).toBeLessThan(HEADER.bytes);
    expect(RECORD).toEqual({ token: 0, crc: 4, payload: 8 });
  });
});
