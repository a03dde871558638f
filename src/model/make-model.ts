// Random-model generator: presets (`tiny` = the shared fixture's shape, `bench` = a 1.6 GiB bf16
// MoE for benchmarks), `--set` overrides with derived keys recomputed, the tensor plan of spec §2
// (dry run: names/shapes/dtypes/inits without any weights) and the writer of a full HF model
// directory. Stateless; the only state is the output directory it writes.
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { indexerTypesFromFreq, parseConfig, type Config } from "./config.ts";
import { ModelError } from "./errors.ts";
import { makeTokenizerConfig, makeTokenizerJson } from "./make-tokenizer.ts";
import { tensorBytes, tensorData, type GenDtype, type Init, type PlannedTensor } from "./make-weights.ts";
import { writeSafetensors } from "./safetensors.ts";

export type Preset = "tiny" | "bench";
export type WeightDtype = "f32" | "bf16";
export const PRESET_NAMES: readonly Preset[] = ["tiny", "bench"];

export interface MakeModelOptions {
  preset: Preset;
  seed: number;
  /** default: f32 for tiny, bf16 for bench */
  dtype?: WeightDtype;
  /** config overrides applied before derivation; keys may be dotted (`rope_parameters.rope_theta`) */
  set?: Record<string, unknown>;
  /** make the MTP head a good drafter (see MTP_DRAFT_* below) */
  mtpDrafts?: boolean;
}

/** HF-style config shared by the presets (GLM-5 conventions). */
const COMMON = {
  architectures: ["GlmMoeDsaForCausalLM"], model_type: "glm_moe_dsa",
  num_nextn_predict_layers: 1, first_k_dense_replace: 1, moe_layer_freq: 1,
  n_shared_experts: 1, n_group: 1, topk_group: 1, topk_method: "noaux_tc", scoring_func: "sigmoid",
  norm_topk_prob: true, routed_scaling_factor: 2.5, moe_router_dtype: "float32", hidden_act: "silu",
  rms_norm_eps: 1e-5, rope_interleave: true, indexer_rope_interleave: true,
  attention_bias: false, attention_dropout: 0.0, tie_word_embeddings: false,
  bos_token_id: 0, eos_token_id: [1, 2, 5], pad_token_id: 1, initializer_range: 0.02, use_cache: true,
};

/**
 * Preset shapes. `tiny` is the shape of shared/fixtures/glm-tiny. `bench`: 8 layers (layer 0
 * dense), 64 experts top-8, vocab 8192; every layer runs its own indexer (GLM-5/5.1 style, no
 * sharing) so DSA cost is measured on every layer.
 */
export const PRESETS: Record<Preset, Record<string, unknown>> = {
  tiny: {
    ...COMMON, vocab_size: 512, hidden_size: 64, intermediate_size: 128, moe_intermediate_size: 32,
    num_hidden_layers: 4, num_attention_heads: 4, q_lora_rank: 32, kv_lora_rank: 32,
    qk_nope_head_dim: 16, qk_rope_head_dim: 8, v_head_dim: 16, n_routed_experts: 16, num_experts_per_tok: 4,
    rope_parameters: { rope_type: "default", rope_theta: 10000 }, index_n_heads: 4, index_head_dim: 16,
    index_topk: 8, index_topk_freq: 2, index_skip_topk_offset: 1, max_position_embeddings: 4096,
  },
  bench: {
    ...COMMON, vocab_size: 8192, hidden_size: 1024, intermediate_size: 2816, moe_intermediate_size: 512,
    num_hidden_layers: 8, num_attention_heads: 16, q_lora_rank: 512, kv_lora_rank: 256,
    qk_nope_head_dim: 64, qk_rope_head_dim: 32, v_head_dim: 64, n_routed_experts: 64, num_experts_per_tok: 8,
    rope_parameters: { rope_type: "default", rope_theta: 1000000 }, index_n_heads: 8, index_head_dim: 64,
    index_topk: 128, index_topk_freq: 1, index_skip_topk_offset: 2, max_position_embeddings: 16384,
  },
};

export function defaultDtype(preset: Preset): WeightDtype {
  return preset === "bench" ? "bf16" : "f32";
}

const int = (raw: Record<string, unknown>, k: string): number => {
  const v = raw[k];
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) throw new ModelError(`must be a non-negative integer, got ${JSON.stringify(v)}`, { file: "config.json", field: k });
  return v;
};

