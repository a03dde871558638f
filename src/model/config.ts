// config.json (+ generation_config.json) → Config: every key of spec §1 range-checked with zod, then
// cross-field checks and the derived per-layer plans (layer_kinds, indexer_types). Stateless.
// Every failure is a ModelError whose field is the offending key path.
import { join } from "node:path";
import * as fs from "node:fs";
import { z } from "zod";
import { fromZod, ModelError, readJsonFile, show } from "./errors.ts";

export interface Config {
  model_type: string; vocab_size: number; hidden_size: number; num_hidden_layers: number;
  num_attention_heads: number; q_lora_rank: number | null; kv_lora_rank: number;
  qk_nope_head_dim: number; qk_rope_head_dim: number; v_head_dim: number;
  intermediate_size: number; moe_intermediate_size: number; n_routed_experts: number;
  num_experts_per_tok: number; n_shared_experts: number; n_group: number; topk_group: number;
  norm_topk_prob: boolean; routed_scaling_factor: number; rms_norm_eps: number; rope_theta: number;
  index_topk: number; index_n_heads: number; index_head_dim: number; // 0 when the model has no indexer
  num_nextn_predict_layers: number; max_position_embeddings: number;
  // derived
  layer_kinds: ("dense" | "moe")[]; // mlp_layer_types wins, else first_k_dense_replace (+ moe_layer_freq)
  indexer_types: ("full" | "shared")[]; // list, else index_topk_pattern "FS..", else freq/offset formula
  has_dsa: boolean; // index_topk > 0 (indexer dims then required)
  attn_scale: number; // 1/sqrt(qk_nope+qk_rope)
  stop_ids: number[]; // eos_token_id (int|list) ∪ generation_config eos, sorted
  sampling: SamplingDefaults; // generation_config.json's sampling parameters
}

const MAX_VOCAB = 4 * 1024 * 1024, MAX_LAYERS = 512, MAX_DIM = 65536, MAX_INTER = 1 << 20;

const got = (i: { input?: unknown }) => `(got ${show(i.input)})`;
const num = () => z.number({ error: (i) => (i.input === undefined ? "is required" : `must be a number ${got(i)}`) });
const int = (lo: number, hi: number) =>
  num().min(lo, { error: (i) => `must be ≥ ${lo} ${got(i)}` })
    .max(hi, { error: (i) => `must be ≤ ${hi} ${got(i)}` })
    .int({ error: (i) => `must be an integer ${got(i)}` });
const pos = (hi: number) =>
  num().gt(0, { error: (i) => `must be > 0 ${got(i)}` }).max(hi, { error: (i) => `must be ≤ ${hi} ${got(i)}` });
const bool = () => z.boolean({ error: (i) => `must be true or false ${got(i)}` });
const lit = <T extends string | boolean>(v: T, why: string) => z.literal(v, { error: (i) => `must be ${JSON.stringify(v)}: ${why} ${got(i)}` });
const oneOf = <T extends string>(vals: readonly [T, ...T[]]) =>
  z.enum(vals, { error: (i) => (i.input === undefined ? "is required" : `must be one of ${vals.join(", ")} ${got(i)}`) });
const tokenIds = () =>
  z.union([int(0, MAX_VOCAB - 1), z.array(int(0, MAX_VOCAB - 1)).max(1024), z.null()], {
    error: (i) => `must be a token id, a list of them, or null ${got(i)}`,
  });
const RopeKind = z.looseObject({
  rope_type: lit("default", "only plain RoPE is supported (no YaRN / scaling)").optional(),
  type: lit("default", "only plain RoPE is supported (no YaRN / scaling)").optional(),
  rope_theta: pos(1e12).optional(),
});

