// Tests for the attention kernel family (ffi/attn.c, attn_x86.c, dsa.c) through the src/native/hb.ts wrappers:
// hb_attn (strided MLA/DSA attention core), hb_index_scores (lightning indexer), hb_dsa_select (top-k, tie rule).
// Each kernel is checked against a plain TypeScript reference written here, and SIMD against forced scalar.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  attn, attnSegs, columnQuads, dsaSelect, Fmt, hb, type HeadsW, indexScores, kvRowElems, kvWrite, mlaAbsorbed, mlaHeads, type MlaSeg, packHeads,
  Simd, simdLevel, toF16, type AttnOperand,
} from "../src/native/hb.ts";
import { rng } from "./helpers/rng.ts";

// ---- helpers ----
const randArr = (r: () => number, n: number, lo = -1, hi = 1) => Float32Array.from({ length: n }, () => lo + (hi - lo) * r());
const randInt = (r: () => number, n: number) => Math.floor(r() * n);

/** max |a-b| / max |b|: a norm-wise relative error. NaN (the sentinel of unwritten slots) must match NaN. */
function relErr(a: Float32Array, b: Float32Array | Float64Array, floor = 1e-30): number {
  let d = 0, m = floor;
  for (let i = 0; i < b.length; i++) {
    if (Number.isNaN(a[i]) || Number.isNaN(b[i])) {
      if (Number.isNaN(a[i]) !== Number.isNaN(b[i])) return Infinity;
      continue; // both NaN: an untouched sentinel slot
    }
    d = Math.max(d, Math.abs(a[i] - b[i]));
    m = Math.max(m, Math.abs(b[i]));
  }
  return d / m;
}

/** Run fn at a SIMD level (hb_simd_force: 0 scalar, 2 = cap at AVX2), then restore the best level. */
function atLevel<T>(level: number, fn: () => T): T {
  hb().hb_simd_force(level);
  try {
    return fn();
  } finally {
    hb().hb_simd_force(1);
  }
}
const LOWER_LEVELS = [Simd.scalar, Simd.avx2]; // scalar reference, AVX2 (== best or scalar on machines without it)
// Load (and, when ffi/*.c changed, compile) libhb outside any single test's time limit.
beforeAll(() => void hb(), 180_000);
afterAll(() => hb().hb_simd_force(1));

// ---- TS references ----
interface AttnCase {
  S: number; H: number; dk: number; dv: number; q: AttnOperand; k: AttnOperand; v: AttnOperand;
  sel: Int32Array | null; nsel: Int32Array; selRow: number; scale: number; out: AttnOperand;
}
function attnRef(c: AttnCase): Float64Array {
  const o = new Float64Array(c.out.a.length);
  for (let i = 0; i < o.length; i++) o[i] = c.out.a[i]; // untouched slots keep their sentinel
  for (let s = 0; s < c.S; s++)
    for (let h = 0; h < c.H; h++) {
      const n = Math.max(0, c.nsel[s]), ob = s * c.out.row + h * c.out.head;
      for (let e = 0; e < c.dv; e++) o[ob + e] = 0;
      if (n === 0) continue;
      const keys = Array.from({ length: n }, (_, j) => (c.sel ? c.sel[s * c.selRow + j] : j));
      const sc = keys.map((t) => {
        let d = 0;
        for (let i = 0; i < c.dk; i++) d += c.q.a[s * c.q.row + h * c.q.head + i] * c.k.a[t * c.k.row + h * c.k.head + i];
        return c.scale * d;
      });
      const m = Math.max(...sc), e = sc.map((x) => Math.exp(x - m)), z = e.reduce((a, b) => a + b, 0);
      keys.forEach((t, j) => {
        for (let i = 0; i < c.dv; i++) o[ob + i] += (e[j] / z) * c.v.a[t * c.v.row + h * c.v.head + i];
      });
    }
  return o;
}
const runAttn = (c: AttnCase) => attn(c.S, c.H, c.dk, c.dv, c.q, c.k, c.v, c.sel, c.nsel, c.selRow, c.scale, c.out);
/** The best level near the TS reference; each lower level near the best (and, with lowerVsRef, the reference). */
function expectAtLevels(c: AttnCase, lowerVsRef: boolean): void {
  const ref = attnRef(c);
  runAttn(c);
  expect(relErr(c.out.a, ref)).toBeLessThan(1e-5);
  for (const level of LOWER_LEVELS) {
    const cs = fresh(c);
    atLevel(level, () => runAttn(cs));
    if (lowerVsRef) expect(relErr(cs.out.a, ref)).toBeLessThan(1e-5);
    expect(relErr(c.out.a, cs.out.a)).toBeLessThan(1e-6);
  }
}