function setPath(obj: Record<string, unknown>, path: string, v: unknown): void {
  const keys = path.split(".");
  if (keys.some((k) => k === "" || k === "__proto__" || k === "constructor" || k === "prototype"))
    throw new ModelError("not a usable config key path", { file: "config.json", field: path });
  let o = obj;
  for (const k of keys.slice(0, -1)) {
    const next = o[k];
    if (typeof next !== "object" || next === null || Array.isArray(next)) o[k] = {};
    o = o[k] as Record<string, unknown>;
  }
  o[keys[keys.length - 1]] = structuredClone(v);
}

/**
 * The config.json object: preset, then overrides, then the derived keys (unless overridden):
 * num_key_value_heads = H, qk_head_dim = dn+dr, head_dim = dr, mlp_layer_types from
 * first_k_dense_replace, indexer_types from index_topk_freq/index_skip_topk_offset (spec §1),
 * rope_theta ⇄ rope_parameters.rope_theta, dtype/torch_dtype from the weight dtype.
 */
export function buildRawConfig(opts: MakeModelOptions): Record<string, unknown> {
  const raw = structuredClone(PRESETS[opts.preset]);
  if (!raw) throw new ModelError(`unknown preset ${JSON.stringify(opts.preset)} (tiny|bench)`, { field: "preset" });
  const set = opts.set ?? {};
  for (const [k, v] of Object.entries(set)) setPath(raw, k, v);
  const has = (k: string) => Object.keys(set).some((s) => s === k || s.startsWith(`${k}.`));
  const L = int(raw, "num_hidden_layers");
  if (!has("num_key_value_heads")) raw.num_key_value_heads = int(raw, "num_attention_heads");
  if (!has("qk_head_dim")) raw.qk_head_dim = int(raw, "qk_nope_head_dim") + int(raw, "qk_rope_head_dim");
  if (!has("head_dim")) raw.head_dim = int(raw, "qk_rope_head_dim");
  if (!has("mlp_layer_types")) {
    const k = int(raw, "first_k_dense_replace");
    raw.mlp_layer_types = Array.from({ length: L }, (_, i) => (i < k ? "dense" : "sparse"));
  }
  if (!has("indexer_types")) {
    const freq = int(raw, "index_topk_freq"), off = int(raw, "index_skip_topk_offset");
    if (freq < 1) throw new ModelError("must be >= 1", { file: "config.json", field: "index_topk_freq" });
    raw.indexer_types = indexerTypesFromFreq(L, freq, off);
  }
  const rp = raw.rope_parameters as Record<string, unknown> | undefined;
  if (has("rope_theta") && !has("rope_parameters")) raw.rope_parameters = { ...(rp ?? { rope_type: "default" }), rope_theta: raw.rope_theta };
  else raw.rope_theta = (raw.rope_parameters as Record<string, unknown> | undefined)?.rope_theta ?? raw.rope_theta;
  const dt = opts.dtype ?? defaultDtype(opts.preset);
  raw.dtype = raw.torch_dtype = dt === "bf16" ? "bfloat16" : "float32";
  return orderKeys(raw);
}

/** Keys in a stable, readable order: the preset's order, derived and extra keys after. */
function orderKeys(raw: Record<string, unknown>): Record<string, unknown> {
  const first = ["architectures", "model_type", "dtype", "torch_dtype"];
  const out: Record<string, unknown> = {};
  for (const k of first) if (k in raw) out[k] = raw[k];
  for (const k of Object.keys(raw)) if (!(k in out)) out[k] = raw[k];
  return out;
}

/** Initialisers (spec'd in the task): projections N(0, 1/fan_in), norms 1+0.1·N, embed N(0,1). */
const proj = (fanIn: number, scale = 1): Init => ({ kind: "normal", std: scale / Math.sqrt(fanIn) });
const NORM: Init = { kind: "norm", std: 0.1 };
const ONE: Init = { kind: "norm", std: 0 };

/**
 * --mtp-drafts: make the MTP head (layer L) a good drafter without training. The MTP head at p
 * sees t_{p+1} and predicts t_{p+2}, which the main model predicts at p+1 from the residual x_{p+1}.
 * 1. MTP head ≈ "next token from the current token only":
 *    - eh_proj = [I | 0] + 1e-3·N: u ≈ RMS(E[t_{p+1}]) (enorm = 1 exactly), hidden half dropped;
 *    - o_proj and every down projection (routed + shared) of layer L × 0.01: the MTP decoder
 *      layer is ≈ identity;
 *    - shared_head.norm = model.norm (same values), so draft_logits ≈ lm_head·RMS(E[t]; model.norm).
 * 2. Main model ≈ the same function plus a context term: embed ~ N(0, 32²) instead of N(0, 1).
 *    Every layer still runs on RMS-normalised inputs (so attention/DSA/MoE are fully exercised),
 *    but its residual contribution r is ~1/32 of the embedding, so the main argmax
 *    lm_head·RMS(32·E[t] + r) usually equals the MTP's. (Step 1 alone gives 0% acceptance: with
 *    N(0,1) embeddings r dominates x.)
 * Measured with the engine's greedy decode + Session.mtpDrafts (3 seeds, 24 tokens, 3-step chains):
 * tiny ≈ 0.93-0.96 accepted per draft step (f32 and bf16), bench shape (3 layers, 16 experts,
 * bf16) ≈ 0.80-0.84; σ = 16 gives ≈ 0.8 / 0.75, σ = 1 gives ≈ 0. Rejections still happen, so both
 * verify paths get exercised.
 */
