// libhb kernels against scalar TypeScript references (written from formats.md and spec §3.2), on seeded
// random inputs with odd sizes (vector tails), at every SIMD level this CPU has (forced scalar, AVX2,
// best). Also the thread pool (self-check symbol), conversions over all codes, and pread.
import { afterAll, describe, expect, test } from "bun:test";
import { dlopen, FFIType } from "bun:ffi";
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { ensureNative } from "../ffi/build.ts";
import {
  add, addRmsnorm, axpy, Conv, convert, copyHeads, expm, kvWrite, maxf, Fmt, type FmtCode, gatherRows, hb, layernorm, matmul, matmulQ8, poolWidth, pread,
  rmsnorm, rope, scatterAxpy, Simd, swiglu,
} from "../src/native/hb.ts";
import { rng } from "./helpers/rng.ts";

const lib = hb();
// test-only symbols, not part of the engine's table
const extra = dlopen(ensureNative(), {
  hb_pool_check: { args: [FFIType.i32, FFIType.i32, FFIType.i32], returns: FFIType.i32 },
  hb_pool_width_check: { args: [], returns: FFIType.i32 },
  hb_simd_level: { args: [], returns: FFIType.i32 },
}).symbols;
const best = lib.hb_simd_force(1);
afterAll(() => {
  lib.hb_simd_force(1);
  lib.hb_init(Number(process.env.HB_THREADS ?? 0) || 0);
});

/** SIMD levels to run: scalar, AVX2 (when present and not the best), best. */
const levels: number[] = [Simd.scalar];
if (best > Simd.avx2 && lib.hb_simd_force(Simd.avx2) === Simd.avx2) levels.push(Simd.avx2);
if (best > Simd.scalar) levels.push(best);
lib.hb_simd_force(1);
function atLevel<T>(level: number, f: () => T): T {
  expect(lib.hb_simd_force(level === 0 ? 0 : level)).toBe(level);
  try { return f(); } finally { lib.hb_simd_force(1); }
}

// ---- deterministic random ----
const randF32 = (r: () => number, n: number, amp = 1) => Float32Array.from({ length: n }, () => (r() * 2 - 1) * amp);
const randU8 = (r: () => number, n: number) => Uint8Array.from({ length: n }, () => Math.floor(r() * 256));

// ---- TS decoders (independent of the C bit tricks: finite values are built arithmetically) ----
const f32bits = (v: number) => new Uint32Array(Float32Array.of(v).buffer)[0];
function f16ToF32Bits(h: number): number {
  const sign = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0x1f) return ((h & 0x8000) << 16 | 0x7f800000 | (m << 13) | (m ? 0x400000 : 0)) >>> 0; // inf / quiet NaN
  const v = e === 0 ? m * 2 ** -24 : (1 + m / 1024) * 2 ** (e - 15);
  return f32bits(sign * v);
}
const f16ToF32 = (h: number) => new Float32Array(Uint32Array.of(f16ToF32Bits(h)).buffer)[0];
function f8e4m3(c: number): number {
  const sign = c & 0x80 ? -1 : 1, e = (c >> 3) & 15, m = c & 7;
  if (e === 15 && m === 7) return NaN;
  return sign * (e === 0 ? m * 2 ** -9 : (1 + m / 8) * 2 ** (e - 7));
}

