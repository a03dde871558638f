// Weight loading: the glm-tiny fixture (shapes, indexer/MTP presence, lazy experts), quantized format
// inference (counts, metadata stamps, disagreements), a synthetic bf16/f16/int model without q_lora or
// DSA, and damaged copies (missing tensor, wrong config, truncated shard) → ModelError naming them.
import { afterAll, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Fmt, hb } from "../src/native/hb.ts";
import { type Config, loadConfig, parseConfig } from "../src/model/config.ts";
import { ModelError } from "../src/model/errors.ts";
import { type Dtype, openModel, readBytes, readF32, type TensorOut, type TensorStore, writeSafetensors } from "../src/model/safetensors.ts";
import { loadMat, loadMatF32, loadVec, loadWeights } from "../src/model/weights.ts";

hb(); // build/load libhb once, outside any timed test
const FIXTURE = join(import.meta.dir, "../../shared/fixtures/glm-tiny");
const hasFixture = fs.existsSync(join(FIXTURE, "model.safetensors"));
if (!hasFixture) console.warn(`weights.test: ${FIXTURE} is absent; skipping the fixture tests`);

const dir = fs.mkdtempSync(join(tmpdir(), "hb-w-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function err(fn: () => unknown, parts: { file?: string; tensor?: string; field?: string } = {}): ModelError {
  let e: unknown;
  try { fn(); } catch (x) { e = x; }
  expect(e).toBeInstanceOf(ModelError);
  const me = e as ModelError;
  if (parts.file) { expect(me.file).toBe(parts.file); expect(me.message).toContain(parts.file); }
  if (parts.tensor) { expect(me.tensor).toBe(parts.tensor); expect(me.message).toContain(`"${parts.tensor}"`); }
  if (parts.field) expect(me.field).toBe(parts.field);
  return me;
}
const bytes = (n: number, seed = 1) => Uint8Array.from({ length: n }, (_, i) => (i * 37 + seed * 11) & 255);
const floats = (n: number, seed = 1) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + seed));

/** Copy every tensor of a store (optionally dropping some) into new files: shards[k] = names in shard k. */
function copyStore(src: TensorStore, outDir: string, drop: string[] = [], nShards = 1): string[] {
  fs.mkdirSync(outDir, { recursive: true });
  const names = src.names().filter((n) => !drop.includes(n));
  const files: string[] = [];
  const wm: Record<string, string> = {};
  const per = Math.ceil(names.length / nShards);
  for (let k = 0; k < nShards; k++) {
    const part = names.slice(k * per, (k + 1) * per);
    const file = nShards === 1 ? "model.safetensors" : `model-0000${k + 1}-of-0000${nShards}.safetensors`;
    for (const n of part) wm[n] = file;
    writeSafetensors(join(outDir, file), part.map((n) => {
      const t = src.get(n);
      return { name: n, dtype: t.dtype, shape: t.shape, data: () => readBytes(t) };
    }), { ...src.metadata });
    files.push(join(outDir, file));
  }
  if (nShards > 1) fs.writeFileSync(join(outDir, "model.safetensors.index.json"), JSON.stringify({ metadata: {}, weight_map: wm }));
  fs.copyFileSync(join(FIXTURE, "config.json"), join(outDir, "config.json"));
  return files;
}

