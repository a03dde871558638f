// Fast mode's lightning indexer over int8 keys (ffi/dsa.c hb_ik_quant / hb_index_scores_q8, dsa_x86.c; the
// copy of the keys in src/engine/ikq.ts): the key bytes and scales follow dsa.h (checked against a TypeScript
// quantizer), the VNNI kernel equals the scalar reference bit for bit, the scores stay close to the f32
// indexer's, and the int8 copy follows the KV cache through appends, truncation, rewrites and growth.
import { describe, expect, test } from "bun:test";
import { hb, ikQuant, indexQ8Ok, indexScores, Simd, type IkQ8 } from "../src/native/hb.ts";
import { ikQ8 } from "../src/engine/ikq.ts";
import { KVCache } from "../src/engine/kv.ts";
import { loadConfig } from "../src/model/config.ts";
import { genModel } from "./helpers/models.ts";
import { rng } from "./helpers/rng.ts";

const lib = hb();
const vnni = lib.hb_simd_force(Simd.avx512vnni) === Simd.avx512vnni;
lib.hb_simd_force(1);
if (!vnni) console.log("indexer-q8.test: no AVX-512 VNNI here: the int8 indexer is not used, and its kernel is not compared");

const randArr = (r: () => number, n: number, amp = 1) => Float32Array.from({ length: n }, () => (r() * 2 - 1) * amp);
const same = (a: Float32Array, b: Float32Array) => a.length === b.length && a.every((v, i) => Object.is(v, b[i]));
const alloc = (T: number, hd: number): IkQ8 => ({ k8: new Uint8Array(Math.ceil(T / 16) * 16 * hd), dk: new Float32Array(Math.ceil(T / 16) * 16) });
/** round half to even, as the C quantizer's 1.5·2^23 trick does in f32 */
const rint = (v: number) => { const f = Math.floor(v), d = v - f; return d > 0.5 || (d === 0.5 && f % 2 !== 0) ? f + 1 : f; };
function scoresQ8(ref: boolean, S: number, nh: number, hd: number, qI: Float32Array, w: Float32Array, q: IkQ8, nk: Int32Array, out: Float32Array, outRow: number, scale: number) {
  (ref ? lib.hb_index_scores_q8_ref : lib.hb_index_scores_q8)(S, nh, hd, qI, w, q.k8, q.dk, nk, out, outRow, scale);
}

