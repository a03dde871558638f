// RunState: every activation buffer of the forward, allocated up front for `rows` batch rows and `ctx`
// context positions, and grown (outside the layer loop) only when a batch needs more. `forward`
// itself allocates no buffers. Shapes use S = rows, T = ctx. Module state: the last buffer generation handed out
// (RunState.gen: unique across every RunState of the process).
import type { Config } from "../model/config.ts";
import type { QualityPolicy } from "./quality.ts";

let generations = 0;

export class RunState {
  rows = 0;
  ctx = 0;
  /** a new number, unique in the process, whenever the buffers below are replaced (ensure): descriptors cached over
   *  them (mat.ts MmCall) check it */
  gen = 0;
  /** activation mode of every matmul: true = exact (f32), false = fast (int8 rows for quantized W) */
  exact = false;
  /** the opt-in router quality policy (quality.ts; moe.ts reads it): null = the model as trained, the default */
  quality: QualityPolicy | null = null;
  /** whether the DSA indexer scores over int8 keys at this forward's SIMD level (hb_index_q8_ok, asked once per forward:
   *  forward resets it to null) */
  indexQ8: boolean | null = null;
  x!: Float32Array;      // [S, D] residual stream
  xb!: Float32Array;     // [S, D] normed input of a sub-block
  ao!: Float32Array;     // [S, D] sub-block output (attention or FFN) before the residual add
  q_a!: Float32Array;    // [S, q_lora] W_qa h
  c_q!: Float32Array;    // [S, q_lora] RMS(q_a): q_resid, also the indexer's input
  q!: Float32Array;      // [S, H*(dn+dr)] per-head [q_nope ‖ q_pe]
  a!: Float32Array;      // [S, kv_lora+dr] W_kva h
  qcat!: Float32Array;   // [S, H*(kv_lora+dr)] absorbed queries [W_K,hᵀ q_nope ‖ q_pe]
  o_lat!: Float32Array;  // [S, H*kv_lora] Σ p·c_kv per head (absorbed)
  o!: Float32Array;      // [S, H*dv] concat_h o_h
  naiveCtx = 0;          // Tn: the positions the naive form's buffers hold (ensureNaive; 0 until a batch may take it)
  c_kv!: Float32Array;   // [Tn, kv_lora] context latents, contiguous (naive form)
  kvb!: Float32Array;    // [Tn, H*(dn+dv)] W_kvb c_kv (naive form)
  k!: Float32Array;      // [Tn, H*(dn+dr)] per-head [k_nope ‖ k_pe] (naive form)
  qI!: Float32Array;     // [S, nh*hd] indexer queries
  kI!: Float32Array;     // [S, hd] indexer keys of the new rows
  iw!: Float32Array;     // [S, nh] indexer head weights
  scores!: Float32Array; // [S, T] indexer scores I(s,t)
  sel!: Int32Array;      // [S, topk] DSA selection of the last full layer
  nsel!: Int32Array;     // [S] keys per row (dense: pos+1)
  nk!: Int32Array;       // [S] visible keys per row (pos+1)
  pos!: Int32Array;      // [S] absolute position of each row
  keep!: Int32Array;     // [S] rows the last layer's FFN runs for (those that get logits), ascending
  hg!: Float32Array;     // [S, F] gate activations, F = max FFN width
  hu!: Float32Array;     // [S, F] up activations
  shg!: Float32Array;    // [S, Fs] shared expert gate activations, Fs = moe_inter · n_shared
  shu!: Float32Array;    // [S, Fs] shared expert up activations
  xe!: Float32Array;     // [S, D] rows gathered for one expert
  ye!: Float32Array;     // [S, D] that expert's output
  z!: Float32Array;      // [S, E] router logits
  mexp!: Int32Array;     // [S, K] routed experts of each row (router order)
  mgate!: Float32Array;  // [S, K] their gates
  mrows!: Int32Array;    // [S·K] rows grouped by expert (ascending expert, rows ascending within)
  mgates!: Float32Array; // [S·K] the gates in that order
  moff!: Int32Array;     // [E + 1] expert e's rows are mrows[moff[e] .. moff[e+1])
  muni!: Int32Array;     // [E] the experts with rows (the union), ascending
  mcnt!: Int32Array;     // [E] their row counts
  mkept!: Int32Array;    // [S] routed experts kept per row under a quality policy (quality.ts)
  eye!: Float32Array;    // [S·K, D] their outputs
  ehg!: Float32Array;    // [S·K, moe_inter] gate activations
  ehu!: Float32Array;    // [S·K, moe_inter] up activations
  logits!: Float32Array; // [S, V]
  ecat!: Float32Array;   // [S, 2D] MTP input [enorm(E[t]) ‖ hnorm(h)]

