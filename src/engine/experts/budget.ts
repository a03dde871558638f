// RAM budget arithmetic of expert streaming (pure, unit-tested): the honest reserve (resident
// weights, KV pool at max context, activations + staging, working-set slabs, page-cache headroom),
// the cache slots per layer that fit in what is left, the pinned share from the history's
// confidence, and the projected peak. No I/O, no state.
import type { Config } from "../../model/config.ts";
import { kvRowElems, type KvDtype } from "../../native/hb.ts";
import { naiveNeed } from "../attention.ts";

export const MiB = 2 ** 20;
export const GiB = 2 ** 30;
/** Left free for the page cache, the runtime and the OS: max(HEADROOM_MIN, HEADROOM_FRAC × budget). */
export const HEADROOM_MIN = 512 * MiB;
export const HEADROOM_FRAC = 0.05;
/** Pinned share of the cache: PIN_MAX × n / (n + PIN_HALF) after n tokens of history. */
export const PIN_MAX = 0.75;
export const PIN_HALF = 4096;
/** Outputs computed ahead of ascending order are staged up to this many bytes (else: ascending). */
export const STAGE_BYTES = 64 * MiB;

/** Bytes of KV state per token of context: every layer's c_kv ‖ k_pe (in the cache's dtype), indexer keys, the MTP
 *  layer, and (hidden: MTP drafting keeps them) the main residual's rows. */
export function kvBytesPerToken(cfg: Config, dtype: KvDtype = "f32", hidden = true): number {
  const kv = cfg.kv_lora_rank + cfg.qk_rope_head_dim;
  const indexed = cfg.has_dsa ? cfg.indexer_types.filter((t) => t === "full").length : 0;
  const mtp = cfg.num_nextn_predict_layers >= 1 ? 1 : 0;
  // indexer keys in f32, and fast mode's int8 copy of them (ikq.ts: a byte per element and a scale per row)
  const row = kvRowElems(dtype, kv) * (dtype === "f32" ? 4 : dtype === "f16" ? 2 : 1);
  return (cfg.num_hidden_layers + mtp) * row + 4 * (indexed * cfg.index_head_dim + (hidden ? cfg.hidden_size : 0)) + indexed * (cfg.index_head_dim + 4);
}

/** KVCache grows by doubling from 16 rows: the rows it holds for ctx tokens. */
export const kvRows = (ctx: number) => Math.max(16, 2 ** Math.ceil(Math.log2(Math.max(1, ctx))));

/** Bytes of one RunState (src/engine/state.ts: keep in step) for S rows over T context positions, its naive-form
 *  buffers as a batch of S new rows ending at T reserves them (attention.ts reserveNaive). */
export function runStateBytes(cfg: Config, S: number, T: number): number {
  const H = cfg.num_attention_heads, dn = cfg.qk_nope_head_dim, dr = cfg.qk_rope_head_dim, dv = cfg.v_head_dim;
  const kvr = cfg.kv_lora_rank, qr = cfg.q_lora_rank ?? 0, D = cfg.hidden_size;
  const F = Math.max(cfg.intermediate_size, cfg.moe_intermediate_size * Math.max(1, cfg.n_shared_experts));
  const nh = cfg.index_n_heads, hd = cfg.index_head_dim;
  const perRow = 3 * D + 2 * qr + H * (dn + dr) + (kvr + dr) + H * (kvr + dr) + H * kvr + H * dv + nh * hd + hd + nh
    + T + Math.max(1, cfg.index_topk) + 4 + 2 * F + 2 * cfg.moe_intermediate_size * cfg.n_shared_experts + 2 * D
    + cfg.n_routed_experts + cfg.vocab_size + 2 * D;
  // the naive attention form's buffers (state.ts ensureNaive): only up to the context where S new rows may take it
  const Tn = naiveNeed(cfg, S, T, "auto");
  const perNaive = kvr + H * (dn + dv) + H * (dn + dr);
  // MoE routing and the batched experts (state.ts): 4 arrays of K per row and the experts kept per row (a quality
  // policy's), E + 1 offsets, the union and its counts (2E), and the rows of every routed expert: outputs [K, D],
  // gate / up activations [K, moe_inter] (inputs are read by index)
  const K = Math.max(1, cfg.num_experts_per_tok), E = cfg.n_routed_experts;
  const moe = 4 * K + 1 + (E > 0 ? K * D + 2 * K * cfg.moe_intermediate_size : 0);
  return 4 * (S * (perRow + moe) + Tn * perNaive + 3 * E + 1);
}

