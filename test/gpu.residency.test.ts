// The CPU half of the Vulkan chain's KV split, no device needed: hb_attn_stats (ffi/attn_stats.c) against a
// TypeScript reference (output and softmax statistics), its SIMD kernels against the scalar reference, two
// partials over disjoint key sets merged through the statistics = hb_attn over all keys; and the block
// residency logic (src/device/residency.ts): window + most-read blocks, uploads, invalidation, runs.
import { describe, expect, test } from "bun:test";
import { attn, type AttnOperand } from "../src/native/hb.ts";
import { attnStats } from "../src/device/split.ts";
import { Residency } from "../src/device/residency.ts";
import { splitGeom } from "../src/device/chain.ts";
import { rand, relErr } from "./helpers/device.ts";

/** TS reference: normalised out and (m, l) per (s, h), in f64. */
function ref(S: number, H: number, dk: number, dv: number, q: AttnOperand, k: AttnOperand, v: AttnOperand, keys: (s: number) => number[], scale: number) {
  const out = new Float64Array(S * H * dv), st = new Float64Array(S * H * 2);
  for (let s = 0; s < S; s++)
    for (let h = 0; h < H; h++) {
      const ks = keys(s);
      if (ks.length === 0) { st[2 * (s * H + h)] = -Infinity; continue; }
      const sc = ks.map((t) => {
        let d = 0;
        for (let i = 0; i < dk; i++) d += q.a[s * q.row + h * q.head + i] * k.a[t * k.row + h * k.head + i];
        return scale * d;
      });
      const m = Math.max(...sc), e = sc.map((x) => Math.exp(x - m)), l = e.reduce((a, b) => a + b, 0);
      st[2 * (s * H + h)] = m; st[2 * (s * H + h) + 1] = l;
      ks.forEach((t, j) => { for (let i = 0; i < dv; i++) out[(s * H + h) * dv + i] += (e[j] / l) * v.a[t * v.row + h * v.head + i]; });
    }
  return { out, st };
}

describe("hb_attn_stats (the CPU's partial attention of the KV split)", () => {
  for (const shared of [true, false])
    test(`${shared ? "MLA absorbed (shared K = V)" : "per-head K, V"}: output and statistics; SIMD = scalar; empty rows`, () => {
      const S = 4, H = 5, dk = shared ? 40 : 17, dv = shared ? 32 : 9, T = 30, selRow = 12, scale = 0.3;
      const q = { a: rand(S * H * dk, 1), row: H * dk, head: dk };
      const kk = shared ? { a: rand(T * dk, 2, 2), row: dk, head: 0 } : { a: rand(T * H * dk, 2, 2), row: H * dk, head: dk };
      const v = shared ? kk : { a: rand(T * H * dv, 3), row: H * dv, head: dv };
      const sel = new Int32Array(S * selRow), nsel = Int32Array.from([12, 0, 5, 1]);
      for (let s = 0; s < S; s++) for (let j = 0; j < selRow; j++) sel[s * selRow + j] = (j * 5 + s * 7) % T;
      const r = ref(S, H, dk, dv, q, kk, v, (s) => Array.from(sel.subarray(s * selRow, s * selRow + nsel[s])), scale);
      for (const useRef of [false, true]) {
        const out = new Float32Array(S * H * dv).fill(NaN), st = new Float32Array(S * H * 2).fill(NaN);
        attnStats(S, H, dk, dv, q, kk, v, sel, nsel, selRow, scale, { a: out, row: H * dv, head: dv }, st, useRef);
        expect(relErr(out, r.out)).toBeLessThan(1e-5);
        for (let x = 0; x < S * H; x++) {
          if (r.st[2 * x + 1] === 0) { expect([st[2 * x], st[2 * x + 1]]).toEqual([-Infinity, 0]); continue; }
          expect(Math.abs(st[2 * x] - r.st[2 * x])).toBeLessThan(1e-5 * Math.max(1, Math.abs(r.st[2 * x])));
          expect(Math.abs(st[2 * x + 1] - r.st[2 * x + 1]) / r.st[2 * x + 1]).toBeLessThan(1e-5);
        }
      }
    });

  test("two partials over disjoint keys merged through (m, l) = hb_attn over all keys", () => {
    const S = 3, H = 4, W = 40, kvr = 32, T = 50, scale = 0.25;
    const q = { a: rand(S * H * W, 11), row: H * W, head: W }, c = { a: rand(T * W, 12, 3), row: W, head: 0 };
    const nk = Int32Array.from([50, 17, 2]);
    const full = new Float32Array(S * H * kvr);
    attn(S, H, W, kvr, q, c, c, null, nk, 0, scale, { a: full, row: H * kvr, head: kvr });
    const part = (odd: boolean) => {
      const sel = new Int32Array(S * T), n = new Int32Array(S);
      for (let s = 0; s < S; s++) for (let t = 0; t < nk[s]; t++) if ((Math.floor(t / 4) % 2 === 1) === odd) sel[s * T + n[s]++] = t;
      const o = new Float32Array(S * H * kvr), st = new Float32Array(S * H * 2);
      attnStats(S, H, W, kvr, q, c, c, sel, n, T, scale, { a: o, row: H * kvr, head: kvr }, st);
      return { o, st };
    };
    const a = part(false), b = part(true), got = new Float32Array(S * H * kvr);
    for (let x = 0; x < S * H; x++) {
      const l1 = a.st[2 * x + 1], l2 = b.st[2 * x + 1], M = Math.max(a.st[2 * x], b.st[2 * x]);
      const wa = l1 > 0 ? l1 * Math.exp(a.st[2 * x] - M) : 0, wb = l2 > 0 ? l2 * Math.exp(b.st[2 * x] - M) : 0;
      for (let e = 0; e < kvr; e++) got[x * kvr + e] = (wa * a.o[x * kvr + e] + wb * b.o[x * kvr + e]) / (wa + wb);
    }
    expect(b.st[2 * (2 * H) + 1]).toBe(0); // row 2 (2 keys) has nothing in the odd blocks: an empty partial
    expect(relErr(got, full)).toBeLessThan(1e-5);
  });
});