  constructor(readonly cfg: Config, rows = 1, ctx = 64) {
    this.ensure(rows, ctx);
  }

  /** Grow to hold `rows` batch rows over contexts of up to `ctx` positions. */
  ensure(rows: number, ctx: number): void {
    if (rows <= this.rows && ctx <= this.ctx) return;
    const c = this.cfg;
    // grow geometrically: decode asks for one more position per step and must not reallocate each time
    const S = rows > this.rows ? Math.max(rows, Math.min(2 * this.rows, rows + 64)) : this.rows;
    const T = ctx > this.ctx ? Math.max(ctx, 2 * this.ctx) : this.ctx;
    const H = c.num_attention_heads, dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, dv = c.v_head_dim;
    const kvr = c.kv_lora_rank, qr = c.q_lora_rank ?? 0, D = c.hidden_size;
    const F = Math.max(c.intermediate_size, c.moe_intermediate_size * Math.max(1, c.n_shared_experts));
    const f = (n: number) => new Float32Array(n);
    this.x = f(S * D); this.xb = f(S * D); this.ao = f(S * D);
    this.q_a = f(S * qr); this.c_q = f(S * qr); this.q = f(S * H * (dn + dr)); this.a = f(S * (kvr + dr));
    this.qcat = f(S * H * (kvr + dr)); this.o_lat = f(S * H * kvr); this.o = f(S * H * dv);
    this.ensureNaive(0);
    this.qI = f(S * c.index_n_heads * c.index_head_dim); this.kI = f(S * c.index_head_dim);
    this.iw = f(S * c.index_n_heads); this.scores = f(S * T);
    this.sel = new Int32Array(S * Math.max(1, c.index_topk)); this.nsel = new Int32Array(S);
    this.nk = new Int32Array(S); this.pos = new Int32Array(S); this.keep = new Int32Array(S);
    this.hg = f(S * F); this.hu = f(S * F); this.xe = f(S * D); this.ye = f(S * D);
    const Fs = c.moe_intermediate_size * c.n_shared_experts;
    this.shg = f(S * Fs); this.shu = f(S * Fs);
    this.z = f(S * c.n_routed_experts);
    const SK = S * Math.max(1, c.num_experts_per_tok);
    this.mexp = new Int32Array(SK); this.mgate = f(SK); this.mrows = new Int32Array(SK); this.mgates = f(SK);
    this.moff = new Int32Array(c.n_routed_experts + 1); this.muni = new Int32Array(c.n_routed_experts); this.mcnt = new Int32Array(c.n_routed_experts);
    this.mkept = new Int32Array(S);
    const SKe = c.n_routed_experts > 0 ? SK : 0;
    this.eye = f(SKe * D); this.ehg = f(SKe * c.moe_intermediate_size); this.ehu = f(SKe * c.moe_intermediate_size); this.logits = f(S * c.vocab_size); this.ecat = f(S * 2 * D);
    this.rows = S; this.ctx = T; this.gen = ++generations;
  }

  /** Grow the naive form's buffers to `ctx` positions (attention.ts reserveNaive, before the layer loop: only batches
   *  that may take that form need them, ~180 KiB a position at GLM-5's widths). */
  ensureNaive(ctx: number): void {
    if (this.c_kv && ctx <= this.naiveCtx) return;
    const c = this.cfg, H = c.num_attention_heads, dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, dv = c.v_head_dim;
    const T = ctx > this.naiveCtx ? Math.max(ctx, 2 * this.naiveCtx) : this.naiveCtx;
    this.c_kv = new Float32Array(T * c.kv_lora_rank); this.kvb = new Float32Array(T * H * (dn + dv)); this.k = new Float32Array(T * H * (dn + dr));
    this.naiveCtx = T; this.gen = ++generations;
  }
}
