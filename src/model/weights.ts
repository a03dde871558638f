// Typed, read-only weight views for the forward (spec §2 names and shapes). Holds the loaded
// matrices/vectors of one model; routed experts are planned (validated from headers) at load time
// and read lazily on first use, then cached per Moe (the seam for expert streaming).
import { Fmt, type FmtCode } from "../native/hb.ts";
import type { Config } from "./config.ts";
import { ModelError } from "./errors.ts";
import { weightBytes, weightF32 } from "../native/mem.ts";
import { fitting, floatFormat, fmtName, isQuant, parseFmt, rowBytes, scaleCount, type QFormat } from "./formats.ts";
import { readBytes, readF32, type TensorInfo, type TensorStore } from "./safetensors.ts";

export type F32 = Float32Array;
/** A matrix W [O, I] in one of the hb formats (0 f32, 1 int8, 2 int4, 3 int2, 4 int4g, 5 bf16, 6 f16). */
export interface Mat { name: string; fmt: FmtCode; O: number; I: number; data: Float32Array | Uint16Array | Uint8Array; scales: Float32Array | null; gs: number }
export interface Indexer { wq_b: Mat; wk: Mat; k_norm_w: F32; k_norm_b: F32; weights_proj: Mat }
export interface AttnWeights { q_a: Mat | null; q_a_norm: F32 | null; q_b: Mat | null; q_proj: Mat | null; kv_a: Mat; kv_a_norm: F32; kv_b: Mat; o: Mat; indexer: Indexer | null }
export interface Mlp { gate: Mat; up: Mat; down: Mat }
export interface Moe {
  router: Mat /* f32 [E,D] */; bias: F32 | null /* [E] */; shared: Mlp | null;
  /** expert e's matrices (a streamed Moe: valid until its layer's next resolve) */
  expert(e: number): Mlp;
  /** Expert streaming (src/engine/experts/): plan a batch's union (ascending ids, rows routed to each). */
  resolve?(experts: readonly number[], rows: readonly number[]): ExpertBatch;
  /** Router-piloted prefetch (src/engine/pilot.ts), when on: start reading these experts (ascending) now,
   *  ahead of this layer's next resolve. */
  readonly prefetch?: ((experts: Int32Array) => void) | null;
  /** Expert streaming: per expert a stamp ≠ 0 while the weights `resolve` hands out for it stay where they are (a new
   *  stamp when they move), so a batch of such experts may run from matrices packed earlier (src/engine/moe.ts)... */
  readonly ver?: Int32Array;
  /** ...reported here instead of resolve: the union uni[0..nu) and its row counts cnt */
  account?(uni: Int32Array, cnt: Int32Array, nu: number): void;
}
/** A batch's routed experts, resolved pinned → cached → disk while the resident ones compute. */
export interface ExpertBatch {
  /** compute order: a permutation of the union (resident first where staging allows, then misses) */
  readonly order: readonly number[];
  /** expert e, waiting for its read if needed; throws a ModelError when that read failed */
  get(e: number): Mlp;
  /** optional: e's weights are in memory (get(e) returns without waiting); lets the MoE batch every
   *  expert of the union into two kernel calls when all are */
  ready?(e: number): boolean;
  /** e's outputs are computed: its buffer may take the next read */
  release(e: number): void;
  /** scratch [floats] for outputs computed ahead of ascending order (deterministic accumulation) */
  stage(floats: number): Float32Array;
  /** always called (finally): settles reads this batch did not consume */
  end(): void;
}
export interface Layer { input_norm: F32; post_norm: F32; attn: AttnWeights; mlp: Mlp | null /* dense */; moe: Moe | null }
export interface Mtp { enorm: F32; hnorm: F32; eh_proj: Mat /* [D, 2D] */; head_norm: F32; layer: Layer }
export interface Weights { embed: Mat /* [V, D] f32/bf16/f16 */; layers: Layer[]; norm: F32; lm_head: Mat; mtp: Mtp | null }

/** A matrix validated from headers only: everything needed to read it later. */
export interface MatPlan { name: string; fmt: FmtCode; O: number; I: number; gs: number; w: TensorInfo; qs: TensorInfo | null }

