// The routed-expert workload of the bench preset, shared by bench/experts.ts (mitata) and bench/ab.ts (two
// libhb builds alternated): int4g64 gate / up [512, 1024] and down [1024, 512] for 7 MoE layers × 64 experts
// (~400 MB, so weights come from memory), each expert's six tensors in one slab as the converter writes
// them, and the two calls the MoE layer makes (every gate ‖ up in one hb_matmul_many on its tokens' rows of the
// hidden states, by index, then every down); and the
// attention layer's dense int8 calls at S = 1 and 8 (the 8-stream step's other weight stream) and 128 (prefill).
// HB_AB_WIDTHS=glm5: GLM-5's widths instead (hidden 6144, experts [2048, 6144] / [6144, 2048], 2 layers × 16 of
// them, ~650 MB; the attention's q_a, kv_a, indexer, q_b and o_proj [6144, 16384], 6 layers, ~1 GB).
// State: the weights, the activations and a seeded LCG (so two runs draw the same sequence of calls).
import { ptr } from "bun:ffi";
import { Fmt, MANY_DESC, type ManyMat } from "../src/native/hb.ts";
import { weightBytes } from "../src/native/mem.ts";

const glm5 = process.env.HB_AB_WIDTHS === "glm5";
if (process.env.HB_AB_WIDTHS && !glm5) throw new Error(`HB_AB_WIDTHS=${process.env.HB_AB_WIDTHS}: only glm5 (or unset: the bench preset)`);
export const D = glm5 ? 6144 : 1024, F = glm5 ? 2048 : 512, E = glm5 ? 16 : 64, LAYERS = glm5 ? 2 : 7, K = 8;

let seed = 12345;
const next = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0);
export const rnd = (n: number) => (next() >>> 8) % n; // high bits (an LCG's low bits repeat with a short period)
/** n random bytes in weight memory (src/native/mem.ts: on huge pages, as the engine's weights are) */
const bytes = (n: number) => {
  const b = weightBytes(Math.ceil(n / 4) * 4), u = new Uint32Array(b.buffer, b.byteOffset, b.length / 4);
  for (let i = 0; i < u.length; i++) u[i] = next();
  return b.subarray(0, n);
};

const gb = (F * D) / 2, sb = ((F * D) / 64) * 4; // one matrix's packed bytes, its scales' bytes
/** [gate, gate scales, up, up scales, down, down scales] in one slab per expert */
function expert() {
  const slab = bytes(3 * (gb + sb));
  const mat = (off: number, O: number): ManyMat =>
    ({ fmt: Fmt.int4g, data: slab.subarray(off, off + gb), scales: new Float32Array(slab.buffer, slab.byteOffset + off + gb, sb / 4).fill(0.01), gs: 64, O });
  return { gate: mat(0, F), up: mat(gb + sb, F), down: mat(2 * (gb + sb), D) };
}
export const experts = Array.from({ length: LAYERS * E }, expert);
export const perExpert = 3 * (gb + sb);

const maxRows = 64 * 32;
const x = Float32Array.from({ length: maxRows * D }, () => rnd(2000) / 1000 - 1);
const h = new Float32Array(maxRows * F), h2 = new Float32Array(maxRows * F), y = new Float32Array(maxRows * D);
export const output = y;

/** A call's matrices as hb_matmul_many descriptors (MANY_DESC doubles each), with the row width I. */
export interface Call { desc: Float64Array; n: number; I: number; keep?: unknown } // keep: arrays the descriptor points into
const put = (d: Float64Array, k: number, w: ManyMat, out: Float32Array, xk: Float32Array, S: number, rows?: Int32Array) => {
  if (rows) void rows.buffer; // a small array's elements move to its buffer when first asked for: ask before taking the address
  d.set([w.fmt, w.gs, w.O, ptr(w.data), ptr(w.scales!), ptr(out), ptr(xk), S, rows ? ptr(rows) : 0, 0], MANY_DESC * k);
};

/**
 * One MoE layer's two calls for experts `sel` (global ids), as moe.ts makes them: expert k's gate ‖ up on its
 * tokens[k] (rows of the tokens' hidden states x, by index), its down on its own rows of h.
 */
export function layerCalls(sel: number[], tokens: Int32Array[]): [Call, Call] {
  const up = new Float64Array(MANY_DESC * 2 * sel.length), down = new Float64Array(MANY_DESC * sel.length);
  let r0 = 0;
  sel.forEach((e, k) => {
    const S = tokens[k].length, w = experts[e], he = h.subarray(r0 * F, (r0 + S) * F);
    put(up, 2 * k, w.gate, he, x, S, tokens[k]);
    put(up, 2 * k + 1, w.up, h2.subarray(r0 * F, (r0 + S) * F), x, S, tokens[k]);
    put(down, k, w.down, y.subarray(r0 * D, (r0 + S) * D), he, S);
    r0 += S;
  });
  return [{ desc: up, n: 2 * sel.length, I: D, keep: tokens }, { desc: down, n: sel.length, I: F }];
}

