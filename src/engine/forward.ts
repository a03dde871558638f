// The forward pass of glm_moe_dsa (spec §3), read top to bottom like the paper:
//   x = E[id];  per layer: x += Attn(RMS(x));  x += FFN(RMS(x));  logits = lm_head · RMS(x).
// `forward` runs one batch of segments (rows of one or more conversations) through layers [0, L)
// and the head. The layer loop is `runLayers(lo, hi)`, so a range can go to another executor
// (the Vulkan chain) later. No buffers are allocated here: RunState is grown before the loop.
import type { Layer } from "../model/weights.ts";
import { add, addRmsnorm, convert, Conv, Fmt, rmsnorm } from "../native/hb.ts";
import { mm } from "./mat.ts";
import { attention, reserveNaive, type AttnMode, type KeyMode } from "./attention.ts";
import { mlp, moe } from "./moe.ts";
import type { Model } from "./model.ts";
import type { RunState } from "./state.ts";
import type { Segment, SelectHook } from "./batch.ts";
import { activePolicy, type QualityPolicy } from "./quality.ts";
import { pilot } from "./pilot.ts";

/** Runs layers [lo, hi) somewhere else (the Vulkan chain): its first `n` layers replace the CPU's. k: as runLayers'
 *  (the model's last layer, when it runs there, needs its FFN only for the first k rows of st.keep). */
export interface LayerExecutor {
  readonly n: number;
  run(m: Model, st: RunState, segs: Segment[], S: number, lo: number, hi: number, opts: ForwardOpts, k?: number): void;
}

export interface ForwardOpts {
  executor?: LayerExecutor; // layers [0, executor.n) run there, the rest on the CPU
  attn?: AttnMode;          // naive / absorbed / auto (cost model)
  exact?: boolean;          // f32 activations; when given it sets RunState.exact (default: fast)
  quality?: QualityPolicy | null; // opt-in router policies (quality.ts); when given it sets RunState.quality
                            // (absent / null: the model as trained, the default path)
  logits?: "all" | "last" | "none"; // which rows get lm_head (last = last row of each segment)
  hidden?: boolean;         // every row's final hidden state is wanted in st.x (MTP input, pooling); else only
                            // the rows that get logits: the last layer's FFN skips the others (llama.cpp's out_ids)
  onSelect?: SelectHook;    // DSA debug hook (full layers)
  onPart?: PartHook;        // bench --per-layer's timer (src/cli/bench-layers.ts)
}

/** Called as a layer's attention and FFN start and end; rows: how many rows the part runs on. */
export type PartHook = (layer: number, part: "attn" | "attn-end" | "ffn" | "ffn-end", rows: number) => void;

/** Rows of a batch: x [S, D] = E[ids]; positions and visible-key counts per row. */
export function embed(m: Model, st: RunState, segs: Segment[], ids: ArrayLike<number>): number {
  const D = m.cfg.hidden_size, E = m.w.embed;
  let S = 0;
  for (const g of segs) S = Math.max(S, g.r0 + g.n);
  let T = 0;
  for (const g of segs) T = Math.max(T, g.pos0 + g.n);
  st.ensure(S, T);
  for (const g of segs) {
    if (g.pos0 > g.kv.len) throw new Error(`segment at position ${g.pos0} leaves a gap after ${g.kv.len} cached rows`);
    g.kv.reserve(g.pos0 + g.n);
    for (let j = 0; j < g.n; j++) {
      const r = g.r0 + j, id = ids[r];
      if (!Number.isInteger(id) || id < 0 || id >= m.cfg.vocab_size) throw new RangeError(`token id ${id} at row ${r} outside [0, ${m.cfg.vocab_size})`);
      st.pos[r] = g.pos0 + j;
      st.nk[r] = g.pos0 + j + 1;
      embedRow(E, id, D, st.x.subarray(r * D, (r + 1) * D));
    }
  }
  return S;
}

