// MLA attention (spec §3.1) over the compressed cache, in both exact forms:
//  - naive (prefill): kv_b rebuilds k_nope and v for the whole context, then per-head attention;
//  - absorbed (decode, small batches): q_abs = W_K,hᵀ q_nope against c_kv, o_h = W_V,h Σ p·c_kv.
// Reads h = st.xb, writes the new rows' c_kv ‖ k_pe into the KVCache and the output to st.ao.
// State: absorbedCache, the absorbed W_Kᵀ of each kv_b (derived, read-only; int8 on AVX-512 VNNI also as column
// quads) with both sides packed for mlaAbsorbed; per layer its projections' descriptors (MmCall); reused segment lists.
import type { Config } from "../model/config.ts";
import type { AttnWeights, Mat } from "../model/weights.ts";
import { rowBytes } from "../model/formats.ts";
import { attn, columnQuads, copyHeads, Fmt, type HeadsW, type KvSeg, mlaAbsorbed, type MlaSeg, packHeads, rope, Simd, simdLevel } from "../native/hb.ts";
import { mm, MmCall, mmMany, rowsOf, transposeF32 } from "./mat.ts";
import { weightBytes } from "../native/mem.ts";
import type { RunState } from "./state.ts";
import type { Segment, SelectHook } from "./batch.ts";
import { indexerKeys, indexerQueries } from "./indexer.ts";

export type AttnMode = "auto" | "naive" | "absorbed";
/** How a layer picks its keys: its own indexer, the last full layer's selection, or all of them. */
export type KeyMode = "full" | "shared" | "dense";

/**
 * W_K,hᵀ of every head stacked: kt [H·kv_lora, dn] (head h = rows h·kv_lora..), applied to kmul_h ⊙ q_nope.
 * Row formats (int8/int4/int2, one scale per row of kv_b): the transposed integer codes with unit scales,
 * and kmul = kv_b's row scales (so W_K,hᵀ q = codesᵀ (s ⊙ q) reads 1 byte per weight, not 4); int8 on AVX-512 VNNI
 * also as column quads (HeadsW.cols).
 * bf16: the transpose in bf16 (exact). f32, f16, int4g: the dequantized transpose in f32; kmul = null.
 */
interface Absorbed { kt: HeadsW; kmul: Float32Array | null; ktp: Float64Array; vw: Float64Array }
const absorbedCache = new WeakMap<Mat, Absorbed>();

/** raw code of element c of a packed row at byte offset `at` (the stored field, before any offset) */
function code(fmt: number, d: Uint8Array, at: number, c: number): number {
  if (fmt === Fmt.int8) return d[at + c];
  if (fmt === Fmt.int2) return (d[at + (c >> 2)] >> ((c & 3) * 2)) & 3;
  return (d[at + (c >> 1)] >> ((c & 1) * 4)) & 15;
}
function setCode(fmt: number, d: Uint8Array, at: number, c: number, v: number): void {
  if (fmt === Fmt.int8) d[at + c] = v;
  else if (fmt === Fmt.int2) d[at + (c >> 2)] |= v << ((c & 3) * 2);
  else d[at + (c >> 1)] |= v << ((c & 1) * 4);
}

