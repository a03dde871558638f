// Tool calling: GLM call parsing (typed arguments, any chunking, unfinished calls kept as text), the
// forced-choice schema, `tools` and earlier calls reaching the chat template, and the chat route end to
// end: a GLM call in the output (spelled under a GBNF grammar, as the tiny model would never write one)
// becomes tool_calls, streamed and not; tool_choice required / named force calls; parallel_tool_calls false keeps one
// call; bad tool fields → 400.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { loadTokenizer, TextCodec } from "../src/model/tokenizer.ts";
import { Detok, thinkIds } from "../src/engine/serving/detok.ts";
import type { Server } from "../src/server/server.ts";
import { forcedCalls, forcedSchema, glmArgs, parseGlmCall, templateArguments, ToolCallStream, type Tool, type ToolCall } from "../src/server/tools.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { post, sseData, startTiny } from "./server.helpers.ts";

const TOOLS: Tool[] = [
  { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } } } },
  { type: "function", function: { name: "set_unit", parameters: { type: "object", properties: { unit: { enum: ["c", "f"] } }, required: ["unit"], additionalProperties: false } } },
];
const CALL = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>123</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>opts</arg_key>\n<arg_value>{\"a\": [1, 2]}</arg_value>\n<arg_key>note</arg_key>\n<arg_value>not json</arg_value>\n</tool_call>";
const ARGS = { city: "123", days: 3, opts: { a: [1, 2] }, note: "not json" };

describe("GLM tool calls", () => {
  test("a call: name, string-typed parameters raw, others JSON, non-JSON kept as a string", () => {
    const c = parseGlmCall(CALL.slice("<tool_call>".length, -"</tool_call>".length), TOOLS);
    expect(c.type).toBe("function");
    expect(c.id).toStartWith("call_");
    expect(c.function.name).toBe("get_weather");
    expect(JSON.parse(c.function.arguments)).toEqual(ARGS);
    expect(JSON.parse(parseGlmCall("no_args\n", TOOLS).function.arguments)).toEqual({});
  });

  test("a body's arguments are the regex's matches (random bodies, malformed ones included)", () => {
    const ARG = /<arg_key>([\s\S]*?)<\/arg_key>\s*<arg_value>([\s\S]*?)<\/arg_value>/g; // the definition (backtracks)
    const atoms = ["<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", " ", "\n", "\u3000", "k", "v", "<", "/",
      "<arg_key>k</arg_key>\n<arg_value>v</arg_value>", "<arg_key>k", "</arg_key> <arg_value>", "v</arg_value>"];
    let seed = 5, both = 0;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) % n;
    for (let t = 0; t < 3000; t++) {
      const body = Array.from({ length: rnd(24) }, () => atoms[rnd(atoms.length)]).join("");
      const want = [...body.matchAll(ARG)].map((m): [string, string] => [m[1], m[2]]);
      expect(glmArgs(body)).toEqual(want);
      if (want.length > 1) both++;
    }
    expect(both).toBeGreaterThan(20); // (bodies with several arguments were drawn)
  });

  test("hostile: 16,000 unclosed arguments (512,001 characters) parse at once, as no arguments", () => {
    // (the regex took 6.3 s of the HTTP thread for 1,000 of them, 205 s for 4,000)
    const body = "f" + "<arg_key>a</arg_key><arg_value>x".repeat(16000);
    expect(glmArgs(body)).toEqual([]);
    expect(JSON.parse(parseGlmCall(body, TOOLS).function.arguments)).toEqual({});
  }, 5000);

  test("a call cut by the limit loses its unfinished tag as /<[^>]*$/ would cut it; 200,000 \"<\" at once", () => {
    const cut = (body: string) => { const s = new ToolCallStream(TOOLS); s.push(`<tool_call>${body}`); const c = s.cutCall()!.function; return [c.name, c.arguments]; };
    const ref = (body: string) => { const c = parseGlmCall(body.replace(/<[^>]*$/, ""), TOOLS).function; return [c.name, c.arguments]; };
    for (const body of ["get_weather<arg_key>city</arg_key><arg_value>\"P\"</arg_value><arg_ke", "get_weather<a<b", "get_weather<x>y<",
      "get_weather", "get_weather<arg_key>days</arg_key><arg_value>3</arg_value>"]) expect(cut(body)).toEqual(ref(body));
    const long = "note" + "<".repeat(200000) + ">x"; // (the regex: 5 s at 80,000; a ">" follows, so nothing is cut)
    expect(cut(long)).toEqual([long, "{}"]);
  }, 5000);

  test("the stream gives the same content and calls however the text is cut; unfinished calls stay text", () => {
    const text = `Let me check. ${CALL}${CALL.replace("get_weather", "set_unit")} done <tool_`;
    for (const cut of [1, 2, 3, 5, 7, 11, 1000]) {
      const s = new ToolCallStream(TOOLS);
      let content = "";
      const calls: ToolCall[] = [];
      for (let i = 0; i < text.length; i += cut) {
        const r = s.push(text.slice(i, i + cut));
        content += r.content;
        calls.push(...r.calls);
      }
      content += s.finish();
      expect(content).toBe("Let me check.  done <tool_");
      expect(calls.map((c) => c.function.name)).toEqual(["get_weather", "set_unit"]);
      expect(JSON.parse(calls[0].function.arguments)).toEqual(ARGS);
    }
    const open = new ToolCallStream(TOOLS);
    expect(open.push("a <tool_call>get_weather\n<arg_key>ci").content).toBe("a ");
    expect(open.finish()).toBe("<tool_call>get_weather\n<arg_key>ci");
  });

  test("forced choices: the named function's parameters; required: a non-empty array of {name, parameters}", () => {
    expect(forcedSchema(TOOLS, { type: "function", function: { name: "set_unit" } })).toEqual(TOOLS[1].function.parameters!);
    expect(forcedSchema(TOOLS, "auto")).toBeNull();
    const req = forcedSchema(TOOLS, "required") as any;
    expect(req.minItems).toBe(1);
    expect(req.items.anyOf.map((s: any) => s.properties.name.const)).toEqual(["get_weather", "set_unit"]);
    const named = forcedCalls('{"unit":"f"}', { type: "function", function: { name: "set_unit" } });
    expect(named.map((c) => [c.function.name, JSON.parse(c.function.arguments)])).toEqual([["set_unit", { unit: "f" }]]);
    const two = forcedCalls('[{"name":"set_unit","parameters":{"unit":"c"}},{"name":"get_weather","parameters":{}}]', "required");
    expect(two.map((c) => c.function.name)).toEqual(["set_unit", "get_weather"]);
    expect(() => forcedCalls('{"unit":', "required")).toThrow();
  });
});