// ---- matmul reference: dequantize per formats.md, then Σ w·x in double ----
type Weight = { W: Float32Array | Uint16Array | Uint8Array; scales: Float32Array | null; gs: number };
function makeWeight(fmt: FmtCode, O: number, I: number, gs: number, r: () => number): Weight {
  const h2 = Math.ceil(I / 2), h4 = Math.ceil(I / 4), sc = (n: number) => randF32(r, n, 0.05).map(Math.abs);
  switch (fmt) {
    case Fmt.f32: return { W: randF32(r, O * I), scales: null, gs: 0 };
    case Fmt.bf16: return { W: Uint16Array.from(randF32(r, O * I), (v) => f32bits(v) >>> 16), scales: null, gs: 0 };
    case Fmt.f16: // random sign, exponent 0..30 (subnormals included), mantissa
      return { W: Uint16Array.from({ length: O * I }, () => (r() < 0.5 ? 0x8000 : 0) | (Math.floor(r() * 16) << 10) | Math.floor(r() * 1024)), scales: null, gs: 0 };
    case Fmt.int8: return { W: randU8(r, O * I), scales: sc(O), gs: 0 };
    case Fmt.int4: return { W: randU8(r, O * h2), scales: sc(O), gs: 0 };
    case Fmt.int2: return { W: randU8(r, O * h4), scales: sc(O), gs: 0 };
    case Fmt.int4g: return { W: randU8(r, O * h2), scales: sc(O * Math.ceil(I / gs)), gs };
  }
  throw new Error(`fmt ${fmt}`);
}
function dequant(fmt: FmtCode, { W, scales, gs }: Weight, O: number, I: number): Float64Array {
  const w = new Float64Array(O * I), h2 = Math.ceil(I / 2), h4 = Math.ceil(I / 4), ng = Math.ceil(I / Math.max(gs, 1));
  const nib = (o: number, i: number) => { const b = W[o * h2 + (i >> 1)]; return ((i & 1 ? b >> 4 : b) & 15) - 8; };
  for (let o = 0; o < O; o++)
    for (let i = 0; i < I; i++) {
      const k = o * I + i;
      let v: number;
      if (fmt === Fmt.f32) v = W[k];
      else if (fmt === Fmt.bf16) v = new Float32Array(Uint32Array.of(W[k] << 16).buffer)[0];
      else if (fmt === Fmt.f16) v = f16ToF32(W[k]);
      else if (fmt === Fmt.int8) v = Math.fround(((W[k] << 24) >> 24) * scales![o]);
      else if (fmt === Fmt.int4) v = Math.fround(nib(o, i) * scales![o]);
      else if (fmt === Fmt.int2) v = Math.fround((((W[o * h4 + (i >> 2)] >> (2 * (i & 3))) & 3) - 2) * scales![o]);
      else v = Math.fround(nib(o, i) * scales![o * ng + Math.floor(i / gs)]);
      w[k] = v;
    }
  return w;
}
/** max over (s,o) of |y − Σ w·x| / (Σ |w·x| + tiny) */
function matmulError(w: Float64Array, x: Float32Array, y: Float32Array, O: number, I: number, S: number): number {
  let worst = 0;
  for (let s = 0; s < S; s++)
    for (let o = 0; o < O; o++) {
      let sum = 0, mag = 0;
      for (let i = 0; i < I; i++) { const p = w[o * I + i] * x[s * I + i]; sum += p; mag += Math.abs(p); }
      const err = Math.abs(y[s * O + o] - sum) / (mag + 1e-30);
      worst = Math.max(worst, Number.isNaN(err) ? Infinity : err);
    }
  return worst;
}

