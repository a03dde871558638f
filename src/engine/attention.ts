// MLA attention (spec §3.1) over the compressed cache, in both exact forms:
//  - naive (prefill): kv_b rebuilds k_nope and v for the whole context, then per-head attention;
//  - absorbed (decode, small batches): q_abs = W_K,hᵀ q_nope against c_kv, o_h = W_V,h Σ p·c_kv.
// Reads h = st.xb, writes the new rows' c_kv ‖ k_pe into the KVCache and the output to st.ao.
// Holds one cache: the per-head absorbed weights of each kv_b (derived, read-only).
import type { Config } from "../model/config.ts";
import type { AttnWeights, Mat } from "../model/weights.ts";
import { attn, Fmt, rmsnorm, rope } from "./hb.ts";
import { mm, rowsOf, transposeF32 } from "./mat.ts";
import type { RunState } from "./state.ts";
import type { Segment, SelectHook } from "./batch.ts";
import { indexerSelect } from "./indexer.ts";

export type AttnMode = "auto" | "naive" | "absorbed";
/** How a layer picks its keys: its own indexer, the last full layer's selection, or all of them. */
export type KeyMode = "full" | "shared" | "dense";

interface Absorbed { wkT: Mat[]; wv: Mat[] } // per head: W_K,hᵀ [kv_lora, dn] (f32), W_V,h [dv, kv_lora]
const absorbedCache = new WeakMap<Mat, Absorbed>();

function absorbed(cfg: Config, kv_b: Mat): Absorbed {
  let a = absorbedCache.get(kv_b);
  if (a) return a;
  const H = cfg.num_attention_heads, dn = cfg.qk_nope_head_dim, dv = cfg.v_head_dim, kvr = cfg.kv_lora_rank;
  a = { wkT: [], wv: [] };
  for (let h = 0; h < H; h++) {
    const wk = rowsOf(kv_b, h * (dn + dv), dn);
    a.wkT.push({ name: `${kv_b.name}[K${h}]ᵀ`, fmt: Fmt.f32, O: kvr, I: dn, data: transposeF32(wk), scales: null, gs: 0 });
    a.wv.push(rowsOf(kv_b, h * (dn + dv) + dn, dv));
  }
  absorbedCache.set(kv_b, a);
  return a;
}

export function attention(cfg: Config, st: RunState, w: AttnWeights, layer: number, kvLayer: number,
  segs: Segment[], S: number, keys: KeyMode, mode: AttnMode, hook?: SelectHook): void {
  const H = cfg.num_attention_heads, dn = cfg.qk_nope_head_dim, dr = cfg.qk_rope_head_dim, dv = cfg.v_head_dim;
  const kvr = cfg.kv_lora_rank, eps = cfg.rms_norm_eps, theta = cfg.rope_theta, Q = H * (dn + dr), W = kvr + dr;
  // q = W_qb RMS(W_qa h) -> [S, H*(dn+dr)] (or W_q h without a q LoRA); rope the last dr of each head
  if (w.q_a && w.q_b && w.q_a_norm) {
    mm(w.q_a, st.xb, S, st.q_a, st.exact);
    rmsnorm(st.q_a, w.q_a_norm, st.c_q, S, cfg.q_lora_rank!, eps);
    mm(w.q_b, st.c_q, S, st.q, st.exact);
  } else mm(w.q_proj!, st.xb, S, st.q, st.exact);
  rope(st.q.subarray(dn), S, Q, H, dn + dr, dr, st.pos, theta);
  // a = W_kva h -> [S, kv_lora+dr]; cache row t = [RMS(a[:kv_lora]) ‖ RoPE(a[kv_lora:], t)]
  mm(w.kv_a, st.xb, S, st.a, st.exact);
  for (const g of segs) {
    const cache = g.kv.kv[kvLayer];
    for (let j = 0; j < g.n; j++) {
      const r = g.r0 + j, t = g.pos0 + j;
      rmsnorm(st.a.subarray(r * W, r * W + kvr), w.kv_a_norm, cache.subarray(t * W, t * W + kvr), 1, kvr, eps);
      cache.set(st.a.subarray(r * W + kvr, (r + 1) * W), t * W + kvr);
    }
    rope(cache.subarray(g.pos0 * W + kvr), g.n, W, 1, 0, dr, st.pos.subarray(g.r0), theta);
  }
  // keys per row
  if (keys === "full") indexerSelect(cfg, st, w.indexer!, layer, kvLayer, segs, S, hook);
  const useSel = keys !== "dense";
  if (!useSel) st.nsel.set(st.nk.subarray(0, S));
  const topk = Math.max(1, cfg.index_topk);

  for (const g of segs) {
    const T = g.pos0 + g.n, sel = useSel ? st.sel.subarray(g.r0 * topk) : null;
    const nsel = st.nsel.subarray(g.r0, g.r0 + g.n);
    const naive = mode === "naive" || (mode === "auto" && naiveIsCheaper(cfg, g.n, T));
    const cache = g.kv.kv[kvLayer];
    if (naive) naiveCore(cfg, st, w.kv_b, cache, g, T, sel, nsel, topk);
    else absorbedCore(cfg, st, w.kv_b, cache, g, sel, nsel, topk);
  }
  mm(w.o, st.o, S, st.ao, st.exact); // Attn(h) = W_o concat_h o_h -> [S, D]
}