export interface BudgetInput {
  /** the RAM budget in bytes (--ram-gb, or detected) */
  ram: number;
  /** weights loaded eagerly: everything but the routed experts */
  residentBytes: number;
  /** slab bytes of the largest expert (a working slab holds any layer's) */
  expertBytes: number;
  moeLayers: number;
  /** one cache slot in every MoE layer: Σ of each layer's own expert bytes (the MTP layer's int8 experts are larger
   *  than the main layers' int4g ones); default expertBytes × moeLayers */
  slotRowBytes?: number;
  experts: number;
  /** KV pool at max context (all sessions) */
  kvBytes: number;
  /** activations (RunState) + staging */
  activationBytes: number;
  /** working-set slabs (streaming buffers shared by the layers; 0 with mmap) */
  workingSlabs: number;
  /** explicit slots per layer (--expert-cache N); 0 / undefined = automatic */
  slots?: number;
  /** tokens of usage history behind the pins */
  historyTokens?: number;
}

export interface BudgetPlan {
  ram: number;
  headroom: number;
  reserve: number;          // resident + kv + activations + working + headroom
  slots: number;            // cache slots per MoE layer
  pinned: number;           // of which pinned (hottest experts, loaded at start)
  pinShare: number;
  residentBytes: number;
  workingBytes: number;
  cacheBytes: number;       // slots × slotRowBytes
  pinnedBytes: number;
  peak: number;             // projected peak RSS: resident + kv + activations + working + cache
  fits: boolean;            // peak + headroom ≤ ram
  auto: boolean;
  warnings: string[];
}

export const pinShare = (tokens: number) => (tokens > 0 ? PIN_MAX * tokens / (tokens + PIN_HALF) : 0);
export const headroomOf = (ram: number) => Math.max(HEADROOM_MIN, Math.floor(HEADROOM_FRAC * ram));

export function planBudget(b: BudgetInput): BudgetPlan {
  if (!(b.ram > 0) || b.expertBytes < 0 || b.moeLayers < 0 || b.experts < 0) throw new RangeError("planBudget: bad input");
  const headroom = headroomOf(b.ram);
  const workingBytes = b.workingSlabs * b.expertBytes;
  const reserve = b.residentBytes + b.kvBytes + b.activationBytes + workingBytes + headroom;
  const perSlot = b.slotRowBytes ?? b.expertBytes * b.moeLayers;
  const auto = !b.slots;
  const fitSlots = perSlot > 0 ? Math.floor(Math.max(0, b.ram - reserve) / perSlot) : b.experts;
  const slots = Math.max(Math.min(b.experts, 1), Math.min(b.experts, auto ? fitSlots : b.slots!));
  const share = pinShare(b.historyTokens ?? 0);
  const pinned = Math.min(slots, Math.floor(slots * share));
  const cacheBytes = slots * perSlot;
  const peak = b.residentBytes + b.kvBytes + b.activationBytes + workingBytes + cacheBytes;
  const fits = peak + headroom <= b.ram;
  const warnings: string[] = [];
  if (!fits) warnings.push(auto
    ? `the budget leaves no room for one expert slot per layer: projected peak ${gib(peak)} + headroom ${gib(headroom)} > ${gib(b.ram)}`
    : `--expert-cache ${b.slots} exceeds the budget: projected peak ${gib(peak)} + headroom ${gib(headroom)} > ${gib(b.ram)}`);
  return {
    ram: b.ram, headroom, reserve, slots, pinned, pinShare: share, residentBytes: b.residentBytes, workingBytes,
    cacheBytes, pinnedBytes: pinned * perSlot, peak, fits, auto, warnings,
  };
}

export const gib = (n: number) => `${(n / GiB).toFixed(2)} GiB`;