const fmtNames = Object.entries(Fmt) as [string, FmtCode][];
describe("matmul", () => {
  for (const [name, fmt] of fmtNames) {
    test(`${name}: every level vs dequantized TS reference, tails and S blocks`, () => {
      const r = rng(1000 + fmt);
      for (const I of [1, 7, 33, 257, 1000])
        for (const S of [1, 3, 8])
          for (const O of [1, 5, 67]) {
            const gs = fmt === Fmt.int4g ? [64, 16, 48, 7][(I + O) % 4] : 0; // 7 and 48: odd/unaligned groups
            const wt = makeWeight(fmt, O, I, gs, r), x = randF32(r, S * I);
            const w = dequant(fmt, wt, O, I);
            for (const level of levels) {
              const y = new Float32Array(S * O).fill(NaN);
              atLevel(level, () => matmul(fmt, wt.W, wt.scales, wt.gs, O, I, x, S, y));
              const err = matmulError(w, x, y, O, I, S);
              if (!(err <= 1e-5)) throw new Error(`${name} O=${O} I=${I} S=${S} gs=${gs} level=${level}: rel err ${err}`);
            }
          }
    });
  }
  test("SIMD and forced-scalar agree on a larger f32/bf16/int4g problem (parallel, tile path)", () => {
    const r = rng(7), O = 300, I = 515, S = 17;
    for (const fmt of [Fmt.f32, Fmt.bf16, Fmt.int4g] as FmtCode[]) {
      const wt = makeWeight(fmt, O, I, 64, r), x = randF32(r, S * I);
      const ys = levels.map((level) => {
        const y = new Float32Array(S * O);
        atLevel(level, () => matmul(fmt, wt.W, wt.scales, wt.gs, O, I, x, S, y));
        return y;
      });
      const w = dequant(fmt, wt, O, I);
      for (const y of ys) expect(matmulError(w, x, y, O, I, S)).toBeLessThan(1e-5);
    }
  });
  test("batch invariance: each row of x gives bit-identical y alone (S=1), in a block (S=3) or in a batch (S=13)", () => {
    const r = rng(99), O = 67, S = 13;
    for (const [name, fmt] of fmtNames)
      for (const I of [7, 33, 1000]) {
        const wt = makeWeight(fmt, O, I, 32, r), x = randF32(r, S * I);
        for (const level of levels) {
          const all = new Float32Array(S * O);
          atLevel(level, () => matmul(fmt, wt.W, wt.scales, wt.gs, O, I, x, S, all));
          for (let s = 0; s < S; s++) {
            const one = new Float32Array(O), three = new Float32Array(3 * O), s3 = Math.min(s, S - 3);
            atLevel(level, () => {
              matmul(fmt, wt.W, wt.scales, wt.gs, O, I, x.subarray(s * I, (s + 1) * I), 1, one);
              matmul(fmt, wt.W, wt.scales, wt.gs, O, I, x.subarray(s3 * I, (s3 + 3) * I), 3, three);
            });
            const row = all.subarray(s * O, (s + 1) * O), row3 = three.subarray((s - s3) * O, (s - s3 + 1) * O);
            if (!row.every((v, o) => Object.is(v, one[o]) && Object.is(v, row3[o])))
              throw new Error(`${name} I=${I} level=${level}: row ${s} differs between S=1, S=3 and S=${S}`);
          }
        }
      }
  });
  test("bad calls fill y with NaN, I = 0 gives zeros, never a crash", () => {
    const y = new Float32Array(6);
    matmul(9 as FmtCode, new Float32Array(6), null, 0, 3, 2, new Float32Array(4), 2, y);
    expect(y.every(Number.isNaN)).toBe(true);
    y.fill(0);
    matmul(Fmt.int4g, new Uint8Array(3), new Float32Array(3), 0, 3, 2, new Float32Array(4), 2, y);
    expect(y.every(Number.isNaN)).toBe(true);
    y.fill(0);
    matmul(Fmt.int8, new Uint8Array(6), null, 0, 3, 2, new Float32Array(4), 2, y);
    expect(y.every(Number.isNaN)).toBe(true);
    y.fill(5);
    matmul(Fmt.f32, new Float32Array(1), null, 0, 3, 0, new Float32Array(1), 2, y);
    expect(Array.from(y)).toEqual([0, 0, 0, 0, 0, 0]);
  });
});