/** Random case. shared: MLA absorbed form (K row = [c_kv ‖ k_pe], V = c_kv aliasing K, head stride 0). */
function makeAttn(seed: number, o: { S: number; H: number; dk: number; dv: number; T: number; shared: boolean; useSel: boolean; zeroRows?: boolean }): AttnCase {
  const r = rng(seed);
  const { S, H, dk, dv, T } = o;
  const q: AttnOperand = { a: randArr(r, S * (H * dk + 3)), row: H * dk + 3, head: dk }; // padded rows
  let k: AttnOperand, v: AttnOperand;
  if (o.shared) {
    if (dv > dk) throw new Error("shared case needs dv <= dk");
    k = { a: randArr(r, T * (dk + 1)), row: dk + 1, head: 0 };
    v = { a: k.a, row: k.row, head: 0 };
  } else {
    const kv = randArr(r, T * H * (dk + dv)); // interleaved per head like kv_b output [T, H, dk+dv]
    k = { a: kv, row: H * (dk + dv), head: dk + dv };
    v = { a: Float32Array.from(kv.subarray(dk)), row: H * (dk + dv), head: dk + dv }; // FFI gets a fresh base
  }
  const selRow = T + 2;
  const nsel = Int32Array.from({ length: S }, (_, s) => (o.zeroRows && s % 3 === 1 ? 0 : 1 + randInt(r, T)));
  let sel: Int32Array | null = null;
  if (o.useSel) {
    sel = new Int32Array(S * selRow).fill(-1); // unused slots would crash/poison if read
    for (let s = 0; s < S; s++) {
      const perm = Array.from({ length: T }, (_, i) => i).sort(() => r() - 0.5);
      for (let j = 0; j < nsel[s]; j++) sel[s * selRow + j] = perm[j];
    }
  }
  const out: AttnOperand = { a: new Float32Array(S * (H * (dv + 2) + 1)).fill(NaN), row: H * (dv + 2) + 1, head: dv + 2 };
  return { S, H, dk, dv, q, k, v, sel, nsel, selRow, scale: 1 / Math.sqrt(dk), out };
}
const fresh = (c: AttnCase): AttnCase => ({ ...c, out: { ...c.out, a: new Float32Array(c.out.a.length).fill(NaN) } });

