// `inspect` report: the shared fixture's true shape (skipped when absent), generated f32/bf16
// models with byte budgets computed independently, MTP detection, quantized-format classification.
import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatReport, inspectModel, storeReport } from "../src/model/inspect.ts";
import { makeModel } from "../src/model/make-model.ts";
import { writeSafetensors } from "../src/model/safetensors.ts";

const root = mkdtempSync(join(tmpdir(), "hb-inspect-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const FIXTURE = join(import.meta.dir, "../../shared/fixtures/glm-tiny");
const haveFixture = existsSync(join(FIXTURE, "config.json"));
if (!haveFixture) console.log(`inspect fixture tests skipped: ${FIXTURE} absent`);

/** tiny-shape byte counts (spec §2), element counts times `b` bytes for matrices */
const D = 64, I = 32, E = 16;
const expertBytes = (b: number) => 3 * I * D * b;

describe.skipIf(!haveFixture)("shared fixture glm-tiny", () => {
  test("true shape", () => {
    const r = inspectModel(FIXTURE);
    expect(r.model_type).toBe("glm_moe_dsa");
    expect([r.vocab_size, r.hidden_size, r.num_layers]).toEqual([512, 64, 4]);
    expect(r.dense_layers).toEqual([0]);
    expect(r.moe_layers).toEqual([1, 2, 3]);
    expect(r.indexer_types).toEqual(["full", "shared", "full", "shared"]);
    expect([r.n_routed_experts, r.experts_per_token, r.n_shared_experts]).toEqual([16, 4, 1]);
    expect(r.mtp).toBe(true);
    expect(r.tensors).toBe(282);
    expect(r.bytes_by_dtype).toEqual({ F32: r.total_bytes });
    expect(r.bytes_by_format).toEqual({ f32: r.total_bytes });
    expect(r.experts_stored).toBe(4 * E); // layers 1-3 + MTP layer 4
    expect(r.per_expert_bytes).toBe(expertBytes(4));
    expect(r.routed_expert_bytes).toBe(4 * E * expertBytes(4));
    expect(r.resident_bytes).toBe(r.total_bytes - r.routed_expert_bytes);
  });
});

describe("generated models", () => {
  test("tiny bf16: bytes by dtype/format, resident vs experts", () => {
    const dir = join(root, "bf16");
    const made = makeModel(dir, { preset: "tiny", seed: 1, dtype: "bf16" });
    const r = inspectModel(dir);
    expect(r.tensors).toBe(made.tensors.length);
    expect(r.total_bytes).toBe(made.dataBytes);
    const vecBytes = made.tensors.filter((t) => t.dtype === "F32").reduce((a, t) => a + 4 * t.shape[0], 0);
    expect(r.bytes_by_dtype).toEqual({ F32: vecBytes, BF16: r.total_bytes - vecBytes });
    expect(r.bytes_by_format).toEqual({ f32: vecBytes, bf16: r.total_bytes - vecBytes });
    expect(r.per_expert_bytes).toBe(expertBytes(2));
    expect(r.routed_expert_bytes).toBe(4 * E * expertBytes(2));
    expect(r.resident_bytes + r.routed_expert_bytes).toBe(r.total_bytes);
    const table = formatReport(r, (n) => `${n}B`);
    expect(table).toContain("moe_layers");
    expect(table).toContain(`${r.per_expert_bytes}B`);
  });

  test("no MTP layer → mtp false; 2 layers", () => {
    const dir = join(root, "nomtp");
    makeModel(dir, { preset: "tiny", seed: 1, set: { num_nextn_predict_layers: 0, num_hidden_layers: 2 } });
    const r = inspectModel(dir);
    expect(r.mtp).toBe(false);
    expect([r.num_layers, r.experts_stored]).toEqual([2, E]);
    expect(r.indexer_types).toEqual(["full", "shared"]);
  });

  test("quantized tensors: format from byte/scale counts, metadata stamp wins", () => {
    const src = join(root, "bf16");
    const dir = join(root, "quant");
    mkdirSync(dir, { recursive: true });
    copyFileSync(join(src, "config.json"), join(dir, "config.json"));
    const u8 = (n: number) => new Uint8Array(n);
    const f32 = (n: number) => new Float32Array(n);
    const e = (j: number, m: string) => `model.layers.1.mlp.experts.${j}.${m}_proj.weight`;
    // logical shapes: gate/up [I=32, D=64], down [D=64, I=32]
    const q = (name: string, bytes: number, scales: number) => [
      { name, dtype: "U8" as const, shape: [bytes], data: u8(bytes) },
      { name: `${name}.qs`, dtype: "F32" as const, shape: [scales], data: f32(scales) },
    ];
    writeSafetensors(join(dir, "model.safetensors"), [
      ...q(e(0, "gate"), 32 * 64, 32), // int8-row
      ...q(e(0, "up"), 32 * 32, 32), // int4-row
      ...q(e(0, "down"), 64 * 16, 64 * 2), // int4 groups of 16 over I = 32
      ...q(e(1, "gate"), 32 * 16, 32), // int2-row
      ...q(e(1, "up"), 32 * 32, 32 * 2), // stamped int4g32 (counts alone would say int4g32 too)
      ...q(e(1, "down"), 64 * 16, 64), // stamped int4 (row)
      { name: "model.norm.weight", dtype: "F32", shape: [64], data: f32(64) },
    ], { format: "pt", [`quant.${e(1, "up")}`]: "int4g32", [`quant.${e(1, "down")}`]: "int4-row" });
    expect(() => inspectModel(dir)).toThrow(/missing tensor/); // (serve could not load these few tensors either)
    const r = storeReport(dir);
    expect(r.bytes_by_format).toEqual({
      int8: 32 * 64 + 4 * 32,
      int4: 32 * 32 + 4 * 32 + 64 * 16 + 4 * 64,
      int4g16: 64 * 16 + 4 * 128,
      int2: 32 * 16 + 4 * 32,
      int4g32: 32 * 32 + 4 * 64,
      f32: 4 * 64,
    });
    expect(r.bytes_by_dtype).toEqual({ U8: 32 * 64 + 32 * 32 + 64 * 16 + 32 * 16 + 32 * 32 + 64 * 16, F32: 4 * (32 + 32 + 128 + 32 + 64 + 64 + 64) });
    expect(r.experts_stored).toBe(2);
    expect(r.per_expert_bytes).toBe(32 * 64 + 32 * 32 + 64 * 16 + 4 * (32 + 32 + 128));
    expect(r.resident_bytes).toBe(4 * 64);
  });
});
