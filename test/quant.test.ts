// Quantize -> dequantize round trips for formats 1-4, packing byte for byte as formats.md says.
import { expect, test } from "bun:test";
import { dequantize, parseFmt, quantCounts, quantize } from "../src/model/quant.ts";

function rand(n: number, seed: number): Float32Array {
  let s = seed;
  return Float32Array.from({ length: n }, () => ((s = (s * 48271) % 2147483647) / 2147483647 - 0.5) * 4);
}

for (const name of ["int8", "int4", "int2", "int4g64", "int4g8"]) {
  test(`${name}: round trip within half a step, exact scales and packing`, () => {
    const f = parseFmt(name)!;
    for (const [O, I] of [[3, 1], [5, 7], [4, 130], [2, 64]]) {
      const W = rand(O * I, O * 31 + I);
      const { q, scales } = quantize(f, W, O, I);
      expect([q.length, scales.length]).toEqual(quantCounts(f, O, I));
      const back = dequantize(f, q, scales, O, I);
      const bits = name === "int8" ? 8 : name === "int2" ? 2 : 4, qmax = 2 ** (bits - 1) - 1;
      const gs = f.gs || I, ng = Math.ceil(I / gs);
      for (let o = 0; o < O; o++) for (let g = 0; g < ng; g++) {
        let amax = 0;
        for (let i = g * gs; i < Math.min(I, (g + 1) * gs); i++) amax = Math.max(amax, Math.abs(W[o * I + i]));
        const s = scales[o * ng + g];
        expect(s).toBe(Math.fround(Math.max(Math.fround(amax / qmax), 1e-8)));
        for (let i = g * gs; i < Math.min(I, (g + 1) * gs); i++) {
          // v = clamp(rint(w/s)): reproduce it and compare the dequantized value exactly
          const r = Math.fround(W[o * I + i] / s);
          let v = Math.round(r); if (Math.abs(r % 1) === 0.5 && v % 2 !== 0) v -= 1; // half to even
          v = Math.min(qmax, Math.max(-(qmax + 1), v));
          expect(back[o * I + i] + 0).toBe(Math.fround(v * s) + 0);
        }
      }
    }
  });
}

test("packing: int4 even index in the low nibble, int2 at bits 2(i mod 4)", () => {
  const { q } = quantize(parseFmt("int4")!, new Float32Array([7, -7, 1, 0]), 1, 4);
  expect([...q]).toEqual([(7 + 8) | ((-7 + 8) << 4), (1 + 8) | ((0 + 8) << 4)]);
  const r2 = quantize(parseFmt("int2")!, new Float32Array([1, -1, 0, 1, -1]), 1, 5);
  expect([...r2.q]).toEqual([(3) | (1 << 2) | (2 << 4) | (3 << 6), 1]);
});