describe.skipIf(!hasFixture)("glm-tiny fixture", () => {
  test("loads with the spec's shapes", () => {
    const store = openModel(FIXTURE);
    const cfg = loadConfig(FIXTURE);
    try {
      const w = loadWeights(store, cfg);
      const dims = (m: { O: number; I: number }) => [m.O, m.I];
      expect(dims(w.embed)).toEqual([512, 64]);
      expect(w.embed.fmt).toBe(Fmt.f32);
      expect(w.embed.data).toEqual(readF32(store.get("model.embed_tokens.weight")));
      expect(dims(w.lm_head)).toEqual([512, 64]);
      expect(w.norm.length).toBe(64);
      expect(w.layers.length).toBe(4);
      for (const [i, l] of w.layers.entries()) {
        const a = l.attn;
        expect([dims(a.q_a!), dims(a.q_b!), dims(a.kv_a), dims(a.kv_b), dims(a.o)]).toEqual([[32, 64], [96, 32], [40, 64], [128, 32], [64, 64]]);
        expect([a.q_a_norm!.length, a.kv_a_norm.length, l.input_norm.length, l.post_norm.length]).toEqual([32, 32, 64, 64]);
        expect(a.q_proj).toBe(null);
        expect(a.indexer !== null).toBe(i % 2 === 0); // full layers 0, 2 carry the indexer; shared 1, 3 lack it
        expect(l.mlp !== null).toBe(i === 0);
        expect(l.moe !== null).toBe(i > 0);
      }
      const ix = w.layers[2].attn.indexer!;
      expect([dims(ix.wq_b), dims(ix.wk), dims(ix.weights_proj), [ix.k_norm_w.length], [ix.k_norm_b.length]]).toEqual([[64, 32], [16, 64], [4, 64], [16], [16]]);
      expect([dims(w.layers[0].mlp!.gate), dims(w.layers[0].mlp!.down)]).toEqual([[128, 64], [64, 128]]);
      const moe = w.layers[1].moe!;
      expect(dims(moe.router)).toEqual([16, 64]);
      expect(moe.router.fmt).toBe(Fmt.f32);
      expect(moe.bias!.length).toBe(16);
      expect([dims(moe.shared!.gate), dims(moe.shared!.down)]).toEqual([[32, 64], [64, 32]]);
      const e3 = moe.expert(3);
      expect([dims(e3.gate), dims(e3.up), dims(e3.down)]).toEqual([[32, 64], [32, 64], [64, 32]]);
      expect(moe.expert(3)).toBe(e3); // cached
      expect(e3.down.data).toEqual(readF32(store.get("model.layers.1.mlp.experts.3.down_proj.weight")));
      err(() => moe.expert(16), { field: "expert" });
      err(() => moe.expert(-1), { field: "expert" });
      const mtp = w.mtp!;
      expect(mtp).not.toBe(null);
      expect(dims(mtp.eh_proj)).toEqual([64, 128]);
      expect([mtp.enorm.length, mtp.hnorm.length, mtp.head_norm.length]).toEqual([64, 64, 64]);
      expect(mtp.layer.moe).not.toBe(null);
      expect(mtp.layer.attn.indexer).not.toBe(null);
      expect(mtp.layer.moe!.expert(15).gate.name).toBe("model.layers.4.mlp.experts.15.gate_proj.weight");
      // no MTP when the config says so
      expect(loadWeights(store, { ...cfg, num_nextn_predict_layers: 0 }).mtp).toBe(null);
    } finally {
      store.close();
    }
  });

  test("a config that disagrees with the tensors names the tensor", () => {
    const store = openModel(FIXTURE);
    const raw = JSON.parse(fs.readFileSync(join(FIXTURE, "config.json"), "utf8"));
    try {
      const e = err(() => loadWeights(store, parseConfig({ ...raw, intermediate_size: 96 })), { tensor: "model.layers.0.mlp.gate_proj.weight", field: "shape" });
      expect(e.message).toContain("expected [96, 64]");
      err(() => loadWeights(store, parseConfig({ ...raw, q_lora_rank: null, index_topk: 0 })), { tensor: "model.layers.0.self_attn.q_proj.weight" });
      err(() => loadWeights(store, parseConfig({ ...raw, n_routed_experts: 32, num_experts_per_tok: 4 })), { tensor: "model.layers.1.mlp.gate.weight", field: "shape" });
    } finally {
      store.close();
    }
  });

  test("missing tensors: a full layer's indexer, an expert", () => {
    const src = openModel(FIXTURE);
    const cfg = loadConfig(FIXTURE);
    try {
      for (const name of ["model.layers.2.self_attn.indexer.wk.weight", "model.layers.3.mlp.experts.9.down_proj.weight", "lm_head.weight"]) {
        const d = join(dir, `missing-${name}`);
        copyStore(src, d, [name]);
        const s = openModel(d);
        try {
          expect(err(() => loadWeights(s, cfg), { tensor: name }).message).toContain("missing tensor");
        } finally {
          s.close();
        }
      }
    } finally {
      src.close();
    }
  });

  test("sharded copy loads the same; a truncated shard names the file and tensor", () => {
    const src = openModel(FIXTURE);
    const d = join(dir, "shards");
    const files = copyStore(src, d, [], 3);
    src.close();
    const cfg = loadConfig(d);
    const s = openModel(d);
    try {
      expect(s.files.length).toBe(3);
      const w = loadWeights(s, cfg);
      expect(w.layers[3].moe!.expert(7).up.data).toEqual(readF32(s.get("model.layers.3.mlp.experts.7.up_proj.weight")));
    } finally {
      s.close();
    }
    // truncate shard 2 in the middle of one of its tensors
    const victim = files[1];
    const sf = openModel(victim);
    const names = sf.names();
    const t = sf.get(names[Math.floor(names.length / 2)]);
    sf.close();
    fs.truncateSync(victim, t.offset + Math.floor(t.nbytes / 2));
    const e = err(() => openModel(d), { file: victim, tensor: t.name, field: "data_offsets" });
    expect(e.message).toContain("beyond data size");
  });

  test("a shard truncated after open: reading names file, tensor and offset", () => {
    const src = openModel(FIXTURE);
    const d = join(dir, "late-trunc");
    const [file] = copyStore(src, d);
    src.close();
    const cfg = loadConfig(d);
    const s = openModel(d);
    try {
      const w = loadWeights(s, cfg); // experts not read yet
      const t = s.get("model.layers.2.mlp.experts.5.gate_proj.weight");
      fs.truncateSync(file, t.offset + 10);
      const e = err(() => w.layers[2].moe!.expert(5), { file, tensor: t.name });
      expect(e.offset).toBe(t.offset + 10);
      expect(e.message).toContain("short read");
    } finally {
      s.close();
    }
  });
});

