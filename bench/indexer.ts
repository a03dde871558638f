// Micro-benchmarks of the DSA lightning indexer (mitata): scores over f32 keys (hb_index_scores, exact mode and
// float weights) against fast mode's int8 keys (hb_index_scores_q8, quantized once when written), both on the
// same keys, read from memory (copies cycled through ~256 MB). Shapes: the bench preset's (8 heads × 64) and
// GLM-5's (32 × 128) for one decoded row at long contexts, and a 32-row prefill block. Reports GMAC/s (p50)
// and int8 / f32. Holds no state. Usage: bun bench/indexer.ts     (HB_THREADS=n to pin the pool size)
import { bench, do_not_optimize, group, run } from "mitata";
import { hb, ikQuant, indexQ8Ok, indexScores, indexScoresQ8, type IkQ8 } from "../src/native/hb.ts";

const lib = hb();
const rand = (n: number) => Float32Array.from({ length: n }, () => Math.random() * 2 - 1);
const shapes: [number, number, number, number][] = [[8, 64, 4096, 1], [8, 64, 16384, 1], [32, 128, 16384, 1], [32, 128, 65536, 1], [8, 64, 4096, 32]];
const macs = new Map<string, number>();
for (const [nh, hd, T, S] of shapes) {
  const copies = Math.max(2, Math.ceil(256e6 / (T * hd * 4)));
  const kIs = Array.from({ length: copies }, () => rand(T * hd));
  const k8s: IkQ8[] = kIs.map((kI) => {
    const q = { k8: new Uint8Array(Math.ceil(T / 16) * 16 * hd), dk: new Float32Array(Math.ceil(T / 16) * 16) };
    ikQuant(kI, hd, 0, T, q);
    return q;
  });
  const qI = rand(S * nh * hd), w = rand(S * nh), out = new Float32Array(S * T);
  const nk = Int32Array.from({ length: S }, (_, s) => T - S + s + 1);
  const name = `${nh}x${hd} T=${T} S=${S}`;
  macs.set(name, S * T * nh * hd);
  let i = 0;
  group(name, () => {
    bench(`${name} f32`, () => { indexScores(S, nh, hd, qI, w, kIs[i = (i + 1) % copies], nk, out, T, 0.125); do_not_optimize(out); });
    bench(`${name} int8`, () => { indexScoresQ8(S, nh, hd, qI, w, k8s[i = (i + 1) % copies], nk, out, T, 0.125); do_not_optimize(out); });
  });
}
const { benchmarks } = await run();
const p50 = new Map<string, number>();
for (const t of benchmarks) for (const r of t.runs) if (r.stats) p50.set(r.name, r.stats.p50);
console.log(`\nthreads=${lib.hb_nthreads()} simd=${lib.hb_simd_name()} int8 kernel here: ${indexQ8Ok(64)} (p50 GMAC/s)`);
for (const [name, n] of macs) {
  const f = p50.get(`${name} f32`)!, q = p50.get(`${name} int8`)!;
  console.log(`${name.padEnd(24)} f32 ${(n / f).toFixed(0).padStart(5)}  int8 ${(n / q).toFixed(0).padStart(5)}  = ${(f / q).toFixed(2)}x`);
}