describe("pool", () => {
  test("every index exactly once, chunks at multiples of chunk: n = 0, 1, primes; chunks 1, 3, 64; nested; spans", () => {
    for (const threads of [1, 3, 0, 7]) {
      const got = lib.hb_init(threads);
      expect(got).toBe(threads || lib.hb_nthreads());
      expect(lib.hb_nthreads()).toBe(got);
      for (const n of [0, 1, 2, 3, 7, 13, 97, 1009, 100003])
        for (const chunk of [1, 3, 64])
          for (const flags of [0, 1, 2, 3]) { // 1: a nested call in each chunk, 2: hb_parallel_spans
            const bad = extra.hb_pool_check(n, chunk, flags);
            if (bad !== 0) throw new Error(`threads=${threads} n=${n} chunk=${chunk} flags=${flags}: ${bad} bad`);
          }
    }
    lib.hb_init(0);
  });
  test("the width policy (ffi/pool_width.c): two bad windows drop a thread, tries after a stay, failed tries double it", () => {
    expect(extra.hb_pool_width_check()).toBe(0);
    const before = poolWidth();
    lib.hb_pool_adapt(0); // every thread (the kernel benchmarks): the full width at once, the counts going on
    expect(poolWidth()).toEqual({ ...before, width: lib.hb_nthreads() });
    lib.hb_pool_adapt(1);
  });
  // (pinned with taskset to CPUs 0 and 1, the busy process to CPU 1: the same contention on any machine)
  test.skipIf(!Bun.which("taskset") || cpus().length < 2)("beside a busy process on one of its two cores the pool drops to one thread, with the same bits, and comes back", async () => {
    const busy = Bun.spawn({ cmd: ["taskset", "-c", "1", process.execPath, "-e", "for (;;) {}"], stdout: "ignore", stderr: "ignore" });
    const child = Bun.spawn({ cmd: ["taskset", "-c", "0,1", process.execPath, join(import.meta.dir, "helpers/pool-width-child.ts")],
      stdin: "pipe", stdout: "pipe", stderr: "inherit" });
    const out = child.stdout.getReader(), dec = new TextDecoder();
    let text = "";
    try {
      while (!text.includes("dropped\n")) { const r = await out.read(); if (r.done) break; text += dec.decode(r.value); }
    } finally {
      busy.kill();
      await busy.exited;
    }
    child.stdin.write("go\n");
    child.stdin.end();
    for (;;) { const r = await out.read(); if (r.done) break; text += dec.decode(r.value); }
    expect(await child.exited).toBe(0);
    const res = JSON.parse(text.slice(text.indexOf("\n") + 1));
    expect(res.threads).toBe(2);
    expect(res.differ).toBe(0);
    expect(res.dropped).toMatchObject({ width: 1, drops: 1 });
    expect(res.back.width).toBe(2);
  }, 60_000);
  test("hb_init(1) then hb_init(0) keeps kernels working; many serial calls", () => {
    const r = rng(3), O = 129, I = 70, x = randF32(r, I), wt = makeWeight(Fmt.f32, O, I, 0, r);
    const w = dequant(Fmt.f32, wt, O, I);
    for (const n of [1, 0, 2, 0]) {
      lib.hb_init(n);
      for (let k = 0; k < 200; k++) {
        const y = new Float32Array(O);
        matmul(Fmt.f32, wt.W, null, 0, O, I, x, 1, y);
        if (k % 50 === 0) expect(matmulError(w, x, y, O, I, 1)).toBeLessThan(1e-5);
      }
    }
  });
  test("simd name and level are consistent", () => {
    const named: number | undefined = Simd[String(lib.hb_simd_name()) as keyof typeof Simd];
    expect(named).toBe(extra.hb_simd_level());
  });
});

describe("conversions", () => {
  const all16 = Uint16Array.from({ length: 65536 * 5 }, (_, i) => i & 0xffff); // ×5: parallel path too
  for (const level of levels) {
    test(`bf16 and f16: all 65536 codes bit-exact (level ${level})`, () => {
      const out = new Float32Array(all16.length), bits = new Uint32Array(out.buffer);
      atLevel(level, () => convert(Conv.bf16, all16, out, all16.length));
      for (let i = 0; i < all16.length; i++) if (bits[i] !== ((all16[i] << 16) >>> 0)) throw new Error(`bf16 ${all16[i]}`);
      atLevel(level, () => convert(Conv.f16, all16, out, all16.length));
      for (let i = 0; i < all16.length; i++) {
        const want = f16ToF32Bits(all16[i]);
        if (bits[i] !== want) throw new Error(`f16 0x${all16[i].toString(16)}: got 0x${bits[i].toString(16)} want 0x${want.toString(16)}`);
      }
    });
  }
  test("F8 E4M3: all 256 codes", () => {
    const src = Uint8Array.from({ length: 256 }, (_, i) => i), out = new Float32Array(256);
    convert(Conv.f8e4m3, src, out, 256);
    for (let c = 0; c < 256; c++) {
      const want = f8e4m3(c);
      if (Number.isNaN(want)) expect(Number.isNaN(out[c])).toBe(true);
      else if (f32bits(out[c]) !== f32bits(want)) throw new Error(`f8 0x${c.toString(16)}: ${out[c]} vs ${want}`);
    }
    expect(out[0x7e]).toBe(448);
    expect(out[0x01]).toBe(2 ** -9);
    expect(Object.is(out[0x80], -0)).toBe(true);
  });
});