function absorbed(cfg: Config, kv_b: Mat): Absorbed {
  let a = absorbedCache.get(kv_b);
  if (a) return a;
  const H = cfg.num_attention_heads, dn = cfg.qk_nope_head_dim, dv = cfg.v_head_dim, kvr = cfg.kv_lora_rank;
  const f = kv_b.fmt, whole = (fmt: HeadsW["fmt"], W: HeadsW["W"], scales: Float32Array | null): HeadsW =>
    ({ fmt, W, scales, gs: 0, O: kvr, I: dn, r0: 0, rstride: kvr });
  // the v side reads kv_b itself: rows dn.. of each head's dn + dv
  const vSide = packHeads({ fmt: f, W: kv_b.data, scales: kv_b.scales, gs: kv_b.gs, O: dv, I: kvr, r0: dn, rstride: dn + dv });
  if (f === Fmt.int8 || f === Fmt.int4 || f === Fmt.int2) {
    const src = kv_b.data as Uint8Array, rbIn = rowBytes(f, kvr), rbOut = rowBytes(f, dn);
    const kt = weightBytes(H * kvr * rbOut), kmul = new Float32Array(H * dn);
    for (let h = 0; h < H; h++)
      for (let d = 0; d < dn; d++) {
        const r = h * (dn + dv) + d;
        kmul[h * dn + d] = kv_b.scales![r];
        for (let c = 0; c < kvr; c++) setCode(f, kt, (h * kvr + c) * rbOut, d, code(f, src, r * rbIn, c));
      }
    const cols = f === Fmt.int8 && simdLevel() >= Simd.avx512vnni ? { cols: columnQuads(kt, H * kvr, dn, weightBytes(H * kvr * dn)) } : {};
    const ktw: HeadsW = { ...whole(f, kt, new Float32Array(H * kvr).fill(1)), ...cols };
    a = { kt: ktw, kmul, ktp: packHeads(ktw), vw: vSide };
  } else {
    const t = new Float32Array(H * kvr * dn);
    for (let h = 0; h < H; h++) t.set(transposeF32(rowsOf(kv_b, h * (dn + dv), dn)), h * kvr * dn);
    const ktw = f === Fmt.bf16 ? whole(Fmt.bf16, Uint16Array.from(new Uint32Array(t.buffer), (u) => u >>> 16), null) : whole(Fmt.f32, t, null);
    a = { kt: ktw, kmul: null, ktp: packHeads(ktw), vw: vSide };
  }
  absorbedCache.set(kv_b, a);
  return a;
}

/**
 * Attention of S rows of h = st.xb into st.ao. Every row's key side is computed and cached (c_kv ‖ k_pe, indexer
 * keys); with k < S only the query rows st.keep[0..k) (ascending; the last rows of their segments: a prompt's last
 * layer, whose other rows no one reads) get queries and an output, moved to rows 0..k-1 of st.ao (and of st.xb,
 * st.pos, st.nk and, on a shared layer, st.sel / st.nsel). Those rows get the same bits either way.
 * Projections that share an input run as one batched call (q_a ‖ kv_a ‖ indexer wk ‖ weights_proj;
 * q_b ‖ indexer wq_b); the absorbed form's q side, core and v side, over every absorbed segment, are one call
 * (hb_mla_absorbed).
 */
