// Micro-benchmarks of the routed-expert workload (mitata), fast mode, with the bench preset's expert shapes
// (int4g64 gate / up [512, 1024] and down [1024, 512]) and the calls the MoE layer makes: every expert's
// gate ‖ up in one hb_matmul_many, then every down in another. Decode-shaped: 8 experts of one row each,
// drawn from 448 (the bench preset's 7 MoE layers × 64: ~400 MB, so weights come from memory). Prefill-
// shaped: all 64 experts of a layer with ~16 rows each (uneven, as routing gives) and exactly 16 each.
// Reference: 2048×2048 int4g64 matrices (32 of them, cycled: from memory) at S = 1 and S = 16, and int8
// ones at S = 1. Reports GB/s of weights and GMAC/s (p50).
// Holds no state. Usage: bun bench/experts.ts     (HB_THREADS=n to pin the pool size)
import { bench, do_not_optimize, run } from "mitata";
import { Fmt, hb, matmulMany, matmulQ8, type ManyMat } from "../src/engine/hb.ts";

const lib = hb();
const D = 1024, F = 512, E = 64, LAYERS = 7, K = 8;
let seed = 12345;
const next = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0);
const bytes = (n: number) => { const u = new Uint32Array(Math.ceil(n / 4)); for (let i = 0; i < u.length; i++) u[i] = next(); return new Uint8Array(u.buffer, 0, n); };
const mat = (O: number, I: number): ManyMat => ({ fmt: Fmt.int4g, data: bytes(O * I / 2), scales: new Float32Array(O * I / 64).fill(0.01), gs: 64, O });
const wbytes = (m: ManyMat) => m.data.byteLength + m.scales!.byteLength;
const experts = Array.from({ length: LAYERS * E }, () => ({ gate: mat(F, D), up: mat(F, D), down: mat(D, F) }));
const perExpert = wbytes(experts[0].gate) + wbytes(experts[0].up) + wbytes(experts[0].down);

/** one MoE layer's two calls for experts `sel` with rows[k] rows each */
function layer(sel: number[], rows: number[], x: Float32Array, h: Float32Array, h2: Float32Array, y: Float32Array): void {
  const up: ManyMat[] = [], upY: Float32Array[] = [], down: ManyMat[] = [], downY: Float32Array[] = [];
  let r0 = 0;
  sel.forEach((e, k) => {
    const S = rows[k], w = experts[e], xe = x.subarray(r0 * D, (r0 + S) * D), he = h.subarray(r0 * F, (r0 + S) * F);
    up.push({ ...w.gate, x: xe, S }, { ...w.up, x: xe, S });
    upY.push(he, h2.subarray(r0 * F, (r0 + S) * F));
    down.push({ ...w.down, x: he, S });
    downY.push(y.subarray(r0 * D, (r0 + S) * D));
    r0 += S;
  });
  matmulMany(false, up, upY, D, null, 0);
  matmulMany(false, down, downY, F, null, 0);
}

const rnd = (n: number) => (next() >>> 8) % n; // high bits (an LCG's low bits repeat with a short period)
const maxRows = 64 * 32;
const x = Float32Array.from({ length: maxRows * D }, () => rnd(2000) / 1000 - 1);
const h = new Float32Array(maxRows * F), h2 = new Float32Array(maxRows * F), y = new Float32Array(maxRows * D);
const uneven = Array.from({ length: E }, () => { let n = 0; for (let t = 0; t < 128; t++) n += rnd(E) < K ? 1 : 0; return Math.max(1, n); });
const unevenRows = uneven.reduce((a, b) => a + b);
const even = new Array<number>(E).fill(16);
const all = Array.from({ length: E }, (_, e) => e);
let li = 0;
const cases: { name: string; bytes: number; macs: number; fn: () => void }[] = [
  { name: "decode: 8 experts x 1 row", bytes: K * perExpert, macs: 3 * K * F * D,
    fn: () => { const sel = new Set<number>(); while (sel.size < K) sel.add(rnd(LAYERS * E)); layer([...sel], new Array(K).fill(1), x, h, h2, y); } },
  { name: `prefill: 64 experts x ~16 rows (${unevenRows} in all)`, bytes: E * perExpert, macs: 3 * unevenRows * F * D,
    fn: () => { li = (li + 1) % LAYERS; layer(all.map((e) => li * E + e), uneven, x, h, h2, y); } },
  { name: "prefill: 64 experts x 16 rows", bytes: E * perExpert, macs: 3 * 16 * E * F * D,
    fn: () => { li = (li + 1) % LAYERS; layer(all.map((e) => li * E + e), even, x, h, h2, y); } },
];
const bigs = Array.from({ length: 32 }, () => mat(2048, 2048)), yb = new Float32Array(16 * 2048); // ~75 MB
let bi = 0;
for (const S of [1, 16])
  cases.push({ name: `reference: 2048x2048 S=${S}`, bytes: wbytes(bigs[0]), macs: S * 2048 * 2048,
    fn: () => { const b = bigs[bi = (bi + 1) % bigs.length]; matmulQ8(Fmt.int4g, b.data, b.scales, 64, 2048, 2048, x, S, yb); } });

const i8s = Array.from({ length: 16 }, () => ({ data: bytes(2048 * 2048), scales: new Float32Array(2048).fill(0.01) })); // 64 MB
cases.push({ name: "reference: int8 2048x2048 S=1", bytes: 2048 * 2048 + 4 * 2048, macs: 2048 * 2048,
  fn: () => { const b = i8s[bi = (bi + 1) % i8s.length]; matmulQ8(Fmt.int8, b.data, b.scales, 0, 2048, 2048, x, 1, yb); } });

for (const c of cases) bench(c.name, () => { c.fn(); do_not_optimize(y); });
const { benchmarks } = await run();
console.log(`\nthreads=${lib.hb_nthreads()} simd=${lib.hb_simd_name()} (p50: GB/s of weights and scales, GMAC/s)`);
for (const t of benchmarks) for (const r of t.runs) {
  const c = cases.find((k) => k.name === r.name);
  if (!c || !r.stats) continue;
  console.log(`${r.name.padEnd(44)} ${(c.bytes / r.stats.p50).toFixed(1).padStart(7)} GB/s ${(c.macs / r.stats.p50).toFixed(0).padStart(6)} GMAC/s`);
}
