// The forecast of `hummingbird plan`: a model's footprint (bytes resident, read per decoded token, one routed expert; the
// multiply-adds per token) from its config and formats or from its files, the RAM plan serve would make
// (experts/budget.ts), the expert cache's hit-rate range, and decode / prefill tok/s from the machine's rates (rates.ts).
// Pure arithmetic; no state.
import type { Config } from "../model/config.ts";
import { rowBytes, scaleCount, type QFormat } from "../model/formats.ts";
import { planTensors } from "../model/make-model.ts";
import { numel, type PlannedTensor } from "../model/make-weights.ts";
import { kvRowElems, type KvDtype } from "../native/hb.ts";
import { kvBytesPerToken, kvRows, planBudget, runStateBytes, STAGE_BYTES, type BudgetPlan } from "./experts/budget.ts";

const EXPERT = /^model\.layers\.(\d+)\.mlp\.experts\.\d+\./;

export interface Footprint {
  residentBytes: number;  // in RAM as loaded: every tensor but the routed experts (vectors and routers as f32)
  decodeBytes: number;    // of those, read per decoded token: all but the embedding table (one row) and the MTP layer
  lmHeadBytes: number;
  expertBytes: number;    // one routed expert of a main layer: gate, up, down and their scales
  mtpExpertBytes: number; // one routed expert of the MTP layer (convert stores it in --mtp's format)
  slotBytes: number;      // the expert cache's slot: the largest expert, the MTP layer's included (as the store sizes it)
  moeLayers: number;      // main MoE layers (the MTP layer's experts are planned in the cache too, not read in decode)
  denseMacs: number;      // multiply-adds per token of the main layers' matrices but routed experts (no embed, no lm_head)
  lastFfnMacs: number;    // of those, the last layer's FFN (its router and shared expert, or its dense MLP)
  expertMacs: number;     // of one routed expert per token: 3·I·D
}

/** Bytes as stored: vectors, routers and the embedding f32, the MTP layer's matrices in `mtp`, experts in `experts`, the
 *  other matrices in `dense` (convert's roles; a matrix's bytes are its rows' plus its scales'). */
export function formatBytes(f: { experts: QFormat; dense: QFormat; mtp: QFormat }, L: number) {
  return (t: PlannedTensor): number => {
    if (t.shape.length !== 2 || t.name.endsWith("mlp.gate.weight") || t.name === "model.embed_tokens.weight") return 4 * numel(t.shape);
    const layer = Number(/^model\.layers\.(\d+)\./.exec(t.name)?.[1] ?? -1);
    const q = layer >= L ? f.mtp : EXPERT.test(t.name) ? f.experts : f.dense, [O, I] = t.shape;
    return O * rowBytes(q.fmt, I) + 4 * scaleCount(q.fmt, O, I, q.gs);
  };
}

/** The footprint of cfg's tensors (spec §2) with each one's bytes from `bytesOf`. */
export function footprint(cfg: Config, bytesOf: (t: PlannedTensor) => number): Footprint {
  const L = cfg.num_hidden_layers, fp = { residentBytes: 0, decodeBytes: 0, lmHeadBytes: 0, denseMacs: 0, lastFfnMacs: 0 };
  let expertSum = 0, mtpSum = 0;
  for (const t of planTensors(cfg, "bf16")) {
    const b = bytesOf(t), layer = Number(/^model\.layers\.(\d+)\./.exec(t.name)?.[1] ?? -1);
    if (EXPERT.test(t.name)) { if (layer < L) expertSum += b; else if (layer === L) mtpSum += b; continue; }
    fp.residentBytes += b;
    if (layer >= L || t.name === "model.embed_tokens.weight") continue;
    fp.decodeBytes += b;
    if (t.name === "lm_head.weight") fp.lmHeadBytes = b;
    else if (t.shape.length === 2) fp.denseMacs += numel(t.shape);
    if (layer === L - 1 && t.shape.length === 2 && t.name.includes(".mlp.")) fp.lastFfnMacs += numel(t.shape);
  }
  const moeLayers = cfg.layer_kinds.filter((k) => k === "moe").length, E = cfg.n_routed_experts;
  const expertBytes = moeLayers ? expertSum / (moeLayers * E) : 0;
  return { ...fp, expertBytes, mtpExpertBytes: mtpSum / E, slotBytes: Math.max(expertBytes, mtpSum / E), moeLayers,
    expertMacs: 3 * cfg.moe_intermediate_size * cfg.hidden_size };
}

export interface PlanInput {
  cfg: Config; fp: Footprint;
  ram: number; diskBps?: number; membw: number;   // bytes, bytes/s
  /** the matmul kernels' rates at S rows from RAM (MAC/s, weight bytes/s): decode streams at S = 1 */
  gemm: (which: "dense" | "experts", S: number) => { macs: number; bytes: number };
  ctx: number; prompt: number; kvDtype: KvDtype;
}

export interface Forecast {
  budget: BudgetPlan; kvBytesPerToken: number; kvBytes: number; expertsOnDisk: number;
  cacheShare: number; hit: [number, number];       // [uniform routing, Zipf(1) routing]
  readPerToken: { dense: number; routed: number; attention: number };
  decode: [number, number]; prefill: [number, number]; // tok/s at the low and the high hit rate
  rowsPerExpert: number;
}