describe("norms and element-wise", () => {
  const r = rng(11);
  test(`rmsnorm and layernorm bit-exact vs double TS reference (levels ${levels.join(", ")})`, () => {
    for (const [S, D] of [[1, 1], [3, 7], [2, 1000], [40, 2049]] as const) for (const level of levels) {
      const x = randF32(r, S * D, 3), w = randF32(r, D), b = randF32(r, D), eps = Math.fround(1e-5);
      const y = new Float32Array(S * D), z = new Float32Array(S * D);
      atLevel(level, () => { rmsnorm(x, w, y, S, D, eps); layernorm(x, w, b, z, S, D, eps); });
      for (let s = 0; s < S; s++) {
        // Σx²: element i into partial sum i mod 8, combined ((t0+t4)+(t2+t6))+((t1+t5)+(t3+t7)) (norm.c)
        const t = new Array<number>(8).fill(0);
        let sum = 0, v = 0;
        for (let i = 0; i < D; i++) { t[i & 7] += x[s * D + i] * x[s * D + i]; sum += x[s * D + i]; }
        const ss = ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
        const rr = 1 / Math.sqrt(ss / D + eps), mean = sum / D;
        for (let i = 0; i < D; i++) v += (x[s * D + i] - mean) ** 2;
        const rl = 1 / Math.sqrt(v / D + eps);
        for (let i = 0; i < D; i++) {
          const k = s * D + i;
          if (y[k] !== Math.fround(x[k] * rr * w[i])) throw new Error(`rmsnorm S=${S} D=${D} level ${level} at ${k}`);
          if (z[k] !== Math.fround((x[k] - mean) * rl * w[i] + b[i])) throw new Error(`layernorm S=${S} D=${D} at ${k}`);
        }
      }
    }
  });
  test("addRmsnorm: the add then the norm, bit for bit (decode rows on the caller, prefill's add on the pool)", () => {
    for (const [S, D] of [[1, 1024], [3, 7], [40, 2049]] as const) {
      const x = randF32(r, S * D, 3), a = randF32(r, S * D), w = randF32(r, D), eps = Math.fround(1e-5);
      const x1 = x.slice(), y1 = new Float32Array(S * D), y2 = new Float32Array(S * D);
      add(x1, a, S * D);
      rmsnorm(x1, w, y1, S, D, eps);
      addRmsnorm(x, a, w, y2, S, D, eps);
      expect([S, D, x.every((v, i) => Object.is(v, x1[i])), y2.every((v, i) => Object.is(v, y1[i]))]).toEqual([S, D, true, true]);
    }
    expect(() => addRmsnorm(new Float32Array(8), new Float32Array(7), new Float32Array(8), new Float32Array(8), 1, 8, 1e-5)).toThrow(/too small/);
  });
  test("swiglu, add (exact), axpy (exact)", () => {
    for (const n of [1, 17, 1001, 20001, 70001]) { // 20001: SwiGLU in 4096-element chunks on the pool, a partial last one; 70001: add too
      const g = randF32(r, n, 8), u = randF32(r, n), out = new Float32Array(n);
      swiglu(g, u, out, n);
      for (let i = 0; i < n; i++) {
        const want = (g[i] / (1 + Math.exp(-g[i]))) * u[i];
        expect(Math.abs(out[i] - want)).toBeLessThanOrEqual(1e-6 * Math.abs(want) + 1e-30);
      }
      // SIMD lanes and the scalar tail give the same bits: each element alone equals it inside the array
      const one = new Float32Array(1);
      for (let i = 0; i < n; i++) {
        swiglu(g.subarray(i, i + 1), u.subarray(i, i + 1), one, 1);
        expect(one[0]).toBe(out[i]);
      }
      const y = randF32(r, n), y0 = y.slice(), x = randF32(r, n), a = Math.fround(0.37);
      add(y, x, n);
      for (let i = 0; i < n; i++) expect(y[i]).toBe(Math.fround(y0[i] + x[i]));
      const y1 = y.slice();
      axpy(y, a, x, n);
      for (let i = 0; i < n; i++) expect(y[i]).toBe(Math.fround(y1[i] + Math.fround(a * x[i])));
    }
  });
  test("swiglu: extreme and non-finite gates, lane / tail agreement", () => {
    const special = [0, -0, 1e-30, -1e-30, 20, -20, 87, -87, 88.5, -88.5, 100, -100, 1e30, -1e30, Infinity, -Infinity, NaN];
    const n = 40, g = new Float32Array(n), u = new Float32Array(n).fill(1.5), out = new Float32Array(n), one = new Float32Array(1);
    for (let i = 0; i < n; i++) g[i] = special[i % special.length];
    swiglu(g, u, out, n);
    for (const level of levels) { // every SIMD level gives the same bits (a NaN's sign and payload are not compared)
      const o = atLevel(level, () => { const o = new Float32Array(n); swiglu(g, u, o, n); return o; });
      const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer), (b, i) => (Number.isNaN(a[i]) ? -1 : b));
      expect(bits(o)).toEqual(bits(out));
    }
    for (let i = 0; i < n; i++) {
      swiglu(g.subarray(i, i + 1), u.subarray(i, i + 1), one, 1);
      expect(Object.is(one[0], out[i]) || (Number.isNaN(one[0]) && Number.isNaN(out[i]))).toBe(true);
      const want = g[i] === -Infinity ? NaN : (g[i] / (1 + Math.exp(-g[i]))) * 1.5;
      if (Number.isNaN(want)) expect(Number.isNaN(out[i])).toBe(true);
      else if (!Number.isFinite(want)) expect(out[i]).toBe(want);
      else expect(Math.abs(out[i] - want)).toBeLessThanOrEqual(1e-6 * Math.abs(want) + 1e-30);
    }
  });
  test("expm (softmax numerators): within 3 ulp of e^(x−m) (0 below 2^-125), the same bits at every SIMD level and position", () => {
    const n = 1001, x = Float32Array.from(randF32(r, n, 60), (v) => v - 30), m = Math.fround(3.5);
    const runs = levels.map((level) => atLevel(level, () => { const y = x.slice(); expm(y, n, m); return y; }));
    for (const y of runs) expect(new Uint32Array(y.buffer)).toEqual(new Uint32Array(runs[0].buffer));
    const one = new Float32Array(1);
    for (let i = 0; i < n; i++) {
      const want = Math.exp(Math.fround(x[i] - m));
      expect(Math.abs(runs[0][i] - want)).toBeLessThanOrEqual(3 * 1.2e-7 * want + 1.2e-38); // (flushed below 2^-125)
      if (i % 97 === 0) { one[0] = x[i]; expm(one, 1, m); expect(one[0]).toBe(runs[0][i]); }
    }
  });
  test("maxf (softmax max): the forward scan's bits at every level: NaN only first, the first of ±0, tails", () => {
    const scan = (x: Float32Array) => { let m = x[0]; for (let j = 1; j < x.length; j++) if (x[j] > m) m = x[j]; return m; };
    const bits = (v: number) => new Uint32Array(Float32Array.of(v).buffer)[0];
    const cases: Float32Array[] = [];
    for (const n of [1, 5, 16, 17, 40, 333]) cases.push(randF32(r, n, 8));
    cases.push(Float32Array.from({ length: 37 }, (_, i) => (i === 9 ? NaN : -i)));     // a NaN inside: ignored
    cases.push(Float32Array.from({ length: 37 }, (_, i) => (i === 0 ? NaN : i)));      // NaN first: the result
    cases.push(Float32Array.from({ length: 37 }, (_, i) => (i < 20 ? -1 - i : i === 20 ? -0 : 0))); // -0 first
    cases.push(Float32Array.from({ length: 37 }, (_, i) => (i === 3 ? 0 : i === 30 ? -0 : -5)));    // +0 first
    cases.push(Float32Array.from({ length: 50 }, (_, i) => (i % 7 === 0 ? -Infinity : -100 + i))); // the last lane's tail
    for (const x of cases) {
      const want = bits(scan(x));
      for (const level of levels) expect(atLevel(level, () => bits(maxf(x, x.length)))).toBe(want);
    }
  });
  test("copy_heads: strided per-head copies, a shared source head, nothing else written", () => {
    const S = 3, H = 4, n = 5, src = randF32(r, 100), dst = new Float32Array(200).fill(7);
    copyHeads({ a: dst.subarray(2), row: 40, head: 9 }, { a: src, row: 11, head: 0 }, S, H, n);
    const want = new Float32Array(200).fill(7);
    for (let s = 0; s < S; s++) for (let h = 0; h < H; h++) for (let i = 0; i < n; i++) want[2 + s * 40 + h * 9 + i] = src[s * 11 + i];
    expect(dst).toEqual(want);
    copyHeads({ a: dst, row: 40, head: 9 }, { a: src, row: 20, head: 6 }, S, H, 3);
    for (let s = 0; s < S; s++) for (let h = 0; h < H; h++) for (let i = 0; i < 3; i++) want[s * 40 + h * 9 + i] = src[s * 20 + h * 6 + i];
    expect(dst).toEqual(want);
  });
  test("kv_write: each segment's rows [lat ‖ k_pe] into its own cache at pos0, nothing else written; bounds", () => {
    const kvr = 6, dr = 4, W = kvr + dr, S = 5, lat = randF32(r, S * kvr), a = randF32(r, S * W);
    const c0 = new Float32Array(8 * W).fill(7), c1 = new Float32Array(8 * W).fill(7);
    kvWrite([{ cache: c0, pos0: 2, r0: 0, n: 3 }, { cache: c1, pos0: 5, r0: 3, n: 2 }], lat, kvr, a.subarray(kvr), W, dr);
    const w0 = new Float32Array(8 * W).fill(7), w1 = new Float32Array(8 * W).fill(7);
    const put = (c: Float32Array, pos: number, row: number) => {
      for (let i = 0; i < kvr; i++) c[pos * W + i] = lat[row * kvr + i];
      for (let j = 0; j < dr; j++) c[pos * W + kvr + j] = a[row * W + kvr + j];
    };
    for (let k = 0; k < 3; k++) put(w0, 2 + k, k);
    for (let k = 0; k < 2; k++) put(w1, 5 + k, 3 + k);
    expect(c0).toEqual(w0);
    expect(c1).toEqual(w1);
    expect(() => kvWrite([{ cache: c1, pos0: 7, r0: 0, n: 2 }], lat, kvr, a.subarray(kvr), W, dr)).toThrow("outside the cache of 8");
  });
  test("rope: interleaved pairs, strided rows/vectors, other elements untouched", () => {
    const S = 3, nvec = 4, dr = 64, vecStride = dr + 3, rowStride = nvec * vecStride + 5, theta = 1e6;
    const x = randF32(r, S * rowStride), y = x.slice(), pos = Int32Array.of(0, 7, 123456);
    rope(y, S, rowStride, nvec, vecStride, dr, pos, theta);
    const touched = new Set<number>();
    for (let s = 0; s < S; s++)
      for (let v = 0; v < nvec; v++)
        for (let j = 0; j < dr / 2; j++) {
          const p = s * rowStride + v * vecStride, phi = pos[s] * Math.pow(theta, (-2 * j) / dr);
          const a = x[p + 2 * j], b = x[p + 2 * j + 1], c = Math.cos(phi), sn = Math.sin(phi);
          const wa = a * c - b * sn, wb = b * c + a * sn;
          expect(Math.abs(y[p + 2 * j] - wa)).toBeLessThanOrEqual(1e-6 * Math.abs(wa) + 1e-7);
          expect(Math.abs(y[p + 2 * j + 1] - wb)).toBeLessThanOrEqual(1e-6 * Math.abs(wb) + 1e-7);
          touched.add(p + 2 * j).add(p + 2 * j + 1);
        }
    for (let k = 0; k < x.length; k++) if (!touched.has(k)) expect(y[k]).toBe(x[k]);
    const y0 = x.slice(0, dr); // position 0 is the identity
    rope(y0, 1, dr, 1, dr, dr, Int32Array.of(0), theta);
    expect(Array.from(y0)).toEqual(Array.from(x.slice(0, dr)));
    // a prompt's rows (split on the pool) equal each row roped alone (the serial path), bit for bit
    const P = 301, H = 16, d = 32, big = randF32(r, P * H * d), one = big.slice(), ps = Int32Array.from({ length: P }, (_, i) => 3 * i);
    rope(big, P, H * d, H, d, d, ps, theta);
    for (let s = 0; s < P; s++) rope(one.subarray(s * H * d), 1, H * d, H, d, d, ps.subarray(s, s + 1), theta);
    expect(big).toEqual(one);
  });
});

