// Hostile grammars, schemas and bodies (issue 29, items 1, 2 and 7's grammar half): an exponentially ambiguous GBNF
// fails fast naming `grammar` instead of doubling its stacks per token; schemas that are huge or deep, deep template
// kwargs and tool parameters, and oversized guided_choice are refused with a 400 naming the field, never a 500 or a
// stall of /health. Each case has a time bound (and the decoding one a memory bound) that the unbounded code missed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { compileGrammar, GrammarError, schemaToGbnf, TokenVocab } from "../src/engine/grammar/index.ts";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { pollHealth, post, startTiny } from "./server.helpers.ts";

const AMBIGUOUS = 'root ::= e\ne ::= "a" e "b" | "a" e "c" | "d"';
const timed = <T>(f: () => T): [T | unknown, number] => {
  const t = performance.now();
  try { return [f(), performance.now() - t]; } catch (e) { return [e, performance.now() - t]; }
};
const grammarError = (e: unknown, re: RegExp) => { expect(e).toBeInstanceOf(GrammarError); expect((e as Error).message).toMatch(re); };

describe("grammar engine: bounded work", () => {
  test("an ambiguous grammar forced down one path fails within a bound instead of doubling its stacks per byte", () => {
    const vocab = new TokenVocab(["a", "b", "c", "d"].map((t) => new TextEncoder().encode(t)), []);
    const gs = compileGrammar(AMBIGUOUS).state(vocab), heap0 = process.memoryUsage().heapUsed;
    const [e, ms] = timed(() => { for (let i = 0; i < 40; i++) { gs.mask(new Float32Array(4)); gs.accept(0); } });
    grammarError(e, /grammar is too ambiguous/);
    expect(ms).toBeLessThan(2000); // unbounded: 2^n stacks, 18 tokens 16-24 s
    expect(process.memoryUsage().heapUsed - heap0).toBeLessThan(200 << 20);
    const [e2, ms2] = timed(() => compileGrammar(AMBIGUOUS).matches("a".repeat(40) + "d"));
    grammarError(e2, /too ambiguous/);
    expect(ms2).toBeLessThan(2000);
  });

  test("grammars whose start expands exponentially, or nests deep, are GrammarErrors (not a stack overflow)", () => {
    let tree = 'root ::= n0 "z"\n';
    for (let i = 0; i < 40; i++) tree += `n${i} ::= n${i + 1} n${i + 1}\n`;
    grammarError(timed(() => compileGrammar(tree + 'n40 ::= "a"?\n'))[0], /too ambiguous/);
    grammarError(timed(() => compileGrammar(`root ::= ${"(".repeat(100_000)}"a"${")".repeat(100_000)}`))[0], /nest deeper than 256/);
    grammarError(timed(() => compileGrammar(`root ::= "a"${"*".repeat(100_000)}`))[0], /nest deeper than 256/);
    let chain = "root ::= r0\n";
    for (let i = 0; i < 5000; i++) chain += `r${i} ::= r${i + 1}\n`;
    grammarError(timed(() => compileGrammar(chain + 'r5000 ::= "x"\n'))[0], /rules nest over 2000 deep/);
    const [big, ms] = timed(() => compileGrammar(`root ::= ${Array.from({ length: 256 }, (_, i) => `"${"x".repeat(60_000)}${i}"`).join(" | ")}`));
    grammarError(big, /grammar is too large/);
    expect(ms).toBeLessThan(500); // unbounded: 10 s and 4M symbols before the old cap
  });

  test("schema conversion: deep, wide and many-required schemas are refused fast, naming where", () => {
    let deep: unknown = { type: "string" };
    for (let i = 0; i < 10_000; i++) deep = { type: "object", properties: { a: deep }, required: ["a"] };
    const [e, ms] = timed(() => schemaToGbnf(deep));
    grammarError(e, /nests deeper than 256 levels/);
    expect((e as GrammarError).path).toStartWith("#/properties/a/properties/a");
    expect(ms).toBeLessThan(500);
    const props: Record<string, unknown> = {};
    for (let i = 0; i < 50_000; i++) props[`p${i}`] = { type: "integer" };
    const [e2, ms2] = timed(() => schemaToGbnf({ type: "object", properties: props, required: Object.keys(props) }));
    grammarError(e2, /too large/);
    expect(ms2).toBeLessThan(1500); // unbounded: 14-25 s (quadratic `required` lookups), 5.7 MB of GBNF
    // what still fits converts and compiles as before
    const few = Object.fromEntries(Object.keys(props).slice(0, 300).map((k) => [k, props[k]]));
    expect(compileGrammar(schemaToGbnf({ type: "object", properties: few })).matches('{"p7": 3, "p299": 4}')).toBe(true);
  });
});

