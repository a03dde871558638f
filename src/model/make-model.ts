// Random-model generator: the tensor plan of spec §2 for a config from make-config.ts (presets and
// `--set` overrides; dry run: names/shapes/dtypes/inits without any weights) and the writer of a full HF
// model directory, streamed chunk by chunk (float, or directly quantized: make-stream.ts). Stateless; the only
// state is the output directory it writes.
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseConfig, type Config } from "./config.ts";
import { ModelError } from "./errors.ts";
import { buildRawConfig, defaultDtype, type MakeModelOptions, type WeightDtype } from "./make-config.ts";
import { makeTokenizerConfig, makeTokenizerJson } from "./make-tokenizer.ts";
import { type GenDtype, type Init, type PlannedTensor } from "./make-weights.ts";
import { quantStamps, tensorChunks, writtenTensors, type WrittenTensor } from "./make-stream.ts";
import { writeSafetensors } from "./safetensors.ts";

export {
  buildRawConfig, defaultDtype, type MakeModelOptions, type Preset, PRESET_NAMES, PRESETS, type WeightDtype,
} from "./make-config.ts";

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
  /** the tensors as written (= tensors unless quantized: then `name` U8 + `name.qs` F32 for the quantized ones) */
  written: WrittenTensor[];
  /** bytes of tensor data written (without the safetensors header) */
  dataBytes: number;
}

/** the generated models' generation_config.json (GLM's sampling defaults: temperature 1, top_p 0.95) */
const generationConfig = (raw: Record<string, unknown>) => ({
  _from_model_config: true, bos_token_id: raw.bos_token_id, eos_token_id: raw.eos_token_id,
  pad_token_id: raw.pad_token_id, do_sample: true, temperature: 1.0, top_p: 0.95,
});

/** Dry run: the config and the tensor plan, no weights. Validates with parseConfig. */
export function planModel(opts: MakeModelOptions): ModelPlan {
  const raw = buildRawConfig(opts);
  const config = parseConfig(raw, generationConfig(raw), "config.json");
  const dtype = opts.dtype ?? defaultDtype(opts.preset);
  const tensors = planTensors(config, dtype, opts.mtpDrafts ?? false), written = writtenTensors(tensors, opts.quant);
  return { raw, config, dtype, tensors, written, dataBytes: written.reduce((a, t) => a + t.bytes, 0) };
}

export interface MadeModel extends ModelPlan {
  dir: string;
  fileBytes: number;
}

/** Write a complete model directory (config, generation config, tokenizer, weights) to `outDir`; `onBytes` after each
 *  chunk written (bytes so far, the tensor's name). */
export function makeModel(outDir: string, opts: MakeModelOptions, onBytes?: (done: number, name: string) => void): MadeModel {
  if (!Number.isSafeInteger(opts.seed) || opts.seed < 0) throw new ModelError(`must be a non-negative integer, got ${opts.seed}`, { field: "seed" });
  const plan = planModel(opts);
  const cfg = plan.config;
  const tokenizer = makeTokenizerJson(cfg.vocab_size); // before any file is written: may reject vocab_size
  mkdirSync(outDir, { recursive: true });
  const json = (name: string, v: unknown) => writeFileSync(join(outDir, name), JSON.stringify(v, null, 2) + "\n");
  json("config.json", plan.raw);
  json("generation_config.json", generationConfig(plan.raw));
  json("tokenizer.json", tokenizer);
  json("tokenizer_config.json", makeTokenizerConfig(cfg.max_position_embeddings));
  const meta: Record<string, string> = {
    format: "pt", generator: "hummingbird make-model", preset: opts.preset, seed: String(opts.seed),
    dtype: plan.dtype, mtp_drafts: String(opts.mtpDrafts ?? false), ...quantStamps(plan.written),
  };
  // Streaming: each tensor's bytes are generated chunk by chunk only when the writer reaches it.
  const path = join(outDir, "model.safetensors");
  let done = 0;
  writeSafetensors(path, plan.written.map((t) => ({
    name: t.name, dtype: t.dtype, shape: t.shape,
    data: function* () {
      for (const c of tensorChunks(t, opts.seed)) { yield c; onBytes?.(done += c.byteLength, t.name); }
    },
  })), meta);
  const fileBytes = statSync(path).size;
  return { ...plan, dir: outDir, fileBytes };
}