describe("hb_attn", () => {
  const shapes = [
    { dk: 1, dv: 5, H: 1, S: 3, T: 7 },
    { dk: 17, dv: 5, H: 3, S: 4, T: 23 },
    { dk: 72, dv: 64, H: 2, S: 5, T: 40 },
    { dk: 17, dv: 64, H: 5, S: 2, T: 33 },
    { dk: 33, dv: 29, H: 4, S: 3, T: 19 }, // dv = 16 + 8 + 5: every AVX2 value-sum width
  ];
  for (const sh of shapes)
    for (const useSel of [false, true])
      test(`per-head K dk=${sh.dk} dv=${sh.dv} H=${sh.H} sel=${useSel}`, () => {
        expectAtLevels(makeAttn(sh.dk * 100 + sh.dv + (useSel ? 7 : 0), { ...sh, shared: false, useSel, zeroRows: true }), true);
      });

  for (const sh of [{ dk: 80, dv: 64, H: 13, S: 3, T: 50 }, { dk: 27, dv: 24, H: 16, S: 1, T: 9 }, { dk: 576, dv: 512, H: 8, S: 2, T: 160 }])
    for (const useSel of [false, true])
      test(`shared K (MLA absorbed) dk=${sh.dk} dv=${sh.dv} H=${sh.H} sel=${useSel}`, () => {
        expectAtLevels(makeAttn(sh.dk + sh.H + (useSel ? 1 : 0), { ...sh, shared: true, useSel, zeroRows: sh.S > 1 }), false);
      });

  test("nsel=0 rows are zero, padding between heads/rows untouched", () => {
    const c = makeAttn(5, { S: 6, H: 3, dk: 17, dv: 5, T: 12, shared: false, useSel: true, zeroRows: true });
    runAttn(c);
    for (let s = 0; s < c.S; s++)
      for (let h = 0; h < c.H; h++) {
        const b = s * c.out.row + h * c.out.head;
        for (let e = 0; e < c.dv; e++) {
          if (c.nsel[s] === 0) expect(c.out.a[b + e]).toBe(0);
          else expect(Number.isFinite(c.out.a[b + e])).toBe(true);
        }
        expect(c.out.a[b + c.dv]).toBeNaN();
        expect(c.out.a[b + c.dv + 1]).toBeNaN();
      }
    for (let s = 0; s < c.S; s++) expect(c.out.a[s * c.out.row + c.out.row - 1]).toBeNaN();
  });

  test("one key -> output equals that value row exactly", () => {
    const c = makeAttn(9, { S: 2, H: 4, dk: 33, dv: 20, T: 10, shared: false, useSel: true });
    c.nsel.fill(1);
    runAttn(c);
    for (let s = 0; s < c.S; s++)
      for (let h = 0; h < c.H; h++) {
        const t = c.sel![s * c.selRow];
        for (let e = 0; e < c.dv; e++) expect(c.out.a[s * c.out.row + h * c.out.head + e]).toBe(c.v.a[t * c.v.row + h * c.v.head + e]);
      }
  });

  test("sel = 0..n-1 equals dense bit for bit (spec §3.3 self-test)", () => {
    for (const shared of [true, false]) {
      const dense = makeAttn(21, { S: 4, H: 11, dk: 40, dv: 24, T: 70, shared, useSel: false });
      const sel = new Int32Array(dense.S * dense.selRow);
      for (let s = 0; s < dense.S; s++) for (let j = 0; j < dense.nsel[s]; j++) sel[s * dense.selRow + j] = j;
      const viaSel = { ...fresh(dense), sel };
      runAttn(dense);
      runAttn(viaSel);
      expect(Array.from(viaSel.out.a)).toEqual(Array.from(dense.out.a));
    }
  });

  test("a row's result does not depend on the batch it runs in (bit exact)", () => {
    const c = makeAttn(33, { S: 6, H: 16, dk: 48, dv: 32, T: 60, shared: true, useSel: true });
    runAttn(c);
    for (let s = 0; s < c.S; s++) {
      const one: AttnCase = {
        ...c, S: 1,
        q: { ...c.q, a: c.q.a.slice(s * c.q.row, (s + 1) * c.q.row) },
        sel: c.sel!.slice(s * c.selRow, (s + 1) * c.selRow),
        nsel: c.nsel.slice(s, s + 1),
        out: { ...c.out, a: new Float32Array(c.out.row).fill(NaN) },
      };
      runAttn(one);
      expect(Array.from(one.out.a)).toEqual(Array.from(c.out.a.subarray(s * c.out.row, (s + 1) * c.out.row)));
    }
  });

  test("per-head keys (prefill): rows in blocks of four equal each row alone, bit for bit, at every level", () => {
    // causal key counts (the blocks' continuation chains), random ones, a zero row and a non-identity selection
    // inside blocks (those blocks run row by row), and a last partial block
    const S = 11, T = 40, r = rng(77);
    for (const level of [Simd.avx512vnni, ...LOWER_LEVELS])
      for (const kind of ["causal", "random", "sel"] as const) {
        const c = makeAttn(90 + S, { S, H: 5, dk: 37, dv: 21, T, shared: false, useSel: false });
        for (let s = 0; s < S; s++) c.nsel[s] = kind === "causal" ? T - S + s + 1 : 1 + randInt(r, T);
        if (kind !== "causal") c.nsel[6] = 0;
        if (kind === "sel") {
          c.sel = new Int32Array(S * c.selRow);
          for (let s = 0; s < S; s++) for (let j = 0; j < c.nsel[s]; j++) c.sel[s * c.selRow + j] = j; // the identity ...
          c.sel[1 * c.selRow] = 1; c.sel[1 * c.selRow + 1] = 0;                                        // ... but row 1
        }
        atLevel(level, () => runAttn(c));
        for (let s = 0; s < S; s++) {
          const one: AttnCase = {
            ...c, S: 1, q: { ...c.q, a: c.q.a.slice(s * c.q.row, (s + 1) * c.q.row) },
            sel: c.sel ? c.sel.slice(s * c.selRow, (s + 1) * c.selRow) : null, nsel: c.nsel.slice(s, s + 1),
            out: { ...c.out, a: new Float32Array(c.out.row).fill(NaN) },
          };
          atLevel(level, () => runAttn(one));
          expect(Array.from(one.out.a)).toEqual(Array.from(c.out.a.subarray(s * c.out.row, (s + 1) * c.out.row)));
        }
        expect(relErr(c.out.a, attnRef(c))).toBeLessThan(1e-5);
      }
  });

  test("large scores stay finite (max-subtracted softmax)", () => {
    const c = makeAttn(44, { S: 2, H: 2, dk: 8, dv: 8, T: 16, shared: false, useSel: false });
    c.scale = 200; // scores of order ±hundreds: exp would overflow without the max shift
    const ref = attnRef(c);
    runAttn(c);
    for (let s = 0; s < c.S; s++)
      for (let h = 0; h < c.H; h++)
        for (let e = 0; e < c.dv; e++) expect(Number.isFinite(c.out.a[s * c.out.row + h * c.out.head + e])).toBe(true);
    expect(relErr(c.out.a, ref)).toBeLessThan(1e-4);
  });
});

// ---- lightning indexer scores ----
function indexRef(S: number, nh: number, hd: number, qI: Float32Array, w: Float32Array, kI: Float32Array, nk: Int32Array, out: Float32Array, outRow: number, scale: number): Float64Array {
  const o = Float64Array.from(out);
  for (let s = 0; s < S; s++)
    for (let t = 0; t < nk[s]; t++) {
      let acc = 0;
      for (let h = 0; h < nh; h++) {
        let d = 0;
        for (let i = 0; i < hd; i++) d += qI[s * nh * hd + h * hd + i] * kI[t * hd + i];
        acc += w[s * nh + h] * Math.max(0, scale * d);
      }
      o[s * outRow + t] = acc;
    }
  return o;
}