describe.skipIf(!hasTiny)("chat template and detokenizer with tools", () => {
  test("GLM's special <tool_call> tokens reach the text only when kept (requests with tools)", () => {
    const codec = loadTokenizer(TINY), ids = [12, ...codec.encode("get_weather"), 13];
    expect(codec.decode([12, 13])).toBe("<tool_call></tool_call>"); // ids 12, 13 are the special tags
    const text = (keep: boolean) => { const d = new Detok(codec, [], thinkIds(codec), keep); return ids.map((t) => d.push(t).text).join("") + d.finish().text; };
    expect(text(true)).toBe("<tool_call>get_weather</tool_call>");
    expect(text(false)).toBe("get_weather");
  });

  test("tools, earlier calls (arguments as objects) and tool results reach the template", () => {
    const template = "{%- for t in tools -%}[tool {{ t.function.name }}]{%- endfor -%}{%- for m in messages -%}<{{ m.role }}>{{ m.content }}"
      + "{%- for c in m.tool_calls or [] -%}(call {{ c.function.name }} city={{ c.function.arguments.city }}){%- endfor -%}"
      + "{%- if m.tool_call_id -%}(for {{ m.tool_call_id }}){%- endif -%}{%- endfor -%}";
    const codec = new TextCodec(JSON.parse(readFileSync(join(TINY, "tokenizer.json"), "utf8")), { chat_template: template });
    const text = codec.chat([
      { role: "user", content: "weather?" },
      { role: "assistant", content: "", tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: { city: "Paris" } } }] },
      { role: "tool", content: "sunny", tool_call_id: "c1" },
    ], { tools: TOOLS });
    expect(text).toBe("[tool get_weather][tool set_unit]<user>weather?<assistant>(call get_weather city=Paris)<tool>sunny(for c1)");
  });
});

