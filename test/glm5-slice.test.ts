// make-model --preset glm5-slice: the slice's config carries GLM-5's widths (test/fixtures/glm5-config.json, written by
// hand from the spec's table), its tensor names and shapes are the real checkpoint's (the expected index built here from
// the config and spec §2, not from our writer), the quantized plan's sizes, and one small streamed write (shrunk widths,
// GLM-5's vocab) that loads and runs.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeModel, planModel } from "../src/model/make-model.ts";
import { CHUNK, tensorChunks } from "../src/model/make-stream.ts";
import { tensorData } from "../src/model/make-weights.ts";
import { parseConfig } from "../src/model/config.ts";
import { parseFmt } from "../src/model/formats.ts";
import { openModel } from "../src/model/safetensors.ts";
import { loadModel } from "../src/engine/model.ts";
import { Session } from "../src/engine/session.ts";

const GLM5 = JSON.parse(readFileSync(join(import.meta.dir, "fixtures/glm5-config.json"), "utf8")) as Record<string, any>;
const root = mkdtempSync(join(tmpdir(), "hb-glm5-slice-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const Q = { experts: parseFmt("int4g64")!, dense: parseFmt("int8")! };

/** name → shape of every tensor of a glm_moe_dsa checkpoint with config c (spec §2; every layer a `full` indexer layer,
 *  as GLM-5's; the MTP layer at index L). Written from the spec, independently of planTensors. */
function checkpointIndex(c: Record<string, any>): Map<string, number[]> {
  const D = c.hidden_size, H = c.num_attention_heads, dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, dv = c.v_head_dim;
  const q = c.q_lora_rank, kv = c.kv_lora_rank, E = c.n_routed_experts, I = c.moe_intermediate_size, F = c.intermediate_size;
  const nh = c.index_n_heads, hd = c.index_head_dim, L = c.num_hidden_layers, V = c.vocab_size, Sh = c.n_shared_experts * I;
  const out = new Map<string, number[]>([["model.embed_tokens.weight", [V, D]], ["model.norm.weight", [D]], ["lm_head.weight", [V, D]]]);
  for (let i = 0; i <= L; i++) {
    const p = `model.layers.${i}.`, a = `${p}self_attn.`;
    const add = (n: string, s: number[]) => out.set(p + n, s);
    add("input_layernorm.weight", [D]); add("post_attention_layernorm.weight", [D]);
    out.set(`${a}q_a_proj.weight`, [q, D]).set(`${a}q_a_layernorm.weight`, [q]).set(`${a}q_b_proj.weight`, [H * (dn + dr), q]);
    out.set(`${a}kv_a_proj_with_mqa.weight`, [kv + dr, D]).set(`${a}kv_a_layernorm.weight`, [kv]);
    out.set(`${a}kv_b_proj.weight`, [H * (dn + dv), kv]).set(`${a}o_proj.weight`, [D, H * dv]);
    out.set(`${a}indexer.wq_b.weight`, [nh * hd, q]).set(`${a}indexer.wk.weight`, [hd, D]);
    out.set(`${a}indexer.k_norm.weight`, [hd]).set(`${a}indexer.k_norm.bias`, [hd]).set(`${a}indexer.weights_proj.weight`, [nh, D]);
    if (i < c.first_k_dense_replace) {
      add("mlp.gate_proj.weight", [F, D]); add("mlp.up_proj.weight", [F, D]); add("mlp.down_proj.weight", [D, F]);
    } else {
      add("mlp.gate.weight", [E, D]); add("mlp.gate.e_score_correction_bias", [E]);
      for (let e = 0; e < E; e++) for (const [k, s] of [["gate", [I, D]], ["up", [I, D]], ["down", [D, I]]] as const) add(`mlp.experts.${e}.${k}_proj.weight`, [...s]);
      add("mlp.shared_experts.gate_proj.weight", [Sh, D]); add("mlp.shared_experts.up_proj.weight", [Sh, D]); add("mlp.shared_experts.down_proj.weight", [D, Sh]);
    }
    if (i === L) { add("enorm.weight", [D]); add("hnorm.weight", [D]); add("eh_proj.weight", [D, 2 * D]); add("shared_head.norm.weight", [D]); }
  }
  return out;
}
const sorted = (m: Map<string, number[]>) => [...m].sort(([a], [b]) => (a < b ? -1 : 1));

describe("glm5-slice", () => {
  test("the fixture is GLM-5 (parses; the full index has 59870 tensors: 3 dense × 17 + 75 MoE × 787 + MTP 791 + 3)", () => {
    const c = parseConfig(GLM5);
    expect([c.hidden_size, c.num_hidden_layers, c.n_routed_experts, c.num_experts_per_tok, c.vocab_size]).toEqual([6144, 78, 256, 8, 154880]);
    expect(c.layer_kinds.filter((k) => k === "dense").length).toBe(3);
    expect(c.indexer_types.every((t) => t === "full")).toBe(true);
    expect(checkpointIndex(GLM5).size).toBe(3 * 17 + 75 * 787 + 791 + 3);
  });

  for (const N of [2, 3]) test(`--layers ${N}: GLM-5's config keys, the real checkpoint's names and shapes`, () => {
    const p = planModel({ preset: "glm5-slice", seed: 0, set: { num_hidden_layers: N } });
    // every key of the real config but the layer count, the dense-layer count and the tokenizer's ids
    const differ = new Set(["num_hidden_layers", "first_k_dense_replace", "eos_token_id", "pad_token_id"]);
    for (const [k, v] of Object.entries(GLM5)) if (!differ.has(k)) expect([k, p.raw[k]]).toEqual([k, v]);
    expect([p.raw.num_hidden_layers, p.raw.first_k_dense_replace]).toEqual([N, 1]);
    const want = checkpointIndex({ ...GLM5, num_hidden_layers: N, first_k_dense_replace: 1 });
    expect(sorted(new Map(p.tensors.map((t) => [t.name, t.shape])))).toEqual(sorted(want));
    // quantized: the same names, each quantized matrix with its `.qs`; the experts int4g64 ([O, I/2] bytes)
    const q = planModel({ preset: "glm5-slice", seed: 0, set: { num_hidden_layers: N }, quant: Q });
    const names = new Set(q.written.map((t) => t.name));
    expect([...names].filter((n) => !n.endsWith(".qs")).sort()).toEqual([...want.keys()].sort());
    for (const t of q.written) if (t.dtype === "U8") expect(names.has(`${t.name}.qs`)).toBe(true);
    const e0 = q.written.find((t) => t.name === "model.layers.1.mlp.experts.0.gate_proj.weight")!;
    expect([e0.dtype, e0.shape]).toEqual(["U8", [2048, 3072]]);
    // sizes: one expert 3 × (2048·6144/2 B + 2048·6144/64 scales × 4 B) = 21.2 MB; two MoE layers at N = 2 (+1 per layer)
    const expert = 3 * (2048 * 6144 / 2 + 4 * 2048 * 6144 / 64);
    expect(expert).toBe(21_233_664);
    const experts = q.written.filter((t) => t.name.includes(".experts.")).reduce((a, t) => a + t.bytes, 0);
    expect(experts).toBe(N * 256 * expert);
  });

  test("a small slice (shrunk widths, GLM-5's vocab) streams in chunks, carries its stamps, loads and runs", () => {
    const set = { num_hidden_layers: 2, hidden_size: 64, intermediate_size: 128, moe_intermediate_size: 64, num_attention_heads: 4,
      q_lora_rank: 32, kv_lora_rank: 32, qk_nope_head_dim: 16, qk_rope_head_dim: 8, v_head_dim: 16, n_routed_experts: 16,
      num_experts_per_tok: 4, index_n_heads: 4, index_head_dim: 16, index_topk: 8 };
    const opts = { preset: "glm5-slice" as const, seed: 3, set, quant: Q };
    const dir = join(root, "small");
    let calls = 0, last = 0;
    const made = makeModel(dir, opts, (done) => { calls++; expect(done).toBeGreaterThan(last); last = done; });
    expect(last).toBe(made.dataBytes);
    const embed = made.written.find((t) => t.name === "model.embed_tokens.weight")!;
    expect(embed.bytes).toBe(154880 * 64 * 2);
    expect(calls).toBeGreaterThan(made.written.length); // the embedding (19.8 MB) came in several chunks
    // chunked float draws are the bytes of the tensor drawn whole
    const parts = [...tensorChunks(embed, 3)].map((c) => c.slice());
    expect(parts.length).toBe(Math.ceil(154880 * 64 / CHUNK));
    expect(Buffer.concat(parts).equals(Buffer.from(tensorData(embed.src, 3).buffer))).toBe(true);
    const store = openModel(dir);
    try {
      expect(store.metadata["quant.model.layers.1.mlp.experts.3.down_proj.weight"]).toBe("int4g64");
      expect(store.metadata["quant.lm_head.weight"]).toBe("int8");
      for (const t of made.written) expect([t.name, store.get(t.name).nbytes]).toEqual([t.name, t.bytes]);
    } finally { store.close(); }
    const m = loadModel(dir);
    const logits = new Session(m, { exact: true }).feed([5, 17, 99, 154000]);
    expect(logits.length).toBeGreaterThanOrEqual(154880);
    expect(logits.subarray(0, 154880).every(Number.isFinite)).toBe(true);
  }, 120_000);
});
