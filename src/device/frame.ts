// One layer's device frame A1 of the Vulkan chain, recorded into command buffers (no submission here), in three
// parts so the KV split can put the CPU's partial attention between them: pre (input norm, MLA projections, DSA
// indexer + selection, absorbed queries, the early copies down), core (the absorbed attention core over the
// mirror) and post ([merge with the CPU's partial] W_V, o_proj, residual, post-attention norm, dense MLP, xb down).
// Unsplit, the three go into one command buffer. Also the shared-expert / dense MLP recorder. Stateless.
import type { Config } from "../model/config.ts";
import type { Segment } from "../engine/batch.ts";
import type { Kernels, V } from "./kernels.ts";
import type { DevLayer, DevMlp } from "./devweights.ts";
import type { DevState } from "./devstate.ts";
import type { MirrorSlot } from "./mirror.ts";
import type { Cmd } from "./backend.ts";

const K_NORM_EPS = 1e-6;

/** y [S,D] = W_down (silu(W_gate x) ⊙ W_up x), scratch hg/hu of the device state */
export function recordMlp(c: Cmd, k: Kernels, ds: DevState, w: DevMlp, x: V, S: number, y: V): void {
  const b = ds.b, F = w.gate.O;
  k.matmul(c, w.gate, x, S, { buf: b.hg });
  k.matmul(c, w.up, x, S, { buf: b.hu });
  c.barrier();
  k.swiglu(c, { buf: b.hg }, { buf: b.hu }, { buf: b.hg }, S * F);
  c.barrier();
  k.matmul(c, w.down, { buf: b.hg }, S, y);
}

/** Shapes of one layer's frame. */
function dims(cfg: Config) {
  const H = cfg.num_attention_heads, dn = cfg.qk_nope_head_dim, dr = cfg.qk_rope_head_dim, kvr = cfg.kv_lora_rank;
  return { D: cfg.hidden_size, H, dn, dr, dv: cfg.v_head_dim, kvr, W: kvr + dr, Q: H * (dn + dr), qr: cfg.q_lora_rank ?? 0,
    nh: cfg.index_n_heads, hd: cfg.index_head_dim, topk: Math.max(1, cfg.index_topk), eps: cfg.rms_norm_eps };
}

/**
 * Part "pre" of layer L over the S rows in ds.b.x (segments `segs`, mirrors `slots`); ends with the copies
 * down (ds.dn.a always; kI/sel/nsel on full layers; qcat when `split`). Returns their bytes.
 */
export function recordPre(c: Cmd, k: Kernels, ds: DevState, cfg: Config, L: DevLayer, segs: Segment[], slots: MirrorSlot[], S: number, split: boolean): number {
  const { D, H, dn, dr, kvr, W, Q, qr, nh, hd, topk, eps } = dims(cfg);
  const b = ds.b, dn_ = ds.dn, i = L.index, full = L.keys === "full", ix = L.indexer;
  // h = RMS(x; input_norm)
  k.rmsnorm(c, { buf: b.x }, L.input_norm, { buf: b.xb }, S, D, eps);
  c.barrier();
  // q_a / q, a = W_kva h; indexer kI = W_wk h, w = W_weights_proj h · nh^-1/2
  if (L.q_a) k.matmul(c, L.q_a, { buf: b.xb }, S, { buf: b.q_a });
  else k.matmul(c, L.q_proj!, { buf: b.xb }, S, { buf: b.q });
  k.matmul(c, L.kv_a, { buf: b.xb }, S, { buf: b.a });
  if (full && ix) {
    k.matmul(c, ix.wk, { buf: b.xb }, S, { buf: b.kI });
    k.matmul(c, ix.weights_proj, { buf: b.xb }, S, { buf: b.iw }, { alpha: Math.fround(1 / Math.sqrt(nh)) });
  }
  c.barrier();
  // c_q = RMS(q_a); cache row = [RMS(a[:kvr]) ‖ RoPE(a[kvr:])] in place in a; kI = LN(kI)
  if (L.q_a) k.rmsnorm(c, { buf: b.q_a }, L.q_a_norm, { buf: b.c_q }, S, qr, eps);
  k.rmsnorm(c, { buf: b.a }, L.kv_a_norm, { buf: b.a }, S, kvr, eps, W, W);
  k.rope(c, { buf: b.a, off: kvr }, S, W, 1, 0, dr, { buf: b.cs }, 0);
  if (full && ix) k.layernorm(c, { buf: b.kI }, ix.k_norm_w, ix.k_norm_b, { buf: b.kI }, S, hd, K_NORM_EPS);
  c.barrier();
  // q = W_qb c_q; new rows into the mirror (split: into their resident blocks); kI roped; qI = W_wq_b c_q
  if (L.q_b) k.matmul(c, L.q_b, { buf: b.c_q }, S, { buf: b.q });
  segs.forEach((g, j) => {
    for (const r of slots[j].runs(i, g.pos0, g.n)) c.copy(b.a, 4 * (g.r0 + r.t0 - g.pos0) * W, slots[j].kv[i], 4 * r.dev0 * W, 4 * r.n * W);
  });
  if (full && ix) {
    k.rope(c, { buf: b.kI }, S, hd, 1, 0, dr, { buf: b.cs }, 0);
    k.matmul(c, ix.wq_b, { buf: b.c_q }, S, { buf: b.qI });
  }
  c.barrier();
  // qcat[s,h] = [W_K,hᵀ q_nope ‖ RoPE(q_pe)]; qI roped; kI rows into the mirror
  k.rope(c, { buf: b.q, off: dn }, S, Q, H, dn + dr, dr, { buf: b.cs }, 0, { buf: b.qcat, off: kvr }, H * W, W);
  k.matmul(c, L.wkT, { buf: b.q }, S, { buf: b.qcat }, { xRow: Q, yRow: H * W, groups: { G: H, O: kvr, wRow0: 0, wGroup: kvr, xGroup: dn + dr, yGroup: W } });
  if (full && ix) {
    k.rope(c, { buf: b.qI }, S, nh * hd, nh, hd, dr, { buf: b.cs }, 0);
    segs.forEach((g, j) => c.copy(b.kI, 4 * g.r0 * hd, slots[j].ik[i]!, 4 * g.pos0 * hd, 4 * g.n * hd));
  }
  c.barrier();
  // DSA: scores where a row sees more than index_topk keys, then the selection (ties: spec §3.3)
  if (full) {
    let scored = false;
    segs.forEach((g, j) => {
      if (g.pos0 + g.n <= topk) return;
      scored = true;
      k.indexScores(c, { s0: g.r0, n: g.n, nh, hd, qI: b.qI, w: b.iw, kI: { buf: slots[j].ik[i]! }, nk: b.nk,
        out: { buf: b.scores }, outRow: ds.T, maxNk: g.pos0 + g.n, scale: Math.fround(1 / Math.sqrt(hd)) });
    });
    if (scored) c.barrier();
    for (const g of segs) k.dsaSelect(c, { s0: g.r0, n: g.n, scores: { buf: b.scores }, scoreRow: ds.T, nk: b.nk, topk, sel: b.sel, nsel: b.nsel });
    c.barrier();
  }
  // crossings down: the KV rows (host cache is canonical), the selection; the queries for the CPU's part
  c.copy(b.a, 0, dn_.a, 0, 4 * S * W);
  let down = 4 * S * W;
  if (full) {
    c.copy(b.kI, 0, dn_.kI, 0, 4 * S * hd).copy(b.sel, 0, dn_.sel, 0, 4 * S * topk).copy(b.nsel, 0, dn_.nsel, 0, 4 * S);
    down += 4 * S * (hd + topk + 1);
  }
  if (split) { c.copy(b.qcat, 0, dn_.qcat, 0, 4 * S * H * W); down += 4 * S * H * W; }
  return down;
}