describe("int8 indexer keys and scores", () => {
  test("hb_ik_quant: k8 = rint(k·127/amax) + 128 at [t/16][i/4][t mod 16][i mod 4], dk = amax/127", () => {
    const r = rng(21), hd = 12, T = 37, kI = randArr(r, T * hd, 2);
    kI.fill(0, 5 * hd, 6 * hd); // an all-zero key
    const q = alloc(T, hd);
    ikQuant(kI, hd, 0, T, q);
    for (let t = 0; t < T; t++) {
      let amax = 0;
      for (let i = 0; i < hd; i++) amax = Math.max(amax, Math.abs(kI[t * hd + i]));
      expect(q.dk[t]).toBe(Math.fround(amax / 127));
      const id = amax > 0 ? Math.fround(127 / amax) : 0;
      for (let i = 0; i < hd; i++) {
        const want = Math.max(-127, Math.min(127, rint(Math.fround(kI[t * hd + i] * id)))) + 128;
        expect([t, i, q.k8[(t >> 4) * 16 * hd + (i >> 2) * 64 + (t & 15) * 4 + (i & 3)]]).toEqual([t, i, want]);
      }
    }
  });

  test.skipIf(!vnni)("the VNNI kernel equals the scalar reference bit for bit (rows, heads, partial blocks, causal prefill)", () => {
    const r = rng(22);
    let cases = 0;
    for (const hd of [4, 36, 64, 128])
      for (const nh of [1, 3, 8, 9])
        for (const S of [1, 5, 40]) {
          const T = 150, outRow = 160, qI = randArr(r, S * nh * hd), w = randArr(r, S * nh), kI = randArr(r, T * hd, 3);
          const nk = Int32Array.from({ length: S }, (_, s) => (S === 1 ? T : Math.max(1, T - S + s + 1 - (s % 3) * 7)));
          const q = alloc(T, hd);
          ikQuant(kI, hd, 0, T, q);
          const a = new Float32Array(S * outRow).fill(NaN), b = new Float32Array(S * outRow).fill(NaN);
          scoresQ8(true, S, nh, hd, qI, w, q, nk, a, outRow, 0.125);
          scoresQ8(false, S, nh, hd, qI, w, q, nk, b, outRow, 0.125);
          if (!same(a, b)) throw new Error(`hd ${hd} nh ${nh} S ${S}: the VNNI kernel differs from the scalar reference`);
          for (let s = 0; s < S; s++) expect(Number.isNaN(b[s * outRow + nk[s]]) || nk[s] === outRow).toBe(true); // nothing past nk
          cases++;
        }
    expect(cases).toBe(48);
  });

  test("the int8 scores stay within 3% of the score range of the f32 indexer's; the top 32 of 512 keys mostly agree", () => {
    const r = rng(23), hd = 64, nh = 8, T = 512, S = 4;
    const qI = randArr(r, S * nh * hd), w = randArr(r, S * nh), kI = randArr(r, T * hd), nk = new Int32Array(S).fill(T);
    const q = alloc(T, hd);
    ikQuant(kI, hd, 0, T, q);
    const f = new Float32Array(S * T), g = new Float32Array(S * T);
    indexScores(S, nh, hd, qI, w, kI, nk, f, T, 0.125);
    scoresQ8(false, S, nh, hd, qI, w, q, nk, g, T, 0.125);
    for (let s = 0; s < S; s++) {
      const a = f.subarray(s * T, (s + 1) * T), b = g.subarray(s * T, (s + 1) * T);
      const range = Math.max(...a) - Math.min(...a);
      let worst = 0;
      for (let t = 0; t < T; t++) worst = Math.max(worst, Math.abs(a[t] - b[t]));
      expect(worst / range).toBeLessThan(0.03);
      const top = (x: Float32Array) => new Set([...x.keys()].sort((i, j) => x[j] - x[i]).slice(0, 32));
      const ta = top(a), tb = top(b);
      expect([...ta].filter((t) => tb.has(t)).length).toBeGreaterThanOrEqual(28);
    }
  });

  test("the int8 copy follows the KV cache: appends, a truncation and rewrite, writes logged elsewhere, growth", () => {
    const cfg = loadConfig(genModel({ preset: "tiny", seed: 1 }));
    const indexed = cfg.indexer_types.map((t) => cfg.has_dsa && t === "full");
    const layer = indexed.indexOf(true), hd = cfg.index_head_dim;
    const kv = new KVCache(cfg, cfg.num_hidden_layers, indexed, 16);
    const r = rng(24);
    const write = (pos0: number, n: number) => { kv.reserve(pos0 + n); kv.ik[layer]!.set(randArr(r, n * hd), pos0 * hd); };
    const fresh = (n: number) => { const q = alloc(kv.cap, hd); ikQuant(kv.ik[layer]!, hd, 0, n, q); return q; };
    const check = (q: IkQ8, n: number) => {
      const want = fresh(n);
      expect(Array.from(q.dk.subarray(0, n))).toEqual(Array.from(want.dk.subarray(0, n)));
      for (let t = 0; t < n; t++) for (let i = 0; i < hd; i++) {
        const at = (t >> 4) * 16 * hd + (i >> 2) * 64 + (t & 15) * 4 + (i & 3);
        if (q.k8[at] !== want.k8[at]) throw new Error(`key ${t} element ${i}: stale int8 copy`);
      }
    };
    // a forward: rows written, the copy asked for (with those rows), then the write logged
    const step = (pos0: number, n: number) => { write(pos0, n); const q = ikQ8(kv, layer, pos0, pos0 + n); kv.len = pos0 + n; kv.wrote(pos0); return q; };
    check(step(0, 10), 10);
    check(step(10, 1), 11);
    check(step(11, 30), 41);        // past the first capacity: the copy grows with the cache
    kv.truncate(20);                 // prefix reuse: keep 20 rows, write new ones over the old 20..40
    check(step(20, 5), 25);
    write(3, 2); kv.wrote(3);        // another write path (a KV file, the device chain) rewrites rows 3..4
    check(step(25, 1), 26);
    expect(kv.cap).toBeGreaterThanOrEqual(41);
  });

  test("fast mode uses the int8 indexer exactly where its kernel runs", () => {
    expect(indexQ8Ok(64)).toBe(vnni);
    expect(indexQ8Ok(62)).toBe(false); // head dims in whole groups of 4
  });
});
