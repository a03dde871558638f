// libhb's radix sort of 64-bit keys (ffi/sort.c, the sampler's candidates) against a comparison sort (BigUint64Array's)
// on random keys, keys that share digits (passes skipped), duplicates, the top bit set, and sizes 0-3 and past 2^16.
import { expect, test } from "bun:test";
import { sortKeys } from "../src/native/hb.ts";
import { Rng } from "../src/engine/sampler.ts";

test("hb_sort_u64 orders 64-bit keys as a comparison sort does", () => {
  const r = new Rng(5), u32 = () => Math.floor(r.next() * 2 ** 32), f = new Float32Array(1), fb = new Uint32Array(f.buffer);
  const pBits = () => { f[0] = r.next() ** 8; return fb[0]; }; // (probabilities' f32 bits, clustered near 0)
  const shapes: [string, (i: number) => [number, number]][] = [
    ["random", () => [u32(), u32()]],
    ["low word only", () => [u32(), 0]],
    ["high word only, top bit set", () => [0, (u32() | 0x80000000) >>> 0]],
    ["few values (duplicates)", () => [u32() % 3, u32() % 2]],
    ["one digit varies", () => [(u32() & 0x7ff) << 11, 7]],
    ["sampler keys: ~bits(p), id", (i) => [i, ~pBits() >>> 0]],
  ];
  for (const n of [0, 1, 2, 3, 64, 1000, 70000])
    for (const [name, make] of shapes) {
      const keys = new Float64Array(n), tmp = new Float64Array(n), w = new Uint32Array(keys.buffer);
      for (let i = 0; i < n; i++) [w[2 * i], w[2 * i + 1]] = make(i);
      const want = new BigUint64Array(keys.buffer.slice(0)).sort();
      sortKeys(keys, tmp, n);
      const got = new BigUint64Array(keys.buffer);
      for (let i = 0; i < n; i++) if (got[i] !== want[i]) throw new Error(`${name}, n = ${n}: key ${i} is ${got[i]}, want ${want[i]}`);
    }
  expect(() => sortKeys(new Float64Array(4), new Float64Array(2), 4)).toThrow(/scratch 2/);
});