describe("hb_index_scores", () => {
  const cases = [
    { S: 3, nh: 1, hd: 1, T: 9 },
    { S: 4, nh: 5, hd: 7, T: 37 },
    { S: 2, nh: 4, hd: 33, T: 600 },
    { S: 3, nh: 8, hd: 128, T: 301 },
    { S: 70, nh: 9, hd: 20, T: 150 },  // several row blocks, a partial head group, short rows of keys
  ];
  for (const cs of cases)
    test(`S=${cs.S} nh=${cs.nh} hd=${cs.hd} T=${cs.T}`, () => {
      const r = rng(cs.hd * 31 + cs.T);
      const { S, nh, hd, T } = cs;
      const qI = randArr(r, S * nh * hd), w = randArr(r, S * nh), kI = randArr(r, T * hd);
      const nk = Int32Array.from({ length: S }, (_, s) => (s === 1 ? 0 : s === 0 ? T : 1 + randInt(r, T)));
      const outRow = T + 5, scale = 1 / Math.sqrt(hd);
      const out = new Float32Array(S * outRow).fill(NaN);
      const ref = indexRef(S, nh, hd, qI, w, kI, nk, out, outRow, scale);
      indexScores(S, nh, hd, qI, w, kI, nk, out, outRow, scale);
      expect(relErr(out, ref)).toBeLessThan(1e-5);
      for (let s = 0; s < S; s++) for (let t = nk[s]; t < outRow; t++) expect(out[s * outRow + t]).toBeNaN();
      for (const level of LOWER_LEVELS) {
        const out0 = new Float32Array(S * outRow).fill(NaN);
        atLevel(level, () => indexScores(S, nh, hd, qI, w, kI, nk, out0, outRow, scale));
        expect(relErr(out0, ref)).toBeLessThan(1e-5);
        expect(new Uint32Array(out0.buffer)).toEqual(new Uint32Array(out.buffer)); // one order at every level (dsa.h): the same bits
      }
    });

  test("ReLU: negative dots contribute nothing; weight sign passes through", () => {
    const nh = 3, hd = 20, T = 11;
    const r = rng(77);
    const qI = randArr(r, nh * hd, 0.1, 1); // all positive
    const kI = randArr(r, T * hd, 0.1, 1);
    for (let t = 0; t < T; t += 2) for (let i = 0; i < hd; i++) kI[t * hd + i] = -kI[t * hd + i]; // even t: all dots < 0
    const w = Float32Array.from([0.5, -2, 1.25]);
    const out = new Float32Array(T);
    indexScores(1, nh, hd, qI, w, kI, Int32Array.of(T), out, T, 0.25);
    const ref = indexRef(1, nh, hd, qI, w, kI, Int32Array.of(T), new Float32Array(T), T, 0.25);
    for (let t = 0; t < T; t++) {
      if (t % 2 === 0) expect(out[t]).toBe(0);
      else expect(out[t]).not.toBe(0);
    }
    expect(relErr(out, ref)).toBeLessThan(1e-5);
    expect(ref.some((x) => x < 0)).toBe(true); // net-negative weights make negative scores
  });
});

// ---- DSA selection ----
/** Spec §3.3 rule: thr = topk-th largest; all > thr ascending, then == thr ascending until full; returned sorted. */
function selectRef(x: ArrayLike<number>, n: number, topk: number): number[] {
  if (n <= topk) return Array.from({ length: n }, (_, i) => i);
  const vals = Array.from({ length: n }, (_, i) => x[i]).sort((a, b) => b - a);
  const thr = vals[topk - 1];
  const gt: number[] = [], eq: number[] = [];
  for (let t = 0; t < n; t++) (x[t] > thr ? gt : x[t] === thr ? eq : []).push(t);
  return [...gt, ...eq.slice(0, topk - gt.length)].sort((a, b) => a - b);
}

/** at the best SIMD level (AVX-512 scans after the first radix pass) and forced scalar */
function checkSelect(scores: Float32Array, scoreRow: number, nk: Int32Array, topk: number) {
  const S = nk.length;
  for (const level of [1, 0]) {
    const sel = new Int32Array(S * topk + 16).fill(-5), nsel = new Int32Array(S).fill(-5);
    atLevel(level, () => dsaSelect(S, scores, scoreRow, nk, topk, sel, nsel));
    for (let s = 0; s < S; s++) {
      const want = selectRef(scores.subarray(s * scoreRow), Math.max(0, nk[s]), topk);
      expect([level, nsel[s]]).toEqual([level, want.length]);
      expect([level, Array.from(sel.subarray(s * topk, s * topk + nsel[s]))]).toEqual([level, want]);
    }
    expect(Array.from(sel.subarray(S * topk))).toEqual(new Array(16).fill(-5)); // nothing written past the rows
  }
}

