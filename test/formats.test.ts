// The weight-format table (src/model/formats.ts) against what actually writes and reads each format: libhb's quantizer
// writes exactly O·rowBytes bytes and scaleCount scales (no more, no less); its matmuls count that many weight bytes;
// a tensor of the table's size (unstamped) is planned as its format and named so by inspect; the table's codes are
// Fmt's and ffi/hb.h's; every format the device kernels name has a branch in both matmul shaders.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Fmt, hb, MANY_DESC, MANY_W, matmul, matmulQ8, MOE_P, MOE_TAB } from "../src/native/hb.ts";
import {
  DEFAULT_GS, FORMATS, fitting, floatFormat, fmtName, format, parseFmt, type QFormat, rowBytes, rowUnits, scaleCount, scalesPerRow,
} from "../src/model/formats.ts";
import { quantCounts, quantize } from "../src/model/quant.ts";
import { openModel, type TensorOut, writeSafetensors } from "../src/model/safetensors.ts";
import { planMat, readMat } from "../src/model/weights.ts";
import { quantFormat } from "../src/model/inspect.ts";
import { rowsOf } from "../src/engine/mat.ts";
import { DEVICE_FMTS, pipelineVariants } from "../src/device/kernels.ts";
import { SHADERS } from "../src/device/push.ts";

const ROOT = join(import.meta.dir, "..");
const SHAPES: [number, number][] = [[1, 1], [3, 7], [5, 64], [4, 130], [17, 33], [2, 257]];
const GROUPS = [8, 16, 32, 64, 128];
const rand = (n: number, seed: number) => {
  let s = seed;
  return Float32Array.from({ length: n }, () => ((s = (s * 48271) % 2147483647) / 2147483647 - 0.5) * 4);
};
/** every (format, gs) worth trying at row length I */
const variants = (I: number): QFormat[] =>
  FORMATS.flatMap((f) => (f.scales === "group" ? GROUPS.filter((gs) => gs < 2 * I || gs === 8).map((gs) => ({ fmt: f.code, gs })) : [{ fmt: f.code, gs: 0 }]));
const name = (f: QFormat) => fmtName(f);

