// config.json parsing: the fixture, derived layer plans (indexer freq/offset, pattern), defaults,
// generation_config eos merge, and hostile values for every key (the error names the key).
import { afterAll, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { indexerTypesFromFreq, loadConfig, parseConfig } from "../src/model/config.ts";
import { ModelError } from "../src/model/errors.ts";

const FIXTURE = join(import.meta.dir, "../../shared/fixtures/glm-tiny");
const hasFixture = fs.existsSync(join(FIXTURE, "config.json"));
if (!hasFixture) console.warn(`config.test: ${FIXTURE} is absent; skipping the fixture test`);

// the fixture's config (kept here so the hostile tests run without ../shared)
const BASE = {
  model_type: "glm_moe_dsa", vocab_size: 512, hidden_size: 64, intermediate_size: 128, moe_intermediate_size: 32,
  num_hidden_layers: 4, num_nextn_predict_layers: 1, first_k_dense_replace: 1, mlp_layer_types: ["dense", "sparse", "sparse", "sparse"],
  moe_layer_freq: 1, num_attention_heads: 4, num_key_value_heads: 4, q_lora_rank: 32, kv_lora_rank: 32, qk_nope_head_dim: 16,
  qk_rope_head_dim: 8, qk_head_dim: 24, head_dim: 8, v_head_dim: 16, n_routed_experts: 16, num_experts_per_tok: 4,
  n_shared_experts: 1, n_group: 1, topk_group: 1, topk_method: "noaux_tc", scoring_func: "sigmoid", norm_topk_prob: true,
  routed_scaling_factor: 2.5, hidden_act: "silu", rms_norm_eps: 1e-5, rope_parameters: { rope_type: "default", rope_theta: 10000.0 },
  rope_theta: 10000.0, rope_interleave: true, indexer_rope_interleave: true, index_n_heads: 4, index_head_dim: 16, index_topk: 8,
  index_topk_freq: 2, index_skip_topk_offset: 1, indexer_types: ["full", "shared", "full", "shared"], max_position_embeddings: 4096,
  attention_bias: false, tie_word_embeddings: false, eos_token_id: [1, 2, 5],
} as Record<string, unknown>;

const dir = fs.mkdtempSync(join(tmpdir(), "hb-cfg-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function err(fn: () => unknown): ModelError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ModelError);
    return e as ModelError;
  }
  throw new Error("expected a ModelError");
}
const withKey = (patch: Record<string, unknown>, drop: string[] = []) => {
  const c: Record<string, unknown> = { ...BASE, ...patch };
  for (const k of drop) delete c[k];
  return c;
};
/** parse must fail naming `field` (as the error's field and in the message after the file). */
function rejects(patch: Record<string, unknown>, field: string, drop: string[] = []) {
  const e = err(() => parseConfig(withKey(patch, drop)));
  expect(e.field).toBe(field);
  expect(e.message.startsWith(`config.json: ${field}: `)).toBe(true);
  return e;
}

describe.skipIf(!hasFixture)("fixture", () => {
  test("glm-tiny config parses with the derived plans", () => {
    const c = loadConfig(FIXTURE);
    expect(c.model_type).toBe("glm_moe_dsa");
    expect(c.layer_kinds).toEqual(["dense", "moe", "moe", "moe"]);
    expect(c.indexer_types).toEqual(["full", "shared", "full", "shared"]);
    expect(c.has_dsa).toBe(true);
    expect([c.index_topk, c.index_n_heads, c.index_head_dim]).toEqual([8, 4, 16]);
    expect(c.attn_scale).toBeCloseTo(1 / Math.sqrt(24), 12);
    expect(c.stop_ids).toEqual([1, 2, 5]);
    expect(c.rope_theta).toBe(10000);
    expect(c.num_nextn_predict_layers).toBe(1);
  });
});

describe("derived fields", () => {
  test("embedded base equals the fixture's config when present", () => {
    if (hasFixture) expect(parseConfig(BASE)).toEqual(loadConfig(FIXTURE));
    expect(parseConfig(BASE).layer_kinds).toEqual(["dense", "moe", "moe", "moe"]);
  });

  test("freq/offset formula: GLM-5.2 (78 layers, freq 4, offset 3)", () => {
    const want = [0, 1, 2, ...Array.from({ length: 18 }, (_, k) => 6 + 4 * k)];
    expect(want[want.length - 1]).toBe(74);
    const c = parseConfig(withKey({ num_hidden_layers: 78, index_topk_freq: 4, index_skip_topk_offset: 3, mlp_layer_types: null, first_k_dense_replace: 3 }, ["indexer_types"]));
    const full = c.indexer_types.flatMap((t, i) => (t === "full" ? [i] : []));
    expect(full).toEqual(want);
    expect(full.length).toBe(21);
    expect(c.layer_kinds.slice(0, 4)).toEqual(["dense", "dense", "dense", "moe"]);
    // defaults: freq 1 → all full; the fixture's freq 2 offset 1 reproduces its list
    expect(indexerTypesFromFreq(5, 1, 2)).toEqual(Array(5).fill("full"));
    expect(indexerTypesFromFreq(4, 2, 1)).toEqual(["full", "shared", "full", "shared"]);
    rejects({ index_topk_freq: 2, index_skip_topk_offset: 0 }, "index_skip_topk_offset", ["indexer_types"]);
  });

  test("index_topk_pattern", () => {
    expect(parseConfig(withKey({ index_topk_pattern: "FFSF" }, ["indexer_types"])).indexer_types).toEqual(["full", "full", "shared", "full"]);
    rejects({ index_topk_pattern: "FFS" }, "index_topk_pattern", ["indexer_types"]);
    rejects({ index_topk_pattern: "SFFF" }, "index_topk_pattern", ["indexer_types"]);
    rejects({ index_topk_pattern: "FXFF" }, "index_topk_pattern", ["indexer_types"]);
    // the list wins over the pattern
    expect(parseConfig(withKey({ index_topk_pattern: "FFFF" })).indexer_types).toEqual(["full", "shared", "full", "shared"]);
  });

  test("layer kinds: mlp_layer_types wins, else first_k_dense_replace", () => {
    expect(parseConfig(withKey({ mlp_layer_types: ["dense", "moe", "dense", "sparse"] })).layer_kinds).toEqual(["dense", "moe", "dense", "moe"]);
    expect(parseConfig(withKey({ first_k_dense_replace: 2 }, ["mlp_layer_types"])).layer_kinds).toEqual(["dense", "dense", "moe", "moe"]);
    rejects({ first_k_dense_replace: 5 }, "first_k_dense_replace", ["mlp_layer_types"]);
    rejects({ mlp_layer_types: ["dense", "moe"] }, "mlp_layer_types");
    rejects({ mlp_layer_types: ["dense", "moe", "moe", "mixture"] }, "mlp_layer_types[3]");
  });

  test("defaults and fallbacks", () => {
    const c = parseConfig(withKey({}, ["norm_topk_prob", "routed_scaling_factor", "n_group", "topk_group", "rope_parameters", "rope_theta", "q_lora_rank", "index_topk", "index_n_heads", "index_head_dim", "eos_token_id"]));
    expect([c.norm_topk_prob, c.routed_scaling_factor, c.n_group, c.topk_group, c.rope_theta]).toEqual([true, 2.5, 1, 1, 10000]);
    expect(c.q_lora_rank).toBe(null);
    expect([c.has_dsa, c.index_topk, c.index_n_heads, c.index_head_dim]).toEqual([false, 0, 0, 0]);
    expect(c.stop_ids).toEqual([]);
    expect(parseConfig(withKey({ rope_theta: 5e5 }, ["rope_parameters"])).rope_theta).toBe(5e5);
    expect(parseConfig(withKey({ rope_theta: 5e5, rope_parameters: { rope_theta: 8e6 } })).rope_theta).toBe(8e6);
    expect(parseConfig(withKey({ q_lora_rank: null, index_topk: 0 })).q_lora_rank).toBe(null);
    expect(parseConfig(withKey({ eos_token_id: 3 })).stop_ids).toEqual([3]);
  });

  test("generation_config eos merges into stop_ids", () => {
    expect(parseConfig(BASE, { eos_token_id: [7, 1] }).stop_ids).toEqual([1, 2, 5, 7]);
    expect(parseConfig(BASE, { eos_token_id: 9, do_sample: true }).stop_ids).toEqual([1, 2, 5, 9]);
    const e = err(() => parseConfig(BASE, { eos_token_id: "2" }));
    expect(e.file).toBe("generation_config.json");
    expect(e.field).toBe("eos_token_id");
    expect(err(() => parseConfig(BASE, { eos_token_id: [600] })).message).toContain("generation_config.json: eos_token_id");
    expect(err(() => parseConfig(BASE, [1])).file).toBe("generation_config.json");
  });

  test("generation_config sampling parameters become the served defaults; bad ones name the key", () => {
    expect(parseConfig(BASE).sampling).toEqual({});
    expect(parseConfig(BASE, { temperature: 0.6, top_p: 0.95, top_k: 20, min_p: 0, repetition_penalty: 1.1, do_sample: true, max_new_tokens: 9 }).sampling)
      .toEqual({ temperature: 0.6, top_p: 0.95, top_k: 20, min_p: 0, repetition_penalty: 1.1 });
    for (const [k, v] of [["temperature", -1], ["top_p", 0], ["top_k", 1.5], ["min_p", 2], ["repetition_penalty", 0], ["temperature", "hot"]] as const) {
      const e = err(() => parseConfig(BASE, { [k]: v }));
      expect([e.file, e.field]).toEqual(["generation_config.json", k]);
    }
  });
});

describe("hostile values name the key", () => {
  const ints: [string, number][] = [
    ["vocab_size", 4 * 1024 * 1024], ["hidden_size", 65536], ["num_hidden_layers", 512], ["num_attention_heads", 1024],
    ["num_key_value_heads", 1024], ["q_lora_rank", 65536], ["kv_lora_rank", 65536], ["qk_nope_head_dim", 65536],
    ["qk_rope_head_dim", 65536], ["v_head_dim", 65536], ["intermediate_size", 1 << 20], ["moe_intermediate_size", 1 << 20],
    ["n_routed_experts", 4096], ["num_experts_per_tok", 4096], ["n_shared_experts", 64], ["n_group", 4096], ["topk_group", 4096],
    ["index_topk", 1 << 20], ["index_n_heads", 1024], ["index_head_dim", 65536], ["index_topk_freq", 512],
    ["index_skip_topk_offset", 512], ["first_k_dense_replace", 512], ["moe_layer_freq", 512], ["num_nextn_predict_layers", 16],
    ["max_position_embeddings", 1 << 24], ["qk_head_dim", 131072],
  ];
  const nullable = new Set(["q_lora_rank", "n_shared_experts", "n_group", "topk_group", "index_topk", "index_n_heads", "index_head_dim",
    "index_topk_freq", "index_skip_topk_offset", "first_k_dense_replace", "moe_layer_freq", "num_nextn_predict_layers"]);
  for (const [key, cap] of ints) {
    test(key, () => {
      expect(rejects({ [key]: 99999999 }, key).message).toContain(`must be ≤ ${cap} (got 99999999)`);
      expect(rejects({ [key]: -1 }, key).message).toContain("(got -1)");
      expect(rejects({ [key]: "64" }, key).message).toContain('(got "64")');
      expect(rejects({ [key]: 1.5 }, key).message).toMatch(/integer|must be ≥/);
      expect(rejects({ [key]: 2 ** 60 }, key).message).toContain(key);
      expect(rejects({ [key]: [4] }, key).message).toContain(key);
      if (!nullable.has(key)) rejects({ [key]: null }, key);
    });
  }
  test("missing required keys", () => {
    for (const key of ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "kv_lora_rank", "qk_nope_head_dim",
      "qk_rope_head_dim", "v_head_dim", "intermediate_size", "moe_intermediate_size", "n_routed_experts", "num_experts_per_tok", "model_type"]) {
      expect(rejects({}, key, [key]).message).toContain("is required");
    }
  });
  test("floats", () => {
    expect(rejects({ hidden_size: 99999999 }, "hidden_size").message).toBe("config.json: hidden_size: must be ≤ 65536 (got 99999999)");
    for (const key of ["rms_norm_eps", "routed_scaling_factor", "rope_theta"]) {
      rejects({ [key]: 0 }, key);
      rejects({ [key]: -1e-5 }, key);
      rejects({ [key]: "1e-5" }, key);
      rejects({ [key]: 1e300 }, key);
      rejects({ [key]: null }, key);
    }
    rejects({ rope_parameters: { rope_theta: -1 } }, "rope_parameters.rope_theta");
    rejects({ rope_parameters: { rope_type: "yarn", factor: 40 } }, "rope_parameters.rope_type");
    rejects({ rope_scaling: { type: "yarn", factor: 40 } }, "rope_scaling.type");
    rejects({ rope_parameters: "x" }, "rope_parameters");
  });
  test("other types and enums", () => {
    rejects({ model_type: "llama" }, "model_type");
    expect(parseConfig(withKey({ model_type: "deepseek_v3" })).model_type).toBe("deepseek_v3");
    rejects({ norm_topk_prob: "yes" }, "norm_topk_prob");
    rejects({ indexer_types: ["full", "half", "full", "shared"] }, "indexer_types[1]");
    rejects({ indexer_types: "full" }, "indexer_types");
    rejects({ eos_token_id: "1" }, "eos_token_id");
    rejects({ eos_token_id: [1, -2] }, "eos_token_id[1]");
    rejects({ eos_token_id: 512 }, "eos_token_id");
    rejects({ hidden_act: "gelu" }, "hidden_act");
    rejects({ attention_bias: true }, "attention_bias");
    rejects({ scoring_func: "softmax" }, "scoring_func");
    rejects({ rope_interleave: false }, "rope_interleave");
    expect(err(() => parseConfig([1, 2])).message).toContain("config.json");
    expect(err(() => parseConfig(null)).message).toContain("config.json");
  });
  test("cross-field checks", () => {
    rejects({ num_experts_per_tok: 17 }, "num_experts_per_tok");
    rejects({ topk_group: 2 }, "topk_group");
    rejects({ n_group: 3 }, "n_group");
    rejects({ n_group: 16, topk_group: 1 }, "n_group"); // 1 expert per group
    rejects({ n_group: 4, topk_group: 1, num_experts_per_tok: 5 }, "num_experts_per_tok");
    expect(parseConfig(withKey({ n_group: 4, topk_group: 2 })).n_group).toBe(4);
    rejects({ qk_rope_head_dim: 7, qk_head_dim: 23 }, "qk_rope_head_dim");
    rejects({ qk_rope_head_dim: 32, qk_head_dim: 48 }, "qk_rope_head_dim"); // > index_head_dim 16
    rejects({ qk_head_dim: 25 }, "qk_head_dim");
    rejects({ num_key_value_heads: 1 }, "num_key_value_heads");
    rejects({ indexer_types: ["full", "shared"] }, "indexer_types");
    rejects({ indexer_types: ["shared", "full", "full", "shared"] }, "indexer_types");
    rejects({ index_n_heads: 0 }, "index_n_heads");
    rejects({}, "index_head_dim", ["index_head_dim"]);
    rejects({ q_lora_rank: null }, "q_lora_rank");
  });
});