const dims = (s: number[]) => `[${s.join(", ")}]`;
/** Format of a U8 `name` + F32 `name.qs` pair from the byte/scale counts, or the metadata stamp. */
function inferQuant(store: TensorStore, w: TensorInfo, qs: TensorInfo, O: number, I: number): QFormat {
  const B = w.nbytes, S = qs.numel, key = `quant.${w.name}`;
  const stamp = Object.hasOwn(store.metadata, key) ? store.metadata[key] : undefined;
  if (stamp !== undefined) {
    const f = parseFmt(stamp);
    if (f === null || !isQuant(f.fmt))
      throw new ModelError(`unknown quant stamp ${JSON.stringify(stamp)}`, { file: w.file, field: `__metadata__.${key}` });
    const b = O * rowBytes(f.fmt, I), s = scaleCount(f.fmt, O, I, f.gs);
    if (b !== B || s !== S)
      throw new ModelError(`stamp ${stamp} needs ${b} bytes and ${s} scales for [${O}, ${I}], tensor has ${B} bytes and ${S} scales`,
        { file: w.file, tensor: w.name, field: `__metadata__.${key}` });
    return f;
  }
  const found = fitting(O, I, B, S);
  if (found.length === 1) return found[0];
  const where = { file: w.file, tensor: w.name, field: "quant" };
  if (found.length === 0) throw new ModelError(`${B} bytes and ${S} scales fit no quantized format for [${O}, ${I}]`, where);
  throw new ModelError(`${B} bytes and ${S} scales are ambiguous (${found.map(fmtName).join(" / ")}); stamp ${key}`, where);
}

/** Validate `name` as W [O, I] from the headers and infer its format. */
export function planMat(store: TensorStore, name: string, [O, I]: [number, number]): MatPlan {
  const w = store.get(name);
  const where = { file: w.file, tensor: name, field: "shape" };
  const qsName = name + ".qs";
  if (w.dtype === "U8") {
    if (!store.has(qsName)) throw new ModelError(`U8 weight needs scales ${JSON.stringify(qsName)}`, { file: w.file, tensor: name, field: "dtype" });
    const qs = store.get(qsName);
    if (!["F32", "BF16", "F16"].includes(qs.dtype)) throw new ModelError(`scales must be F32, got ${qs.dtype}`, { file: qs.file, tensor: qsName, field: "dtype" });
    if (w.shape.length === 2 ? w.shape[0] !== O : w.shape.length !== 1)
      throw new ModelError(`is ${dims(w.shape)}, expected [${O}, bytes per row] or flat`, where);
    const { fmt, gs } = inferQuant(store, w, qs, O, I);
    return { name, fmt, O, I, gs, w, qs };
  }
  if (store.has(qsName)) throw new ModelError(`a ${w.dtype} weight must not have ${JSON.stringify(qsName)}`, { file: w.file, tensor: name, field: "dtype" });
  const fmt = floatFormat(w.dtype);
  if (fmt === undefined) throw new ModelError(`dtype ${w.dtype} is not a weight format`, { file: w.file, tensor: name, field: "dtype" });
  if (w.shape.length !== 2 || w.shape[0] !== O || w.shape[1] !== I) throw new ModelError(`is ${dims(w.shape)}, expected [${O}, ${I}]`, where);
  return { name, fmt, O, I, gs: 0, w, qs: null };
}

/** Read a planned matrix. F8_E4M3 (+ `_scale_inv` from the store) is dequantised to f32. */
export function readMat(store: TensorStore, p: MatPlan): Mat {
  const base = { name: p.name, fmt: p.fmt, O: p.O, I: p.I, gs: p.gs };
  if (p.qs) return { ...base, data: readBytes(p.w, weightBytes(p.w.nbytes)), scales: readF32(p.qs, weightF32(p.qs.numel)) };
  if (p.w.dtype === "BF16" || p.w.dtype === "F16") {
    const b = weightBytes(2 * p.O * p.I);
    readBytes(p.w, b);
    return { ...base, data: new Uint16Array(b.buffer, b.byteOffset, p.O * p.I), scales: null };
  }
  return { ...base, data: readF32(p.w, weightF32(p.O * p.I), store), scales: null };
}

export function loadMat(store: TensorStore, name: string, expectShape: [number, number]): Mat {
  return readMat(store, planMat(store, name, expectShape));
}

/** A float matrix forced to f32 (router): BF16/F16 are converted, quantized formats refused. */
export function loadMatF32(store: TensorStore, name: string, shape: [number, number]): Mat {
  const p = planMatF32(store, name, shape);
  return { name, fmt: Fmt.f32, O: p.O, I: p.I, gs: 0, data: readF32(p.w, null, store), scales: null };
}