describe("quantized format inference", () => {
  const O = 4;
  const q = (name: string, I: number, nbytes: number, nscales: number, shape?: number[]): TensorOut[] => [
    { name, dtype: "U8", shape: shape ?? [nbytes], data: bytes(nbytes) },
    { name: `${name}.qs`, dtype: "F32", shape: [nscales], data: floats(nscales) },
  ];
  const path = join(dir, "quant.safetensors");
  const fp8 = bytes(O * 6).map((b) => b & 0x77);
  writeSafetensors(path, [
    ...q("int8", 6, O * 6, O, [O, 6]),
    ...q("int4", 6, O * 3, O),
    ...q("int2", 6, O * 2, O, [O, 2]),
    ...q("g8", 32, O * 16, O * 4),
    ...q("g64", 200, O * 100, O * 4),
    ...q("g64stamped", 200, O * 100, O * 4),
    ...q("g8odd", 100, O * 50, O * 13),
    ...q("amb", 2, O, O),
    ...q("amb_stamped", 2, O, O),
    ...q("wrong_stamp", 6, O * 6, O),
    ...q("bad_stamp", 6, O * 6, O),
    ...q("nofit", 6, 5, O),
    ...q("nogs", 30, O * 15, O * 3),
    ...q("badrows", 6, O * 6, O, [O + 2, 4]),
    { name: "noqs", dtype: "U8", shape: [O * 6], data: bytes(O * 6) },
    { name: "f32qs", dtype: "F32", shape: [O, 6], data: floats(O * 6) },
    { name: "f32qs.qs", dtype: "F32", shape: [O], data: floats(O) },
    { name: "bf16", dtype: "BF16", shape: [O, 6], data: new Uint16Array(O * 6).map((_, i) => 0x3f80 + i) },
    { name: "f16", dtype: "F16", shape: [O, 6], data: new Uint16Array(O * 6).map((_, i) => 0x3c00 + i) },
    { name: "fp8", dtype: "F8_E4M3", shape: [O, 6], data: fp8 },
    { name: "fp8_scale_inv", dtype: "F32", shape: [1, 1], data: new Float32Array([4]) },
    { name: "i32", dtype: "I32", shape: [O, 6], data: new Int32Array(O * 6) },
    { name: "vec", dtype: "BF16", shape: [6], data: new Uint16Array(6).fill(0x4000) },
  ] as TensorOut[], { "quant.g64stamped": "int4g", "quant.amb_stamped": "int2", "quant.wrong_stamp": "int4g64", "quant.bad_stamp": "int4g12" });
  const store = openModel(path);
  afterAll(() => store.close());

  test("formats from byte and scale counts", () => {
    const cases: [string, number, number, number][] = [
      ["int8", 6, Fmt.int8, 0], ["int4", 6, Fmt.int4, 0], ["int2", 6, Fmt.int2, 0],
      ["g8", 32, Fmt.int4g, 8], ["g64", 200, Fmt.int4g, 64], ["g64stamped", 200, Fmt.int4g, 64], ["g8odd", 100, Fmt.int4g, 8],
      ["amb_stamped", 2, Fmt.int2, 0],
    ];
    for (const [name, I, fmt, gs] of cases) {
      const m = loadMat(store, name, [O, I]);
      expect([name, m.fmt, m.gs, m.O, m.I]).toEqual([name, fmt, gs, O, I]);
      expect(m.data).toEqual(readBytes(store.get(name)));
      expect(m.scales).toEqual(readF32(store.get(`${name}.qs`)));
    }
  });

  test("stamps: ambiguous without, disagreeing, unknown", () => {
    expect(err(() => loadMat(store, "amb", [O, 2]), { tensor: "amb", field: "quant" }).message).toContain("quant.amb");
    const e = err(() => loadMat(store, "wrong_stamp", [O, 6]), { tensor: "wrong_stamp", field: "__metadata__.quant.wrong_stamp" });
    expect(e.message).toContain("int4g64");
    err(() => loadMat(store, "bad_stamp", [O, 6]), { field: "__metadata__.quant.bad_stamp" });
  });

  test("counts that fit nothing, wrong shapes, missing scales", () => {
    err(() => loadMat(store, "nofit", [O, 6]), { tensor: "nofit", field: "quant" });
    err(() => loadMat(store, "nogs", [O, 30]), { tensor: "nogs", field: "quant" });
    err(() => loadMat(store, "int8", [O, 7]), { tensor: "int8" });
    err(() => loadMat(store, "int8", [O + 1, 6]), { tensor: "int8", field: "shape" });
    err(() => loadMat(store, "badrows", [O, 6]), { tensor: "badrows", field: "shape" });
    err(() => loadMat(store, "noqs", [O, 6]), { tensor: "noqs", field: "dtype" });
    err(() => loadMat(store, "f32qs", [O, 6]), { tensor: "f32qs", field: "dtype" });
    err(() => loadMat(store, "i32", [O, 6]), { tensor: "i32", field: "dtype" });
    err(() => loadMat(store, "absent", [O, 6]), { tensor: "absent" });
    err(() => loadMatF32(store, "int8", [O, 6]), { tensor: "int8", field: "dtype" });
  });

  test("float formats: bf16/f16 kept 16-bit, fp8 dequantised, vectors as f32", () => {
    const b = loadMat(store, "bf16", [O, 6]);
    expect([b.fmt, b.data instanceof Uint16Array, b.data[5], b.scales]).toEqual([Fmt.bf16, true, 0x3f85, null]);
    const h = loadMat(store, "f16", [O, 6]);
    expect([h.fmt, h.data instanceof Uint16Array, h.data[0]]).toEqual([Fmt.f16, true, 0x3c00]);
    const f = loadMat(store, "fp8", [O, 6]);
    expect(f.fmt).toBe(Fmt.f32);
    expect(f.data).toEqual(readF32(store.get("fp8"), null, store));
    expect(f.data[1]).toBe(readF32(store.get("fp8"))[1] * 4);
    const r = loadMatF32(store, "bf16", [O, 6]);
    expect([r.fmt, r.data[0]]).toEqual([Fmt.f32, 1]);
    expect(loadVec(store, "vec", 6)).toEqual(new Float32Array(6).fill(2));
    err(() => loadVec(store, "vec", 5), { tensor: "vec", field: "shape" });
    err(() => loadMat(store, "bf16", [6, O]), { tensor: "bf16", field: "shape" });
  });
});

