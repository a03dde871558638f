// safetensors reader/writer: round trips of every dtype, shards + index, targeted hostile headers and
// a ≥2000-file mutation fuzz (every outcome is a correct load or a ModelError; nothing else, no fd leak).
import { afterAll, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hb } from "../src/native/hb.ts";
import { findDuplicateKey, ModelError } from "../src/model/errors.ts";
import {
  DTYPE_SIZE, type Dtype, openModel, openSafetensors, readBytes, readF32, type TensorOut, writeSafetensors,
} from "../src/model/safetensors.ts";
import { rng } from "./helpers/rng.ts";

hb(); // build/load libhb (pread, convert) once, outside any timed test
const dir = fs.mkdtempSync(join(tmpdir(), "hb-st-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const randBytes = (r: () => number, n: number) => Uint8Array.from({ length: n }, () => (r() * 256) | 0);

// reference decoders (independent of libhb)
const f32of = (bits: number) => new Float32Array(new Uint32Array([bits >>> 0]).buffer)[0];
const bf16 = (h: number) => f32of(h << 16);
function f16(h: number): number {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, m = h & 1023;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}
function f8e4m3(b: number): number {
  const s = b & 0x80 ? -1 : 1, e = (b >> 3) & 15, m = b & 7;
  if (e === 15 && m === 7) return NaN;
  if (e === 0) return s * (m / 8) * 2 ** -6;
  return s * (1 + m / 8) * 2 ** (e - 7);
}
const same = (a: number, b: number) => (Number.isNaN(a) && Number.isNaN(b)) || Math.fround(a) === Math.fround(b);

function expectModelError(fn: () => unknown, parts: { file?: string; tensor?: string; field?: string | RegExp; msg?: RegExp } = {}) {
  let err: unknown;
  try { fn(); } catch (e) { err = e; }
  expect(err).toBeInstanceOf(ModelError);
  const me = err as ModelError;
  if (parts.file) { expect(me.file).toBe(parts.file); expect(me.message).toContain(parts.file); }
  if (parts.tensor) { expect(me.tensor).toBe(parts.tensor); expect(me.message).toContain(`"${parts.tensor}"`); }
  if (parts.field instanceof RegExp) expect(me.field ?? "").toMatch(parts.field);
  else if (parts.field) { expect(me.field).toBe(parts.field); expect(me.message).toContain(parts.field); }
  if (parts.msg) expect(me.message).toMatch(parts.msg);
  return me;
}

/** A file from a raw header object/text and a data blob. */
function rawFile(path: string, header: unknown, data: Uint8Array, opts: { n?: bigint } = {}) {
  const json = header instanceof Uint8Array ? header : new TextEncoder().encode(typeof header === "string" ? header : JSON.stringify(header));
  const head = new Uint8Array(8);
  new DataView(head.buffer).setBigUint64(0, opts.n ?? BigInt(json.length), true);
  fs.writeFileSync(path, Buffer.concat([head, json, data]));
}

describe("round trip", () => {
  const r = rng(1);
  const tensors: TensorOut[] = (Object.keys(DTYPE_SIZE) as Dtype[]).map((dtype, k) => {
    const shape = k % 3 === 0 ? [3, 5] : k % 3 === 1 ? [7] : [2, 3, 2];
    return { name: `t.${dtype}`, dtype, shape, data: randBytes(r, shape.reduce((a, b) => a * b, 1) * DTYPE_SIZE[dtype]) };
  });
  tensors.push({ name: "empty", dtype: "F32", shape: [0, 4], data: new Float32Array(0) });
  tensors.push({ name: "scalar", dtype: "F32", shape: [], data: new Float32Array([42]) });
  const path = join(dir, "all.safetensors");
  writeSafetensors(path, tensors, { format: "pt", "quant.x": "int4g64" });

  test("header is padded to 8 and bytes come back", () => {
    const raw = fs.readFileSync(path);
    const n = Number(raw.readBigUInt64LE(0));
    expect(n % 8).toBe(0);
    const sf = openSafetensors(path);
    try {
      expect(sf.dataStart).toBe(8 + n);
      expect({ ...sf.metadata }).toEqual({ format: "pt", "quant.x": "int4g64" });
      expect([...sf.tensors.keys()]).toEqual(tensors.map((t) => t.name));
      for (const t of tensors) {
        const info = sf.tensors.get(t.name)!;
        expect(info.dtype).toBe(t.dtype);
        expect(info.shape).toEqual(t.shape);
        const want = t.data as ArrayBufferView;
        expect(readBytes(info)).toEqual(new Uint8Array(want.buffer, want.byteOffset, want.byteLength));
      }
      expect(readF32(sf.tensors.get("scalar")!)).toEqual(new Float32Array([42]));
      expect(readF32(sf.tensors.get("empty")!).length).toBe(0);
    } finally {
      sf.close();
    }
  });

  test("readF32 converts F32/BF16/F16/F8_E4M3 like the reference", () => {
    const sf = openSafetensors(path);
    try {
      const dec: Partial<Record<Dtype, (b: Uint8Array, i: number) => number>> = {
        F32: (b, i) => new DataView(b.buffer).getFloat32(4 * i, true),
        BF16: (b, i) => bf16(b[2 * i] | (b[2 * i + 1] << 8)),
        F16: (b, i) => f16(b[2 * i] | (b[2 * i + 1] << 8)),
        F8_E4M3: (b, i) => f8e4m3(b[i]),
      };
      for (const [dt, f] of Object.entries(dec)) {
        const info = sf.tensors.get(`t.${dt}`)!;
        const b = readBytes(info);
        const out = new Float32Array(info.numel + 3).fill(7);
        const y = readF32(info, out);
        expect(y.length).toBe(info.numel);
        for (let i = 0; i < info.numel; i++) if (!same(y[i], f!(b, i))) throw new Error(`${dt}[${i}] ${y[i]} != ${f!(b, i)}`);
        expect(out[info.numel]).toBe(7); // nothing written past the tensor
      }
      expectModelError(() => readF32(sf.tensors.get("t.I32")!), { field: "dtype" });
      expectModelError(() => readF32(sf.tensors.get("t.F32")!, new Float32Array(2)), { tensor: "t.F32" });
      expectModelError(() => readBytes(sf.tensors.get("t.F32")!, new Uint8Array(3)), { tensor: "t.F32" });
    } finally {
      sf.close();
    }
  });

  test("F8_E4M3 with 128×128 block scale_inv", () => {
    const O = 130, I = 260, r2 = rng(5);
    const w = randBytes(r2, O * I).map((b) => b & 0x77); // finite, small
    const s = Float32Array.from({ length: 2 * 3 }, (_, k) => k + 0.5);
    const p = join(dir, "fp8.safetensors");
    writeSafetensors(p, [
      { name: "w.weight", dtype: "F8_E4M3", shape: [O, I], data: w },
      { name: "w.weight_scale_inv", dtype: "F32", shape: [2, 3], data: s },
      { name: "bad.weight", dtype: "F8_E4M3", shape: [O, I], data: w },
      { name: "bad.weight_scale_inv", dtype: "F32", shape: [1, 3], data: s.subarray(0, 3) },
    ]);
    const store = openModel(p);
    try {
      const y = readF32(store.get("w.weight"), null, store);
      for (const [o, i] of [[0, 0], [127, 127], [128, 0], [129, 259], [5, 200], [100, 130]]) {
        expect(y[o * I + i]).toBe(Math.fround(f8e4m3(w[o * I + i]) * s[(o >> 7) * 3 + (i >> 7)]));
      }
      const y2 = readF32(store.get("w.weight"), null, store.get("w.weight_scale_inv"));
      expect(y2).toEqual(y);
      expectModelError(() => readF32(store.get("bad.weight"), null, store), { tensor: "bad.weight_scale_inv", field: "shape" });
    } finally {
      store.close();
    }
  });

  test("writer refuses bad input and leaves nothing behind", () => {
    const p = join(dir, "bad-w.safetensors");
    expectModelError(() => writeSafetensors(p, [{ name: "a", dtype: "F32", shape: [3], data: new Uint8Array(8) }]), { tensor: "a", field: "data" });
    expectModelError(() => writeSafetensors(p, [{ name: "a", dtype: "F32", shape: [-1], data: new Uint8Array(0) }]), { field: "shape" });
    expectModelError(() => writeSafetensors(p, [{ name: "a", dtype: "Q9" as Dtype, shape: [1], data: new Uint8Array(1) }]), { field: "dtype" });
    const dup = { name: "a", dtype: "U8" as Dtype, shape: [1], data: new Uint8Array(1) };
    expectModelError(() => writeSafetensors(p, [dup, dup]), { tensor: "a" });
    expectModelError(() => writeSafetensors(p, [{ ...dup, data: () => new Uint8Array(2) }]), { tensor: "a", field: "data" });
    expect(fs.readdirSync(dir).filter((f) => f.startsWith("bad-w"))).toEqual([]);
    writeSafetensors(p, [{ ...dup, data: () => new Uint8Array([9]) }]); // lazy data is written
    const sf = openSafetensors(p);
    expect(readBytes(sf.tensors.get("a")!)).toEqual(new Uint8Array([9]));
    sf.close();
  });
});

describe("shards + index", () => {
  const d = join(dir, "sharded");
  fs.mkdirSync(d);
  const A = { name: "a", dtype: "F32" as Dtype, shape: [2], data: new Float32Array([1, 2]) };
  const B = { name: "b", dtype: "F16" as Dtype, shape: [1], data: new Uint16Array([0x3c00]) };
  const C = { name: "c", dtype: "U8" as Dtype, shape: [3], data: new Uint8Array([1, 2, 3]) };
  const index = (wm: unknown) => fs.writeFileSync(join(d, "model.safetensors.index.json"), JSON.stringify({ metadata: { total_size: 13 }, weight_map: wm }));
  const ok = { a: "s1.safetensors", b: "s1.safetensors", c: "s2.safetensors" };

  test("loads through weight_map", () => {
    writeSafetensors(join(d, "s1.safetensors"), [A, B], { format: "pt" });
    writeSafetensors(join(d, "s2.safetensors"), [C], { format: "pt", "quant.c": "int8" });
    index(ok);
    const s = openModel(d);
    try {
      expect(s.names().sort()).toEqual(["a", "b", "c"]);
      expect(s.files.length).toBe(2);
      expect({ ...s.metadata }).toEqual({ format: "pt", "quant.c": "int8" });
      expect(readF32(s.get("a"))).toEqual(new Float32Array([1, 2]));
      expect(readF32(s.get("b"))).toEqual(new Float32Array([1]));
      expect(readBytes(s.get("c"))).toEqual(new Uint8Array([1, 2, 3]));
      expect(s.has("zz")).toBe(false);
      expectModelError(() => s.get("zz"), { tensor: "zz", msg: /missing/ });
    } finally {
      s.close();
    }
    expectModelError(() => readBytes(s.get("a")), { tensor: "a", msg: /closed/ });
  });

  test("hostile indexes", () => {
    const idx = join(d, "model.safetensors.index.json");
    index({ ...ok, c: "s3.safetensors" });
    expectModelError(() => openModel(d), { file: idx, tensor: "c", field: "weight_map", msg: /does not exist/ });
    index({ ...ok, c: "s1.safetensors" });
    expectModelError(() => openModel(d), { file: idx, tensor: "c", field: "weight_map" });
    index({ ...ok, zz: "s1.safetensors" });
    expectModelError(() => openModel(d), { file: idx, tensor: "zz", field: "weight_map" });
    index({ ...ok, c: "../sharded/s2.safetensors" });
    expectModelError(() => openModel(d), { file: idx, field: "weight_map", msg: /plain file name/ });
    index({ ...ok, c: 5 });
    expectModelError(() => openModel(d), { file: idx, field: "weight_map.c" });
    index([1, 2]);
    expectModelError(() => openModel(d), { file: idx, field: "weight_map" });
    fs.writeFileSync(idx, '{"weight_map": {"a": "s1.safetensors", "a": "s2.safetensors"}}');
    expectModelError(() => openModel(d), { file: idx, field: "weight_map.a", msg: /duplicate/ });
    fs.writeFileSync(idx, "{not json");
    expectModelError(() => openModel(d), { file: idx, field: "json" });
    // the same tensor in two shards
    writeSafetensors(join(d, "s2.safetensors"), [C, { ...A, data: new Float32Array([3, 4]) }]);
    index(ok);
    expectModelError(() => openModel(d), { tensor: "a", msg: /also in/ });
    // quant stamps that disagree between shards
    writeSafetensors(join(d, "s1.safetensors"), [A, B], { "quant.c": "int4" });
    writeSafetensors(join(d, "s2.safetensors"), [C], { "quant.c": "int8" });
    expectModelError(() => openModel(d), { field: "__metadata__.quant.c" });
    expectModelError(() => openModel(join(dir, "nope")), { msg: /cannot open/ });
    expectModelError(() => openModel(dir), { msg: /neither/ });
  });
});

describe("hostile headers", () => {
  const p = join(dir, "h.safetensors");
  const data = new Uint8Array(64);
  const ent = (dtype: string, shape: unknown, off: unknown) => ({ dtype, shape, data_offsets: off });
  const open = () => {
    const sf = openSafetensors(p);
    sf.close();
  };
  const cases: [string, () => void, Parameters<typeof expectModelError>[1]][] = [
    ["tiny file", () => fs.writeFileSync(p, new Uint8Array(5)), { field: "header_length" }],
    ["N = 0", () => rawFile(p, "", new Uint8Array(8), { n: 0n }), { field: "header_length" }],
    ["huge N", () => rawFile(p, {}, data, { n: 1n << 62n }), { field: "header_length", msg: /limit/ }],
    ["N = 2^64-1", () => rawFile(p, {}, data, { n: (1n << 64n) - 1n }), { field: "header_length" }],
    ["N past EOF", () => rawFile(p, { a: ent("F32", [1], [0, 4]) }, new Uint8Array(0), { n: 1000n }), { field: "header_length", msg: /past the end/ }],
    ["not JSON", () => rawFile(p, "{\"a\": ", data), { field: "header", msg: /JSON/ }],
    ["bad UTF-8", () => rawFile(p, Uint8Array.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]), data), { field: "header" }],
    ["array", () => rawFile(p, [1, 2], data), { field: "header", msg: /object/ }],
    ["null", () => rawFile(p, "null", data), { field: "header" }],
    ["number", () => rawFile(p, "12", data), { field: "header" }],
    ["unknown dtype", () => rawFile(p, { a: ent("F128", [1], [0, 16]) }, data), { tensor: "a", field: "dtype" }],
    ["shape string", () => rawFile(p, { a: ent("F32", "4", [0, 16]) }, data), { tensor: "a", field: "shape" }],
    ["negative dim", () => rawFile(p, { a: ent("F32", [-4], [0, 16]) }, data), { tensor: "a", field: "shape[0]" }],
    ["fractional dim", () => rawFile(p, { a: ent("F32", [1.5], [0, 6]) }, data), { tensor: "a", field: "shape[0]" }],
    ["2^53 dim", () => rawFile(p, '{"a": {"dtype": "U8", "shape": [9007199254740993], "data_offsets": [0, 1]}}', data), { tensor: "a", field: "shape[0]" }],
    ["1e999 offset", () => rawFile(p, '{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1e999]}}', data), { tensor: "a", field: "data_offsets[1]" }],
    ["dims overflow", () => rawFile(p, { a: ent("F32", [2 ** 40, 2 ** 40, 0.5e1], [0, 16]) }, data), { tensor: "a", field: "shape" }],
    ["3 offsets", () => rawFile(p, { a: ent("U8", [1], [0, 1, 2]) }, data), { tensor: "a", field: /data_offsets/ }],
    ["missing offsets", () => rawFile(p, { a: { dtype: "U8", shape: [1] } }, data), { tensor: "a", field: "data_offsets" }],
    ["extra field", () => rawFile(p, { a: { ...ent("U8", [1], [0, 1]), extra: 1 } }, data), { tensor: "a" }],
    ["entry not object", () => rawFile(p, { a: 7 }, data), { tensor: "a" }],
    ["reversed", () => rawFile(p, { a: ent("U8", [0], [8, 4]) }, data), { tensor: "a", field: "data_offsets", msg: /after/ }],
    ["out of range", () => rawFile(p, { a: ent("U8", [8], [60, 68]) }, data), { tensor: "a", field: "data_offsets", msg: /beyond data size 64/ }],
    ["size mismatch", () => rawFile(p, { a: ent("F32", [3], [0, 16]) }, data), { tensor: "a", field: "shape" }],
    ["overlap", () => rawFile(p, { a: ent("U8", [8], [0, 8]), b: ent("U8", [8], [4, 12]) }, data), { tensor: "b", field: "data_offsets", msg: /overlaps/ }],
    ["duplicate name", () => rawFile(p, '{"a": {"dtype":"U8","shape":[1],"data_offsets":[0,1]}, "a": {"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', data), { tensor: "a", field: "name", msg: /duplicate/ }],
    ["escaped duplicate", () => rawFile(p, '{"a": {"dtype":"U8","shape":[1],"data_offsets":[0,1]}, "\\u0061": {"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', data), { tensor: "a", msg: /duplicate/ }],
    ["duplicate field", () => rawFile(p, '{"a": {"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}}', data), { tensor: "a", field: "dtype" }],
    ["metadata not str", () => rawFile(p, { __metadata__: { k: 1 } }, data), { field: "__metadata__.k" }],
    ["empty name", () => rawFile(p, { "": ent("U8", [1], [0, 1]) }, data), { field: "name" }],
  ];
  for (const [name, make, parts] of cases) {
    test(name, () => {
      make();
      expectModelError(open, { file: p, ...parts });
    });
  }

  test("not a regular file, missing file", () => {
    expectModelError(() => openSafetensors(dir), { file: dir });
    expectModelError(() => openSafetensors(join(dir, "missing")), { msg: /cannot open/ });
  });

  test("gaps and zero-size tensors are fine; keys like __proto__ are plain names", () => {
    rawFile(p, '{"__proto__": {"dtype":"U8","shape":[2],"data_offsets":[10,12]}, "z": {"dtype":"F32","shape":[0],"data_offsets":[11,11]}}', data);
    const sf = openSafetensors(p);
    expect([...sf.tensors.keys()]).toEqual(["__proto__", "z"]);
    expect(sf.tensors.get("__proto__")!.offset).toBe(sf.dataStart + 10);
    sf.close();
  });

  test("truncation after open is a short read naming file, tensor and offset", () => {
    const q = join(dir, "trunc.safetensors");
    writeSafetensors(q, [{ name: "a", dtype: "F32", shape: [4], data: new Float32Array(4) }, { name: "b", dtype: "F32", shape: [256], data: new Float32Array(256) }]);
    const sf = openSafetensors(q);
    try {
      const b = sf.tensors.get("b")!;
      fs.truncateSync(q, b.offset + 100);
      const me = expectModelError(() => readBytes(b), { file: q, tensor: "b", msg: /short read/ });
      expect(me.offset).toBe(b.offset + 100);
      expect(me.message).toContain(`offset ${b.offset + 100}`);
      expect(readF32(sf.tensors.get("a")!)).toEqual(new Float32Array(4));
    } finally {
      sf.close();
    }
  });
});