hb();
const dir = mkdtempSync(join(tmpdir(), "hb-formats-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the table", () => {
  test("codes are Fmt's, in code order, and ffi/hb.h's enum", () => {
    expect(FORMATS.map((f) => f.code as number)).toEqual(FORMATS.map((_, i) => i));
    expect(Object.fromEntries(FORMATS.map((f) => [f.name, f.code]))).toEqual({ ...Fmt });
    const h = readFileSync(join(ROOT, "ffi/hb.h"), "utf8");
    for (const f of FORMATS) expect(h).toMatch(new RegExp(`\\bHB_${f.name.toUpperCase()} = ${f.code}\\b`));
  });

  test("hb_matmul_many's and hb_moe_up / down's descriptor layouts are hb.h's", () => {
    const h = readFileSync(join(ROOT, "ffi/hb.h"), "utf8");
    const def = (n: string) => { const m = new RegExp(`#define ${n} (.+)`).exec(h); expect(m).not.toBeNull(); return m![1].trim(); };
    expect(Number(def("HB_MANY_DESC"))).toBe(MANY_DESC);
    expect(Number(def("HB_MOE_W"))).toBe(MANY_W);
    expect(def("HB_MOE_TAB")).toBe("(3 * HB_MOE_W + 1)");
    expect(MOE_TAB).toBe(3 * MANY_W + 1);
    expect(Number(def("HB_MOE_P"))).toBe(MOE_P);
    for (const f of ["matmul_many.c", "moe.c"]) expect(readFileSync(join(ROOT, "ffi", f), "utf8")).not.toMatch(/#define HB_(MANY_DESC|MOE_W|MOE_TAB|MOE_P)\b/);
  });

  test("names round-trip through parseFmt / fmtName; int4g means int4g64", () => {
    for (const f of FORMATS.filter((x) => x.convertible))
      for (const q of variants(256).filter((v) => v.fmt === f.code)) expect(parseFmt(fmtName(q))).toEqual(q);
    expect(parseFmt("int4g")).toEqual({ fmt: Fmt.int4g, gs: DEFAULT_GS });
    for (const bad of ["f16", "int4g4", "int4g48", "int4gx", "int8-row", "", "F32"]) expect(parseFmt(bad)).toBeNull();
    expect(() => format(7)).toThrow(/unknown format 7/);
  });

  test("every libhb kernel the table names is in the binding's symbol table (src/native/hb.ts)", () => {
    const lib = hb() as unknown as Record<string, unknown>;
    for (const f of FORMATS) for (const k of f.kernels.cpu) expect(typeof lib[k]).toBe("function");
  });

  test("float dtypes: each stored dtype names one format; F8_E4M3 is read as f32", () => {
    for (const f of FORMATS.filter((x) => x.scales === "none")) expect(floatFormat(f.dtype)).toBe(f.code);
    expect(floatFormat("F8_E4M3")).toBe(Fmt.f32);
    expect(floatFormat("U8")).toBeUndefined();
    for (const f of FORMATS) expect(f.dtype === "U8").toBe(f.scales !== "none");
  });
});

describe("the writers and readers agree with the table", () => {
  for (const f of FORMATS.filter((x) => x.scales !== "none")) {
    test(`${f.name}: hb_quantize writes exactly O·rowBytes bytes and scaleCount scales`, () => {
      for (const [O, I] of SHAPES) for (const q of variants(I).filter((v) => v.fmt === f.code)) {
        const nb = O * rowBytes(q.fmt, I), ns = scaleCount(q.fmt, O, I, q.gs), W = rand(O * I, O * 31 + I);
        expect(quantCounts(q, O, I)).toEqual([nb, ns]);
        const r = quantize(q, W, O, I);
        expect([r.q.length, r.scales.length]).toEqual([nb, ns]);
        // the writer's own extent: two fills, bytes it wrote agree and the ones beyond keep their fill
        const runs = [0x00, 0xff].map((fill) => {
          const qb = new Uint8Array(nb + 16).fill(fill), sb = new Float32Array(ns + 4).fill(fill ? -1 : 0);
          expect(hb().hb_quantize(q.fmt, W, O, I, q.gs, qb, sb)).toBe(0);
          return { qb, sb, fill };
        });
        expect(runs[0].qb.subarray(0, nb)).toEqual(runs[1].qb.subarray(0, nb));
        expect(runs[0].sb.subarray(0, ns)).toEqual(runs[1].sb.subarray(0, ns));
        for (const { qb, sb, fill } of runs) {
          expect(qb.subarray(nb).every((b) => b === fill)).toBe(true);
          expect(sb.subarray(ns).every((s) => s === (fill ? -1 : 0))).toBe(true);
        }
        // row by row: row o of the whole is the row quantized alone (the stride is rowBytes / scalesPerRow)
        const rb = rowBytes(q.fmt, I), spr = scalesPerRow(q.fmt, I, q.gs);
        for (let o = 0; o < O; o++) {
          const one = quantize(q, W.subarray(o * I, (o + 1) * I), 1, I);
          expect(r.q.subarray(o * rb, (o + 1) * rb)).toEqual(one.q);
          expect(r.scales.subarray(o * spr, (o + 1) * spr)).toEqual(one.scales);
        }
        if (f.scales === "row" || ns >= 2 * O) expect(fitting(O, I, nb, ns)).toContainEqual(q); // (one group a row is the row format)
      }
    });
  }

  test("libhb's matmuls read O·rowBytes weight bytes (+ 4 per scale) in every format", () => {
    for (const [O, I] of SHAPES) for (const q of variants(I)) {
      const f = format(q.fmt), data = new Uint8Array(O * rowBytes(q.fmt, I));
      const W = f.unit === 4 ? new Float32Array(data.buffer) : f.unit === 2 ? new Uint16Array(data.buffer) : data;
      const sc = f.scales === "none" ? null : new Float32Array(scaleCount(q.fmt, O, I, q.gs)).fill(1);
      const x = new Float32Array(I), y = new Float32Array(O);
      for (const mm of [matmul, matmulQ8]) {
        hb().hb_wbytes(1);
        mm(q.fmt, W, sc, q.gs, O, I, x, 1, y);
        expect(Number(hb().hb_wbytes(1))).toBe(data.length + 4 * (sc?.length ?? 0));
      }
      expect(W.length).toBe(O * rowUnits(q.fmt, I));
    }
  });

  test("an unstamped tensor of the table's size is planned as its format, read whole, sliced by rows; inspect names it", () => {
    const O = 6, I = 40, tensors: TensorOut[] = [], want = new Map<string, QFormat>();
    for (const q of variants(I).filter((v) => format(v.fmt).scales !== "group" || scalesPerRow(v.fmt, I, v.gs) >= 2)) {
      const f = format(q.fmt), n = `w.${fmtName(q)}`;
      want.set(n, q);
      if (f.scales === "none") {
        tensors.push({ name: n, dtype: f.dtype, shape: [O, I], data: new Uint8Array(O * rowBytes(q.fmt, I)) });
        continue;
      }
      const r = quantize(q, rand(O * I, 7), O, I);
      tensors.push({ name: n, dtype: "U8", shape: [O, rowBytes(q.fmt, I)], data: r.q });
      tensors.push({ name: `${n}.qs`, dtype: "F32", shape: f.scales === "group" ? [O, scalesPerRow(q.fmt, I, q.gs)] : [O], data: r.scales });
    }
    writeSafetensors(join(dir, "model.safetensors"), tensors);
    const store = openModel(dir);
    try {
      for (const [n, q] of want) {
        const p = planMat(store, n, [O, I]);
        expect({ fmt: p.fmt, gs: p.gs }).toEqual(q);
        expect(p.w.nbytes).toBe(O * rowBytes(q.fmt, I));
        if (format(q.fmt).scales !== "none") expect(quantFormat(store, p.w, [O, I])).toBe(name(q));
        const m = readMat(store, p), part = rowsOf(m, 2, 3);
        expect(m.data.length).toBe(O * rowUnits(q.fmt, I));
        expect(part.data.length).toBe(3 * rowUnits(q.fmt, I));
        expect(part.scales?.length ?? 0).toBe(3 * scalesPerRow(q.fmt, I, q.gs));
      }
    } finally { store.close(); }
  });
});

describe("the device kernels", () => {
  test("every format the device serves is in the table; the matmul variants are exactly those", () => {
    const codes = FORMATS.map((f) => f.code) as number[];
    for (const c of DEVICE_FMTS) expect(codes).toContain(c);
    expect(DEVICE_FMTS).toEqual(FORMATS.filter((f) => f.kernels.device !== null).map((f) => f.code));
    expect(pipelineVariants().filter(([s]) => s === "matmul").map(([, d]) => d.FMT)).toEqual([...DEVICE_FMTS]);
    expect(Object.keys(SHADERS)).toContain("matmul");
  });

  test("both matmul shaders decode exactly the device formats", () => {
    const comp = readFileSync(join(ROOT, "shaders/matmul.comp"), "utf8"), wgsl = readFileSync(join(ROOT, "shaders/matmul.wgsl"), "utf8");
    const wqComp = comp.slice(comp.indexOf("float wq("), comp.indexOf("#error unsupported FMT"));
    const wqWgsl = wgsl.slice(wgsl.indexOf("fn wq("), wgsl.indexOf("default:", wgsl.indexOf("fn wq(")));
    const inComp = new Set([...wqComp.matchAll(/FMT == (\d+)/g)].map((m) => Number(m[1])));
    const inWgsl = new Set([...wqWgsl.matchAll(/case ([\du, ]+):/g)].flatMap((m) => m[1].split(",").map((s) => Number(s.trim().replace(/u$/, "")))));
    const want = [...DEVICE_FMTS].sort();
    expect([...inComp].sort()).toEqual(want);
    expect([...inWgsl].sort()).toEqual(want);
  });
});