describe("row helpers at prefill size (copies split on the pool) equal their definitions bit for bit", () => {
  const r = rng(77);
  const S = 300, D = 1000, n = 2400; // n·D, S·D ≥ 65536 floats: the pool paths of the copies
  const x = randF32(r, S * D);
  test("gather_rows: out[j] = x[rows[j]] (rows repeat)", () => {
    const rows = Int32Array.from({ length: n }, () => Math.floor(r() * S)), out = new Float32Array(n * D);
    gatherRows(x, D, rows, n, out);
    for (let j = 0; j < n; j += 7) expect(out.subarray(j * D, (j + 1) * D)).toEqual(x.subarray(rows[j] * D, (rows[j] + 1) * D));
  });
  test("scatter_axpy: y[rows[j]] += g_j·ye[j] in j order, also where rows repeat (on the pool by rows of y, and serial)", () => {
    for (const [n1, D1] of [[n, D], [8, 64]]) { // (8·64 < 65536: the serial loop of a decode step)
      const rows = Int32Array.from({ length: n1 }, () => Math.floor(r() * S)), g = randF32(r, n1), ye = randF32(r, n1 * D1);
      const y = x.slice(0, S * D1), want = y.slice();
      scatterAxpy(y, D1, rows, g, ye, n1);
      for (let j = 0; j < n1; j++)
        for (let i = 0; i < D1; i++) want[rows[j] * D1 + i] = Math.fround(want[rows[j] * D1 + i] + Math.fround(g[j] * ye[j * D1 + i]));
      expect(y).toEqual(want);
    }
  });
  test("add: y += x over a prefill-sized residual", () => {
    const N = 3 * 65536 + 123, y = randF32(r, N), b = randF32(r, N), want = y.map((v, i) => Math.fround(v + b[i]));
    add(y, b, N);
    expect(y).toEqual(want);
  });
  test("copy_heads: every row and head of a large strided copy", () => {
    const H = 16, m = 24, src = randF32(r, S * H * 40), dst = new Float32Array(S * H * 30).fill(5);
    copyHeads({ a: dst, row: H * 30, head: 30 }, { a: src, row: H * 40, head: 40 }, S, H, m);
    const want = new Float32Array(S * H * 30).fill(5);
    for (let s = 0; s < S; s++) for (let h = 0; h < H; h++) for (let i = 0; i < m; i++) want[s * H * 30 + h * 30 + i] = src[s * H * 40 + h * 40 + i];
    expect(dst).toEqual(want);
  });
  test("rope: the angle table is reused only for the same positions, dims and theta", () => {
    const dr = 32, rows = 5, x0 = randF32(r, rows * dr);
    const one = (pos: number[], theta: number, d = dr) => {
      const y = x0.slice(0, pos.length * d);
      rope(y, pos.length, d, 1, d, d, Int32Array.from(pos), theta);
      return y;
    };
    const rowAlone = (pos: number[], theta: number, d = dr) => pos.flatMap((p, s) => {
      const y = x0.slice(s * d, (s + 1) * d);
      rope(y, 1, d, 1, d, d, Int32Array.of(p), theta);
      return Array.from(y);
    });
    // consecutive calls that differ from the previous one in one key each (a stale table would be reused),
    // each made twice (the second from the table), then checked against the rows roped one at a time
    const cases: [number[], number, number][] = [[[1, 2, 3, 4, 5], 1e4, 32], [[1, 2, 3, 4, 6], 1e4, 32], [[1, 2, 3, 4, 6], 1e6, 32],
      [[1, 2, 3, 4, 6], 1e6, 16], [[9, 2, 3, 4, 6], 1e6, 16], [[9, 2, 3], 1e6, 16]];
    const got = cases.map(([pos, theta, d]) => [one(pos, theta, d), one(pos, theta, d)]);
    cases.forEach(([pos, theta, d], k) => {
      expect(Array.from(got[k][0])).toEqual(rowAlone(pos, theta, d));
      expect(got[k][1]).toEqual(got[k][0]);
    });
  });
});

