// Constrained output over HTTP and mux on a generated tiny model (random weights, byte-level BPE, so
// no shared fixture is needed): response_format json_schema (streaming and not, greedy and several
// seeds at temperature 1) always parses and validates; json_object; the `grammar` GBNF extension on
// both routes; masked logprobs; schema / grammar errors → 400 naming the field; mux grammar=<bytes>
// end to end (and BAD_REQUEST grammar keeping the stream in sync); mux DATA frames carry raw token
// bytes whose concatenation is the UTF-8 of the decoded text.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startServer, type Server } from "../src/server/server.ts";
import { genModel } from "./helpers/models.ts";
import { MuxClient, muxOnce, post, sseData, submit, type Frame } from "./server.helpers.ts";

const SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 10 },
    age: { type: "integer" },
    score: { type: "number" },
    ok: { type: "boolean" },
    color: { enum: ["red", "green", "blue"] },
    tags: { type: "array", items: { type: "string", maxLength: 4 }, maxItems: 3 },
    where: { type: "object", properties: { x: { type: "integer" }, note: { type: ["string", "null"], maxLength: 5 } }, required: ["x"] },
  },
  required: ["name", "age", "ok", "color"],
} as const;

/** Errors of `v` against SCHEMA (a hand check of exactly the keywords used above); [] when valid. */
function validate(v: unknown): string[] {
  const errs: string[] = [];
  const obj = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);
  const str = (x: unknown, max: number, at: string) => {
    if (typeof x !== "string") errs.push(`${at}: not a string`);
    else if ([...x].length > max) errs.push(`${at}: longer than ${max}`);
  };
  const int = (x: unknown, at: string) => { if (typeof x !== "number" || !Number.isInteger(x)) errs.push(`${at}: not an integer`); };
  const only = (o: Record<string, unknown>, keys: string[], at: string) => {
    for (const k of Object.keys(o)) if (!keys.includes(k)) errs.push(`${at}: extra key ${k}`);
  };
  if (!obj(v)) return ["not an object"];
  only(v, Object.keys(SCHEMA.properties), "$");
  for (const k of SCHEMA.required) if (!(k in v)) errs.push(`$: missing ${k}`);
  if ("name" in v) str(v.name, 10, "name");
  if ("age" in v) int(v.age, "age");
  if ("score" in v && typeof v.score !== "number") errs.push("score: not a number");
  if ("ok" in v && typeof v.ok !== "boolean") errs.push("ok: not a boolean");
  if ("color" in v && !["red", "green", "blue"].includes(v.color as string)) errs.push("color: not in the enum");
  if ("tags" in v) {
    if (!Array.isArray(v.tags) || v.tags.length > 3) errs.push("tags: not an array of ≤ 3");
    else v.tags.forEach((t, i) => str(t, 4, `tags.${i}`));
  }
  if ("where" in v) {
    const w = v.where;
    if (!obj(w)) errs.push("where: not an object");
    else {
      only(w, ["x", "note"], "where");
      if (!("x" in w)) errs.push("where: missing x");
      else int(w.x, "where.x");
      if ("note" in w && w.note !== null) str(w.note, 5, "where.note");
    }
  }
  return errs;
}

function checkJson(text: string, what: string): unknown {
  let v: unknown;
  try { v = JSON.parse(text); } catch (e) { throw new Error(`${what}: not JSON (${(e as Error).message}): ${JSON.stringify(text)}`); }
  const errs = validate(v);
  if (errs.length) throw new Error(`${what}: ${errs.join("; ")}: ${text}`);
  return v;
}

const RF = { type: "json_schema", json_schema: { name: "person", schema: SCHEMA, strict: true } };
const MSGS = [{ role: "user", content: "Describe a person as JSON." }];
const RUNS: [string, number, number | undefined][] = [["greedy", 0, undefined], ...[1, 2, 3, 4].map((s) => [`T=1 seed ${s}`, 1, s] as [string, number, number])];

async function chatStream(url: string, body: object): Promise<{ text: string; finish: string }> {
  const res = await post(url, "/v1/chat/completions", { ...body, stream: true });
  if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
  let text = "", finish = "";
  for (const d of sseData(await res.text())) {
    if (d === "[DONE]") break;
    const c = JSON.parse(d).choices[0];
    text += c?.delta?.content ?? "";
    if (c?.finish_reason) finish = c.finish_reason;
  }
  return { text, finish };
}