const Schema = z.looseObject({
  model_type: oneOf(["glm_moe_dsa", "deepseek_v3", "deepseek_v32"]),
  vocab_size: int(1, MAX_VOCAB),
  hidden_size: int(1, MAX_DIM),
  num_hidden_layers: int(1, MAX_LAYERS),
  num_attention_heads: int(1, 1024),
  num_key_value_heads: int(1, 1024).optional(),
  q_lora_rank: int(1, MAX_DIM).nullable().optional(),
  kv_lora_rank: int(1, MAX_DIM),
  qk_nope_head_dim: int(1, MAX_DIM),
  qk_rope_head_dim: int(2, MAX_DIM),
  qk_head_dim: int(1, 2 * MAX_DIM).optional(),
  v_head_dim: int(1, MAX_DIM),
  intermediate_size: int(1, MAX_INTER),
  moe_intermediate_size: int(1, MAX_INTER),
  n_routed_experts: int(1, 4096),
  num_experts_per_tok: int(1, 4096),
  n_shared_experts: int(0, 64).nullable().optional(),
  n_group: int(1, 4096).nullable().optional(),
  topk_group: int(1, 4096).nullable().optional(),
  norm_topk_prob: bool().optional(),
  routed_scaling_factor: pos(1e6).optional(),
  rms_norm_eps: pos(1).optional(),
  rope_theta: pos(1e12).optional(),
  rope_parameters: RopeKind.nullable().optional(),
  rope_scaling: RopeKind.nullable().optional(),
  rope_interleave: lit(true, "only interleaved (GPT-J) RoPE is supported").optional(),
  indexer_rope_interleave: lit(true, "only interleaved (GPT-J) RoPE is supported").optional(),
  index_topk: int(0, 1 << 20).nullable().optional(),
  index_n_heads: int(0, 1024).nullable().optional(),
  index_head_dim: int(0, MAX_DIM).nullable().optional(),
  indexer_types: z.array(oneOf(["full", "shared"])).max(MAX_LAYERS).nullable().optional(),
  index_topk_pattern: z.string({ error: (i) => `must be a string of F/S ${got(i)}` })
    .regex(/^[FS]*$/, { error: () => "must contain only F and S" }).max(MAX_LAYERS).nullable().optional(),
  index_topk_freq: int(1, MAX_LAYERS).nullable().optional(),
  index_skip_topk_offset: int(0, MAX_LAYERS).nullable().optional(),
  first_k_dense_replace: int(0, MAX_LAYERS).nullable().optional(),
  moe_layer_freq: int(1, MAX_LAYERS).nullable().optional(),
  mlp_layer_types: z.array(oneOf(["dense", "sparse", "moe"])).max(MAX_LAYERS).nullable().optional(),
  num_nextn_predict_layers: int(0, 16).nullable().optional(),
  max_position_embeddings: int(1, 1 << 24).optional(),
  eos_token_id: tokenIds().optional(),
  hidden_act: lit("silu", "the FFN is SwiGLU").optional(),
  attention_bias: lit(false, "attention biases are not supported").optional(),
  scoring_func: lit("sigmoid", "the router is sigmoid (noaux_tc)").optional(),
  topk_method: lit("noaux_tc", "the router is sigmoid (noaux_tc)").optional(),
});
const GenSchema = z.looseObject({
  eos_token_id: tokenIds().optional(),
  // sampling defaults (served as vLLM does with --generation-config auto)
  temperature: z.number().min(0).max(100).nullish(), top_p: z.number().gt(0).max(1).nullish(), top_k: z.int().min(0).nullish(),
  min_p: z.number().min(0).max(1).nullish(), repetition_penalty: z.number().gt(0).max(100).nullish(),
});
/** the sampling parameters a model's generation_config.json names (absent keys: none) */
export interface SamplingDefaults { temperature?: number; top_p?: number; top_k?: number; min_p?: number; repetition_penalty?: number }

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const idList = (v: number | number[] | null | undefined): number[] => (v == null ? [] : Array.isArray(v) ? v : [v]);

/** `full(i) ⇔ max(i − offset + 1, 0) mod freq == 0` (spec §1). */
export function indexerTypesFromFreq(L: number, freq: number, offset: number): ("full" | "shared")[] {
  return Array.from({ length: L }, (_, i) => (Math.max(i - offset + 1, 0) % freq === 0 ? "full" : "shared"));
}

