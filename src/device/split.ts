// The CPU's half of the KV split: for the rows of segments whose mirror leaves some blocks on the host, the
// absorbed attention core over exactly those keys (the row's DSA selection, or its dense prefix, minus the
// device-resident blocks) on the host KVCache, with softmax statistics (libhb hb_attn_stats), for the
// device to merge with its own partial (shaders/attn_merge.comp). Also feeds the residencies' read
// counts from the selections. State: scratch key lists, grown on demand.
import type { Config } from "../model/config.ts";
import type { Segment } from "../engine/batch.ts";
import type { KeyMode } from "../engine/attention.ts";
import type { RunState } from "../engine/state.ts";
import { hb, type AttnOperand } from "../native/hb.ts";
import type { MirrorSlot } from "./mirror.ts";

/**
 * hb_attn's contract (src/native/hb.ts `attn`) plus stats [S·H, 2] = (row max m, l = Σ exp(score − m)) of
 * each (s, h); rows without keys: zeros, m = −inf, l = 0.
 */
export function attnStats(S: number, H: number, dk: number, dv: number, q: AttnOperand, k: AttnOperand, v: AttnOperand,
  sel: Int32Array | null, nsel: Int32Array, selRow: number, scale: number, out: AttnOperand, stats: Float32Array, ref = false): void {
  if (stats.length < 2 * S * H) throw new RangeError(`attnStats: stats holds ${stats.length} < 2·${S}·${H} floats`);
  (ref ? hb().hb_attn_stats_ref : hb().hb_attn_stats)(S, H, dk, dv, q.a, q.row, q.head, k.a, k.row, k.head, v.a, v.row, v.head,
    sel, nsel, selRow, scale, out.a, out.row, out.head, stats);
}

export class HostPart {
  private sel = new Int32Array(0);
  private n = new Int32Array(0);

  /** Keys of layer entry i each row of `segs` reads (st.sel / st.nsel, or the dense prefix st.nk) -> read counts. */
  count(i: number, keys: KeyMode, st: RunState, segs: Segment[], slots: MirrorSlot[], topk: number): void {
    segs.forEach((g, j) => {
      if (!slots[j].split) return;
      const r = slots[j].res[i];
      for (let q = 0; q < g.n; q++) {
        const row = g.r0 + q;
        if (keys === "dense") r.count(null, st.nk[row]);
        else r.count(st.sel.subarray(row * topk, row * topk + st.nsel[row]), 0);
      }
    });
  }

  /**
   * The CPU's partial attention of layer `layer` (mirror entry i) for all S rows: qcat [S, H·W] from the
   * device, host keys from each segment's KVCache; o [S, H·kv_lora] and stats [S·H, 2] (rows with nothing
   * on the host: l = 0, which the merge leaves alone). Returns the keys attended on the CPU (all rows, heads once).
   */
  run(cfg: Config, layer: number, i: number, keys: KeyMode, st: RunState, segs: Segment[], slots: MirrorSlot[],
    qcat: Float32Array, o: Float32Array, stats: Float32Array): number {
    const H = cfg.num_attention_heads, kvr = cfg.kv_lora_rank, W = kvr + cfg.qk_rope_head_dim, topk = Math.max(1, cfg.index_topk);
    let S = 0;
    for (const g of segs) S = Math.max(S, g.r0 + g.n);
    for (let r = 0; r < S * H; r++) { stats[2 * r] = -Infinity; stats[2 * r + 1] = 0; }
    let total = 0;
    segs.forEach((g, j) => {
      const s = slots[j];
      if (!s.partial(i, g.pos0 + g.n)) return;
      const res = s.res[i], dense = keys === "dense";
      let maxK = 0;
      for (let q = 0; q < g.n; q++) maxK = Math.max(maxK, dense ? st.nk[g.r0 + q] : st.nsel[g.r0 + q]);
      if (this.sel.length < g.n * maxK) this.sel = new Int32Array(Math.max(g.n * maxK, 2 * this.sel.length));
      if (this.n.length < g.n) this.n = new Int32Array(Math.max(g.n, 2 * this.n.length));
      let any = 0;
      for (let q = 0; q < g.n; q++) {
        const row = g.r0 + q, base = q * maxK;
        let c = 0;
        if (dense) { for (let t = 0; t < st.nk[row]; t++) if (!res.resident(t)) this.sel[base + c++] = t; }
        else for (let x = 0; x < st.nsel[row]; x++) { const t = st.sel[row * topk + x]; if (!res.resident(t)) this.sel[base + c++] = t; }
        this.n[q] = c;
        any += c;
      }
      if (any === 0) return;
      total += any;
      const cache = g.kv.f32(layer);
      attnStats(g.n, H, W, kvr, { a: qcat.subarray(g.r0 * H * W), row: H * W, head: W }, { a: cache, row: W, head: 0 },
        { a: cache, row: W, head: 0 }, this.sel, this.n.subarray(0, g.n), maxK, cfg.attn_scale,
        { a: o.subarray(g.r0 * H * kvr), row: H * kvr, head: kvr }, stats.subarray(2 * g.r0 * H, 2 * (g.r0 + g.n) * H));
    });
    return total;
  }
}