describe.skipIf(!hasTiny)("a GLM-style chat template (the constructs GLM-4.5's uses)", () => {
  // tools as tojson(ensure_ascii=False) lines, a visible_text macro, calls rendered key by key from
  // arguments.items() (strings raw, other values as JSON), tool results after <|observation|>
  const GLM = "[gMASK]<sop>{%- if tools -%}<|system|>\n<tools>\n{% for tool in tools %}{{ tool | tojson(ensure_ascii=False) }}\n{% endfor %}</tools>{%- endif -%}"
    + "{%- macro visible_text(content) -%}{%- if content is string -%}{{- content }}{%- elif content is iterable and content is not mapping -%}"
    + "{%- for item in content -%}{%- if item is mapping and item.type == 'text' -%}{{- item.text }}{%- elif item is string -%}{{- item }}{%- endif -%}{%- endfor -%}"
    + "{%- else -%}{{- content }}{%- endif -%}{%- endmacro -%}"
    + "{%- for m in messages %}{%- if m.role == 'user' -%}<|user|>\n{{ visible_text(m.content) }}"
    + "{%- elif m.role == 'assistant' -%}<|assistant|>\n{{ visible_text(m.content) }}{%- if m.tool_calls -%}{% for tc in m.tool_calls %}"
    + "{%- if tc.function %}{%- set tc = tc.function %}{%- endif %}{{ '\\n<tool_call>' + tc.name }}{% set _args = tc.arguments %}"
    + "{% for k, v in _args.items() %}\n<arg_key>{{ k }}</arg_key>\n<arg_value>{{ v | tojson(ensure_ascii=False) if v is not string else v }}</arg_value>{% endfor %}"
    + "\n</tool_call>{% endfor %}{% endif %}"
    + "{%- elif m.role == 'tool' -%}{%- if loop.first or (messages[loop.index0 - 1].role != 'tool') %}{{- '<|observation|>' }}{%- endif %}"
    + "\n<tool_response>\n{{ m.content }}\n</tool_response>{%- endif -%}{%- endfor -%}{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}";

  test("renders tools, an earlier call and its result; the rendered call parses back to the same arguments", () => {
    const codec = new TextCodec(JSON.parse(readFileSync(join(TINY, "tokenizer.json"), "utf8")), { chat_template: GLM });
    const args = '{"city":"Zürich","days":3,"opts":{"a":[1,2]}}';
    const text = codec.chat([
      { role: "user", content: "weather?" },
      { role: "assistant", content: "", tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: templateArguments(args) } }] },
      { role: "tool", content: "sunny", tool_call_id: "c1" },
    ], { tools: TOOLS });
    expect(text).toContain(`<tools>\n${JSON.stringify(TOOLS[0]).replaceAll(",", ", ").replaceAll(":", ": ")}`);
    expect(text).toContain("<|observation|>"); // (block tags eat the newline after them, as HF's trim_blocks)
    expect(text).toEndWith("<tool_response>\nsunny\n</tool_response><|assistant|>");
    const body = text.slice(text.indexOf("<tool_call>") + "<tool_call>".length, text.indexOf("</tool_call>"));
    const back = parseGlmCall(body, TOOLS);
    expect(back.function.name).toBe("get_weather");
    expect(JSON.parse(back.function.arguments)).toEqual(JSON.parse(args));
  });
});

