// Micro-benchmarks of the DSA lightning indexer (mitata): scores over f32 keys (hb_index_scores, exact mode and
// float weights) against fast mode's int8 keys (hb_index_scores_q8, quantized once when written), both on the
// same keys, read from memory (copies cycled through ~256 MB). Shapes: the bench preset's (8 heads × 64) and
// GLM-5's (32 × 128) for one decoded row at long contexts, and a 32-row prefill block. Reports GMAC/s (p50)
// and int8 / f32. Holds no state. Usage: bun bench/indexer.ts     (HB_THREADS=n to pin the pool size)
// `--per-token`: instead, the indexer's cost per decoded token (score every visible key + select index_topk 2048,
// one row) at GLM-5's shape (32 heads × 128) and contexts 1k-128k, at every SIMD level here (hb_simd_force: scalar,
// AVX2, AVX-512, the best), f32 keys against int8 keys; with the bytes of keys read per token and the fraction of
// the bandwidth probe (hb_membw) that is. Median of `--reps` (default 15) calls, key copies cycled through ~256 MB.
import { bench, do_not_optimize, group, run } from "mitata";
import { dsaSelect, hb, ikQuant, indexQ8Ok, indexScores, indexScoresQ8, memBandwidth, Simd, type IkQ8 } from "../src/native/hb.ts";

const lib = hb();
if (process.argv.includes("--per-token")) {
  await perToken();
  process.exit(0);
}
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

async function perToken() {
  const nh = 32, hd = 128, topk = 2048, ctxs = [1024, 8192, 32768, 131072];
  const ri = process.argv.indexOf("--reps"), reps = ri > 0 ? Number(process.argv[ri + 1]) : 15;
  const best = lib.hb_simd_force(1);
  const levels: number[] = [];
  for (const l of [Simd.scalar, Simd.avx2, Simd.avx512]) if (l < best && lib.hb_simd_force(l) === l) levels.push(l);
  levels.push(best);
  lib.hb_simd_force(1);
  const bw = memBandwidth(256 << 20, 5);
  const name = (l: number) => Object.keys(Simd).find((k) => Simd[k as keyof typeof Simd] === l)!;
  const med = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1];
  console.log(`threads=${lib.hb_nthreads()} best simd=${lib.hb_simd_name()} probe ${(bw / 1e9).toFixed(1)} GB/s; ${nh}×${hd}, top-${topk}, one row; median of ${reps}`);
  console.log("simd        keys  ctx      score µs  select µs  total µs  ns/key  GMAC/s  key GB/s  % probe");
  const qI = Float32Array.from({ length: nh * hd }, () => Math.random() * 2 - 1), w = Float32Array.from({ length: nh }, () => Math.random() * 2 - 1);
  for (const T of ctxs) {
    const copies = Math.max(2, Math.ceil(256e6 / (T * hd * 4)));
    const kIs = Array.from({ length: copies }, () => Float32Array.from({ length: T * hd }, () => Math.random() * 2 - 1));
    const k8s: IkQ8[] = kIs.map((kI) => { const q = { k8: new Uint8Array(Math.ceil(T / 16) * 16 * hd), dk: new Float32Array(Math.ceil(T / 16) * 16) }; ikQuant(kI, hd, 0, T, q); return q; });
    const nk = Int32Array.of(T), out = new Float32Array(T), sel = new Int32Array(topk), nsel = new Int32Array(1);
    for (const l of levels) {
      lib.hb_simd_force(l);
      for (const int8 of [false, true]) {
        if (int8 && !indexQ8Ok(hd)) continue;
        const sc: number[] = [], se: number[] = [];
        // slow levels at long contexts: fewer calls (the scalar kernel runs ~0.1 s per 32k keys)
        const n = l === Simd.scalar && T > 8192 ? Math.max(3, reps >> 2) : reps;
        for (let r = 0; r <= n; r++) {
          const i = r % copies, t0 = Bun.nanoseconds();
          if (int8) indexScoresQ8(1, nh, hd, qI, w, k8s[i], nk, out, T, 0.088);
          else indexScores(1, nh, hd, qI, w, kIs[i], nk, out, T, 0.088);
          const t1 = Bun.nanoseconds();
          dsaSelect(1, out, T, nk, topk, sel, nsel);
          const t2 = Bun.nanoseconds();
          if (r > 0) { sc.push((t1 - t0) / 1e3); se.push((t2 - t1) / 1e3); } // the first call warms up
        }
        const a = med(sc), b = med(se), bytes = T * hd * (int8 ? 1 : 4) + (int8 ? T * 4 : 0);
        console.log(`${name(l).padEnd(11)} ${int8 ? "int8" : "f32 "}  ${String(T).padEnd(7)} ${a.toFixed(0).padStart(9)} ${b.toFixed(0).padStart(10)} ${(a + b).toFixed(0).padStart(9)}` +
          ` ${((a + b) * 1e3 / T).toFixed(1).padStart(7)} ${(T * nh * hd / a / 1e3).toFixed(1).padStart(7)} ${(bytes / a / 1e3).toFixed(1).padStart(9)} ${(100 * bytes / a * 1e6 / bw).toFixed(0).padStart(8)}`);
      }
    }
    lib.hb_simd_force(1);
  }
}
