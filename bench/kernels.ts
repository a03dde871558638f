// Micro-benchmarks of libhb matmul (mitata): W [O,I] · x [S,I] for every weight format in both activation
// modes — exact (f32 activations, hb_matmul) and fast (int8 activations, hb_matmul_q8; float formats have
// no fast kernel: fast mode runs them exactly) — at decode (S=1), a small prefill block (S=16) and a prefill
// chunk (S=128: the int8 packed-panel GEMM on VNNI machines). Reports
// GB/s of weights read (median and best sample: the box may be shared), the fast / exact ratio, and for
// f32 / bf16 the speed-up over the forced-scalar kernels, all measured in the same run. Holds no state.
// Usage: bun bench/kernels.ts [O=2048] [I=2048]     (HB_THREADS=n to pin the pool size)
import { bench, do_not_optimize, group, run } from "mitata";
import { Fmt, type FmtCode, hb, matmul, matmulQ8 } from "../src/native/hb.ts";

const O = Number(process.argv[2] ?? 2048), I = Number(process.argv[3] ?? 2048);
const lib = hb();
lib.hb_pool_adapt(0); // every call on every pool thread (ffi/pool_width.h)
const simd = String(lib.hb_simd_name());

const rand = (n: number) => Float32Array.from({ length: n }, () => Math.random() * 2 - 1);
const bytes = (n: number) => Uint8Array.from({ length: n }, () => (Math.random() * 256) | 0);
const scales = (n: number) => Float32Array.from({ length: n }, () => 0.001 + Math.random() * 0.05);
const wf32 = rand(O * I), half = Uint16Array.from(new Uint32Array(wf32.buffer), (u) => u >>> 16);
type W = { fmt: FmtCode; W: Float32Array | Uint16Array | Uint8Array; sc: Float32Array | null; gs: number; quant: boolean };
const weights: Record<string, W> = {
  f32: { fmt: Fmt.f32, W: wf32, sc: null, gs: 0, quant: false },
  bf16: { fmt: Fmt.bf16, W: half, sc: null, gs: 0, quant: false },
  f16: { fmt: Fmt.f16, W: Uint16Array.from(half, (h) => h & 0xbfff), sc: null, gs: 0, quant: false }, // finite halves
  int8: { fmt: Fmt.int8, W: bytes(O * I), sc: scales(O), gs: 0, quant: true },
  int4: { fmt: Fmt.int4, W: bytes(O * Math.ceil(I / 2)), sc: scales(O), gs: 0, quant: true },
  int2: { fmt: Fmt.int2, W: bytes(O * Math.ceil(I / 4)), sc: scales(O), gs: 0, quant: true },
  int4g64: { fmt: Fmt.int4g, W: bytes(O * Math.ceil(I / 2)), sc: scales(O * Math.ceil(I / 64)), gs: 64, quant: true },
};
const scalarFor = new Set(["f32", "bf16"]); // forced-scalar baselines (slow: only where asked)

for (const S of [1, 16, 128]) {
  const x = rand(S * I), y = new Float32Array(S * O);
  group(`matmul O=${O} I=${I} S=${S}`, () => {
    for (const [name, w] of Object.entries(weights)) {
      const runs: [string, number, boolean][] = [["exact", 1, true]];
      if (w.quant) runs.push(["fast", 1, false]);
      if (scalarFor.has(name)) runs.push(["scalar", 0, true]);
      for (const [mode, force, exact] of runs) {
        bench(`${name} S=${S} ${mode}`, () => {
          lib.hb_simd_force(force);
          (exact ? matmul : matmulQ8)(w.fmt, w.W, w.sc, w.gs, O, I, x, S, y);
          do_not_optimize(y);
        });
      }
    }
  });
}

const { benchmarks } = await run();
lib.hb_simd_force(1);

// summary: weight bytes / time (median and best sample), fast / exact and SIMD / forced-scalar of the medians
const stat = new Map<string, { p50: number; min: number }>();
for (const t of benchmarks) for (const r of t.runs) if (r.stats) stat.set(r.name, { p50: r.stats.p50, min: r.stats.min });
console.log(`\nthreads=${lib.hb_nthreads()} simd=${simd} O=${O} I=${I} (GB/s = bytes of W and scales / time)`);
console.log(`${"bench".padEnd(24)} ${"p50 ms".padStart(9)} ${"GB/s p50".padStart(9)} ${"GB/s best".padStart(10)} ${"fast/exact".padStart(11)} ${"vs scalar".padStart(10)}`);
for (const [name, { p50, min }] of stat) {
  const [fmt, , mode] = name.split(" "), w = weights[fmt];
  const nbytes = w.W.byteLength + (w.sc?.byteLength ?? 0);
  const exact = mode === "fast" ? stat.get(name.replace(/fast$/, "exact")) : undefined;
  const scalar = mode === "exact" ? stat.get(name.replace(/exact$/, "scalar")) : undefined;
  const r = (b: { p50: number } | undefined) => (b ? `${(b.p50 / p50).toFixed(2)}x` : "");
  console.log(`${name.padEnd(24)} ${(p50 / 1e6).toFixed(3).padStart(9)} ${(nbytes / p50).toFixed(2).padStart(9)} ${(nbytes / min).toFixed(2).padStart(10)} ${r(exact).padStart(11)} ${r(scalar).padStart(10)}`);
}