export function parseConfig(raw: unknown, gen?: unknown, file = "config.json", genFile = "generation_config.json"): Config {
  if (!isObject(raw)) throw new ModelError(`must be a JSON object (got ${show(raw)})`, { file });
  const r = Schema.safeParse(raw);
  if (!r.success) throw fromZod(r.error, { file });
  const c = r.data;
  const fail = (field: string, msg: string): never => { throw new ModelError(msg, { file, field }); };
  const L = c.num_hidden_layers, H = c.num_attention_heads, dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim;

  if (c.num_key_value_heads !== undefined && c.num_key_value_heads !== H)
    fail("num_key_value_heads", `must equal num_attention_heads ${H} for MLA (got ${c.num_key_value_heads})`);
  if (c.qk_head_dim !== undefined && c.qk_head_dim !== dn + dr)
    fail("qk_head_dim", `must equal qk_nope_head_dim + qk_rope_head_dim = ${dn + dr} (got ${c.qk_head_dim})`);
  if (dr % 2 !== 0) fail("qk_rope_head_dim", `must be even (got ${dr})`);

  const E = c.n_routed_experts, K = c.num_experts_per_tok;
  const nGroup = c.n_group ?? 1, topkGroup = c.topk_group ?? 1;
  if (K > E) fail("num_experts_per_tok", `must be ≤ n_routed_experts ${E} (got ${K})`);
  if (topkGroup > nGroup) fail("topk_group", `must be ≤ n_group ${nGroup} (got ${topkGroup})`);
  if (E % nGroup !== 0) fail("n_group", `must divide n_routed_experts ${E} (got ${nGroup})`);
  if (nGroup > 1 && E / nGroup < 2) fail("n_group", `needs ≥ 2 experts per group (got ${E / nGroup})`);
  if (K > topkGroup * (E / nGroup)) fail("num_experts_per_tok", `must be ≤ topk_group × experts per group = ${topkGroup * (E / nGroup)} (got ${K})`);

  // DSA indexer
  const topk = c.index_topk ?? 0;
  const has_dsa = topk > 0;
  const nh = has_dsa ? (c.index_n_heads ?? 0) : 0, hd = has_dsa ? (c.index_head_dim ?? 0) : 0;
  if (has_dsa) {
    if (nh === 0) fail("index_n_heads", "must be ≥ 1 when index_topk > 0");
    if (hd === 0) fail("index_head_dim", "must be ≥ 1 when index_topk > 0");
    if (dr > hd) fail("qk_rope_head_dim", `must be ≤ index_head_dim ${hd} (got ${dr})`);
    if (c.q_lora_rank == null) fail("q_lora_rank", "is required when index_topk > 0 (the indexer reads c_q)");
  }
  let indexer_types: ("full" | "shared")[];
  let itField: string;
  if (c.indexer_types != null) {
    itField = "indexer_types";
    indexer_types = c.indexer_types;
  } else if (c.index_topk_pattern != null) {
    itField = "index_topk_pattern";
    indexer_types = [...c.index_topk_pattern].map((ch) => (ch === "F" ? "full" : "shared"));
  } else {
    itField = "index_skip_topk_offset";
    indexer_types = indexerTypesFromFreq(L, c.index_topk_freq ?? 1, c.index_skip_topk_offset ?? 2);
  }
  if (indexer_types.length !== L) fail(itField, `must have num_hidden_layers = ${L} entries (got ${indexer_types.length})`);
  if (indexer_types[0] !== "full") fail(itField, "layer 0 must be a full indexer layer");

  // FFN plan
  let layer_kinds: ("dense" | "moe")[];
  if (c.mlp_layer_types != null) {
    if (c.mlp_layer_types.length !== L) fail("mlp_layer_types", `must have num_hidden_layers = ${L} entries (got ${c.mlp_layer_types.length})`);
    layer_kinds = c.mlp_layer_types.map((t) => (t === "dense" ? "dense" : "moe"));
  } else {
    const k = c.first_k_dense_replace ?? Math.min(3, L), freq = c.moe_layer_freq ?? 1;
    if (k > L) fail("first_k_dense_replace", `must be ≤ num_hidden_layers ${L} (got ${k})`);
    layer_kinds = Array.from({ length: L }, (_, i) => (i >= k && i % freq === 0 ? "moe" : "dense"));
  }

  // stop ids
  let genEos: number[] = [];
  const sampling: SamplingDefaults = {};
  if (gen !== undefined) {
    if (!isObject(gen)) throw new ModelError(`must be a JSON object (got ${show(gen)})`, { file: genFile });
    const g = GenSchema.safeParse(gen);
    if (!g.success) throw fromZod(g.error, { file: genFile });
    genEos = idList(g.data.eos_token_id);
    for (const k of ["temperature", "top_p", "top_k", "min_p", "repetition_penalty"] as const) if (g.data[k] != null) sampling[k] = g.data[k];
    for (const id of genEos) if (id >= c.vocab_size) throw new ModelError(`id ${id} is ≥ vocab_size ${c.vocab_size}`, { file: genFile, field: "eos_token_id" });
  }
  const eos = idList(c.eos_token_id);
  for (const id of eos) if (id >= c.vocab_size) fail("eos_token_id", `id ${id} is ≥ vocab_size ${c.vocab_size}`);
  const stop_ids = [...new Set([...eos, ...genEos])].sort((a, b) => a - b);

  const rope_theta = c.rope_parameters?.rope_theta ?? c.rope_theta ?? 10000;
  return {
    model_type: c.model_type, vocab_size: c.vocab_size, hidden_size: c.hidden_size, num_hidden_layers: L,
    num_attention_heads: H, q_lora_rank: c.q_lora_rank ?? null, kv_lora_rank: c.kv_lora_rank,
    qk_nope_head_dim: dn, qk_rope_head_dim: dr, v_head_dim: c.v_head_dim,
    intermediate_size: c.intermediate_size, moe_intermediate_size: c.moe_intermediate_size, n_routed_experts: E,
    num_experts_per_tok: K, n_shared_experts: c.n_shared_experts ?? 1, n_group: nGroup, topk_group: topkGroup,
    norm_topk_prob: c.norm_topk_prob ?? true, routed_scaling_factor: c.routed_scaling_factor ?? 2.5,
    rms_norm_eps: c.rms_norm_eps ?? 1e-6, rope_theta,
    index_topk: has_dsa ? topk : 0, index_n_heads: nh, index_head_dim: hd,
    num_nextn_predict_layers: c.num_nextn_predict_layers ?? 0, max_position_embeddings: c.max_position_embeddings ?? 4096,
    layer_kinds, indexer_types, has_dsa, attn_scale: 1 / Math.sqrt(dn + dr), stop_ids, sampling,
  };
}

const MAX_CONFIG = 16 * 1024 * 1024;

/** Read dir/config.json (+ dir/generation_config.json when present) and parse them. */
export function loadConfig(dir: string): Config {
  const file = join(dir, "config.json");
  const raw = readJsonFile(file, MAX_CONFIG);
  const genFile = join(dir, "generation_config.json");
  const gen = fs.existsSync(genFile) ? readJsonFile(genFile, MAX_CONFIG) : undefined;
  return parseConfig(raw, gen, file, genFile);
}