describe("pread", () => {
  const dir = mkdtempSync(join(tmpdir(), "hb-pread-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  test("reads at offsets, short at EOF, −errno on a bad fd", () => {
    const data = Uint8Array.from({ length: 10000 }, (_, i) => (i * 7 + 3) & 255);
    const file = join(dir, "blob.bin");
    writeFileSync(file, data);
    const fd = openSync(file, "r");
    try {
      for (const [off, len] of [[0, 10000], [1, 1], [4097, 333], [9990, 10]]) {
        const buf = new Uint8Array(len);
        expect(pread(fd, buf, len, off)).toBe(len);
        expect(buf).toEqual(data.subarray(off, off + len));
      }
      const buf = new Uint8Array(100);
      expect(pread(fd, buf, 100, 9950)).toBe(50);
      expect(pread(fd, buf, 100, 20000)).toBe(0);
      expect(pread(fd, buf.subarray(10), 5, 2)).toBe(5);
      expect(buf.subarray(10, 15)).toEqual(data.subarray(2, 7));
    } finally {
      closeSync(fd);
    }
    const ebadf = 9;
    expect(pread(fd, new Uint8Array(4), 4, 0)).toBe(-ebadf); // fd closed above
    expect(pread(-1, new Uint8Array(4), 4, 0)).toBe(-ebadf);
  });
});