const dataOf = (f: Frame[], id: string) => f.filter((x) => x.words[0] === "DATA" && x.words[1] === id).map((x) => x.data!);
const cat = (parts: Uint8Array[]) => Buffer.concat(parts.map((p) => Buffer.from(p)));
const isUtf8 = (b: Uint8Array) => { try { new TextDecoder("utf-8", { fatal: true }).decode(b); return true; } catch { return false; } };

describe("constrained output (generated tiny model)", () => {
  let s: Server;
  beforeAll(async () => {
    s = startServer({ dir: genModel({ preset: "tiny", seed: 21 }), slots: 4, port: 0, host: "127.0.0.1", ctx: 2048,
      templateKwargs: { enable_thinking: false } }); // the constraint tests read the content; thinking is tested below
    await s.engine.ready;
  });
  afterAll(() => s.stop());

  test("response_format json_schema, non-streaming: parses and validates, finish_reason stop (greedy + 4 seeds at T=1)", async () => {
    const outs = await Promise.all(RUNS.map(async ([what, temperature, seed]) => {
      const res = await post(s.url, "/v1/chat/completions", { messages: MSGS, response_format: RF, temperature, seed, max_tokens: 1500 });
      const j = await res.json() as any;
      expect(res.status).toBe(200);
      checkJson(j.choices[0].message.content, what);
      expect(j.choices[0].finish_reason).toBe("stop");
      return j.choices[0].message.content as string;
    }));
    expect(new Set(outs).size).toBeGreaterThan(1); // temperature 1 really samples
  }, 60000);

  test("response_format json_schema, streaming: the concatenated deltas parse and validate; greedy equals non-streaming", async () => {
    for (const [what, temperature, seed] of RUNS) {
      const r = await chatStream(s.url, { messages: MSGS, response_format: RF, temperature, seed, max_tokens: 1500 });
      checkJson(r.text, `stream ${what}`);
      expect(r.finish).toBe("stop");
    }
    const full = await (await post(s.url, "/v1/chat/completions", { messages: MSGS, response_format: RF, temperature: 0, max_tokens: 1500 })).json() as any;
    const st = await chatStream(s.url, { messages: MSGS, response_format: RF, temperature: 0, max_tokens: 1500 });
    expect(st.text).toBe(full.choices[0].message.content);
  }, 60000);

  test("response_format json_object and /v1/completions with json_schema", async () => {
    const o = await (await post(s.url, "/v1/chat/completions", { messages: MSGS, response_format: { type: "json_object" }, temperature: 0, max_tokens: 600 })).json() as any;
    if (o.choices[0].finish_reason === "stop") {
      const v = JSON.parse(o.choices[0].message.content);
      expect(typeof v === "object" && v !== null && !Array.isArray(v)).toBe(true);
    } else {
      expect(o.choices[0].message.content.startsWith("{")).toBe(true); // an unbounded object may run out of tokens
    }
    for (const seed of [5, 6]) {
      const c = await (await post(s.url, "/v1/completions", { prompt: "JSON:", response_format: RF, temperature: 1, seed, max_tokens: 1500 })).json() as any;
      checkJson(c.choices[0].text, `completions seed ${seed}`);
      expect(c.choices[0].finish_reason).toBe("stop");
    }
  }, 60000);

  test("grammar (GBNF) on both routes; logprobs report the constrained distribution", async () => {
    const grammar = 'root ::= ("yes" | "no") "!" [0-9]{2}';
    const re = /^(yes|no)![0-9]{2}$/;
    for (const seed of [1, 2, 3]) {
      const c = await (await post(s.url, "/v1/completions", { prompt: "Answer:", grammar, temperature: 1, seed, max_tokens: 50 })).json() as any;
      expect(c.choices[0].text).toMatch(re);
      expect(c.choices[0].finish_reason).toBe("stop");
      const m = await (await post(s.url, "/v1/chat/completions", { messages: MSGS, grammar, temperature: 1, seed, max_tokens: 50 })).json() as any;
      expect(m.choices[0].message.content).toMatch(re);
      expect(m.choices[0].finish_reason).toBe("stop");
    }
    // a choice between two one-byte tokens: the top alternatives are only those, with probabilities summing to 1
    const lp = await (await post(s.url, "/v1/chat/completions", { messages: MSGS, grammar: 'root ::= [ab] "."', temperature: 0, max_tokens: 5, logprobs: true, top_logprobs: 5 })).json() as any;
    const first = lp.choices[0].logprobs.content[0];
    expect(first.top_logprobs.map((t: any) => t.token).sort()).toEqual(["a", "b"]);
    expect(first.top_logprobs.reduce((a: number, t: any) => a + Math.exp(t.logprob), 0)).toBeCloseTo(1, 5);
    expect(first.logprob).toBe(first.top_logprobs[0].logprob); // greedy picks the top one
    const forced = lp.choices[0].logprobs.content[1]; // "." is the only choice
    expect(forced.logprob).toBeCloseTo(0, 6);
    expect(forced.top_logprobs).toHaveLength(1);
  }, 60000);

  test("enable_thinking with a grammar: the reasoning (if the model opens it) is free, the constrained text is the content", async () => {
    const r = await (await post(s.url, "/v1/chat/completions", { messages: MSGS, grammar: 'root ::= "ok"', chat_template_kwargs: { enable_thinking: true },
      temperature: 0, max_tokens: 10, thinking_token_budget: 2 })).json() as any;
    expect(r.choices[0].message.content).toBe("ok");
    expect(typeof r.choices[0].message.reasoning_content).toBe("string");
  });

  const bad: [string, string, object, string][] = [
    ["unknown schema type", "/v1/chat/completions", { messages: MSGS, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { a: { type: "frobnicate" } } } } } }, "response_format.json_schema.schema.properties.a.type"],
    ["strict schema with an unenforceable keyword", "/v1/completions", { prompt: "x", response_format: { type: "json_schema", json_schema: { name: "x", strict: true, schema: { type: "string", format: "uri-template" } } } }, "response_format.json_schema.schema.format"],
    ["schema that is not an object", "/v1/chat/completions", { messages: MSGS, response_format: { type: "json_schema", json_schema: { name: "x", schema: 5 } } }, "response_format.json_schema.schema"],
    ["no json_schema.name", "/v1/chat/completions", { messages: MSGS, response_format: { type: "json_schema", json_schema: { schema: {} } } }, "response_format.json_schema.name"],
    ["unknown response_format type", "/v1/chat/completions", { messages: MSGS, response_format: { type: "xml" } }, "response_format.type"],
    ["GBNF syntax error", "/v1/completions", { prompt: "x", grammar: "root ::= (" }, "grammar"],
    ["GBNF undefined rule", "/v1/chat/completions", { messages: MSGS, grammar: "root ::= missing" }, "grammar"],
    ["grammar and json_schema together", "/v1/chat/completions", { messages: MSGS, grammar: 'root ::= "a"', response_format: RF }, "grammar"],
    ["empty grammar", "/v1/completions", { prompt: "x", grammar: "" }, "grammar"],
  ];
  for (const [what, path, body, param] of bad) {
    test(`400 naming the field: ${what}`, async () => {
      for (const stream of [false, true]) {
        const res = await post(s.url, path, { ...body, stream });
        expect(res.status).toBe(400);
        const j = await res.json() as any;
        expect(j.error.type).toBe("invalid_request_error");
        expect(j.error.param).toBe(param);
        expect(j.error.message).toStartWith(param);
      }
    });
  }

  test("strict: false ignores keywords that cannot be enforced", async () => {
    const rf = { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { n: { type: "integer", minimum: 3 } }, required: ["n"] } } };
    const r = await (await post(s.url, "/v1/completions", { prompt: "x", response_format: rf, temperature: 0, max_tokens: 100 })).json() as any;
    expect(Number.isInteger(JSON.parse(r.choices[0].text).n)).toBe(true);
  });

  test("mux grammar=<bytes>: output follows the grammar, DONE stop; a bad grammar is BAD_REQUEST grammar and the stream stays in sync", async () => {
    const enc = new TextEncoder();
    const frame = (id: number, prompt: string, g: string, max: number, temp = "0", extra = "") =>
      `SUBMIT ${id} auto ${enc.encode(prompt).length} ${max} ${temp} 1 grammar=${enc.encode(g).length}${extra}\n${prompt}\n${g}\n`;
    const g = 'root ::= "{\\"n\\":" [1-9] [0-9]? "}"';
    const f = await muxOnce(s.url, frame(1, "give me json", g, 40) + frame(2, "again", g, 40, "1", " seed=9")
      + frame(3, "bad", "root ::= nope", 5) + frame(4, "bad", "", 5) + submit(5, "after", 2));
    for (const id of ["1", "2"]) {
      expect(cat(dataOf(f, id)).toString()).toMatch(/^\{"n":[1-9][0-9]?\}$/);
      expect(f.find((x) => x.words[0] === "DONE" && x.words[1] === id)!.words[2]).toBe("stop");
    }
    const e3 = f.find((x) => x.words[1] === "3")!;
    expect(e3.words.slice(0, 4)).toEqual(["ERROR", "3", "BAD_REQUEST", "grammar"]);
    expect(e3.head).toContain('undefined rule "nope"');
    expect(f.find((x) => x.words[1] === "4")!.words.slice(0, 4)).toEqual(["ERROR", "4", "BAD_REQUEST", "grammar"]);
    expect(f.find((x) => x.words[0] === "DONE" && x.words[1] === "5")!.words[2]).toBe("length");
    // invalid UTF-8 in the grammar block
    const raw = new Uint8Array([...enc.encode("SUBMIT 6 auto 1 1 0 1 grammar=2\nx\n"), 0xff, 0xfe, 10]);
    const f6 = await muxOnce(s.url, raw);
    expect(f6.find((x) => x.words[1] === "6")!.head).toBe("ERROR 6 BAD_REQUEST grammar is not valid UTF-8");
  }, 60000);

  test("mux DATA frames carry raw token bytes: a multi-byte character may split across frames; all bytes == UTF-8 of the text", async () => {
    // forced multi-byte output: each non-ASCII character of the generated tokenizer is several byte tokens
    const forced = 'root ::= "héllo 世界 😀 " [а-я]{3}';
    const prompt = "Ünïcödé prompt — 世界:";
    const f = await muxOnce(s.url, `SUBMIT 1 auto ${Buffer.byteLength(prompt)} 40 0 1 grammar=${Buffer.byteLength(forced)}\n${prompt}\n${forced}\n`);
    const parts = dataOf(f, "1");
    const http = await (await post(s.url, "/v1/completions", { prompt, grammar: forced, temperature: 0, max_tokens: 40 })).json() as any;
    expect(http.choices[0].text).toMatch(/^héllo 世界 😀 [а-я]{3}$/);
    expect(cat(parts).equals(Buffer.from(http.choices[0].text))).toBe(true);
    expect(parts.some((p) => !isUtf8(p))).toBe(true); // some frame holds part of a character
    const done = f.find((x) => x.words[0] === "DONE")!;
    expect(parts.length).toBe(Number(done.words[3])); // one DATA per token, none extra at the end
    // free text with multi-byte characters (valid UTF-8 by grammar), streamed over a live mux stream
    const free = "root ::= [^\\x00-\\x1f]{12}";
    const c = new MuxClient(s.url);
    c.send(`SUBMIT 7 auto ${Buffer.byteLength(prompt)} 30 1 1 seed=3 grammar=${Buffer.byteLength(free)}\n${prompt}\n${free}\n`);
    await c.end(7);
    c.endInput();
    await c.done;
    const h2 = await (await post(s.url, "/v1/completions", { prompt, grammar: free, temperature: 1, top_p: 1, seed: 3, max_tokens: 30 })).json() as any;
    expect(cat(dataOf(c.frames, "7")).equals(Buffer.from(h2.choices[0].text))).toBe(true);
    expect([...h2.choices[0].text]).toHaveLength(12);
  }, 60000);

  test("mux without a grammar: DATA bytes of a multi-byte prompt's continuation equal /v1/completions at temperature 0", async () => {
    const prompt = "Ça va? 東京 — ünïcödé ✓";
    const f = await muxOnce(s.url, submit(1, prompt, 24));
    const http = await (await post(s.url, "/v1/completions", { prompt, temperature: 0, max_tokens: 24 })).json() as any;
    const bytes = cat(dataOf(f, "1"));
    expect(new TextDecoder().decode(bytes)).toBe(http.choices[0].text);
  }, 60000);
});