describe.skipIf(!hasTiny)("serve: hostile grammars and bodies", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 2 }); });
  afterAll(() => s.stop());
  const A = 113; // the fixture's token "a"
  const completion = (extra: Record<string, unknown>) =>
    post(s.url, "/v1/completions", { prompt: "x", max_tokens: 40, temperature: 0, ...extra });

  test("an ambiguous GBNF forced by logit_bias ends fast with a 400 / an SSE error naming grammar; others are served", async () => {
    const t = performance.now();
    const r = await completion({ grammar: AMBIGUOUS, logit_bias: { [A]: 100 } });
    const j = (await r.json()) as any;
    expect(r.status).toBe(400);
    expect(j.error.param).toBe("grammar");
    expect(j.error.message).toMatch(/^grammar: grammar is too ambiguous/);
    expect(performance.now() - t).toBeLessThan(3000); // unbounded: 18 tokens took 16-24 s
    const sse = await (await completion({ grammar: AMBIGUOUS, logit_bias: { [A]: 100 }, stream: true })).text();
    expect(sse).toMatch(/too ambiguous/);
    const vllm = (await (await completion({ guided_grammar: AMBIGUOUS, logit_bias: { [A]: 100 } })).json()) as any;
    expect(vllm.error.param).toBe("guided_grammar");
    const ok = (await (await completion({ guided_choice: ["yes", "no"] })).json()) as any;
    expect(["yes", "no"]).toContain(ok.choices[0].text);
  });

  test("/health answers while huge schemas are refused with a 400 naming the field", async () => {
    const props: Record<string, unknown> = {};
    for (let i = 0; i < 50_000; i++) props[`p${i}`] = { type: "integer" };
    const schema = { type: "object", properties: props, required: Object.keys(props) };
    const health = pollHealth(s.url);
    const refused = await Promise.all([0, 1].map(async () => {
      const r = await completion({ response_format: { type: "json_schema", json_schema: { name: "big", schema } } });
      return [r.status, ((await r.json()) as any).error.param];
    }));
    const worst = await health.stop();
    expect(refused).toEqual([[400, "response_format.json_schema.schema.properties"], [400, "response_format.json_schema.schema.properties"]]);
    expect(worst).toBeLessThan(400); // unbounded: /health blocked 17 s
  });

  test("deep schemas, template kwargs and tool parameters are 400s naming the field, not 500s", async () => {
    let deep: unknown = { type: "string" };
    for (let i = 0; i < 10_000; i++) deep = { type: "object", properties: { a: deep } };
    const r1 = await completion({ response_format: { type: "json_schema", json_schema: { name: "deep", schema: deep } } });
    expect(r1.status).toBe(400);
    expect(((await r1.json()) as any).error.param).toBe("response_format.json_schema.schema.properties");
    // a 1M-deep array, as raw JSON text (JSON.stringify of it would overflow here)
    const n = 1_000_000, nested = `${"[".repeat(n)}${"]".repeat(n)}`;
    const raw = (body: string) => fetch(`${s.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body });
    const msgs = '"messages":[{"role":"user","content":"hi"}],"max_tokens":1';
    const r2 = await raw(`{${msgs},"chat_template_kwargs":{"x":${nested}}}`);
    expect(r2.status).toBe(400);
    expect(((await r2.json()) as any).error.param).toBe("chat_template_kwargs.x.0.0");
    const r3 = await raw(`{${msgs},"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":${nested}}}}}],"tool_choice":"required"}`);
    expect(r3.status).toBe(400);
    expect(((await r3.json()) as any).error.message).toMatch(/^tools\.0\.function\.parameters\.…: nests deeper than 256 levels/);
  });

  test("an oversized guided_choice or grammar is refused before it is built or compiled", async () => {
    const t = performance.now();
    const r = await completion({ guided_choice: Array.from({ length: 256 }, (_, i) => `${"x".repeat(20_000)}${i}`) });
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error).toMatchObject({ param: "guided_choice", message: expect.stringMatching(/grammar is too large/) });
    const g = await completion({ grammar: `root ::= "${"y".repeat(300_000)}"` });
    expect(((await g.json()) as any).error.param).toBe("grammar");
    expect(performance.now() - t).toBeLessThan(2000);
  });
});