function planMatF32(store: TensorStore, name: string, shape: [number, number]): MatPlan {
  const p = planMat(store, name, shape);
  if (p.qs) throw new ModelError("must be a float tensor, not quantized", { file: p.w.file, tensor: name, field: "dtype" });
  return p;
}

/** A vector [n] as f32 (any float dtype). */
export function loadVec(store: TensorStore, name: string, n: number): F32 {
  return readF32(planVec(store, name, n), null, store);
}
function planVec(store: TensorStore, name: string, n: number): TensorInfo {
  const t = store.get(name);
  if (t.shape.length !== 1 || t.shape[0] !== n) throw new ModelError(`is ${dims(t.shape)}, expected [${n}]`, { file: t.file, tensor: name, field: "shape" });
  return t;
}

// ---- the model --------------------------------------------------------------------------------

export interface MlpPlan { gate: MatPlan; up: MatPlan; down: MatPlan }
function planMlp(store: TensorStore, p: string, D: number, inter: number): MlpPlan {
  return {
    gate: planMat(store, `${p}gate_proj.weight`, [inter, D]),
    up: planMat(store, `${p}up_proj.weight`, [inter, D]),
    down: planMat(store, `${p}down_proj.weight`, [D, inter]),
  };
}
export const readMlp = (store: TensorStore, m: MlpPlan): Mlp => ({ gate: readMat(store, m.gate), up: readMat(store, m.up), down: readMat(store, m.down) });

/** Routed experts validated up front, each read on first use and then cached. */
export class LazyMoe implements Moe {
  private readonly cache: (Mlp | undefined)[];
  constructor(readonly store: TensorStore, readonly router: Mat, readonly bias: F32 | null,
    readonly shared: Mlp | null, readonly plans: readonly MlpPlan[]) {
    this.cache = new Array(plans.length);
  }
  expert(e: number): Mlp {
    if (!Number.isInteger(e) || e < 0 || e >= this.plans.length)
      throw new ModelError(`expert ${e} out of range [0, ${this.plans.length})`, { tensor: this.router.name, field: "expert" });
    return (this.cache[e] ??= readMlp(this.store, this.plans[e]));
  }
}

type IndexerMode = "none" | "optional" | "required";

/** How the model's tensors are taken: read (loadWeights) or only validated from the headers (checkWeights, whose
 *  matrices and vectors hold no data). The same walk over the model's names and shapes serves both. */
interface Reader { mat: typeof loadMat; matF32: typeof loadMatF32; vec: typeof loadVec; mlp: typeof readMlp }
const READ: Reader = { mat: loadMat, matF32: loadMatF32, vec: loadVec, mlp: readMlp };
const planned = (p: MatPlan): Mat => ({ name: p.name, fmt: p.fmt, O: p.O, I: p.I, gs: p.gs, data: new Float32Array(0), scales: null });
const CHECK: Reader = {
  mat: (store, name, shape) => planned(planMat(store, name, shape)),
  matF32: (store, name, shape) => planned(planMatF32(store, name, shape)),
  vec: (store, name, n) => (planVec(store, name, n), new Float32Array(0)),
  mlp: (_store, m) => ({ gate: planned(m.gate), up: planned(m.up), down: planned(m.down) }),
};

function loadIndexer(r: Reader, store: TensorStore, cfg: Config, p: string, mode: IndexerMode): Indexer | null {
  if (mode === "none" || (mode === "optional" && !store.has(`${p}wq_b.weight`))) return null;
  const D = cfg.hidden_size, nh = cfg.index_n_heads, hd = cfg.index_head_dim;
  return {
    wq_b: r.mat(store, `${p}wq_b.weight`, [nh * hd, cfg.q_lora_rank!]),
    wk: r.mat(store, `${p}wk.weight`, [hd, D]),
    k_norm_w: r.vec(store, `${p}k_norm.weight`, hd),
    k_norm_b: r.vec(store, `${p}k_norm.bias`, hd),
    weights_proj: r.mat(store, `${p}weights_proj.weight`, [nh, D]),
  };
}