function naiveIsCheaper(cfg: Config, n: number, T: number): boolean {
  const H = cfg.num_attention_heads, dn = cfg.qk_nope_head_dim, dr = cfg.qk_rope_head_dim, dv = cfg.v_head_dim;
  const kvr = cfg.kv_lora_rank;
  const naive = T * H * (dn + dv) * kvr + n * T * H * (dn + dr + dv);
  const abs = n * H * kvr * (dn + dv) + n * T * H * (2 * kvr + dr);
  return naive < abs;
}

/** kv = W_kvb c_kv for t < T; S_h = q_h·[k_nope_h ‖ k_pe]·scale; o_h = Σ P v_h -> st.o rows of g */
function naiveCore(cfg: Config, st: RunState, kv_b: Mat, cache: Float32Array, g: Segment, T: number,
  sel: Int32Array | null, nsel: Int32Array, topk: number): void {
  const H = cfg.num_attention_heads, dn = cfg.qk_nope_head_dim, dr = cfg.qk_rope_head_dim, dv = cfg.v_head_dim;
  const kvr = cfg.kv_lora_rank, W = kvr + dr, KV = H * (dn + dv), K = H * (dn + dr), Q = H * (dn + dr);
  for (let t = 0; t < T; t++) st.c_kv.set(cache.subarray(t * W, t * W + kvr), t * kvr);
  mm(kv_b, st.c_kv, T, st.kvb, st.exact); // [T, H*(dn+dv)]
  for (let t = 0; t < T; t++) {
    const k_pe = cache.subarray(t * W + kvr, (t + 1) * W);
    for (let h = 0; h < H; h++) {
      const src = t * KV + h * (dn + dv), dst = t * K + h * (dn + dr);
      st.k.set(st.kvb.subarray(src, src + dn), dst);
      st.k.set(k_pe, dst + dn);
    }
  }
  attn(g.n, H, dn + dr, dv,
    { a: st.q.subarray(g.r0 * Q), row: Q, head: dn + dr },
    { a: st.k, row: K, head: dn + dr },
    { a: st.kvb.subarray(dn), row: KV, head: dn + dv },
    sel, nsel, topk, cfg.attn_scale,
    { a: st.o.subarray(g.r0 * H * dv), row: H * dv, head: dv });
}

/** q_abs = W_K,hᵀ q_nope; scores over [c_kv ‖ k_pe] shared by all heads; o_h = W_V,h Σ P c_kv */
function absorbedCore(cfg: Config, st: RunState, kv_b: Mat, cache: Float32Array, g: Segment,
  sel: Int32Array | null, nsel: Int32Array, topk: number): void {
  const H = cfg.num_attention_heads, dn = cfg.qk_nope_head_dim, dr = cfg.qk_rope_head_dim, dv = cfg.v_head_dim;
  const kvr = cfg.kv_lora_rank, W = kvr + dr, Q = H * (dn + dr), QC = H * W;
  const ab = absorbed(cfg, kv_b);
  for (let r = g.r0; r < g.r0 + g.n; r++) {
    for (let h = 0; h < H; h++) {
      const q = r * Q + h * (dn + dr), qc = r * QC + h * W;
      mm(ab.wkT[h], st.q.subarray(q, q + dn), 1, st.qcat.subarray(qc, qc + kvr), st.exact);
      st.qcat.set(st.q.subarray(q + dn, q + dn + dr), qc + kvr);
    }
  }
  attn(g.n, H, W, kvr,
    { a: st.qcat.subarray(g.r0 * QC), row: QC, head: W },
    { a: cache, row: W, head: 0 },
    { a: cache, row: W, head: 0 },
    sel, nsel, topk, cfg.attn_scale,
    { a: st.o_lat.subarray(g.r0 * H * kvr), row: H * kvr, head: kvr });
  for (let r = g.r0; r < g.r0 + g.n; r++) {
    for (let h = 0; h < H; h++) {
      const ol = (r * H + h) * kvr, o = (r * H + h) * dv;
      mm(ab.wv[h], st.o_lat.subarray(ol, ol + kvr), 1, st.o.subarray(o, o + dv), st.exact);
    }
  }
}