export function attention(cfg: Config, st: RunState, w: AttnWeights, layer: number, kvLayer: number,
  segs: Segment[], S: number, keys: KeyMode, mode: AttnMode, hook?: SelectHook, k = S): void {
  const H = cfg.num_attention_heads, dn = cfg.qk_nope_head_dim, dr = cfg.qk_rope_head_dim, dv = cfg.v_head_dim;
  const kvr = cfg.kv_lora_rank, eps = cfg.rms_norm_eps, theta = cfg.rope_theta, Q = H * (dn + dr), W = kvr + dr;
  // projections of h = st.xb: a = W_kva h -> [S, kv_lora+dr] and on indexer layers kI = W_wk h (every row); W_qa h (or
  // q = W_q h) and iw = W_weights_proj h (the query rows) — in one call unless rows are skipped (the descriptors
  // kept per layer: callsOf)
  const ix = keys === "full" ? w.indexer! : null, lora = !!(w.q_a && w.q_b && w.q_a_norm);
  const c = callsOf(w), tag = ix ? 1 : 0, proj = k === S ? c.all : c.keys;
  if (!proj.fits(st, st.xb, S, tag)) {
    const kq = projections(st, w, ix, lora);
    if (k === S) proj.set(st, [...kq.kW, ...kq.qW], st.xb, S, [...kq.kOut, ...kq.qOut], tag);
    else proj.set(st, kq.kW, st.xb, S, kq.kOut, tag);
  }
  // cache row t = [RMS(a[:kv_lora]) ‖ RoPE(a[kv_lora:], t)]: both over every row of the batch at once (the
  // latents gathered into st.o_lat, free until the attention core), then every segment's rows written to its cache;
  // on indexer layers the new rows' keys likewise (indexerKeys): one call with the projections (mlaKv)
  const lat = st.o_lat;
  for (let i = 0; i < segs.length; i++) {
    const g = segs[i], d = kvSegs[i] ?? (kvSegs[i] = { cache: g.kv.kv[kvLayer], pos0: 0, r0: 0, n: 0, ik: null });
    d.cache = g.kv.kv[kvLayer]; d.pos0 = g.pos0; d.r0 = g.r0; d.n = g.n; d.ik = ix ? g.kv.ik[kvLayer] : null;
  }
  proj.builder.runMlaKv(st.exact, cfg.hidden_size, kvSegs, segs.length, st.a, S, kvr, dr, lat, w.kv_a_norm, eps, st.pos, theta,
    ix ? indexerKeys(cfg, st, ix) : null);
  if (k === 0) return;
  // the query rows
  let qs = segs, written = segs;
  if (k < S) {
    ({ qs, written } = queryRows(st, segs, k, cfg.hidden_size, keys === "shared" ? Math.max(1, cfg.index_topk) : 0));
    const kq = projections(st, w, ix, lora);
    mmMany(kq.qW, st.xb, k, kq.qOut, st.exact);
  }
  // q = W_qb RMS(W_qa h) -> [k, H*(dn+dr)] (with the indexer's qI = W_wq_b c_q); rope the last dr of each head (qI: the
  // first dr of each of its heads; with q_a: all in one call)
  if (lora) {
    if (!c.qb.fits(st, st.c_q, k, tag)) {
      if (ix) c.qb.set(st, [w.q_b!, ix.wq_b], st.c_q, k, [st.q, st.qI], tag);
      else c.qb.set(st, [w.q_b!], st.c_q, k, [st.q], tag);
    }
    c.qb.builder.runMlaQ(st.exact, st.q_a, w.q_a_norm!, st.c_q, k, cfg.q_lora_rank!, eps, st.q, H, dn, dr, st.pos, theta,
      ix ? st.qI : null, cfg.index_n_heads, cfg.index_head_dim);
  } else rope(st.q.subarray(dn), k, Q, H, dn + dr, dr, st.pos, theta);
  // keys per row
  if (ix) indexerQueries(cfg, st, ix, layer, kvLayer, qs, written, k, hook, lora);
  const useSel = keys !== "dense";
  if (!useSel) st.nsel.set(st.nk.subarray(0, k));
  const topk = Math.max(1, cfg.index_topk);

  // each segment in the cheaper exact form; the absorbed ones share their per-row head projections (one
  // call each side for all of them: the kernels give every row the same bits whatever the batch)
  // (an f16 / q8 cache: always absorbed — the naive form would widen every cached row to rebuild k_nope / v; the
  // choice by the rows written, so that query rows alone get the form, and the bits, they get with the others)
  let nabs = 0;
  for (let i = 0; i < qs.length; i++) {
    const g = qs[i];
    if (g.kv.dtype === "f32" && (mode === "naive" || (mode === "auto" && naiveIsCheaper(cfg, written[i].n, g.pos0 + g.n, useSel ? topk : Infinity)))) {
      const sel = useSel ? st.sel.subarray(g.r0 * topk) : null, nsel = st.nsel.subarray(g.r0, g.r0 + g.n);
      naiveCore(cfg, st, w.kv_b, g.kv.f32(kvLayer), g, g.pos0 + g.n, sel, nsel, topk);
      continue;
    }
    const d = absSegs[nabs] ?? (absSegs[nabs] = { r0: 0, n: 0, kv: g.kv.kv[kvLayer] });
    d.r0 = g.r0; d.n = g.n; d.kv = g.kv.kv[kvLayer];
    nabs++;
  }
  if (nabs > 0) { // q side, the core over every absorbed segment, v side: one call (mlaAbsorbed)
    const ab = absorbed(cfg, w.kv_b);
    mlaAbsorbed(st.exact, absSegs, nabs, H, dn, dr, dv, kvr, ab.ktp, ab.kmul, st.q, st.qcat,
      useSel ? st.sel : null, st.nsel, topk, cfg.attn_scale, st.o_lat, ab.vw, st.o);
  }
  mm(w.o, st.o, k, st.ao, st.exact); // Attn(h) = W_o concat_h o_h -> [k, D]
}

