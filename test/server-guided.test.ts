// vLLM's guided decoding on the OpenAI routes (shared fixture): guided_choice / guided_json / guided_grammar /
// guided_regex and the structured_outputs spellings constrain the output as response_format and grammar do (the same
// grammar, the same output; a regex's output matches it whole); conflicts, unsupported regexes and bad JSON are
// refused naming the field.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

describe.skipIf(!hasTiny)("serve: vLLM's guided decoding", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 2 }); });
  afterAll(() => s.stop());
  const chat = async (extra: Record<string, unknown>) => {
    const r = await post(s.url, "/v1/chat/completions", { messages: [{ role: "user", content: "Answer:" }], max_tokens: 40, temperature: 0, ...extra });
    return { status: r.status, j: (await r.json()) as any };
  };
  const schema = { type: "object", properties: { a: { type: "integer" }, b: { enum: ["x", "y"] } }, required: ["a", "b"], additionalProperties: false };

  test("choices, JSON schemas and grammars constrain the output; the vLLM spellings equal response_format / grammar", async () => {
    const choices = ["yes", "no", "maybe so"];
    for (const extra of [{ guided_choice: choices }, { structured_outputs: { choice: choices } }]) {
      const { j } = await chat(extra);
      expect(choices).toContain(j.choices[0].message.content);
      expect(j.choices[0].finish_reason).toBe("stop");
    }
    const viaRf = (await chat({ response_format: { type: "json_schema", json_schema: { name: "s", schema } } })).j.choices[0].message.content;
    // (and llama-server's spellings: a schema beside json_object, a top-level json_schema)
    for (const extra of [{ guided_json: schema }, { guided_json: JSON.stringify(schema) }, { structured_outputs: { json: schema } },
      { response_format: { type: "json_object", schema } }, { json_schema: schema }]) {
      const out = (await chat(extra)).j.choices[0].message.content;
      expect(out).toBe(viaRf);
      if (out.endsWith("}")) expect(Number.isInteger(JSON.parse(out).a)).toBe(true);
    }
    const gbnf = 'root ::= "ab" | "cd" | "ef"';
    const viaGrammar = (await chat({ grammar: gbnf })).j.choices[0].message.content;
    expect(["ab", "cd", "ef"]).toContain(viaGrammar);
    expect((await chat({ guided_grammar: gbnf })).j.choices[0].message.content).toBe(viaGrammar);
    const comp = (await (await post(s.url, "/v1/completions", { prompt: "Pick:", max_tokens: 8, temperature: 0, guided_choice: choices })).json()) as any;
    expect(choices).toContain(comp.choices[0].text);
  });

  test("guided_regex / structured_outputs.regex, and JSON Schema patterns and formats: the output matches, greedy or sampled", async () => {
    const re = "[0-9]{3}-[a-z]{2}(x|yz)?";
    for (const extra of [{ guided_regex: re }, { structured_outputs: { regex: re } }, { guided_regex: re, temperature: 1, seed: 4 }]) {
      const { status, j } = await chat(extra);
      expect(status).toBe(200);
      expect(j.choices[0].message.content).toMatch(new RegExp(`^(?:${re})$`));
      expect(j.choices[0].finish_reason).toBe("stop");
    }
    // a JSON Schema pattern (the string's value, searched unless anchored)
    const schema = { type: "object", properties: { code: { type: "string", pattern: "^[A-Z]{2}-[0-9]{2}$" } }, required: ["code"], additionalProperties: false };
    const js = (await chat({ guided_json: schema, max_tokens: 40 })).j.choices[0];
    expect(js.finish_reason).toBe("stop");
    expect(JSON.parse(js.message.content).code).toMatch(/^[A-Z]{2}-[0-9]{2}$/);
    // a format (as pydantic writes a datetime field), under a strict response_format
    const when = { type: "object", properties: { at: { type: "string", format: "date-time" }, n: { type: "integer", minimum: 3, maximum: 42 },
      p: { type: "number", minimum: 0, maximum: 1 }, price: { type: "number", multipleOf: 0.01, exclusiveMinimum: 0 }, k: { type: "integer", multipleOf: 7 } },
      required: ["at", "n", "p", "price", "k"], additionalProperties: false };
    const dt = (await chat({ response_format: { type: "json_schema", json_schema: { name: "w", strict: true, schema: when } }, max_tokens: 160 })).j.choices[0];
    expect(dt.finish_reason).toBe("stop");
    const n = JSON.parse(dt.message.content).n;
    expect(Number.isInteger(n) && n >= 3 && n <= 42).toBe(true); // (and bounded integers and numbers, as pydantic's conint, confloat)
    const p = JSON.parse(dt.message.content).p;
    expect(p >= 0 && p <= 1).toBe(true);
    const { price, k } = JSON.parse(dt.message.content); // (multipleOf, as OpenAI's structured outputs take it)
    expect(price > 0 && /^\d+(\.\d{1,2})?$/.test(String(price))).toBe(true);
    expect([dt.message.content, Number.isInteger(k) && k % 7 === 0]).toEqual([dt.message.content, true]);
    expect(JSON.parse(dt.message.content).at).toMatch(/^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/); // (RFC 3339)
    const comp = (await (await post(s.url, "/v1/completions", { prompt: "Code:", max_tokens: 12, temperature: 0, guided_regex: "\\d{1,3}\\.\\d" })).json()) as any;
    expect(comp.choices[0].text).toMatch(/^\d{1,3}\.\d$/);
  });

  test("conflicts, unsupported regexes and bad JSON are refused naming the field", async () => {
    for (const [extra, param] of [
      [{ json_schema: schema, guided_json: schema }, "json_schema"],
      [{ response_format: { type: "json_object", schema: { type: "strin" } } }, "response_format.schema.type"],
      [{ json_schema: { type: "object", properties: { n: { type: "strin" } } } }, "json_schema.properties.n.type"],
      [{ guided_json: schema, response_format: { type: "json_object" } }, "guided_json"],
      [{ guided_choice: ["a"], guided_grammar: 'root ::= "a"' }, "guided_choice"],
      [{ structured_outputs: { choice: ["a"] }, grammar: 'root ::= "a"' }, "structured_outputs.choice"],
      [{ guided_regex: "(a)\\1" }, "guided_regex"], // a backreference: not a regular language
      [{ structured_outputs: { regex: "(?=x)y" } }, "structured_outputs.regex"],
      [{ guided_regex: "[a-z]+", guided_choice: ["a"] }, "guided_choice"],
      [{ guided_json: "{not json" }, "guided_json"],
      [{ guided_json: { type: "object", properties: { a: { type: "frobnicate" } } } }, "guided_json"],
    ] as const) {
      const { status, j } = await chat(extra);
      expect(status).toBe(400);
      expect(j.error.param).toStartWith(param);
    }
  });
});