export const MTP_DRAFT_RESIDUAL_SCALE = 0.01;
export const MTP_DRAFT_EH_NOISE = 1e-3;
export const MTP_DRAFT_EMBED_STD = 32;

/** Every tensor of spec §2 for `cfg`, in file order (F32 first, then BF16; stable otherwise). */
export function planTensors(cfg: Config, dtype: WeightDtype, mtpDrafts = false): PlannedTensor[] {
  const D = cfg.hidden_size, V = cfg.vocab_size, L = cfg.num_hidden_layers, H = cfg.num_attention_heads;
  const dn = cfg.qk_nope_head_dim, dr = cfg.qk_rope_head_dim, dv = cfg.v_head_dim;
  const qlr = cfg.q_lora_rank, kvr = cfg.kv_lora_rank, E = cfg.n_routed_experts, I = cfg.moe_intermediate_size;
  const Ish = cfg.n_shared_experts * I, nh = cfg.index_n_heads, hd = cfg.index_head_dim;
  const mat: GenDtype = dtype === "bf16" ? "BF16" : "F32";
  const out: PlannedTensor[] = [];
  const m = (name: string, shape: number[], init: Init) => out.push({ name, dtype: mat, shape, init });
  const v = (name: string, shape: number[], init: Init, stream?: string) => out.push({ name, dtype: "F32", shape, init, stream });

  const layer = (i: number, kind: "dense" | "moe", indexer: boolean, mtp: boolean) => {
    const p = `model.layers.${i}`;
    const res = mtp && mtpDrafts ? MTP_DRAFT_RESIDUAL_SCALE : 1;
    if (mtp) {
      v(`${p}.enorm.weight`, [D], mtpDrafts ? ONE : NORM);
      v(`${p}.hnorm.weight`, [D], NORM);
      m(`${p}.eh_proj.weight`, [D, 2 * D], mtpDrafts ? { kind: "eye_left", noise: MTP_DRAFT_EH_NOISE } : proj(2 * D));
    }
    v(`${p}.input_layernorm.weight`, [D], NORM);
    if (qlr === null) {
      if (indexer) throw new ModelError("q_lora_rank null (plain q_proj) cannot feed the DSA indexer (wq_b reads the q_a latent)", { file: "config.json", field: "q_lora_rank" });
      m(`${p}.self_attn.q_proj.weight`, [H * (dn + dr), D], proj(D));
    } else {
      m(`${p}.self_attn.q_a_proj.weight`, [qlr, D], proj(D));
      v(`${p}.self_attn.q_a_layernorm.weight`, [qlr], NORM);
      m(`${p}.self_attn.q_b_proj.weight`, [H * (dn + dr), qlr], proj(qlr));
    }
    m(`${p}.self_attn.kv_a_proj_with_mqa.weight`, [kvr + dr, D], proj(D));
    v(`${p}.self_attn.kv_a_layernorm.weight`, [kvr], NORM);
    m(`${p}.self_attn.kv_b_proj.weight`, [H * (dn + dv), kvr], proj(kvr));
    m(`${p}.self_attn.o_proj.weight`, [D, H * dv], proj(H * dv, res));
    if (indexer) {
      m(`${p}.self_attn.indexer.wq_b.weight`, [nh * hd, qlr ?? 0], proj(qlr ?? 1));
      m(`${p}.self_attn.indexer.wk.weight`, [hd, D], proj(D));
      v(`${p}.self_attn.indexer.k_norm.weight`, [hd], NORM);
      v(`${p}.self_attn.indexer.k_norm.bias`, [hd], { kind: "normal", std: 0.02 });
      m(`${p}.self_attn.indexer.weights_proj.weight`, [nh, D], proj(D));
    }
    v(`${p}.post_attention_layernorm.weight`, [D], NORM);
    if (kind === "dense") {
      const F = cfg.intermediate_size;
      m(`${p}.mlp.gate_proj.weight`, [F, D], proj(D));
      m(`${p}.mlp.up_proj.weight`, [F, D], proj(D));
      m(`${p}.mlp.down_proj.weight`, [D, F], proj(F));
    } else {
      m(`${p}.mlp.gate.weight`, [E, D], proj(D)); // router ~ N(0, 1/D)
      v(`${p}.mlp.gate.e_score_correction_bias`, [E], { kind: "normal", std: 0.01 }); // F32 even in bf16 models
      for (let e = 0; e < E; e++) {
        m(`${p}.mlp.experts.${e}.gate_proj.weight`, [I, D], proj(D));
        m(`${p}.mlp.experts.${e}.up_proj.weight`, [I, D], proj(D));
        m(`${p}.mlp.experts.${e}.down_proj.weight`, [D, I], proj(I, res));
      }
      if (Ish > 0) {
        m(`${p}.mlp.shared_experts.gate_proj.weight`, [Ish, D], proj(D));
        m(`${p}.mlp.shared_experts.up_proj.weight`, [Ish, D], proj(D));
        m(`${p}.mlp.shared_experts.down_proj.weight`, [D, Ish], proj(Ish, res));
      }
    }
    if (mtp) v(`${p}.shared_head.norm.weight`, [D], NORM, mtpDrafts ? "model.norm.weight" : undefined);
  };

  m("model.embed_tokens.weight", [V, D], { kind: "normal", std: mtpDrafts ? MTP_DRAFT_EMBED_STD : 1 });
  // Indexer weights on `full` layers and on the MTP layer (as in the real checkpoints), if DSA is on.
  for (let i = 0; i < L; i++) layer(i, cfg.layer_kinds[i], cfg.has_dsa && cfg.indexer_types[i] === "full", false);
  for (let j = 0; j < cfg.num_nextn_predict_layers; j++) layer(L + j, "moe", cfg.has_dsa, true);
  v("model.norm.weight", [D], NORM);
  m("lm_head.weight", [V, D], proj(D));
  return [...out.filter((t) => t.dtype === "F32"), ...out.filter((t) => t.dtype !== "F32")];
}