/** a layer's batched projection calls, their descriptors kept across steps (MmCall): all the projections of h, the
 *  key side's alone (rows skipped), q_b ‖ indexer wq_b */
interface LayerCalls { all: MmCall; keys: MmCall; qb: MmCall }
const layerCalls = new WeakMap<AttnWeights, LayerCalls>();
function callsOf(w: AttnWeights): LayerCalls {
  let c = layerCalls.get(w);
  if (!c) layerCalls.set(w, c = { all: new MmCall(), keys: new MmCall(), qb: new MmCall() });
  return c;
}
/** the projections of h: the key side's (kv_a, indexer wk) and the query side's (q_a or q_proj, indexer weights_proj) */
function projections(st: RunState, w: AttnWeights, ix: AttnWeights["indexer"] | null, lora: boolean) {
  const kW: Mat[] = [w.kv_a], kOut: Float32Array[] = [st.a], qW: Mat[] = [], qOut: Float32Array[] = [];
  if (lora) { qW.push(w.q_a!); qOut.push(st.q_a); } else { qW.push(w.q_proj!); qOut.push(st.q); }
  if (ix) { kW.push(ix.wk); kOut.push(st.kI); qW.push(ix.weights_proj); qOut.push(st.iw); }
  return { kW, kOut, qW, qOut };
}
/** the segments of one layer's mlaKv / mlaAbsorbed call, reused (grown as needed) */
const kvSegs: KvSeg[] = [], absSegs: MlaSeg[] = [];

/**
 * Move the query rows st.keep[0..k) (ascending, the last rows of their segments) to rows 0..k-1 of st.xb [*, D],
 * st.pos, st.nk (and st.sel / st.nsel rows of `topk` entries when a shared layer reads them); returns their segments
 * (the same caches and positions, the rows renumbered) and, index for index, the segments they came from.
 */
function queryRows(st: RunState, segs: Segment[], k: number, D: number, topk: number): { qs: Segment[]; written: Segment[] } {
  const qs: Segment[] = [], written: Segment[] = [];
  for (let i = 0; i < k; i++) {
    const r = st.keep[i];
    if (r === i) continue;
    st.xb.copyWithin(i * D, r * D, (r + 1) * D);
    st.pos[i] = st.pos[r]; st.nk[i] = st.nk[r];
    if (topk) { st.sel.copyWithin(i * topk, r * topk, (r + 1) * topk); st.nsel[i] = st.nsel[r]; }
  }
  let i = 0;
  for (const g of segs) {
    const r0 = i;
    while (i < k && st.keep[i] < g.r0 + g.n) i++;
    if (i > r0) { qs.push({ kv: g.kv, r0, n: i - r0, pos0: g.pos0 + g.n - (i - r0) }); written.push(g); }
  }
  return { qs, written };
}

/** The naive form's buffers at most (RunState c_kv, kvb, k over T positions): past them the absorbed form runs, which
 *  needs none (at GLM-5's widths 178 KiB a position: 1 GiB is 5890 positions, where 128k would take 22 GiB). */
export const NAIVE_MAX_BYTES = 2 ** 30;

/**
 * Multiply-adds of each form for n new rows over T positions, each query attending to min(T, topk) keys (DSA
 * layers select at most index_topk; dense ones see all): the naive form rebuilds k_nope / v for all T rows,
 * the absorbed one projects per query. (Counting T keys per query on DSA layers picked the naive form for
 * long prompts, which measured up to 1.2x slower there: 687 vs 832 tok/s for 4096 tokens in chunks of 512.)
 * Never the naive form where its buffers would pass NAIVE_MAX_BYTES.
 */