/** Part "core": o_lat[s,h] = Σ_t P c_kv(t) over each row's keys (absorbed MLA); split: over the resident
 * blocks of split slots, with the softmax statistics in ds.b.dst. */
export function recordCore(c: Cmd, k: Kernels, ds: DevState, cfg: Config, L: DevLayer, segs: Segment[], slots: MirrorSlot[], split: boolean): void {
  const { H, W, kvr, topk } = dims(cfg);
  const b = ds.b, i = L.index, keys = L.keys;
  segs.forEach((g, j) => k.attn(c, {
    s0: g.r0, n: g.n, H, dk: W, dv: kvr, q: { buf: b.qcat, row: H * W, head: W },
    k: { buf: slots[j].kv[i], row: W, head: 0 }, v: { buf: slots[j].kv[i], row: W, head: 0 },
    out: { buf: b.o_lat, row: H * kvr, head: kvr }, sel: keys === "dense" ? null : b.sel, selRow: topk,
    nsel: keys === "dense" ? b.nk : b.nsel, p: b.p, pStride: ds.pT, scale: cfg.attn_scale,
    tab: slots[j].split ? { buf: slots[j].tab[i], blk: slots[j].shape.split!.blk } : null, stats: split ? b.dst : null,
  }));
  c.barrier();
}

/**
 * Part "post": [merge] o_h = W_V,h o_lat_h; Attn = W_o concat_h o_h; x += Attn; xb = RMS(x; post_norm);
 * the dense MLP of a dense layer; xb down on MoE layers. merge: the CPU's partial attention (ds.up.ocpu /
 * ds.up.cst, S rows) goes up and is merged into o_lat first. Returns the bytes copied down.
 */
export function recordPost(c: Cmd, k: Kernels, ds: DevState, cfg: Config, L: DevLayer, S: number, merge: boolean): number {
  const { D, H, dn, dv, kvr, eps } = dims(cfg);
  const b = ds.b, up = ds.up, dn_ = ds.dn;
  if (merge) {
    c.copy(up.ocpu, 0, b.ocpu, 0, 4 * S * H * kvr).copy(up.cst, 0, b.cst, 0, 4 * S * H * 2).barrier();
    k.attnMerge(c, { s0: 0, n: S, H, dv: kvr, o: b.o_lat, oRow: H * kvr, oHead: kvr, st: b.dst, o2: b.ocpu, st2: b.cst });
    c.barrier();
  }
  k.matmul(c, L.kv_b, { buf: b.o_lat }, S, { buf: b.o }, { xRow: H * kvr, yRow: H * dv, groups: { G: H, O: dv, wRow0: dn, wGroup: dn + dv, xGroup: kvr, yGroup: dv } });
  c.barrier();
  k.matmul(c, L.o, { buf: b.o }, S, { buf: b.ao });
  c.barrier();
  k.add(c, { buf: b.x }, { buf: b.ao }, S * D);
  c.barrier();
  k.rmsnorm(c, { buf: b.x }, L.post_norm, { buf: b.xb }, S, D, eps);
  c.barrier();
  if (L.mlp) { // dense FFN on the device
    recordMlp(c, k, ds, L.mlp, { buf: b.xb }, S, { buf: b.ao });
    c.barrier();
    k.add(c, { buf: b.x }, { buf: b.ao }, S * D);
  }
  if (!L.moe) return 0;
  c.copy(b.xb, 0, dn_.xb, 0, 4 * S * D); // xb for the routed experts
  return 4 * S * D;
}