describe("KV split residency (src/device/residency.ts)", () => {
  test("fits: every block resident in order; over budget: newest window + most-read blocks", () => {
    const r = new Residency(4, 4, 2);
    expect(r.plan(0, 10)).toEqual([]); // prefill: nothing on the host yet
    r.wrote(0, 10);
    expect(r.complete(10)).toBe(true);
    expect(Array.from(r.slotOf.subarray(0, 3))).toEqual([0, 1, 2]);
    r.count([1, 2, 9], 0); // block 0 read twice, block 2 once
    r.count(null, 3);      // dense prefix: block 0 three more
    expect(r.plan(10, 11)).toEqual([]);
    r.wrote(10, 11);
    // 24 rows = 6 blocks > 4 slots: window = blocks 4, 5; then block 0 (5 reads), then block 2 (1)
    r.invalidate(11);
    const ups = r.plan(11, 24);
    expect(r.complete(24)).toBe(false);
    expect([0, 1, 2, 3, 4, 5].map((k) => r.slotOf[k] >= 0)).toEqual([true, false, true, false, true, true]);
    expect(ups).toEqual([]); // blocks 0 and 2 were already there and full; 4 and 5 are the step's own rows
    expect(r.runs(11, 13).map((x) => [x.t0, x.n])).toEqual([[11, 1], [16, 4], [20, 4]]); // rows 12..15 are not resident
    expect(r.resident(9)).toBe(true);
    expect(r.resident(13)).toBe(false);
  });

  test("invalidation re-uploads the stale rows of resident blocks; a rewind frees blocks past the end", () => {
    const r = new Residency(4, 3, 1);
    r.plan(0, 12); r.wrote(0, 12);
    r.invalidate(6); // host rows 6.. changed (truncate + rewrite)
    const ups = r.plan(12, 13).sort((a, b) => a.row0 - b.row0); // 4 blocks > 3 slots: block 3 + the two newest old ones
    expect(ups).toEqual([{ row0: 6, row1: 8, dev0: r.slotOf[1] * 4 + 2 }, { row0: 8, row1: 12, dev0: r.slotOf[2] * 4 }]);
    expect(r.slotOf[0]).toBe(-1);
    r.wrote(12, 13);
    r.invalidate(5);
    expect(r.plan(5, 6)).toEqual([{ row0: 0, row1: 4, dev0: r.slotOf[0] * 4 }]); // back to 6 rows: blocks 2, 3 freed, 0 back
    expect([r.slotOf[2], r.slotOf[3]]).toEqual([-1, -1]);
    expect(r.complete(6)).toBe(true);
  });

  test("chain options -> split geometry (rows, bytes, block, window)", () => {
    expect(splitGeom({}, 40)).toBeNull();
    expect(splitGeom({ kvBudgetRows: 8, kvBlock: 2 }, 40)).toEqual({ blk: 2, slots: 4, window: 2 });
    expect(splitGeom({ kvBudgetBytes: 4 * 40 * 64, kvBudgetRows: 100 }, 40)).toEqual({ blk: 16, slots: 4, window: 2 });
    expect(splitGeom({ kvBudgetRows: 3 }, 40)).toEqual({ blk: 3, slots: 1, window: 1 });
    expect(() => splitGeom({ kvBudgetRows: 0 }, 40)).toThrow(/at least 1/);
  });
});
