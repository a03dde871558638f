// Micro-benchmarks of the attention core (mitata), hb_attn: the naive MLA form of a prefill (per-head keys
// [k_nope ‖ k_pe] and values, causal: row s sees keys 0..s) with the bench preset's heads (16 × dk 96, dv 64) and
// GLM-5's (64 × dk 256, dv 256), and the absorbed form of one decoded row (keys [c_kv ‖ k_pe] shared by the
// heads, the values their first 512 columns) over a long context, also over f16 / q8 caches. Keys and values stay in the cache (compute,
// not memory, is measured). Reports GMAC/s (p50: score and value multiply-adds over the keys each row sees).
// Holds no state. Usage: bun bench/attn.ts     (HB_THREADS=n to pin the pool size)
import { bench, do_not_optimize, run } from "mitata";
import { attn, attnSegs, hb, kvRowElems, kvWrite } from "../src/native/hb.ts";

const lib = hb();
const rand = (n: number) => Float32Array.from({ length: n }, () => Math.random() * 2 - 1);
interface Case { name: string; macs: number; fn: () => void }
const cases: Case[] = [];
for (const [S, H, dk, dv] of [[128, 16, 96, 64], [1024, 16, 96, 64], [512, 64, 256, 256]]) {
  const q = rand(S * H * dk), k = rand(S * H * dk), v = rand(S * H * dv), out = new Float32Array(S * H * dv);
  const nsel = Int32Array.from({ length: S }, (_, s) => s + 1);
  cases.push({ name: `prefill S=${S} H=${H} dk=${dk} dv=${dv} (causal)`, macs: (H * (dk + dv) * S * (S + 1)) / 2,
    fn: () => attn(S, H, dk, dv, { a: q, row: H * dk, head: dk }, { a: k, row: H * dk, head: dk }, { a: v, row: H * dv, head: dv },
      null, nsel, 0, 1 / Math.sqrt(dk), { a: out, row: H * dv, head: dv }) });
}
{ // a long prompt's prefill on a DSA layer (naive form): rows past index_topk = 128 attend to 128 of their keys
  // (ascending, drawn at random; the first 128 rows see all theirs), so the keys are gathered rows from the L3
  const S = 2048, H = 16, dk = 96, dv = 64, K = 128, q = rand(S * H * dk), k = rand(S * H * dk), v = rand(S * H * dv);
  const out = new Float32Array(S * H * dv), sel = new Int32Array(S * K), nsel = new Int32Array(S);
  let seed = 1;
  const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  for (let s = 0; s < S; s++) {
    const pick = s < K ? Array.from({ length: s + 1 }, (_, j) => j) : [...new Set(Array.from({ length: 4 * K }, () => Math.floor(next() * (s + 1))))].slice(0, K).sort((a, b) => a - b);
    nsel[s] = pick.length;
    sel.set(pick, s * K);
  }
  const macs = Array.from(nsel).reduce((a, n) => a + n, 0) * H * (dk + dv);
  cases.push({ name: `prefill S=${S} H=${H} dk=${dk} dv=${dv} (DSA: ${K} keys)`, macs,
    fn: () => attn(S, H, dk, dv, { a: q, row: H * dk, head: dk }, { a: k, row: H * dk, head: dk }, { a: v, row: H * dv, head: dv },
      sel, nsel, K, 1 / Math.sqrt(dk), { a: out, row: H * dv, head: dv }) });
}
for (const [H, T] of [[16, 4096], [64, 4096]]) {
  const dk = 576, dv = 512, q = rand(H * dk), kv = rand(T * dk), out = new Float32Array(H * dv), nsel = Int32Array.of(T);
  cases.push({ name: `decode H=${H} T=${T} (absorbed, shared keys)`, macs: H * (dk + dv) * T,
    fn: () => attn(1, H, dk, dv, { a: q, row: H * dk, head: dk }, { a: kv, row: dk, head: 0 }, { a: kv, row: dk, head: 0 },
      null, nsel, 0, 0.05, { a: out, row: H * dv, head: dv }) });
}
// the same decode over a cache in each KV dtype (hb_attn_segs, as the engine calls it: f16 / q8 rows widened first),
// two rows (two conversations) per call
for (const H of [16, 64]) {
  const T = 4096, dk = 576, dv = 512, q = rand(2 * H * dk), out = new Float32Array(2 * H * dv), nsel = Int32Array.of(T, T);
  const x = rand(T * dk), lat = x.filter((_, i) => i % dk < 512), kpe = x.filter((_, i) => i % dk >= 512);
  for (const t of ["f32", "f16", "q8"] as const) {
    const caches = [0, 1].map(() => { const c = t === "f32" ? new Float32Array(T * dk) : t === "f16" ? new Uint16Array(T * dk) : new Uint8Array(T * kvRowElems("q8", dk));
      kvWrite([{ cache: c, pos0: 0, r0: 0, n: T }], lat, 512, kpe, 64, 64); return c; });
    cases.push({ name: `decode H=${H} T=${T} ×2 rows, ${t} cache`, macs: 2 * H * (dk + dv) * T,
      fn: () => attnSegs(caches.map((c, i) => ({ r0: i, n: 1, k: c, v: c })), H, dk, dv, { a: q, row: H * dk, head: dk }, { row: dk, head: 0 },
        { row: dk, head: 0 }, null, nsel, 0, 0.05, { a: out, row: H * dv, head: dv }) });
  }
}
for (const c of cases) bench(c.name, () => { c.fn(); do_not_optimize(c); });
const { benchmarks } = await run();
console.log(`\nthreads=${lib.hb_nthreads()} simd=${lib.hb_simd_name()} (p50)`);
for (const t of benchmarks) for (const r of t.runs) {
  const c = cases.find((k) => k.name === r.name);
  if (c && r.stats) console.log(`${r.name.padEnd(48)} ${(r.stats.p50 / 1e6).toFixed(3).padStart(9)} ms ${(c.macs / r.stats.p50).toFixed(1).padStart(7)} GMAC/s`);
}