describe.skipIf(!hasTiny)("serve: tool calls", () => {
  let s: Server;
  let client: OpenAI;
  beforeAll(async () => {
    s = await startTiny({ slots: 2 });
    client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "x", maxRetries: 0, timeout: 20000 });
  });
  afterAll(() => s.stop());
  const msgs = [{ role: "user", content: "What is the weather in Paris?" }];
  const SHORT = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>";
  const SHORT_ARGS = { city: "Paris", days: 3 };
  const gbnf = `root ::= "Sure. " ${JSON.stringify(SHORT)}`;

  test("a GLM call in the output becomes tool_calls (content before it kept); the SDK reads it", async () => {
    const r = await client.chat.completions.create({ model: "m", messages: msgs as any, tools: TOOLS as any, max_tokens: 600, temperature: 0, grammar: gbnf } as any);
    const c = r.choices[0];
    expect(c.finish_reason).toBe("tool_calls");
    expect(c.message.content).toBe("Sure. ");
    expect(c.message.tool_calls).toHaveLength(1);
    const call = c.message.tool_calls![0] as any;
    expect(call.type).toBe("function");
    expect(call.function.name).toBe("get_weather");
    expect(JSON.parse(call.function.arguments)).toEqual(SHORT_ARGS);
  });

  test("streamed: content deltas, then one tool_calls delta (index 0), finish_reason tool_calls", async () => {
    const res = await post(s.url, "/v1/chat/completions", { messages: msgs, tools: TOOLS, max_tokens: 600, temperature: 0, grammar: gbnf, stream: true });
    const chunks = sseData(await res.text()).filter((d) => d !== "[DONE]").map((d) => JSON.parse(d));
    const content = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    const calls = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    expect(content).toBe("Sure. ");
    expect(calls).toHaveLength(1);
    expect(calls[0].index).toBe(0);
    expect(calls[0].function.name).toBe("get_weather");
    expect(JSON.parse(calls[0].function.arguments)).toEqual(SHORT_ARGS);
    expect(chunks.at(-1).choices[0].finish_reason).toBe("tool_calls");
  });

  test("tool_choice none: the same output stays text", async () => {
    const r = await (await post(s.url, "/v1/chat/completions", { messages: msgs, tools: TOOLS, tool_choice: "none", max_tokens: 600, temperature: 0, grammar: gbnf })).json() as any;
    expect(r.choices[0].message.content).toBe(`Sure. ${SHORT}`);
    expect(r.choices[0].message.tool_calls).toBeUndefined();
    expect(r.choices[0].finish_reason).toBe("stop");
  });

  test("tool_choice named and required force calls whose arguments follow the schemas", async () => {
    const named = await client.chat.completions.create({ model: "m", messages: msgs as any, tools: TOOLS as any, tool_choice: { type: "function", function: { name: "set_unit" } }, max_tokens: 40, temperature: 0.8, seed: 3 });
    const n = named.choices[0];
    expect(n.finish_reason).toBe("tool_calls");
    expect(n.message.content).toBeNull();
    expect((n.message.tool_calls![0] as any).function.name).toBe("set_unit");
    expect(["c", "f"]).toContain(JSON.parse((n.message.tool_calls![0] as any).function.arguments).unit);
    const req = await (await post(s.url, "/v1/chat/completions", { messages: msgs, tools: [TOOLS[1]], tool_choice: "required", max_tokens: 60, temperature: 0 })).json() as any;
    const calls = req.choices[0].message.tool_calls;
    expect(calls.length).toBeGreaterThan(0);
    for (const c of calls) {
      expect(c.function.name).toBe("set_unit");
      expect(["c", "f"]).toContain(JSON.parse(c.function.arguments).unit);
    }
  });

  test("parallel_tool_calls false: one call at most (auto: the later ones dropped; required: an array of one)", async () => {
    const two = `root ::= "Sure. " ${JSON.stringify(SHORT + SHORT.replace("Paris", "Lyon"))}`;
    const ask = async (extra: object) => (await (await post(s.url, "/v1/chat/completions", { messages: msgs, tools: TOOLS, max_tokens: 600, temperature: 0, ...extra })).json()) as any;
    expect((await ask({ grammar: two })).choices[0].message.tool_calls).toHaveLength(2);
    const one = (await ask({ grammar: two, parallel_tool_calls: false })).choices[0];
    expect(one.message.tool_calls).toHaveLength(1);
    expect(JSON.parse(one.message.tool_calls[0].function.arguments)).toEqual(SHORT_ARGS); // the first
    expect(one.finish_reason).toBe("tool_calls");
    // required: the grammar's array holds one call (a long enough output would otherwise hold several)
    const req = forcedSchema(TOOLS, "required", true) as any;
    expect(req.maxItems).toBe(1);
    const forced = (await ask({ tool_choice: "required", parallel_tool_calls: false, max_tokens: 200, temperature: 1, seed: 5 })).choices[0];
    expect(forced.message.tool_calls).toHaveLength(1);
  });

  test("earlier calls and tool results in messages are accepted", async () => {
    const history = [...msgs, { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "sunny" }];
    const res = await post(s.url, "/v1/chat/completions", { messages: history, tools: TOOLS, max_tokens: 3, temperature: 0 });
    expect(res.status).toBe(200);
  });

  const bad: [string, object, string][] = [
    ["unknown named tool", { tools: TOOLS, tool_choice: { type: "function", function: { name: "nope" } } }, "tool_choice.function.name"],
    ["required without tools", { tool_choice: "required" }, "tool_choice"],
    ["forced call with response_format", { tools: TOOLS, tool_choice: "required", response_format: { type: "json_object" } }, "tool_choice"],
    ["bad tool name", { tools: [{ type: "function", function: { name: "a b" } }] }, "tools.0.function.name"],
    ["non-function tool", { tools: [{ type: "retrieval" }] }, "tools.0.type"],
    ["tool_choice value", { tools: TOOLS, tool_choice: "always" }, "tool_choice"],
    ["legacy functions", { functions: [{ name: "f" }] }, "functions"],
  ];
  for (const [what, extra, param] of bad)
    test(`400 naming the field: ${what}`, async () => {
      const res = await post(s.url, "/v1/chat/completions", { messages: msgs, max_tokens: 2, ...extra });
      expect(res.status).toBe(400);
      expect(((await res.json()) as any).error.param).toStartWith(param);
    });
});
