// Random-model configs: the presets (`tiny` = the shared fixture's shape, `bench` = a 1.6 GiB bf16 MoE
// for benchmarks, `glm5-slice` = GLM-5's exact widths over a few layers) and `--set` overrides with the derived keys recomputed, as the config.json object
// make-model.ts writes. Stateless.
import { indexerTypesFromFreq } from "./config.ts";
import { ModelError } from "./errors.ts";
import type { QFormat } from "./formats.ts";

export type Preset = "tiny" | "bench" | "glm5-slice";
export type WeightDtype = "f32" | "bf16";
export const PRESET_NAMES: readonly Preset[] = ["tiny", "bench", "glm5-slice"];

export interface MakeModelOptions {
  preset: Preset;
  seed: number;
  /** default: f32 for tiny, bf16 for bench */
  dtype?: WeightDtype;
  /** config overrides applied before derivation; keys may be dotted (`rope_parameters.rope_theta`) */
  set?: Record<string, unknown>;
  /** make the MTP head a good drafter (see MTP_DRAFT_* below) */
  mtpDrafts?: boolean;
  /** write matrices directly quantized (random codes + scales, make-stream.ts) as `convert --experts/--dense` would
   *  store them; the embedding stays float, the router F32 */
  quant?: { experts: QFormat; dense: QFormat };
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
  // GLM-5's widths (spec §1 "Real GLM-5 family values"); layers: layer 0 dense, the rest MoE, + the MTP layer
  "glm5-slice": {
    ...COMMON, vocab_size: 154880, hidden_size: 6144, intermediate_size: 12288, moe_intermediate_size: 2048,
    num_hidden_layers: 2, num_attention_heads: 64, q_lora_rank: 2048, kv_lora_rank: 512,
    qk_nope_head_dim: 192, qk_rope_head_dim: 64, v_head_dim: 256, n_routed_experts: 256, num_experts_per_tok: 8,
    rope_parameters: { rope_type: "default", rope_theta: 1000000 }, index_n_heads: 32, index_head_dim: 128,
    index_topk: 2048, index_topk_freq: 1, index_skip_topk_offset: 2, max_position_embeddings: 202752,
  },
};

export function defaultDtype(preset: Preset): WeightDtype {
  return preset === "tiny" ? "f32" : "bf16";
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