/** H(n) = Σ 1/k: the share of uses a cache of the n hottest of E Zipf(1) experts serves is H(n)/H(E). */
const harmonic = (n: number) => { let h = 0; for (let k = 1; k <= n; k++) h += 1 / k; return h; };

export function forecast(p: PlanInput): Forecast {
  const { cfg, fp } = p, E = cfg.n_routed_experts, K = cfg.num_experts_per_tok, L = cfg.num_hidden_layers;
  const mtp = cfg.num_nextn_predict_layers >= 1 && fp.moeLayers > 0 ? 1 : 0, rows = Math.min(p.ctx, 512);
  const kvTok = kvBytesPerToken(cfg, p.kvDtype, true), kvBytes = kvRows(p.ctx) * kvTok;
  const budget = planBudget({
    ram: p.ram, residentBytes: fp.residentBytes, expertBytes: fp.slotBytes, moeLayers: fp.moeLayers + mtp, experts: E,
    slotRowBytes: fp.expertBytes * fp.moeLayers + mtp * fp.mtpExpertBytes, // each layer's slots sized by its own experts
    kvBytes, activationBytes: runStateBytes(cfg, rows, kvRows(p.ctx)) + Math.min(STAGE_BYTES, rows * K * cfg.hidden_size * 4),
    workingSlabs: Math.min(8, Math.max(2, K)),
  });
  const share = fp.moeLayers ? budget.slots / E : 1;
  const hit: [number, number] = [share, fp.moeLayers ? harmonic(budget.slots) / harmonic(E) : 1];
  if (hit[0] < 1 && !(p.diskBps! > 0)) throw new RangeError("the experts miss the cache: a disk rate is needed");
  const disk = p.diskBps ?? Infinity;
  // decode at the end of a ctx-token context: the attended rows (index_topk of them with DSA) and the indexer's int8 keys
  const row = kvRowElems(p.kvDtype, cfg.kv_lora_rank + cfg.qk_rope_head_dim) * (p.kvDtype === "f32" ? 4 : p.kvDtype === "f16" ? 2 : 1);
  const indexed = cfg.has_dsa ? cfg.indexer_types.filter((t) => t === "full").length : 0;
  const attention = L * Math.min(p.ctx, cfg.has_dsa ? cfg.index_topk : p.ctx) * row + indexed * p.ctx * (cfg.index_head_dim + 4);
  const routed = K * fp.expertBytes * fp.moeLayers;
  const dense1 = p.gemm("dense", 1).bytes, experts1 = p.gemm("experts", 1).bytes;
  const decodeS = (h: number) => fp.decodeBytes / dense1 + attention / p.membw + routed * (h / experts1 + (1 - h) / disk);
  // prefill of `prompt` tokens: the matrices at their measured rates (the experts at the rows each gets), attention's
  // products at the dense rate, lm_head once, and each MoE layer's union of experts read once (the misses from disk);
  // the last layer's FFN runs for the last row only (forward.ts: the rows that get logits)
  const P = p.prompt, Se = Math.max(1, Math.round((P * K) / E));
  const H = cfg.num_attention_heads, perKey = H * (cfg.qk_nope_head_dim + cfg.qk_rope_head_dim + cfg.v_head_dim);
  let attnMacs = 0;
  for (let s = 0; s < P; s++) attnMacs += L * Math.min(s + 1, cfg.has_dsa ? cfg.index_topk : s + 1) * perKey + indexed * (s + 1) * cfg.index_n_heads * cfg.index_head_dim;
  const lastMoe = cfg.layer_kinds[L - 1] === "moe" ? 1 : 0, fullMoe = fp.moeLayers - lastMoe;
  const compute = (P * (fp.denseMacs - fp.lastFfnMacs) + fp.lastFfnMacs + attnMacs) / p.gemm("dense", P).macs
    + (K * fp.expertMacs * (P * fullMoe + lastMoe)) / p.gemm("experts", Se).macs;
  const used = fullMoe * E * (1 - (1 - K / E) ** P) + lastMoe * K; // experts a prefill touches
  const prefillS = (h: number) => compute + fp.lmHeadBytes / p.membw + used * fp.expertBytes * (1 - h) / disk;
  return {
    budget, kvBytesPerToken: kvTok, kvBytes, expertsOnDisk: E * (fp.expertBytes * fp.moeLayers + fp.mtpExpertBytes), cacheShare: share, hit,
    readPerToken: { dense: fp.decodeBytes, routed, attention },
    decode: [1 / decodeS(hit[0]), 1 / decodeS(hit[1])], prefill: [P / prefillS(hit[0]), P / prefillS(hit[1])], rowsPerExpert: Se,
  };
}

/** Bytes as a model directory stores them (attach.ts's residentBytes rule: vectors, routers and FP8 as f32), `.qs`
 *  scales added to their matrix. */
export function storeBytes(store: { has(n: string): boolean; get(n: string): { shape: number[]; numel: number; nbytes: number; dtype: string } }) {
  return (t: PlannedTensor): number => {
    const s = store.get(t.name), qs = `${t.name}.qs`;
    const own = s.shape.length === 1 || t.name.endsWith("mlp.gate.weight") || s.dtype === "F8_E4M3" ? 4 * s.numel : s.nbytes;
    return own + (store.has(qs) ? store.get(qs).nbytes : 0);
  };
}