/** the entry point both calls go through (a libhb's hb_matmul_many, fast mode) */
export type ManyFn = (exact: number, n: number, desc: Float64Array, I: number) => void;
export const runCalls = (fn: ManyFn, calls: readonly Call[]) => { for (const c of calls) fn(0, c.n, c.desc, c.I); };

export interface Shape { name: string; draw: () => { calls: Call[]; bytes: number; macs: number } }
const all = Array.from({ length: E }, (_, e) => e);
let li = 0;
/** the experts of `streams` rows of one layer, each choosing K of E at random: the union, each expert's rows */
function union(streams: number) {
  li = (li + 1) % LAYERS;
  const chose: number[][] = Array.from({ length: E }, () => []);
  for (let r = 0; r < streams; r++) {
    const sel = new Set<number>();
    while (sel.size < K) sel.add(rnd(E));
    for (const e of sel) chose[e].push(r);
  }
  const u = all.filter((e) => chose[e].length > 0), tokens = u.map((e) => Int32Array.from(chose[e]));
  return { calls: layerCalls(u.map((e) => li * E + e), tokens), bytes: u.length * perExpert, macs: 3 * tokens.reduce((a, t) => a + t.length, 0) * F * D };
}
/** a 128-token prompt's rows per expert: n[e] distinct tokens of the 128 for expert e */
const tokensOf = (n: number[]) => n.map((c, e) => Int32Array.from({ length: c }, (_, i) => (7 * e + i) % 128));
const uneven = tokensOf(Array.from({ length: E }, () => { let n = 0; for (let t = 0; t < 128; t++) n += rnd(E) < K ? 1 : 0; return Math.max(1, n); }));
const even = Array.from({ length: E }, (_, e) => Int32Array.from({ length: 16 }, (_, i) => (e + 8 * i) % 128)); // each token in 8 experts
const layerOf = (tokens: Int32Array[]) => {
  li = (li + 1) % LAYERS;
  return { calls: layerCalls(all.map((e) => li * E + e), tokens), bytes: E * perExpert, macs: 3 * tokens.reduce((a, t) => a + t.length, 0) * F * D };
};
/**
 * The dense int8 projections of one attention layer of the bench preset, as the forward calls them (q_a ‖ kv_a ‖
 * indexer wk ‖ weights_proj on h; q_b ‖ indexer wq_b on c_q; o_proj), at S rows (S = 8: an 8-stream decode step's
 * dense calls, which run ~1.4x one row's time). 24 layers' worth (~70 MB) cycled, so the weights come from memory.
 */
const DL = glm5 ? 6 : 24, QR = glm5 ? 2048 : 512, HV = glm5 ? 16384 : D; // q_lora_rank; heads × v_head_dim
const i8 = (O: number, I: number): ManyMat => ({ fmt: Fmt.int8, data: bytes(O * I), scales: new Float32Array(O).fill(0.01), gs: 0, O });
const denseLayers = Array.from({ length: DL }, () => glm5
  ? { fromH: [i8(2048, D), i8(576, D), i8(128, D), i8(32, D)], fromQ: [i8(16384, QR), i8(4096, QR)], o: i8(D, HV) }
  : { fromH: [i8(512, D), i8(288, D), i8(64, D), i8(8, D)], fromQ: [i8(1536, QR), i8(512, QR)], o: i8(D, HV) });
let dl = 0;
function denseCalls(S: number) {
  const L = denseLayers[dl = (dl + 1) % DL], calls: Call[] = [];
  let bytes = 0, macs = 0, off = 0;
  for (const [ws, I] of [[L.fromH, D], [L.fromQ, QR], [[L.o], HV]] as const) {
    const desc = new Float64Array(MANY_DESC * ws.length);
    ws.forEach((w, k) => { put(desc, k, w, y.subarray(off), x, S); off += S * w.O; bytes += w.O * I + 4 * w.O; macs += S * w.O * I; });
    calls.push({ desc, n: ws.length, I });
  }
  return { calls, bytes, macs };
}

export const shapes: Shape[] = [
  { name: "decode: 8 experts x 1 row", draw: () => union(1) },
  { name: "8 streams: the union of 8 rows' experts", draw: () => union(8) },
  { name: `prefill: 64 experts x ~16 rows (${uneven.reduce((a, t) => a + t.length, 0)} in all)`, draw: () => layerOf(uneven) },
  { name: "prefill: 64 experts x 16 rows", draw: () => layerOf(even) },
  { name: "dense: an attention layer's int8 calls, S=1", draw: () => denseCalls(1) },
  { name: "dense: an attention layer's int8 calls, S=8", draw: () => denseCalls(8) },
  { name: "dense: an attention layer's int8 calls, S=128 (a prefill chunk)", draw: () => denseCalls(128) },
];
