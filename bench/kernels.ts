// Micro-benchmarks of libhb matmul (mitata): W [O,I] · x [S,I] for f32 / bf16 (and int8 / int4g for
// reference) at decode (S=1) and a small prefill block (S=16). Reports GB/s of weights read and the
// speed-up over the forced-scalar kernels measured in the same run. Holds no state.
// Usage: bun bench/kernels.ts [O=2048] [I=2048]     (HB_THREADS=n to pin the pool size)
import { bench, do_not_optimize, group, run } from "mitata";
import { Fmt, type FmtCode, hb, matmul } from "../src/engine/hb.ts";

const O = Number(process.argv[2] ?? 2048), I = Number(process.argv[3] ?? 2048);
const lib = hb();
const simd = String(lib.hb_simd_name());

const rand = (n: number) => Float32Array.from({ length: n }, () => Math.random() * 2 - 1);
const wf32 = rand(O * I);
const weights: Record<string, { fmt: FmtCode; W: Float32Array | Uint16Array | Uint8Array; sc: Float32Array | null; gs: number }> = {
  f32: { fmt: Fmt.f32, W: wf32, sc: null, gs: 0 },
  bf16: { fmt: Fmt.bf16, W: Uint16Array.from(new Uint32Array(wf32.buffer), (u) => u >>> 16), sc: null, gs: 0 },
  int8: { fmt: Fmt.int8, W: Uint8Array.from({ length: O * I }, () => (Math.random() * 256) | 0), sc: rand(O), gs: 0 },
  int4g: {
    fmt: Fmt.int4g, W: Uint8Array.from({ length: O * Math.ceil(I / 2) }, () => (Math.random() * 256) | 0),
    sc: rand(O * Math.ceil(I / 64)), gs: 64,
  },
};
const scalarFor = new Set(["f32", "bf16"]); // scalar baselines (slow: only where asked)

for (const S of [1, 16]) {
  const x = rand(S * I), y = new Float32Array(S * O);
  group(`matmul O=${O} I=${I} S=${S}`, () => {
    for (const [name, w] of Object.entries(weights)) {
      const levels: [string, number][] = [[simd, 1]];
      if (scalarFor.has(name)) levels.push(["scalar", 0]);
      for (const [lvl, force] of levels) {
        bench(`${name} S=${S} ${lvl}`, () => {
          lib.hb_simd_force(force);
          matmul(w.fmt, w.W, w.sc, w.gs, O, I, x, S, y);
          do_not_optimize(y);
        });
      }
    }
  });
}

const { benchmarks } = await run();
lib.hb_simd_force(1);

// summary: weight bytes / time (median and best sample: this box may be shared, so the mean is noisy),
// and the SIMD vs forced-scalar ratio of the medians per (format, S)
const stat = new Map<string, { p50: number; min: number }>();
for (const t of benchmarks) for (const r of t.runs) if (r.stats) stat.set(r.name, { p50: r.stats.p50, min: r.stats.min });
console.log(`\nthreads=${lib.hb_nthreads()} simd=${simd} O=${O} I=${I}`);
console.log(`${"bench".padEnd(26)} ${"p50 ms".padStart(9)} ${"GB/s p50".padStart(9)} ${"GB/s best".padStart(10)} ${"vs scalar".padStart(10)}`);
for (const [name, { p50, min }] of stat) {
  const bytes = weights[name.split(" ")[0]].W.byteLength;
  const base = name.endsWith(simd) ? stat.get(name.replace(simd, "scalar")) : undefined;
  const ratio = base ? `${(base.p50 / p50).toFixed(1)}x` : "";
  console.log(`${name.padEnd(26)} ${(p50 / 1e6).toFixed(3).padStart(9)} ${(bytes / p50).toFixed(2).padStart(9)} ${(bytes / min).toFixed(2).padStart(10)} ${ratio.padStart(10)}`);
}