function loadAttn(r: Reader, store: TensorStore, cfg: Config, p: string, mode: IndexerMode): AttnWeights {
  const D = cfg.hidden_size, H = cfg.num_attention_heads, dn = cfg.qk_nope_head_dim, dr = cfg.qk_rope_head_dim;
  const dv = cfg.v_head_dim, kvr = cfg.kv_lora_rank, qr = cfg.q_lora_rank;
  return {
    q_a: qr === null ? null : r.mat(store, `${p}q_a_proj.weight`, [qr, D]),
    q_a_norm: qr === null ? null : r.vec(store, `${p}q_a_layernorm.weight`, qr),
    q_b: qr === null ? null : r.mat(store, `${p}q_b_proj.weight`, [H * (dn + dr), qr]),
    q_proj: qr === null ? r.mat(store, `${p}q_proj.weight`, [H * (dn + dr), D]) : null,
    kv_a: r.mat(store, `${p}kv_a_proj_with_mqa.weight`, [kvr + dr, D]),
    kv_a_norm: r.vec(store, `${p}kv_a_layernorm.weight`, kvr),
    kv_b: r.mat(store, `${p}kv_b_proj.weight`, [H * (dn + dv), kvr]),
    o: r.mat(store, `${p}o_proj.weight`, [D, H * dv]),
    indexer: loadIndexer(r, store, cfg, `${p}indexer.`, mode),
  };
}

function loadLayer(r: Reader, store: TensorStore, cfg: Config, i: number, moe: boolean, mode: IndexerMode): Layer {
  const p = `model.layers.${i}.`, D = cfg.hidden_size, E = cfg.n_routed_experts, I = cfg.moe_intermediate_size;
  const layer: Layer = {
    input_norm: r.vec(store, `${p}input_layernorm.weight`, D),
    post_norm: r.vec(store, `${p}post_attention_layernorm.weight`, D),
    attn: loadAttn(r, store, cfg, `${p}self_attn.`, mode),
    mlp: null,
    moe: null,
  };
  if (!moe) {
    layer.mlp = r.mlp(store, planMlp(store, `${p}mlp.`, D, cfg.intermediate_size));
    return layer;
  }
  const biasName = `${p}mlp.gate.e_score_correction_bias`;
  const router = r.matF32(store, `${p}mlp.gate.weight`, [E, D]);
  const bias = store.has(biasName) ? r.vec(store, biasName, E) : null;
  const plans = Array.from({ length: E }, (_, e) => planMlp(store, `${p}mlp.experts.${e}.`, D, I));
  const shared = cfg.n_shared_experts > 0 ? r.mlp(store, planMlp(store, `${p}mlp.shared_experts.`, D, cfg.n_shared_experts * I)) : null;
  layer.moe = new LazyMoe(store, router, bias, shared, plans);
  return layer;
}

/** Load every weight of the model (experts lazily), validating names and shapes against cfg. */
export function loadWeights(store: TensorStore, cfg: Config): Weights {
  return buildWeights(READ, store, cfg);
}

/** loadWeights' checks (every name, shape, dtype and quant format against cfg), from the headers only: what
 *  `inspect` runs, so that it refuses exactly the weights `serve` would. */
export function checkWeights(store: TensorStore, cfg: Config): void {
  buildWeights(CHECK, store, cfg);
}

function buildWeights(r: Reader, store: TensorStore, cfg: Config): Weights {
  const D = cfg.hidden_size, V = cfg.vocab_size, L = cfg.num_hidden_layers;
  const embed = r.mat(store, "model.embed_tokens.weight", [V, D]);
  if (embed.fmt !== Fmt.f32 && embed.fmt !== Fmt.bf16 && embed.fmt !== Fmt.f16)
    throw new ModelError("must be f32, bf16 or f16 (rows are gathered)", { file: store.get(embed.name).file, tensor: embed.name, field: "dtype" });
  const layers: Layer[] = [];
  for (let i = 0; i < L; i++) {
    const mode: IndexerMode = !cfg.has_dsa ? "none" : cfg.indexer_types[i] === "full" ? "required" : "optional";
    layers.push(loadLayer(r, store, cfg, i, cfg.layer_kinds[i] === "moe", mode));
  }
  const norm = r.vec(store, "model.norm.weight", D);
  const lm_head = r.mat(store, "lm_head.weight", [V, D]);
  let mtp: Mtp | null = null;
  const p = `model.layers.${L}.`;
  if (cfg.num_nextn_predict_layers >= 1 && store.has(`${p}eh_proj.weight`)) {
    mtp = {
      enorm: r.vec(store, `${p}enorm.weight`, D),
      hnorm: r.vec(store, `${p}hnorm.weight`, D),
      eh_proj: r.mat(store, `${p}eh_proj.weight`, [D, 2 * D]),
      head_norm: r.vec(store, `${p}shared_head.norm.weight`, D),
      layer: loadLayer(r, store, cfg, L, store.has(`${p}mlp.gate.weight`), cfg.has_dsa ? "optional" : "none"),
    };
  }
  return { embed, layers, norm, lm_head, mtp };
}