test("duplicate-key scanner handles escapes, nesting and arrays", () => {
  const cases: [string, string[] | null][] = [
    ['{"a": 1, "b": {"a": 2}}', null],
    ['{"a\\"": 1, "a\\\\": 2, "a": [{"x": 1}, {"x": 2}]}', null],
    ['{"q\\"": 1, "q\\u0022": 2}', ["q\""]],
    ['{"s": "\\\\", "s": 1}', ["s"]],
    ['{"a": {"b": [1, {"c": 1, "c": 2}]}}', ["a", "b", "c"]],
    ['{"k": "{\\"k\\": 1}", "x": ["k", "k"]}', null],
    ['[{"a": 1}, {"a": 1}]', null],
  ];
  for (const [text, want] of cases) {
    JSON.parse(text); // the scanner only ever sees valid JSON
    expect([text, findDuplicateKey(text)]).toEqual([text, want]);
  }
});

describe("fuzz", () => {
  test("2400 mutated files: a correct load or a ModelError, nothing else", () => {
    const r = rng(12345);
    const int = (n: number) => Math.floor(r() * n);
    const pick = <T>(a: T[]): T => a[int(a.length)];
    const dtypes: Dtype[] = ["F32", "BF16", "F16", "F8_E4M3", "U8", "I8", "I32"];
    const base: TensorOut[] = Array.from({ length: 6 }, (_, k) => {
      const dtype = dtypes[k % dtypes.length];
      const shape = [1 + int(5), 1 + int(6)];
      return { name: `model.layers.${k}.w`, dtype, shape, data: randBytes(r, shape[0] * shape[1] * DTYPE_SIZE[dtype]) };
    });
    const basePath = join(dir, "fuzz-base.safetensors");
    writeSafetensors(basePath, base, { format: "pt" });
    const baseBytes = new Uint8Array(fs.readFileSync(basePath));
    const N0 = Number(new DataView(baseBytes.buffer).getBigUint64(0, true));
    const baseHeader = JSON.parse(new TextDecoder().decode(baseBytes.subarray(8, 8 + N0)));
    const baseData = baseBytes.subarray(8 + N0);
    const weird = [-1, -0, 0.5, 2 ** 53, 2 ** 53 + 2, 2 ** 64, 1e308, "1", null, true, [], {}, "NaN", 1e-9, 4096, 7];

    function mutateHeader(): string {
      const h = structuredClone(baseHeader) as Record<string, any>;
      const names = Object.keys(h).filter((k) => k !== "__metadata__");
      const t = h[pick(names)];
      switch (int(12)) {
        case 0: t.data_offsets = [t.data_offsets[1], t.data_offsets[0]]; break; // reversed
        case 1: t.data_offsets = [t.data_offsets[0] + int(9) - 4, t.data_offsets[1] + int(9) - 4]; break; // shift / overlap
        case 2: t.data_offsets[int(2)] = pick(weird); break;
        case 3: t.shape[int(t.shape.length)] = pick(weird); break;
        case 4: t.dtype = pick([...dtypes, "F64", "BOOL", "X", 3, null]); break;
        case 5: t.shape = pick([[], [0], [1, 1, 1], "3", null, [2 ** 31, 2 ** 31]]); break;
        case 6: t[pick(["extra", "dtype", "shape", "data_offsets"])] = pick(weird); break;
        case 7: delete t[pick(["dtype", "shape", "data_offsets"])]; break;
        case 8: h[pick(names)] = pick(weird); break;
        case 9: h.__metadata__ = pick([{ a: 1 }, [], "x", { b: "c" }, null]); break;
        case 10: { const o = h[pick(names)]; o.data_offsets = [...t.data_offsets]; o.shape = [...t.shape]; o.dtype = t.dtype; break; } // full overlap
        default: return pick(["[]", "null", "7", '"s"', "{}", "{\"a\":", JSON.stringify(h).replace(/"model\.layers\.1\.w"/, '"model.layers.2.w"')]);
      }
      return JSON.stringify(h);
    }

    function mutate(): Uint8Array {
      const kind = int(6);
      if (kind === 0 || kind === 1) { // byte flips in header (0) or data (1)
        const b = baseBytes.slice();
        const lo = kind === 0 ? 8 : 8 + N0, hi = kind === 0 ? 8 + N0 : b.length;
        for (let k = 1 + int(4); k > 0; k--) b[lo + int(hi - lo)] = int(256);
        return b;
      }
      if (kind === 2) return baseBytes.slice(0, int(baseBytes.length)); // truncation
      if (kind === 3) { // header length field
        const b = baseBytes.slice();
        const v = pick([0n, 1n, 2n, BigInt(N0 - 1 - int(8)), BigInt(N0 + 1 + int(8)), BigInt(b.length), 1n << 40n, (1n << 64n) - 1n, BigInt(int(2 ** 30))]);
        new DataView(b.buffer).setBigUint64(0, v, true);
        return b;
      }
      const json = new TextEncoder().encode(mutateHeader());
      const pad = int(3);
      const out = new Uint8Array(8 + json.length + pad + baseData.length).fill(0x20);
      new DataView(out.buffer).setBigUint64(0, BigInt(json.length + pad), true);
      out.set(json, 8);
      out.set(baseData, 8 + json.length + pad);
      return kind === 4 ? out : out.subarray(0, out.length - int(baseData.length + 1)); // 5: also truncated
    }

    const fdsBefore = fs.readdirSync("/proc/self/fd").length;
    const p = join(dir, "fuzz.safetensors");
    let loaded = 0, rejected = 0;
    const failures: string[] = [];
    const N = 2400;
    for (let it = 0; it < N; it++) {
      const bytes = mutate();
      fs.writeFileSync(p, bytes);
      try {
        const sf = openSafetensors(p);
        try {
          for (const info of sf.tensors.values()) {
            if (info.offset < sf.dataStart || info.offset + info.nbytes > bytes.length) throw new Error(`${info.name}: range outside file`);
            if (info.nbytes !== info.numel * DTYPE_SIZE[info.dtype]) throw new Error(`${info.name}: nbytes`);
            const got = readBytes(info);
            const want = bytes.subarray(info.offset, info.offset + info.nbytes);
            if (Buffer.compare(got, want) !== 0) throw new Error(`${info.name}: bytes differ`);
            if (["F32", "BF16", "F16", "F8_E4M3"].includes(info.dtype)) {
              const y = readF32(info);
              if (y.length !== info.numel) throw new Error(`${info.name}: readF32 length`);
            }
          }
          const spans = [...sf.tensors.values()].filter((t) => t.nbytes > 0).sort((a, b) => a.offset - b.offset);
          for (let k = 1; k < spans.length; k++)
            if (spans[k].offset < spans[k - 1].offset + spans[k - 1].nbytes) throw new Error(`${spans[k].name}: overlaps`);
          loaded++;
        } finally {
          sf.close();
        }
      } catch (e) {
        if (e instanceof ModelError) rejected++;
        else failures.push(`iteration ${it}: ${(e as Error)?.stack ?? e}`);
      }
    }
    expect(failures.slice(0, 5)).toEqual([]);
    expect(loaded + rejected).toBe(N);
    expect(loaded).toBeGreaterThan(N / 10); // data flips etc. must still load
    expect(rejected).toBeGreaterThan(N / 3);
    expect(fs.readdirSync("/proc/self/fd").length).toBe(fdsBefore); // no fd leak
  });
});