describe("loadConfig files", () => {
  test("bad JSON, non-object JSON, missing file name the file", () => {
    const d = join(dir, "m");
    fs.mkdirSync(d);
    const f = join(d, "config.json");
    expect(err(() => loadConfig(d)).message).toContain(f);
    fs.writeFileSync(f, "{ bad json");
    let e = err(() => loadConfig(d));
    expect(e.file).toBe(f);
    expect(e.field).toBe("json");
    fs.writeFileSync(f, "[1]");
    expect(err(() => loadConfig(d)).file).toBe(f);
    fs.writeFileSync(f, '{"hidden_size": 64, "hidden_size": 99999999}');
    expect(err(() => loadConfig(d)).field).toBe("hidden_size");
    fs.writeFileSync(f, JSON.stringify(BASE));
    expect(loadConfig(d).stop_ids).toEqual([1, 2, 5]);
    const g = join(d, "generation_config.json");
    fs.writeFileSync(g, JSON.stringify({ eos_token_id: [3] }));
    expect(loadConfig(d).stop_ids).toEqual([1, 2, 3, 5]);
    fs.writeFileSync(g, "nope");
    e = err(() => loadConfig(d));
    expect(e.file).toBe(g);
    fs.writeFileSync(f, JSON.stringify({ ...BASE, hidden_size: 99999999 }));
    fs.rmSync(g);
    expect(err(() => loadConfig(d)).message).toBe(`${f}: hidden_size: must be ≤ 65536 (got 99999999)`);
  });
});
