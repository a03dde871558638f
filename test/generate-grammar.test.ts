// Constrained generation end to end: a JSON schema masks the sampler inside the speculative decoder;
// the output always parses, and grammar-forced drafts leave greedy output unchanged.
import { expect, test } from "bun:test";
import { loadModel } from "../src/engine/model.ts";
import { generate } from "../src/engine/generate.ts";
import { compileGrammar, loadTokenVocab, schemaToGbnf } from "../src/engine/grammar/index.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { genModel } from "./helpers/models.ts";

const schema = { type: "object", properties: { name: { type: "string", enum: ["ann", "bob"] }, n: { type: "integer" }, ok: { type: "boolean" } }, required: ["name", "n", "ok"] };

test("JSON-schema-constrained output parses, with and without drafts, greedy and sampled", () => {
  const dir = genModel({ preset: "tiny", seed: 9, mtpDrafts: true });
  const m = loadModel(dir), codec = loadTokenizer(dir), vocab = loadTokenVocab(dir, m.cfg.stop_ids);
  const g = compileGrammar(schemaToGbnf(schema, { whitespace: "compact" }));
  // encode: lets the decoder draft the grammar's forced bytes; without it, no drafting at all
  const run = (draft: "off" | "mtp", seed?: number, forced = true) => {
    const r = generate(m, codec.encode("hello"), { maxTokens: 200, temperature: seed === undefined ? 0 : 0.9, seed, draft,
      grammar: g.state(vocab), encode: forced ? (t) => codec.encode(t) : undefined });
    return { r, text: codec.decode(r.gen_ids, true) };
  };
  const plain = run("off", undefined, false), off = run("off"), mtp = run("mtp");
  expect(plain.r.stats.drafted).toBe(0);
  expect(off.r.stats.accepted).toBeGreaterThan(0); // grammar-forced drafts were accepted
  expect(mtp.r.stats.drafted).toBeGreaterThan(off.r.stats.drafted);
  expect(off.r.gen_ids).toEqual(plain.r.gen_ids);
  expect(mtp.r.gen_ids).toEqual(plain.r.gen_ids);
  for (const { r, text } of [off, run("off", 1), run("mtp", 2), run("mtp", 3)]) {
    expect(r.finish_reason).toBe("stop");
    const v = JSON.parse(text);
    expect(["ann", "bob"]).toContain(v.name);
    expect(Number.isInteger(v.n)).toBe(true);
    expect(typeof v.ok).toBe("boolean");
  }
});
