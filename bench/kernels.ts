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

// summary: weight bytes / mean time, and SIMD vs scalar ratio per (format, S)
const avg = new Map<string, number>();
for (const t of benchmarks) for (const r of t.runs) if (r.stats) avg.set(r.name, r.stats.avg);
console.log(`\nthreads=${lib.hb_nthreads()} simd=${simd} O=${O} I=${I}`);
console.log("bench                          time/call     GB/s(W)   vs scalar");
for (const [name, ns] of avg) {
  const fmt = name.split(" ")[0];
  const bytes = weights[fmt].W.byteLength;
  const base = name.endsWith(simd) ? avg.get(name.replace(simd, "scalar")) : undefined;
  const ratio = base ? `${(base / ns).toFixed(1)}x` : "";
  console.log(`${name.padEnd(30)} ${(ns / 1e6).toFixed(3).padStart(8)} ms ${(bytes / ns).toFixed(2).padStart(10)} ${ratio.padStart(10)}`);
}