describe("synthetic model: no q_lora, no DSA, mixed formats", () => {
  const cfg: Config = parseConfig({
    model_type: "deepseek_v3", vocab_size: 40, hidden_size: 16, num_hidden_layers: 2, num_attention_heads: 2, q_lora_rank: null,
    kv_lora_rank: 8, qk_nope_head_dim: 4, qk_rope_head_dim: 2, v_head_dim: 4, intermediate_size: 24, moe_intermediate_size: 8,
    n_routed_experts: 4, num_experts_per_tok: 2, n_shared_experts: 0, first_k_dense_replace: 1, eos_token_id: 1,
  });
  const D = 16, V = 40, H = 2, I = 8;
  const f16 = (name: string, shape: number[], dtype: Dtype = "F16"): TensorOut => ({ name, dtype, shape, data: new Uint16Array(shape[0] * (shape[1] ?? 1)).fill(dtype === "F16" ? 0x3c00 : 0x3f80) });
  const f32 = (name: string, shape: number[]): TensorOut => ({ name, dtype: "F32", shape, data: floats(shape[0] * (shape[1] ?? 1)) });
  const int4g8 = (name: string, [o, i]: number[]): TensorOut[] => [
    { name, dtype: "U8", shape: [o, Math.ceil(i / 2)], data: bytes(o * Math.ceil(i / 2)) },
    { name: `${name}.qs`, dtype: "F32", shape: [o, Math.ceil(i / 8)], data: floats(o * Math.ceil(i / 8)) },
  ];
  const ts: TensorOut[] = [f16("model.embed_tokens.weight", [V, D], "BF16"), f32("model.norm.weight", [D]),
    { name: "lm_head.weight", dtype: "U8", shape: [V * D], data: bytes(V * D) }, f32("lm_head.weight.qs", [V])];
  for (let i = 0; i < 2; i++) {
    const p = `model.layers.${i}.`;
    ts.push(f32(`${p}input_layernorm.weight`, [D]), f32(`${p}post_attention_layernorm.weight`, [D]),
      f16(`${p}self_attn.q_proj.weight`, [H * 6, D]), f16(`${p}self_attn.kv_a_proj_with_mqa.weight`, [10, D]),
      f32(`${p}self_attn.kv_a_layernorm.weight`, [8]), f16(`${p}self_attn.kv_b_proj.weight`, [H * 8, 8]), f16(`${p}self_attn.o_proj.weight`, [D, H * 4]));
    if (i === 0) ts.push(f32(`${p}mlp.gate_proj.weight`, [24, D]), f32(`${p}mlp.up_proj.weight`, [24, D]), f32(`${p}mlp.down_proj.weight`, [D, 24]));
    else {
      ts.push(f16(`${p}mlp.gate.weight`, [4, D], "BF16"));
      for (let e = 0; e < 4; e++) {
        ts.push(...int4g8(`${p}mlp.experts.${e}.gate_proj.weight`, [I, D]), ...int4g8(`${p}mlp.experts.${e}.up_proj.weight`, [I, D]),
          ...int4g8(`${p}mlp.experts.${e}.down_proj.weight`, [D, I]));
      }
    }
  }
  const path = join(dir, "synth.safetensors");
  writeSafetensors(path, ts, { "quant.lm_head.weight": "int8", "quant.model.layers.1.mlp.experts.3.down_proj.weight": "int4g8" });

  test("loads with the right formats", () => {
    const store = openModel(path);
    try {
      const w = loadWeights(store, cfg);
      expect([w.embed.fmt, w.lm_head.fmt, w.mtp]).toEqual([Fmt.bf16, Fmt.int8, null]);
      const a = w.layers[1].attn;
      expect([a.q_a, a.q_a_norm, a.q_b, a.indexer, a.q_proj!.fmt, a.q_proj!.O]).toEqual([null, null, null, null, Fmt.f16, 12]);
      const moe = w.layers[1].moe!;
      expect([moe.router.fmt, moe.router.data instanceof Float32Array, moe.router.data[0], moe.bias, moe.shared]).toEqual([Fmt.f32, true, 1, null, null]);
      const ex = moe.expert(2);
      // down [16, 8] with one group per row is int4-row by counts; expert 3's stamp says int4g8
      expect([ex.gate.fmt, ex.gate.gs, ex.down.fmt, ex.down.gs, ex.down.O, ex.down.I]).toEqual([Fmt.int4g, 8, Fmt.int4, 0, D, I]);
      expect([moe.expert(3).down.fmt, moe.expert(3).down.gs]).toEqual([Fmt.int4g, 8]);
      expect(w.layers[0].mlp!.down.fmt).toBe(Fmt.f32);
    } finally {
      store.close();
    }
  });

  test("an expert with a broken format fails at load time, not at first use", () => {
    const bad = ts.map((t) => t.name === "model.layers.1.mlp.experts.3.up_proj.weight.qs" ? { ...t, shape: [I * 3], data: floats(I * 3) } : t);
    const p2 = join(dir, "synth-bad.safetensors");
    writeSafetensors(p2, bad);
    const store = openModel(p2);
    try {
      err(() => loadWeights(store, cfg), { tensor: "model.layers.1.mlp.experts.3.up_proj.weight", field: "quant" });
    } finally {
      store.close();
    }
  });
});
