// Device activations of the chain (the device twin of RunState) for S rows over contexts of T positions, grown in
// powers of two, plus the host-visible staging buffers of the per-frame crossings (shapes: on DevState).
// State: those device and staging buffers and the S, T they are sized for.
import type { Config } from "../model/config.ts";
import type { Buf, Gpu } from "./backend.ts";

const pow2 = (n: number) => { let c = 1; while (c < n) c *= 2; return c; };

/** Shapes (elements): x/xb/ao/sh [S,D], q_a/c_q [S,q_lora], q [S,H(dn+dr)], a [S,W] (W = kv_lora+dr),
 *  qcat [S,H·W], o_lat [S,H·kv_lora], o [S,H·dv], qI [S,nh·hd], kI [S,hd], iw [S,nh], scores [S,T],
 *  sel [S,topk] i32, nsel/nk [S] i32, cs [S,dr] (cos, sin), hg/hu [S,F], p [S·H, pT] (attention probs);
 *  the KV split: dst/cst [S·H, 2] softmax statistics of the device's / CPU's partial attention, ocpu
 *  [S,H·kv_lora] the CPU's partial o_lat.
 *  Staging "up": x, cs, nk, sel, nsel, routed, ocpu, cst; "dn": xb, a, kI, sel, nsel, x, qcat. */
export class DevState {
  S = 0;
  T = 0;
  pT = 0;
  b: Record<string, Buf> = {};
  up: Record<string, Buf> = {};
  dn: Record<string, Buf> = {};

  constructor(private readonly vk: Gpu, private readonly cfg: Config) {}

  /** Grow to hold `rows` rows over `ctx` positions (old contents are not kept: they are per-forward). */
  ensure(rows: number, ctx: number): void {
    if (rows <= this.S && ctx <= this.T) return;
    this.free();
    const c = this.cfg, S = pow2(Math.max(rows, this.S, 1)), T = pow2(Math.max(ctx, this.T, 16));
    const H = c.num_attention_heads, dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, dv = c.v_head_dim;
    const kvr = c.kv_lora_rank, W = kvr + dr, qr = c.q_lora_rank ?? 0, D = c.hidden_size, topk = Math.max(1, c.index_topk);
    const nh = c.index_n_heads, hd = c.index_head_dim;
    const F = Math.max(c.intermediate_size, c.moe_intermediate_size * Math.max(1, c.n_shared_experts));
    const pT = c.has_dsa ? Math.min(T, topk) : T; // attention keys per row: nsel <= topk under DSA
    const dev = (n: number) => this.vk.buffer(4 * Math.max(1, n));
    const host = (n: number) => this.vk.buffer(4 * Math.max(1, n), "host");
    this.b = {
      x: dev(S * D), xb: dev(S * D), ao: dev(S * D), sh: dev(S * D), routed: dev(S * D),
      q_a: dev(S * qr), c_q: dev(S * qr), q: dev(S * H * (dn + dr)), a: dev(S * W), qcat: dev(S * H * W),
      o_lat: dev(S * H * kvr), o: dev(S * H * dv), qI: dev(S * nh * hd), kI: dev(S * hd), iw: dev(S * nh),
      scores: dev(S * T), sel: dev(S * topk), nsel: dev(S), nk: dev(S), cs: dev(S * dr), hg: dev(S * F), hu: dev(S * F),
      p: dev(S * H * pT), dst: dev(S * H * 2), cst: dev(S * H * 2), ocpu: dev(S * H * kvr),
    };
    this.up = { x: host(S * D), cs: host(S * dr), nk: host(S), sel: host(S * topk), nsel: host(S), routed: host(S * D),
      ocpu: host(S * H * kvr), cst: host(S * H * 2) };
    this.dn = { xb: host(S * D), a: host(S * W), kI: host(S * hd), sel: host(S * topk), nsel: host(S), x: host(S * D),
      qcat: host(S * H * W) };
    this.S = S; this.T = T; this.pT = pT;
  }

  free(): void {
    for (const g of [this.b, this.up, this.dn]) for (const k of Object.keys(g)) g[k].free();
    this.b = {}; this.up = {}; this.dn = {};
    this.S = 0; this.T = 0;
  }
}