export function naiveIsCheaper(cfg: Config, n: number, T: number, topk: number): boolean {
  const H = cfg.num_attention_heads, dn = cfg.qk_nope_head_dim, dr = cfg.qk_rope_head_dim, dv = cfg.v_head_dim;
  const kvr = cfg.kv_lora_rank, K = Math.min(T, topk);
  if (4 * T * (kvr + H * (dn + dv) + H * (dn + dr)) > NAIVE_MAX_BYTES) return false;
  const naive = T * H * (dn + dv) * kvr + n * K * H * (dn + dr + dv);
  const abs = n * H * kvr * (dn + dv) + n * K * H * (2 * kvr + dr);
  return naive < abs;
}

/** The largest t ≤ T at which n new rows take the naive form (0: none). Along t the difference between the forms is
 *  linear up to topk and the naive one's grows after, so the t where it is cheaper form a prefix of [1, T]. */
export function naiveCtx(cfg: Config, n: number, T: number, topk: number): number {
  if (naiveIsCheaper(cfg, n, T, topk)) return T;
  let lo = 0, hi = T; // naive cheaper at lo (or lo = 0), not at hi
  while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (naiveIsCheaper(cfg, n, mid, topk)) lo = mid; else hi = mid; }
  return lo;
}

/** The positions the naive form's buffers need for n new rows ending at position T: mode naive, T; auto, where that
 *  form is cheaper on a DSA or on a dense layer (attention's choice); absorbed, none. */
export function naiveNeed(cfg: Config, n: number, T: number, mode: AttnMode): number {
  if (mode !== "auto") return mode === "naive" ? T : 0;
  return Math.max(naiveCtx(cfg, n, T, Infinity), cfg.has_dsa ? naiveCtx(cfg, n, T, Math.max(1, cfg.index_topk)) : 0);
}

/** Before the layer loop: st's naive-form buffers for every segment of the batch that may take that form (f32 cache). */
export function reserveNaive(cfg: Config, st: RunState, segs: readonly Segment[], mode: AttnMode): void {
  let need = 0;
  for (const g of segs) if (g.kv.dtype === "f32") need = Math.max(need, naiveNeed(cfg, g.n, g.pos0 + g.n, mode));
  if (need > 0) st.ensureNaive(need);
}

/** kv = W_kvb c_kv for t < T; S_h = q_h·[k_nope_h ‖ k_pe]·scale; o_h = Σ P v_h -> st.o rows of g */
function naiveCore(cfg: Config, st: RunState, kv_b: Mat, cache: Float32Array, g: Segment, T: number,
  sel: Int32Array | null, nsel: Int32Array, topk: number): void {
  const H = cfg.num_attention_heads, dn = cfg.qk_nope_head_dim, dr = cfg.qk_rope_head_dim, dv = cfg.v_head_dim;
  const kvr = cfg.kv_lora_rank, W = kvr + dr, KV = H * (dn + dv), K = H * (dn + dr), Q = H * (dn + dr);
  if (T > st.naiveCtx) throw new Error(`naive attention over ${T} positions: RunState holds ${st.naiveCtx} (reserveNaive was not called)`);
  copyHeads({ a: st.c_kv, row: kvr, head: 0 }, { a: cache, row: W, head: 0 }, T, 1, kvr);
  mm(kv_b, st.c_kv, T, st.kvb, st.exact); // [T, H*(dn+dv)]
  // k[t,h] = [k_nope[t,h] ‖ k_pe[t]]
  copyHeads({ a: st.k, row: K, head: dn + dr }, { a: st.kvb, row: KV, head: dn + dv }, T, H, dn);
  copyHeads({ a: st.k.subarray(dn), row: K, head: dn + dr }, { a: cache.subarray(kvr), row: W, head: 0 }, T, H, dr);
  attn(g.n, H, dn + dr, dv,
    { a: st.q.subarray(g.r0 * Q), row: Q, head: dn + dr },
    { a: st.k, row: K, head: dn + dr },
    { a: st.kvb.subarray(dn), row: KV, head: dn + dv },
    sel, nsel, topk, cfg.attn_scale,
    { a: st.o.subarray(g.r0 * H * dv), row: H * dv, head: dv });
}

