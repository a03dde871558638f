// Random-model generator: presets and --set derivation (dry-run plans, incl. the full bench shape),
// written models round-trip through openModel/loadConfig, value distributions, bf16 rounding,
// determinism, the tokenizer through @huggingface/tokenizers and the chat template through jinja.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";
import { buildRawConfig, makeModel, planModel, type MakeModelOptions } from "../src/model/make-model.ts";
import { fillTensor, fromBf16, Rng, toBf16 } from "../src/model/make-weights.ts";
import { makeTokenizerJson, MIN_VOCAB, SPECIAL_TOKENS } from "../src/model/make-tokenizer.ts";
import { loadConfig } from "../src/model/config.ts";
import { ModelError } from "../src/model/errors.ts";
import { openModel, readF32 } from "../src/model/safetensors.ts";

const root = mkdtempSync(join(tmpdir(), "hb-make-model-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const made = new Map<string, string>();
function gen(opts: MakeModelOptions): string {
  const key = JSON.stringify(opts);
  if (!made.has(key)) {
    const dir = join(root, `m${n++}`);
    makeModel(dir, opts);
    made.set(key, dir);
  }
  return made.get(key)!;
}
const FIXTURE = join(import.meta.dir, "../../shared/fixtures/glm-tiny");
/** bench shrunk for speed: 2 layers (dense + MoE) + MTP, 8 experts, vocab 1024 */
const SMALL_BENCH = { num_hidden_layers: 2, vocab_size: 1024, n_routed_experts: 8 };
const T = 60_000; // per-test timeout for tests that write models (2-core CI under load)

/** Parameter count of spec §2 for a config, written independently of planTensors. */
function expectedParams(c: Record<string, any>): number {
  const D = c.hidden_size, H = c.num_attention_heads, dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, dv = c.v_head_dim;
  const q = c.q_lora_rank, kv = c.kv_lora_rank, E = c.n_routed_experts, I = c.moe_intermediate_size;
  const attn = D + q * D + q + H * (dn + dr) * q + (kv + dr) * D + kv + H * (dn + dv) * kv + D * H * dv + D;
  const idx = c.index_n_heads * c.index_head_dim * q + c.index_head_dim * D + 2 * c.index_head_dim + c.index_n_heads * D;
  const moe = E * D + E + E * 3 * I * D + 3 * c.n_shared_experts * I * D;
  const dense = 3 * c.intermediate_size * D;
  let p = 2 * c.vocab_size * D + D;
  c.mlp_layer_types.forEach((k: string, i: number) => {
    p += attn + (c.indexer_types[i] === "full" ? idx : 0) + (k === "dense" ? dense : moe);
  });
  return p + attn + idx + moe + 3 * D + 2 * D * D; // MTP: enorm, hnorm, shared_head.norm, eh_proj
}

describe("presets and plans (dry run)", () => {
  test("tiny = the fixture's config keys and shape", () => {
    const p = planModel({ preset: "tiny", seed: 0 });
    const c = p.config;
    expect([c.vocab_size, c.hidden_size, c.num_hidden_layers, c.intermediate_size]).toEqual([512, 64, 4, 128]);
    expect([c.num_attention_heads, c.q_lora_rank, c.kv_lora_rank, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim]).toEqual([4, 32, 32, 16, 8, 16]);
    expect([c.n_routed_experts, c.num_experts_per_tok, c.moe_intermediate_size, c.n_shared_experts]).toEqual([16, 4, 32, 1]);
    expect([c.index_n_heads, c.index_head_dim, c.index_topk]).toEqual([4, 16, 8]);
    expect(c.indexer_types).toEqual(["full", "shared", "full", "shared"]);
    expect(c.layer_kinds).toEqual(["dense", "moe", "moe", "moe"]);
    expect([c.rope_theta, c.rms_norm_eps, c.norm_topk_prob, c.routed_scaling_factor]).toEqual([10000, 1e-5, true, 2.5]);
    expect(c.stop_ids).toEqual([1, 2, 5]);
    expect(p.tensors.length).toBe(282);
    expect(p.dataBytes).toBe(expectedParams(p.raw) * 4);
    if (!existsSync(FIXTURE)) return console.log(`fixture comparison skipped: ${FIXTURE} absent`);
    const fx = JSON.parse(readFileSync(join(FIXTURE, "config.json"), "utf8"));
    expect(Object.keys(p.raw).sort()).toEqual(Object.keys(fx).sort());
    for (const k of Object.keys(fx)) expect([k, p.raw[k]]).toEqual([k, fx[k]]);
    const st = openModel(FIXTURE);
    try {
      expect(p.tensors.map((t) => t.name).sort()).toEqual(st.names().sort());
      for (const t of p.tensors) expect([t.name, st.get(t.name).shape]).toEqual([t.name, t.shape]);
    } finally {
      st.close();
    }
  });

  test("full bench preset: shape table without writing weights", () => {
    const p = planModel({ preset: "bench", seed: 0 });
    const c = p.config;
    expect(p.dtype).toBe("bf16");
    expect(p.raw.dtype).toBe("bfloat16");
    expect([c.vocab_size, c.hidden_size, c.num_hidden_layers, c.intermediate_size]).toEqual([8192, 1024, 8, 2816]);
    expect(c.layer_kinds).toEqual(["dense", ...Array(7).fill("moe")]);
    expect(c.indexer_types).toEqual(Array(8).fill("full"));
    expect([c.n_routed_experts, c.num_experts_per_tok, c.index_n_heads, c.index_head_dim, c.index_topk]).toEqual([64, 8, 8, 64, 128]);
    const byName = new Map(p.tensors.map((t) => [t.name, t]));
    const shape = (n: string) => byName.get(n)?.shape;
    const l = "model.layers.3.";
    expect(shape("model.embed_tokens.weight")).toEqual([8192, 1024]);
    expect(shape(l + "self_attn.q_a_proj.weight")).toEqual([512, 1024]);
    expect(shape(l + "self_attn.q_b_proj.weight")).toEqual([16 * 96, 512]);
    expect(shape(l + "self_attn.kv_a_proj_with_mqa.weight")).toEqual([256 + 32, 1024]);
    expect(shape(l + "self_attn.kv_b_proj.weight")).toEqual([16 * 128, 256]);
    expect(shape(l + "self_attn.o_proj.weight")).toEqual([1024, 16 * 64]);
    expect(shape(l + "self_attn.indexer.wq_b.weight")).toEqual([8 * 64, 512]);
    expect(shape(l + "self_attn.indexer.wk.weight")).toEqual([64, 1024]);
    expect(shape(l + "self_attn.indexer.weights_proj.weight")).toEqual([8, 1024]);
    expect(shape(l + "mlp.experts.63.down_proj.weight")).toEqual([1024, 512]);
    expect(shape("model.layers.0.mlp.gate_proj.weight")).toEqual([2816, 1024]);
    expect(shape("model.layers.8.eh_proj.weight")).toEqual([1024, 2048]);
    expect(shape("model.layers.8.mlp.experts.0.up_proj.weight")).toEqual([512, 1024]);
    expect(byName.get(l + "mlp.gate.e_score_correction_bias")?.dtype).toBe("F32");
    expect(byName.get(l + "self_attn.indexer.k_norm.bias")?.dtype).toBe("F32");
    expect(byName.get(l + "input_layernorm.weight")?.dtype).toBe("F32");
    expect(byName.get(l + "mlp.gate.weight")?.dtype).toBe("BF16");
    expect(byName.get("lm_head.weight")?.dtype).toBe("BF16");
    const mats = p.tensors.filter((t) => t.shape.length === 2);
    expect(mats.every((t) => t.dtype === "BF16")).toBe(true);
    expect(p.tensors.filter((t) => t.shape.length === 1).every((t) => t.dtype === "F32")).toBe(true);
    // F32 tensors first, so every tensor starts aligned to its element size
    const firstBf = p.tensors.findIndex((t) => t.dtype === "BF16");
    expect(p.tensors.slice(firstBf).every((t) => t.dtype === "BF16")).toBe(true);
    const vecs = p.tensors.filter((t) => t.dtype === "F32").reduce((a, t) => a + t.shape[0], 0);
    expect(p.dataBytes).toBe(2 * expectedParams(p.raw) + 2 * vecs);
    expect(p.dataBytes).toBeGreaterThan(1.5e9);
  });

  test("--set overrides and derived keys follow", () => {
    const raw = buildRawConfig({ preset: "tiny", seed: 0, set: { num_hidden_layers: 6, index_topk: 4, qk_rope_head_dim: 4, rope_theta: 5e5, first_k_dense_replace: 2 } });
    expect(raw.mlp_layer_types).toEqual(["dense", "dense", "sparse", "sparse", "sparse", "sparse"]);
    expect(raw.indexer_types).toEqual(["full", "shared", "full", "shared", "full", "shared"]);
    expect([raw.head_dim, raw.qk_head_dim, raw.index_topk]).toEqual([4, 20, 4]);
    expect(raw.rope_parameters).toEqual({ rope_type: "default", rope_theta: 5e5 });
    const p = planModel({ preset: "tiny", seed: 0, set: { num_hidden_layers: 2, "rope_parameters.rope_theta": 1e6, indexer_types: ["full", "full"] } });
    expect(p.config.rope_theta).toBe(1e6);
    expect(p.raw.rope_theta).toBe(1e6);
    expect(p.config.indexer_types).toEqual(["full", "full"]);
    expect(p.tensors.some((t) => t.name === "model.layers.1.self_attn.indexer.wk.weight")).toBe(true);
    expect(p.tensors.some((t) => t.name.startsWith("model.layers.2.eh_proj"))).toBe(true);
    const noMtp = planModel({ preset: "tiny", seed: 0, set: { num_nextn_predict_layers: 0 } });
    expect(noMtp.tensors.some((t) => t.name.startsWith("model.layers.4."))).toBe(false);
    const noDsa = planModel({ preset: "tiny", seed: 0, set: { index_topk: 0 } });
    expect(noDsa.tensors.some((t) => t.name.includes("indexer"))).toBe(false);
  });

  test("bad overrides are ModelErrors naming the field", () => {
    const field = (set: Record<string, unknown>) => {
      try {
        makeModel(join(root, "never"), { preset: "tiny", seed: 0, set });
      } catch (e) {
        expect(e).toBeInstanceOf(ModelError);
        return (e as ModelError).field;
      }
      throw new Error("no error");
    };
    expect(field({ hidden_size: "wide" })).toBe("hidden_size");
    expect(field({ num_hidden_layers: 0 })).toBe("num_hidden_layers");
    expect(field({ vocab_size: MIN_VOCAB - 1 })).toBe("vocab_size");
    expect(field({ num_experts_per_tok: 99 })).toBe("num_experts_per_tok");
    expect(field({ "__proto__.x": 1 })).toBe("__proto__.x");
    expect(existsSync(join(root, "never"))).toBe(false); // rejected before anything is written
  });
});

describe("weights", () => {
  test("bf16 rounding is round-to-nearest-even", () => {
    const f = new Float32Array(new Uint32Array([0x3f800000, 0x3f808000, 0x3f818000, 0x3f808001, 0x7fc00001, 0xff800000, 0x80000000]).buffer);
    expect([...toBf16(f)]).toEqual([0x3f80, 0x3f80, 0x3f82, 0x3f81, 0x7fc0, 0xff80, 0x8000]);
    expect(fromBf16(new Uint16Array([0x3f80, 0xc040]))).toEqual(new Float32Array([1, -3]));
  });

  test("PRNG normals have mean 0, variance 1", () => {
    const r = new Rng(42, "x");
    let s = 0, s2 = 0;
    const N = 200_000;
    for (let i = 0; i < N; i++) {
      const z = r.normal();
      s += z;
      s2 += z * z;
    }
    expect(Math.abs(s / N)).toBeLessThan(0.01);
    expect(Math.abs(s2 / N - 1)).toBeLessThan(0.02);
    // the bulk filler draws exactly what normal() draws, across odd split points
    const a = new Rng(7, "y"), b = new Rng(7, "y");
    const one = Float32Array.from({ length: 1001 }, () => a.normal());
    const bulk = new Float32Array(1001);
    b.fillNormal(bulk.subarray(0, 3), 1, 0);
    b.fillNormal(bulk.subarray(3), 1, 0);
    expect(bulk).toEqual(one);
    expect(b.normal()).toBe(a.normal());
    expect(new Rng(7, "z").normal()).not.toBe(new Rng(7, "y").normal());
    expect(new Rng(8, "y").normal()).not.toBe(new Rng(7, "y").normal());
  });

  for (const [preset, dtype, set] of [["tiny", "f32", {}], ["tiny", "bf16", {}], ["bench", "bf16", SMALL_BENCH], ["bench", "f32", SMALL_BENCH]] as const) {
    test(`${preset} ${dtype}: loads through loadConfig + openModel with the planned tensors and values`, () => {
      const opts: MakeModelOptions = { preset, seed: 11, dtype, set: { ...set } };
      const dir = gen(opts);
      const plan = planModel(opts);
      const cfg = loadConfig(dir);
      expect(cfg).toEqual(plan.config);
      const st = openModel(dir);
      try {
        expect(st.metadata.format).toBe("pt");
        expect(st.names().length).toBe(plan.tensors.length);
        for (const t of plan.tensors) {
          const info = st.get(t.name);
          expect([t.name, info.dtype, info.shape]).toEqual([t.name, t.dtype, t.shape]);
          expect(info.offset % (t.dtype === "F32" ? 4 : 2)).toBe(0);
        }
        const D = cfg.hidden_size;
        const check = (name: string, want: { mean: number; std: number }, tol = 0.1) => {
          const x = readF32(st.get(name));
          let s = 0, s2 = 0;
          for (const v of x) s += v;
          const mean = s / x.length;
          for (const v of x) s2 += (v - mean) ** 2;
          const std = Math.sqrt(s2 / x.length);
          expect([name, Math.abs(mean - want.mean) < tol * Math.max(want.std, 0.1)]).toEqual([name, true]);
          expect([name, Math.abs(std / want.std - 1) < tol]).toEqual([name, true]);
        };
        check("model.embed_tokens.weight", { mean: 0, std: 1 });
        check("model.layers.1.self_attn.q_a_proj.weight", { mean: 0, std: 1 / Math.sqrt(D) });
        check("model.layers.1.mlp.experts.0.down_proj.weight", { mean: 0, std: 1 / Math.sqrt(cfg.moe_intermediate_size) });
        check("model.layers.1.mlp.gate.weight", { mean: 0, std: 1 / Math.sqrt(D) });
        check("model.norm.weight", { mean: 1, std: 0.1 }, 0.3);
        check("model.layers.1.mlp.gate.e_score_correction_bias", { mean: 0, std: 0.01 }, 0.9);
        expect(st.get("model.layers.1.mlp.gate.e_score_correction_bias").dtype).toBe("F32");
        // the stored bytes are the planned values (bf16: rounded)
        const t = plan.tensors.find((p) => p.name === "model.layers.0.self_attn.kv_b_proj.weight")!;
        const want = fillTensor(t, 11);
        expect(readF32(st.get(t.name))).toEqual(dtype === "bf16" ? fromBf16(toBf16(want)) : want);
      } finally {
        st.close();
      }
    }, T);
  }

  test("same seed → identical bytes; different seed → different weights, same config", () => {
    const a = gen({ preset: "tiny", seed: 5 });
    const b = join(root, "again");
    makeModel(b, { preset: "tiny", seed: 5 });
    const c = gen({ preset: "tiny", seed: 6 });
    for (const f of ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"])
      expect([f, Bun.hash(readFileSync(join(a, f)))]).toEqual([f, Bun.hash(readFileSync(join(b, f)))]);
    expect(readFileSync(join(c, "config.json"), "utf8")).toBe(readFileSync(join(a, "config.json"), "utf8"));
    const wa = readFileSync(join(a, "model.safetensors")), wc = readFileSync(join(c, "model.safetensors"));
    expect(wa.length).toBe(wc.length);
    expect(Bun.hash(wa)).not.toBe(Bun.hash(wc));
  }, T);

  test("--mtp-drafts: eh_proj ≈ [I | 0], tied head norm, scaled MTP residual", () => {
    const dir = gen({ preset: "tiny", seed: 2, mtpDrafts: true });
    const st = openModel(dir);
    try {
      const D = 64;
      const eh = readF32(st.get("model.layers.4.eh_proj.weight"));
      for (const [o, i, want] of [[0, 0, 1], [5, 5, 1], [5, 6, 0], [7, D + 7, 0], [63, 63, 1]])
        expect(Math.abs(eh[o * 2 * D + i] - want)).toBeLessThan(0.01);
      expect(readF32(st.get("model.layers.4.shared_head.norm.weight"))).toEqual(readF32(st.get("model.norm.weight")));
      expect(readF32(st.get("model.layers.4.enorm.weight"))).toEqual(new Float32Array(D).fill(1));
      const rms = (n: string) => Math.sqrt(readF32(st.get(n)).reduce((a, v) => a + v * v, 0) / st.get(n).numel);
      expect(rms("model.layers.4.self_attn.o_proj.weight")).toBeLessThan(0.02 * rms("model.layers.3.self_attn.o_proj.weight"));
      expect(rms("model.layers.4.mlp.experts.3.down_proj.weight")).toBeLessThan(0.02 * rms("model.layers.3.mlp.experts.3.down_proj.weight"));
      expect(rms("model.embed_tokens.weight")).toBeGreaterThan(20);
    } finally {
      st.close();
    }
  }, T);
});

describe("tokenizer and chat template", () => {
  const texts = [
    "Hello, world! The hummingbird's heart beats 1234 times a minute.",
    "naïve café — 日本語 😀\n\n  tabs\tand  trailing spaces  ",
    "<|user|>hi there<|assistant|><think></think>ok",
  ];
  for (const V of [MIN_VOCAB, 512, 8192]) {
    test(`vocab ${V}: exact size, GLM specials at 0..15, loads and round-trips`, () => {
      const tj = makeTokenizerJson(V) as { model: { vocab: Record<string, number> } };
      const ids = Object.values(tj.model.vocab).sort((a, b) => a - b);
      expect(ids).toEqual(Array.from({ length: V }, (_, i) => i));
      const tok = new Tokenizer(tj, { clean_up_tokenization_spaces: false });
      SPECIAL_TOKENS.forEach((s, i) => expect(tok.token_to_id(s)).toBe(i));
      expect(tok.token_to_id("a")).toBe(16 + 97); // byte tokens in byte order
      for (const s of texts) {
        const e = tok.encode(s);
        expect(e.ids.every((i) => i >= 0 && i < V)).toBe(true);
        expect(tok.decode(e.ids)).toBe(s);
      }
      if (V >= 512) expect(tok.encode("the hummingbird").ids.length).toBeLessThan(8); // merges do merge
    });
  }

  test("the generated directory's tokenizer files load together; template renders GLM style", () => {
    const dir = gen({ preset: "tiny", seed: 0 });
    const tj = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
    const tc = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8"));
    const tok = new Tokenizer(tj, tc);
    expect(tok.get_vocab().size).toBe(512);
    const tpl = new Template(tc.chat_template);
    const messages = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Hello." },
      { role: "user", content: "Bye" },
    ];
    expect(tpl.render({ messages, add_generation_prompt: true, enable_thinking: false })).toBe(
      "[gMASK]<sop><|system|>Be brief.<|user|>Hi<|assistant|><think></think>Hello.<|user|>Bye<|assistant|><think></think>",
    );
    expect(tpl.render({ messages: [{ role: "user", content: "x" }], add_generation_prompt: true })).toBe("[gMASK]<sop><|user|>x<|assistant|>");
    expect(tpl.render({ messages: [{ role: "user", content: "x" }], add_generation_prompt: false })).toBe("[gMASK]<sop><|user|>x");
    const ids = tok.encode(tpl.render({ messages, add_generation_prompt: true, enable_thinking: false })).ids;
    expect(ids.slice(0, 3)).toEqual([0, 6, 4]); // [gMASK] <sop> <|system|>
    expect(ids.slice(-3)).toEqual([3, 8, 9]); // <|assistant|> <think> </think>
  }, T);

  test("vocab_size below 16 + 256 + 1 is rejected", () => {
    expect(() => makeTokenizerJson(MIN_VOCAB - 1)).toThrow(/vocab_size/);
  });
});
