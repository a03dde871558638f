// Micro-benchmarks of the routed-expert workload (mitata), fast mode, with the bench preset's expert shapes
// (bench/expert-shapes.ts: the MoE layer's own two calls, weights from memory): decode-shaped (8 experts of
// one row each), an 8-stream decode step's union of experts (1-8 rows each), prefill-shaped (all 64 experts
// of a layer with ~16 rows each, uneven as routing gives, and exactly 16 each). Reference: 2048×2048
// int4g64 matrices (32 of them, cycled: from memory) at S = 1 and S = 16, and int8 ones at S = 1. Reports
// GB/s of weights and GMAC/s (p50). To compare two builds of libhb in one run, see bench/ab.ts.
// Holds no state. Usage: bun bench/experts.ts     (HB_THREADS=n to pin the pool size)
import { bench, do_not_optimize, run } from "mitata";
import { Fmt, hb, matmulQ8 } from "../src/native/hb.ts";
import { output, rnd, runCalls, shapes } from "./expert-shapes.ts";

const lib = hb();
lib.hb_pool_adapt(0); // every call on every pool thread (ffi/pool_width.h)
const many = lib.hb_matmul_many;
type Case = { name: string; bytes: number; macs: number; n: number; fn: () => void };
const cases: Case[] = shapes.map((s) => {
  const c: Case = { name: s.name, bytes: 0, macs: 0, n: 0,
    fn: () => { const d = s.draw(); c.n++; c.bytes += d.bytes; c.macs += d.macs; runCalls(many, d.calls); } };
  return c;
});
const x = Float32Array.from({ length: 16 * 2048 }, () => rnd(2000) / 1000 - 1);
const scales = (n: number) => new Float32Array(n).fill(0.01);
const bytes = (n: number) => Uint8Array.from({ length: n }, () => rnd(256));
const bigs = Array.from({ length: 32 }, () => ({ data: bytes(2048 * 1024), scales: scales(2048 * 32) })), yb = new Float32Array(16 * 2048); // ~75 MB
let bi = 0;
const fixed = (c: Omit<Case, "n">): Case => ({ ...c, n: -1 });
for (const S of [1, 16])
  cases.push(fixed({ name: `reference: 2048x2048 S=${S}`, bytes: bigs[0].data.byteLength + 4 * bigs[0].scales.length, macs: S * 2048 * 2048,
    fn: () => { const b = bigs[bi = (bi + 1) % bigs.length]; matmulQ8(Fmt.int4g, b.data, b.scales, 64, 2048, 2048, x, S, yb); } }));
const i8s = Array.from({ length: 16 }, () => ({ data: bytes(2048 * 2048), scales: scales(2048) })); // 64 MB
cases.push(fixed({ name: "reference: int8 2048x2048 S=1", bytes: 2048 * 2048 + 4 * 2048, macs: 2048 * 2048,
  fn: () => { const b = i8s[bi = (bi + 1) % i8s.length]; matmulQ8(Fmt.int8, b.data, b.scales, 0, 2048, 2048, x, 1, yb); } }));

for (const c of cases) bench(c.name, () => { c.fn(); do_not_optimize(output); });
const { benchmarks } = await run();
console.log(`\nthreads=${lib.hb_nthreads()} simd=${lib.hb_simd_name()} (p50: GB/s of weights and scales, GMAC/s)`);
for (const t of benchmarks) for (const r of t.runs) {
  const c = cases.find((k) => k.name === r.name);
  if (!c || !r.stats) continue;
  const per = c.n > 0 ? c.n : 1; // drawn shapes: the mean call over every draw
  console.log(`${r.name.padEnd(44)} ${(c.bytes / per / r.stats.p50).toFixed(1).padStart(7)} GB/s ${(c.macs / per / r.stats.p50).toFixed(0).padStart(6)} GMAC/s`);
}