export function embedRow(E: Model["w"]["embed"], id: number, D: number, out: Float32Array): void {
  if (E.fmt === Fmt.f32) out.set((E.data as Float32Array).subarray(id * D, (id + 1) * D));
  else if (E.fmt === Fmt.bf16 || E.fmt === Fmt.f16) convert(E.fmt === Fmt.bf16 ? Conv.bf16 : Conv.f16, (E.data as Uint16Array).subarray(id * D, (id + 1) * D), out, D);
  else throw new Error(`${E.name}: quantized embeddings are not supported yet`);
}

/** One decoder layer over S rows of st.x: x += Attn(RMS(x)); x += FFN(RMS(x)). With k < S (the last layer,
 *  whose other rows no one reads) every row's keys are cached but the queries, the output and the FFN run only for
 *  rows st.keep[0..k) (ascending): they are moved to rows 0..k-1 and back, and the other rows keep the layer's input.
 *  Kept rows get the same bits either way. normed: st.xb holds RMS(x; input_norm) already (the previous layer's
 *  last add made it); next (with k = S): the norm weights of what reads x next (the next layer, the head), for the
 *  last add to leave st.xb = RMS(x; next) in the same call (hb_add_rmsnorm: hb_add, then hb_rmsnorm: the same bits). */
export function block(m: Model, st: RunState, w: Layer, layer: number, kvLayer: number, segs: Segment[],
  S: number, keys: KeyMode, opts: ForwardOpts, k = S, normed = false, next: Float32Array | null = null): void {
  const D = m.cfg.hidden_size, eps = m.cfg.rms_norm_eps;
  const piloted = !!w.moe?.prefetch;
  if (piloted) pilot(m.cfg, st, w, st.x, S); // the likely experts start reading under the attention (it borrows st.xb)
  if (!normed || piloted) rmsnorm(st.x, w.input_norm, st.xb, S, D, eps);
  opts.onPart?.(layer, "attn", S);
  attention(m.cfg, st, w.attn, layer, kvLayer, segs, S, keys, opts.attn ?? "auto", opts.onSelect, k);
  opts.onPart?.(layer, "attn-end", S);
  if (k === 0) return;
  if (k < S) for (let i = 0; i < k; i++) st.x.copyWithin(i * D, st.keep[i] * D, (st.keep[i] + 1) * D); // keep[i] ≥ i
  addRmsnorm(st.x, st.ao, w.post_norm, st.xb, k, D, eps); // x += Attn(RMS(x)); xb = RMS(x) (one call)
  opts.onPart?.(layer, "ffn", k);
  if (w.moe) moe(m.cfg, st, w.moe, st.xb, k, st.ao);
  else mlp(st, w.mlp!, st.xb, k, st.ao);
  opts.onPart?.(layer, "ffn-end", k);
  if (next && k === S) addRmsnorm(st.x, st.ao, next, st.xb, S, D, eps);
  else add(st.x, st.ao, k * D);
  if (k < S) for (let i = k - 1; i >= 0; i--) st.x.copyWithin(st.keep[i] * D, i * D, (i + 1) * D); // sources below stay unread
}

/** Which keys layer i attends to. */
export function keyMode(m: Model, i: number): KeyMode {
  if (!m.cfg.has_dsa) return "dense";
  return m.cfg.indexer_types[i] === "full" ? "full" : "shared";
}

/** Layers [lo, hi); the model's last layer runs its FFN only for the first `k` rows of st.keep (default all). Each
 *  layer's last add also norms x for the next one (block's `next`); headNorm: for the head after layer hi - 1. */
export function runLayers(m: Model, st: RunState, segs: Segment[], S: number, lo: number, hi: number, opts: ForwardOpts, k = S,
  headNorm: Float32Array | null = null): void {
  const L = m.cfg.num_hidden_layers, ls = m.w.layers;
  for (let i = lo; i < hi; i++) {
    const kk = i === L - 1 ? k : S, next = i + 1 < hi ? ls[i + 1].input_norm : headNorm;
    block(m, st, ls[i], i, i, segs, S, keyMode(m, i), opts, kk, i > lo, next);
  }
}