describe("hb_dsa_select", () => {
  test("tied values from a small integer set with many zeros", () => {
    const r = rng(1234);
    for (const topk of [1, 2, 3, 7, 16, 64]) {
      const S = 40, scoreRow = 260;
      const scores = new Float32Array(S * scoreRow).fill(1e9); // beyond nk must be ignored
      const nk = Int32Array.from({ length: S }, () => 1 + randInt(r, 250));
      for (let s = 0; s < S; s++)
        for (let t = 0; t < nk[s]; t++) {
          const u = r();
          scores[s * scoreRow + t] = u < 0.5 ? 0 : u < 0.6 ? -0 : [1, 2, 3, -1, -2][randInt(r, 5)];
        }
      checkSelect(scores, scoreRow, nk, topk);
    }
  });

  test("n <= topk selects everything; n = topk+1; nk = 0", () => {
    const r = rng(99);
    const topk = 8, scoreRow = 12;
    const nk = Int32Array.of(0, 1, 7, 8, 9, 9, 9, 12);
    const scores = randArr(r, nk.length * scoreRow);
    scores.fill(0.5, 5 * scoreRow, 6 * scoreRow); // n = topk+1 all tied: drops the last key
    checkSelect(scores, scoreRow, nk, topk);
    const sel = new Int32Array(nk.length * topk), nsel = new Int32Array(nk.length);
    dsaSelect(nk.length, scores, scoreRow, nk, topk, sel, nsel);
    expect(Array.from(nsel)).toEqual([0, 1, 7, 8, 8, 8, 8, 8]);
    expect(Array.from(sel.subarray(5 * topk, 6 * topk))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  test("topk = 1 picks the first maximum", () => {
    const scores = Float32Array.of(1, 3, 2, 3, -1, 3);
    const sel = new Int32Array(1), nsel = new Int32Array(1);
    dsaSelect(1, scores, 6, Int32Array.of(6), 1, sel, nsel);
    expect(nsel[0]).toBe(1);
    expect(sel[0]).toBe(1);
  });

  test("wide value range, ±Infinity, denormals, near-equal floats", () => {
    const r = rng(4321);
    const pool = [Infinity, -Infinity, 1e30, -1e30, 1e-42, -1e-42, 0, -0, 1, Math.fround(1 + 2 ** -23), Math.fround(1 - 2 ** -24), 0.1, -0.1];
    const S = 30, scoreRow = 120;
    const scores = new Float32Array(S * scoreRow);
    for (let i = 0; i < scores.length; i++) scores[i] = r() < 0.7 ? pool[randInt(r, pool.length)] : (r() - 0.5) * 10 ** randInt(r, 8);
    const nk = Int32Array.from({ length: S }, () => randInt(r, scoreRow + 1));
    for (const topk of [1, 5, 31]) checkSelect(scores, scoreRow, nk, topk);
  });

  test("long rows with random floats and injected ties", () => {
    const r = rng(555);
    const S = 4, n = 5000, topk = 512;
    const scores = randArr(r, S * n, -3, 3);
    for (let i = 0; i < scores.length; i += 7) scores[i] = scores[(i * 13) % scores.length];
    for (let i = 0; i < scores.length; i += 11) scores[i] = 0;
    checkSelect(scores, n, Int32Array.from({ length: S }, (_, s) => n - 1000 * s), topk);
    for (const k of [1, 64, 700]) checkSelect(scores, n, Int32Array.of(n, 600, 100, 3000), k); // one nk per row of scores
  });

  test("long rows: wide value range, ±Infinity, denormals, ±0, near-equal floats", () => {
    const r = rng(8765);
    const pool = [Infinity, -Infinity, 1e30, -1e30, 1e-42, -1e-42, 0, -0, 1, Math.fround(1 + 2 ** -23), Math.fround(1 - 2 ** -24)];
    const S = 3, n = 3000;
    const scores = new Float32Array(S * n);
    for (let i = 0; i < scores.length; i++) scores[i] = r() < 0.5 ? pool[randInt(r, pool.length)] : (r() - 0.5) * 10 ** randInt(r, 8);
    for (const topk of [1, 7, 128, 1500]) checkSelect(scores, n, Int32Array.of(n, 2000, 513), topk);
  });
});

describe("an f16 KV cache", () => {
  test("f32 -> f16: round to nearest even and saturation, as Float16Array rounds (and clamps), at every level", () => {
    const r = rng(5), n = 5000, x = new Float32Array(n);
    for (let i = 0; i < n; i++) x[i] = (r() - 0.5) * 2 ** (Math.floor(r() * 50) - 30); // subnormal to overflowing
    x.set([0, -0, 65504, 65519.99, 65520, 1e9, -1e9, 2 ** -25, 2 ** -24, 1.5 * 2 ** -25, 2 ** -14, 1 + 2 ** -11, 1 + 3 * 2 ** -11]);
    const want = Uint16Array.from(new Uint16Array(new Float16Array(Array.from(x, (v) => Math.max(-65504, Math.min(65504, v)))).buffer));
    for (const level of [Simd.scalar, Simd.avx2, Simd.avx512]) {
      const got = new Uint16Array(n);
      atLevel(level, () => toF16(x, got, n));
      expect(Array.from(got)).toEqual(Array.from(want));
    }
  });

  test("hb_attn_segs over an f16 cache equals it over an f32 cache of the widened values, bit for bit, at every level", () => {
    const r = rng(78), H = 16, W = 40, dv = 32, topk = 6, scale = 0.3, lens = [3, 9, 14], rowsOf = [1, 2, 3];
    const S = rowsOf.reduce((a, b) => a + b, 0), QR = H * W, OR = H * dv;
    const halves = lens.map((T) => { const h = new Uint16Array(T * W); toF16(randArr(r, T * W), h, T * W); return h; });
    const wide = halves.map((h) => Float32Array.from(new Float16Array(h.buffer)));
    const q = randArr(r, S * QR), sel = new Int32Array(S * topk), nsel = new Int32Array(S);
    const f16s: { r0: number; n: number; k: Uint16Array; v: Uint16Array }[] = [], f32s: { r0: number; n: number; k: Float32Array; v: Float32Array }[] = [];
    let r0 = 0;
    rowsOf.forEach((n, g) => {
      for (let j = 0; j < n; j++) {
        const s = r0 + j, T = lens[g], m = s === 1 ? 0 : Math.min(topk, T); // row 1 sees no keys
        nsel[s] = m;
        for (let i = 0; i < m; i++) sel[s * topk + i] = T - 1 - Math.floor((i * T) / m); // (descending: order matters)
      }
      f16s.push({ r0, n, k: halves[g], v: halves[g] });
      f32s.push({ r0, n, k: wide[g], v: wide[g] });
      r0 += n;
    });
    // without a selection, causal rows (a segment's row j of n sees T - n + 1 + j keys: a thread's widened keys of
    // one row extended or reused by the next); twice, the caches rewritten in between (nothing kept across calls)
    for (const level of [Simd.scalar, Simd.avx2, Simd.avx512]) for (const useSel of [true, false, false]) {
      const ns = useSel ? nsel : Int32Array.from(nsel, (_, s) => { const g = f32s.find((g) => s >= g.r0 && s < g.r0 + g.n)!; return lens[f32s.indexOf(g)] - g.n + 1 + s - g.r0; });
      if (!useSel) halves.forEach((h, g) => { toF16(randArr(r, h.length), h, h.length); wide[g].set(new Float16Array(h.buffer)); });
      const run = (segs: typeof f16s | typeof f32s) => {
        const out = new Float32Array(S * OR).fill(NaN);
        atLevel(level, () => attnSegs(segs, H, W, dv, { a: q, row: QR, head: W }, { row: W, head: 0 }, { row: W, head: 0 },
          useSel ? sel : null, ns, topk, scale, { a: out, row: OR, head: dv }));
        return out;
      };
      const got = run(f16s), want = run(f32s);
      expect(Array.from(new Uint32Array(got.buffer))).toEqual(Array.from(new Uint32Array(want.buffer)));
      expect(got.some(Number.isNaN)).toBe(false);
    }
    expect(() => attnSegs([{ r0: 0, n: 1, k: halves[0], v: halves[1] }], H, W, dv, { a: q, row: QR, head: W }, { row: W, head: 0 }, { row: W, head: 0 },
      null, nsel, topk, scale, { a: new Float32Array(OR), row: OR, head: dv })).toThrow(/f16/);
  });
});

describe("a q8 KV cache", () => {
  const W = 40, B = 32, nb = Math.ceil(W / B), rowBytes = W + 4 * nb; // (a partial last block)
  const even = (x: number) => { const r = Math.round(x); return Math.abs(x - Math.trunc(x)) === 0.5 && r % 2 !== 0 ? r - 1 : r; };
  /** the rows hb_kv_write makes of values x [n, W]: blocks of 32, q = rint(x·127/amax) half to even, scale amax/127 */
  function reference(x: Float32Array, n: number): Float32Array {
    const out = new Float32Array(n * W);
    for (let r = 0; r < n; r++)
      for (let b0 = 0; b0 < W; b0 += B) {
        const e = Math.min(b0 + B, W);
        let amax = 0;
        for (let i = b0; i < e; i++) amax = Math.max(amax, Math.abs(x[r * W + i]));
        const inv = amax > 0 ? Math.fround(127 / amax) : 0, d = Math.fround(amax / 127);
        for (let i = b0; i < e; i++) out[r * W + i] = Math.fround((even(Math.fround(x[r * W + i] * inv)) + 0) * d); // (an int8 code: no -0)
      }
    return out;
  }

  test("rows written in blocks of 32 (half-to-even codes, amax/127 scales); attention over them equals f32 attention over the dequantized rows, bit for bit, at every level", () => {
    const r = rng(91), H = 8, dv = 32, kvr = 32, dr = W - kvr, T = 20, S = 3, topk = 7, QR = H * W, OR = H * dv;
    const x = randArr(r, T * W);
    for (let i = 0; i < W; i++) x[5 * W + i] = 0; // (a zero row: scale 0)
    const cache = new Uint8Array(T * rowBytes);
    kvWrite([{ cache, pos0: 0, r0: 0, n: T }], Float32Array.from({ length: T * kvr }, (_, i) => x[Math.floor(i / kvr) * W + (i % kvr)]), kvr,
      Float32Array.from({ length: T * dr }, (_, i) => x[Math.floor(i / dr) * W + kvr + (i % dr)]), dr, dr);
    const want = reference(x, T);
    const q = new Int8Array(cache.buffer), sc = (t: number, b: number) => new DataView(cache.buffer).getFloat32(t * rowBytes + W + 4 * b, true);
    for (let t = 0; t < T; t++) for (let i = 0; i < W; i++) expect(Math.fround(q[t * rowBytes + i] * sc(t, Math.floor(i / B)))).toBe(want[t * W + i]);
    const qv = randArr(r, S * QR), sel = Int32Array.from({ length: S * topk }, (_, i) => (i * 7 + 3) % T), nsel = Int32Array.of(topk, 0, 4);
    for (const level of [Simd.scalar, Simd.avx2, Simd.avx512]) {
      const run = (k: Uint8Array | Float32Array) => {
        const out = new Float32Array(S * OR).fill(NaN);
        atLevel(level, () => attnSegs([{ r0: 0, n: S, k, v: k }], H, W, dv, { a: qv, row: QR, head: W }, { row: W, head: 0 }, { row: W, head: 0 },
          sel, nsel, topk, 0.2, { a: out, row: OR, head: dv }));
        return out;
      };
      expect(Array.from(new Uint32Array(run(cache).buffer))).toEqual(Array.from(new Uint32Array(run(want).buffer)));
    }
  });
});

describe("hb_attn_segs", () => {
  test("segments with their own caches in one call equal one hb_attn per segment, bit for bit", () => {
    const r = rng(77), H = 16, W = 40, dv = 32, topk = 6, scale = 0.3;
    const lens = [3, 9, 1, 14, 5]; // cache rows per segment
    const rowsOf = [1, 2, 0, 3, 1]; // query rows per segment (a segment of none is left out)
    const S = rowsOf.reduce((a, b) => a + b, 0), QR = H * W, OR = H * dv;
    const caches = lens.map((T) => randArr(r, T * W));
    const q = randArr(r, S * QR), sel = new Int32Array(S * topk), nsel = new Int32Array(S);
    const segs: { r0: number; n: number; k: Float32Array; v: Float32Array }[] = [];
    let r0 = 0;
    rowsOf.forEach((n, g) => {
      for (let j = 0; j < n; j++) {
        const s = r0 + j, T = lens[g], m = s === 2 ? 0 : Math.min(topk, T); // row 2 sees no keys
        nsel[s] = m;
        for (let i = 0; i < m; i++) sel[s * topk + i] = Math.floor((i * T) / m);
      }
      segs.push({ r0, n, k: caches[g], v: caches[g] });
      r0 += n;
    });
    for (const useSel of [true, false]) {
      if (!useSel) rowsOf.forEach((n, g) => { for (let j = 0; j < n; j++) nsel[segs[g].r0 + j] = lens[g]; });
      const want = new Float32Array(S * OR).fill(NaN), got = new Float32Array(S * OR).fill(NaN);
      for (const g of segs) {
        if (g.n === 0) continue;
        attn(g.n, H, W, dv, { a: q.subarray(g.r0 * QR), row: QR, head: W }, { a: g.k, row: W, head: 0 }, { a: g.v, row: W, head: 0 },
          useSel ? sel.subarray(g.r0 * topk) : null, nsel.subarray(g.r0), topk, scale, { a: want.subarray(g.r0 * OR), row: OR, head: dv });
      }
      attnSegs(segs, H, W, dv, { a: q, row: QR, head: W }, { row: W, head: 0 }, { row: W, head: 0 },
        useSel ? sel : null, nsel, topk, scale, { a: got, row: OR, head: dv });
      expect(Array.from(new Uint32Array(got.buffer))).toEqual(Array.from(new Uint32Array(want.buffer)));
      expect(got.subarray(2 * OR, 3 * OR).every((x) => x === 0)).toBe(useSel); // no keys -> zeros
    }
  });
});

describe("hb_mla_absorbed", () => {
  // one pool job per layer (ffi/mla.c absorbed_job) against the three calls it stands for: the q side (hb_mla_heads),
  // the core over every segment (hb_attn_segs), the v side (hb_mla_heads), made one after the other
  test("equals the q side, the core and the v side made one by one, bit for bit: runs, segments, selections, KV dtypes", () => {
    const r = rng(77), H = 6, dn = 16, dr = 8, dv = 12, kvr = 32, W = kvr + dr, Q = H * (dn + dr), QC = H * W, T = 40, topk = 24;
    const kt = Uint8Array.from({ length: H * kvr * dn }, () => randInt(r, 256)), ktS = randArr(r, H * kvr, 0.001, 0.02);
    const kvb = Uint8Array.from({ length: H * (dn + dv) * kvr }, () => randInt(r, 256)), kvbS = randArr(r, H * (dn + dv), 0.001, 0.02);
    const kmul = randArr(r, H * dn);
    const ktw: HeadsW = { fmt: Fmt.int8, W: kt, scales: ktS, gs: 0, O: kvr, I: dn, r0: 0, rstride: kvr,
      ...(simdLevel() >= Simd.avx512vnni ? { cols: columnQuads(kt, H * kvr, dn) } : {}) };
    const vw: HeadsW = { fmt: Fmt.int8, W: kvb, scales: kvbS, gs: 0, O: dv, I: kvr, r0: dn, rstride: dn + dv };
    // segments: rows 0-1, 2 and 5-9 (rows 3-4 in none: two runs), each its own cache of T positions; or row 3 alone (one
    // stream's decode: one job for the three)
    for (const [parts, runs] of [[[[0, 2], [2, 1], [5, 5]], [[0, 3], [5, 5]]], [[[3, 1]], [[3, 1]]]]) {
      const S = 10, q = randArr(r, S * Q), nsel = new Int32Array(S), sel = new Int32Array(S * topk);
      for (const [r0, n] of parts) for (let s = r0; s < r0 + n; s++) {
        const keys = [...new Set(Array.from({ length: topk }, () => randInt(r, T)))].sort((a, b) => a - b);
        nsel[s] = s % 3 === 0 ? keys.length : Math.min(topk, 1 + s); // some selected, some the first keys in order
        sel.set(s % 3 === 0 ? keys : Array.from({ length: nsel[s] }, (_, j) => j), s * topk);
      }
      for (const t of ["f32", "f16", "q8"] as const) {
        const caches = parts.map(() => {
          const c = t === "f32" ? new Float32Array(T * W) : t === "f16" ? new Uint16Array(T * W) : new Uint8Array(T * kvRowElems("q8", W));
          kvWrite([{ cache: c, pos0: 0, r0: 0, n: T }], randArr(r, T * kvr), kvr, randArr(r, T * dr), dr, dr);
          return c;
        });
        for (const exact of [true, false]) {
          const one = { qcat: new Float32Array(S * QC).fill(7), olat: new Float32Array(S * H * kvr).fill(7), o: new Float32Array(S * H * dv).fill(7) };
          const segs: MlaSeg[] = parts.map(([r0, n], i) => ({ r0, n, kv: caches[i] }));
          mlaAbsorbed(exact, segs, segs.length, H, dn, dr, dv, kvr, packHeads(ktw), kmul, q, one.qcat, sel, nsel, topk, 0.125, one.olat, packHeads(vw), one.o);
          const three = { qcat: new Float32Array(S * QC).fill(7), olat: new Float32Array(S * H * kvr).fill(7), o: new Float32Array(S * H * dv).fill(7) };
          for (const [r0, n] of runs)
            mlaHeads(exact, n, H, ktw, { a: q.subarray(r0 * Q), row: Q, head: dn + dr }, kmul, { a: three.qcat.subarray(r0 * QC), row: QC, head: W },
              q.subarray(r0 * Q + dn), dr);
          attnSegs(parts.map(([r0, n], i) => ({ r0, n, k: caches[i], v: caches[i] })), H, W, kvr, { a: three.qcat, row: QC, head: W },
            { row: W, head: 0 }, { row: W, head: 0 }, sel, nsel, topk, 0.125, { a: three.olat, row: H * kvr, head: kvr });
          for (const [r0, n] of runs)
            mlaHeads(exact, n, H, vw, { a: three.olat.subarray(r0 * H * kvr), row: H * kvr, head: kvr }, null,
              { a: three.o.subarray(r0 * H * dv), row: H * dv, head: dv }, null, 0);
          for (const k of ["qcat", "olat", "o"] as const)
            if (!one[k].every((v, i) => Object.is(v, three[k][i]))) throw new Error(`${t} exact=${exact}: ${k} differs`);
          expect(one.o.subarray(parts[0][0] * H * dv, (parts[0][0] + 1) * H * dv).every((v) => v !== 7)).toBe(true);
        }
      }
    }
  });
});
