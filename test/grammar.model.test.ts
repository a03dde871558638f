// End to end on the glm-tiny fixture model: the decode loop the engine would run (Session.feed ->
// GrammarState.mask -> Sampler.sample -> GrammarState.accept) always yields JSON that parses and
// fits the schema. Skipped when ../shared/fixtures/glm-tiny is absent.
import { describe, expect, test } from "bun:test";
import { compileGrammar, loadTokenVocab, schemaToGbnf } from "../src/engine/grammar/index.ts";
import { loadModel } from "../src/engine/model.ts";
import { Session } from "../src/engine/session.ts";
import { Sampler } from "../src/engine/sampler.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";

describe.skipIf(!hasTiny)("glm-tiny: grammar-constrained generation", () => {
  test("greedy and 8 sampled seeds: the output parses and validates", () => {
    const m = loadModel(TINY);
    const vocab = loadTokenVocab(TINY, m.cfg.stop_ids);
    const codec = loadTokenizer(TINY);
    const schema = {
      type: "object",
      properties: { ok: { type: "boolean" }, n: { type: "integer" }, tag: { enum: ["x", "y"] }, s: { type: "string", maxLength: 6 } },
      required: ["ok", "n", "tag", "s"],
    };
    const g = compileGrammar(schemaToGbnf(schema, { whitespace: "compact" }));
    const prompt = codec.encode("Answer in JSON:");
    for (const temperature of [0, 1.5])
      for (let seed = 0; seed < 8; seed++) {
        const s = new Session(m), sampler = new Sampler({ temperature, seed }), gs = g.state(vocab);
        let logits = s.feed(prompt);
        const out: number[] = [];
        for (let step = 0; step < 200 && !gs.isDone(); step++) {
          const l = Float32Array.from(logits); // feed() returns a view into the run state
          expect(gs.mask(l)).toBeGreaterThan(0);
          const id = sampler.sample(l);
          gs.accept(id);
          if (m.cfg.stop_ids.includes(id)) break;
          out.push(id);
          logits = s.feed([id]);
        }
        expect(gs.isComplete()).toBe(true);
        const v = JSON.parse(codec.decode(out));
        expect(Object.keys(v)).toEqual(["ok", "n", "tag", "s"]);
        expect([typeof v.ok, Number.isInteger(v.n), ["x", "y"].includes(v.tag), typeof v.s === "string" && [...v.s].length <= 6])
          .toEqual(["boolean", true, true, true]);
        if (temperature === 0) break; // greedy: one seed is enough
      }
  });
});