/** The rows `head(which)` reads, into st.keep (ascending); returns their count (S: every row). */
export function keptRows(st: RunState, segs: Segment[], S: number, which: "all" | "last" | "none"): number {
  if (which === "all") return S;
  let k = 0;
  for (const g of segs) {
    const n = which === "none" || g.noLogits ? 0 : g.allLogits ? g.n : 1;
    for (let r = g.r0 + g.n - n; r < g.r0 + g.n; r++) st.keep[k++] = r;
  }
  if (k > 1) for (let i = 1; i < k; i++) if (st.keep[i] <= st.keep[i - 1]) return S; // segments out of row order
  return k;
}

/** Whether head(which) reads every row in place (logits row r from x row r): "all", or "last" where every segment
 *  wants all its rows (decode: one row each) and the segments follow each other from row 0. */
export function headInPlace(segs: Segment[], S: number, which: "all" | "last" | "none"): boolean {
  if (which !== "last") return which === "all";
  let k = 0;
  for (const g of segs) {
    const n = g.noLogits ? 0 : g.allLogits ? g.n : 1;
    if (n !== g.n || g.r0 !== k) return false;
    k += n;
  }
  return k === S;
}

/** logits rows = lm_head · RMS(x; norm) for the chosen rows, in batch order ("last": the last row of each
 *  segment, or all of its rows when it asks with `allLogits`, none with `noLogits`); returns how many rows were written.
 *  normed: st.xb holds RMS(x; norm) of every row already (headInPlace; the last layer's add made it). */
export function head(m: Model, st: RunState, segs: Segment[], S: number, which: "all" | "last", normed = false): number {
  const D = m.cfg.hidden_size;
  if (which === "all" || normed) {
    if (!normed) rmsnorm(st.x, m.w.norm, st.xb, S, D, m.cfg.rms_norm_eps);
    mm(m.w.lm_head, st.xb, S, st.logits, st.exact);
    return S;
  }
  let k = 0;
  for (const g of segs) {
    const n = g.noLogits ? 0 : g.allLogits ? g.n : 1, r = g.r0 + g.n - n;
    rmsnorm(st.x.subarray(r * D, (r + n) * D), m.w.norm, st.xb.subarray(k * D, (k + n) * D), n, D, m.cfg.rms_norm_eps);
    k += n;
  }
  if (k > 0) mm(m.w.lm_head, st.xb, k, st.logits, st.exact);
  return k;
}

/** Run the batch: rows st.x <- embed(ids); layers 0..L-1; head. KV caches advance past their rows. */
export function forward(m: Model, st: RunState, segs: Segment[], ids: ArrayLike<number>, opts: ForwardOpts = {}): number {
  if (opts.exact !== undefined) st.exact = opts.exact;
  if (opts.quality !== undefined) st.quality = activePolicy(opts.quality);
  st.indexQ8 = null; // (the SIMD level may have changed since the last forward: tests cap it)
  const S = embed(m, st, segs, ids);
  reserveNaive(m.cfg, st, segs, opts.attn ?? "auto");
  const L = m.cfg.num_hidden_layers, n = Math.min(opts.executor?.n ?? 0, L), which = opts.logits ?? "all";
  const k = opts.hidden ? S : keptRows(st, segs, S, which);
  if (n > 0) opts.executor!.run(m, st, segs, S, 0, n, opts, n === L ? k : S);
  const normed = n < L && k === S && headInPlace(segs, S, which); // the last layer's add norms x for the head
  runLayers(m, st, segs, S, n, L, opts, k, normed ? m.w.norm : null);
  for (const g of segs) { g.kv.len = g.pos0 + g.n; g.kv.wrote(g.pos0); }
  return which === "none" ? 0 : head(m, st, segs, S, which, normed);
}
