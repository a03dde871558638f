// The converter: quantized containers run in exact mode equal to the f32 forward over their
// dequantized weights; experts are contiguous; reruns resume; FP8 block scales dequantize right.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { convert } from "../src/model/convert.ts";
import { parseFmt } from "../src/model/quant.ts";
import { openModel } from "../src/model/safetensors.ts";
import { loadModel, type Model } from "../src/engine/model.ts";
import { generate } from "../src/engine/generate.ts";
import { Session } from "../src/engine/session.ts";
import { dequantizedCopy } from "./helpers/dequant.ts";
import { genModel } from "./helpers/models.ts";
import { hasTiny, relRms, TINY } from "./helpers/fixture.ts";

const q = (s: string) => parseFmt(s)!;
const tmp = () => mkdtempSync(join(tmpdir(), "hb-conv-"));
const prompt = [14, 51, 88, 125, 162, 199, 236, 273, 310, 347, 384, 421];

function compare(a: Model, b: Model) {
  const exact = { exact: true }; // f32 activations: the quantized container must equal its dequantized copy
  const V = a.cfg.vocab_size, la = new Session(a, exact).feed(prompt, true).slice(), lb = new Session(b, exact).feed(prompt, true).slice();
  let worst = 0;
  for (let p = 0; p < prompt.length; p++) worst = Math.max(worst, relRms(la.subarray(p * V, (p + 1) * V), lb.subarray(p * V, (p + 1) * V)));
  expect(worst).toBeLessThan(1e-4);
  expect(generate(a, prompt, { maxTokens: 12, temperature: 0, forward: exact }).gen_ids).toEqual(generate(b, prompt, { maxTokens: 12, temperature: 0, forward: exact }).gen_ids);
}

const cases = [
  { name: "bf16 input, int8 everywhere", src: () => genModel({ preset: "tiny", seed: 21, dtype: "bf16" }), o: { experts: q("int8"), dense: q("int8"), mtp: q("int8") } },
  { name: "f32 input, int4g8 experts, int4 dense, int2 mtp", src: () => genModel({ preset: "tiny", seed: 22 }), o: { experts: q("int4g8"), dense: q("int4"), mtp: q("int2") } },
  ...(hasTiny ? [{ name: "shared fixture, int4g16 experts, int8 dense", src: () => TINY, o: { experts: q("int4g16"), dense: q("int8"), mtp: q("int8") } }] : []),
];

describe("convert", () => {
  for (const c of cases) {
    test(`${c.name}: exact mode equals the dequantized reference`, () => {
      const src = c.src(), out = tmp();
      convert(src, out, c.o);
      compare(loadModel(out), loadModel(dequantizedCopy(out, src)));
      rmSync(out, { recursive: true, force: true });
    });
  }

  test("experts are contiguous, shards split between experts, and a rerun resumes", () => {
    const src = genModel({ preset: "tiny", seed: 23 }), out = tmp();
    const o = { experts: q("int4g8"), dense: q("int8"), mtp: q("int8"), shardBytes: 64 * 1024 };
    const first = convert(src, out, o);
    expect(first.shards).toBeGreaterThan(2);
    const store = openModel(out);
    for (const l of [1, 2, 3]) for (const e of [0, 5, 15]) {
      const p = `model.layers.${l}.mlp.experts.${e}.`;
      const parts = ["gate_proj.weight", "gate_proj.weight.qs", "up_proj.weight", "up_proj.weight.qs", "down_proj.weight", "down_proj.weight.qs"].map((n) => store.get(p + n));
      expect(new Set(parts.map((t) => t.file)).size).toBe(1);
      for (let i = 1; i < parts.length; i++) expect(parts[i].offset).toBe(parts[i - 1].offset + parts[i - 1].nbytes);
    }
    store.close();
    const again = convert(src, out, o);
    expect(again.resumed).toBe(first.shards);
    compare(loadModel(out), loadModel(dequantizedCopy(out, src)));
  });
});