export interface ModelPlan {
  raw: Record<string, unknown>;
  config: Config;
  dtype: WeightDtype;
  tensors: PlannedTensor[];
  /** bytes of tensor data (without the safetensors header) */
  dataBytes: number;
}

/** Dry run: the config and the tensor plan, no weights. Validates with parseConfig. */
export function planModel(opts: MakeModelOptions): ModelPlan {
  const raw = buildRawConfig(opts);
  const config = parseConfig(raw, undefined, "config.json");
  const dtype = opts.dtype ?? defaultDtype(opts.preset);
  const tensors = planTensors(config, dtype, opts.mtpDrafts ?? false);
  return { raw, config, dtype, tensors, dataBytes: tensors.reduce((a, t) => a + tensorBytes(t), 0) };
}

export interface MadeModel extends ModelPlan {
  dir: string;
  fileBytes: number;
}

/** Write a complete model directory (config, generation config, tokenizer, weights) to `outDir`. */
export function makeModel(outDir: string, opts: MakeModelOptions, onTensor?: (i: number, t: PlannedTensor) => void): MadeModel {
  if (!Number.isSafeInteger(opts.seed) || opts.seed < 0) throw new ModelError(`must be a non-negative integer, got ${opts.seed}`, { field: "seed" });
  const plan = planModel(opts);
  const cfg = plan.config;
  const tokenizer = makeTokenizerJson(cfg.vocab_size); // before any file is written: may reject vocab_size
  mkdirSync(outDir, { recursive: true });
  const json = (name: string, v: unknown) => writeFileSync(join(outDir, name), JSON.stringify(v, null, 2) + "\n");
  json("config.json", plan.raw);
  json("generation_config.json", {
    _from_model_config: true, bos_token_id: plan.raw.bos_token_id, eos_token_id: plan.raw.eos_token_id,
    pad_token_id: plan.raw.pad_token_id, do_sample: true, temperature: 1.0, top_p: 0.95,
  });
  json("tokenizer.json", tokenizer);
  json("tokenizer_config.json", makeTokenizerConfig(cfg.max_position_embeddings));
  const meta: Record<string, string> = {
    format: "pt", generator: "hummingbird make-model", preset: opts.preset, seed: String(opts.seed),
    dtype: plan.dtype, mtp_drafts: String(opts.mtpDrafts ?? false),
  };
  // Streaming: each tensor's bytes are generated only when the writer reaches it.
  const path = join(outDir, "model.safetensors");
  writeSafetensors(path, plan.tensors.map((t, i) => ({
    name: t.name, dtype: t.dtype, shape: t.shape,
    data: () => {
      const d = tensorData(t, opts.seed);
      onTensor?.(i, t);
      return d;
    },
  })), meta);
  const fileBytes = statSync(path).size;
  return { ...plan, dir: outDir, fileBytes };
}
