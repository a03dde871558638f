// POST /v1/responses (OpenAI's Responses API) through the official `openai` SDK on the shared fixture: the reply
// equals the chat route's for the same conversation (instructions as the system turn, message items), usage and
// incomplete_details; streamed, the SDK's events come in the API's order with increasing sequence numbers and
// deltas adding up to the text; reasoning as a reasoning item (a template that opens <think>); a forced
// function gives a function_call item (streamed as the call events) with the chat route's arguments, earlier call /
// output items render as the chat route's tool turns; structured outputs (text.format) as the chat route's
// response_format; previous_response_id (the in-memory store) and GET /v1/responses/{id}; other tools and bad formats
// are refused naming the field.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, startTiny, TOOL_TURNS_TEMPLATE } from "./server.helpers.ts";

describe.skipIf(!hasTiny)("serve: /v1/responses", () => {
  let s: Server, client: OpenAI;
  beforeAll(async () => {
    s = await startTiny({ slots: 2 });
    client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "x", maxRetries: 0, timeout: 20000 });
  });
  afterAll(() => s.stop());
  const chat = async (messages: { role: string; content: string }[], max: number, think = false) =>
    ((await (await post(s.url, "/v1/chat/completions", { messages, max_tokens: max, temperature: 0, chat_template_kwargs: { enable_thinking: think } })).json()) as any);

  test("a reply equal to the chat route's, in the Responses shape", async () => {
    const want = await chat([{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }, { role: "assistant", content: "Hello." }, { role: "user", content: "More?" }], 8);
    const r = await client.responses.create({ model: "glm-tiny", instructions: "Be brief.", max_output_tokens: 8, temperature: 0,
      input: [{ role: "user", content: "Hi" }, { role: "assistant", content: [{ type: "output_text", text: "Hello." }] } as any, { role: "user", content: [{ type: "input_text", text: "More?" }] }] });
    expect(r.object).toBe("response");
    expect(r.id).toMatch(/^resp-/);
    expect(r.output_text).toBe(want.choices[0].message.content);
    expect(r.status).toBe(want.choices[0].finish_reason === "length" ? "incomplete" : "completed");
    if (r.status === "incomplete") expect(r.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(r.usage).toMatchObject({ input_tokens: want.usage.prompt_tokens, output_tokens: want.usage.completion_tokens });
    expect(r.output.map((o) => o.type)).toEqual(["message"]);
  });

  test("streamed: the API's events in order, sequence numbers rising, deltas adding up", async () => {
    const whole = await client.responses.create({ model: "m", input: "Tell me a story.", max_output_tokens: 10, temperature: 0 });
    const stream = await client.responses.create({ model: "m", input: "Tell me a story.", max_output_tokens: 10, temperature: 0, stream: true });
    const types: string[] = [], seqs: number[] = [];
    let text = "", last: any = null;
    for await (const ev of stream) {
      types.push(ev.type); seqs.push(ev.sequence_number);
      if (ev.type === "response.output_text.delta") text += ev.delta;
      last = ev;
    }
    expect(types.slice(0, 4)).toEqual(["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]);
    expect(types.slice(-4)).toEqual(["response.output_text.done", "response.content_part.done", "response.output_item.done", `response.${whole.status}`]);
    expect(seqs).toEqual(seqs.map((_, i) => i));
    expect(text).toBe(whole.output_text);
    expect(last.response.output[0].content[0].text).toBe(whole.output_text);
  });

  test("reasoning: a reasoning item with the chat route's reasoning_content, streamed as reasoning_text deltas", async () => {
    // a template that opens <think> when thinking is on (the fixture's own never does), so the reply is reasoning
    const T = "{%- for m in messages -%}<|user|>{{ m.content }}{%- endfor -%}<|assistant|>{%- if enable_thinking -%}<think>{%- endif -%}";
    const t = await startTiny({ slots: 1, chatTemplate: T });
    try {
      const want = ((await (await post(t.url, "/v1/chat/completions", { messages: [{ role: "user", content: "Think." }], max_tokens: 12, temperature: 0,
        chat_template_kwargs: { enable_thinking: true } })).json()) as any).choices[0].message;
      expect(want.reasoning_content.length).toBeGreaterThan(0);
      const c = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: "x", maxRetries: 0, timeout: 20000 });
      const r = await c.responses.create({ model: "m", input: "Think.", max_output_tokens: 12, temperature: 0, reasoning: { effort: "high" } });
      const item = r.output[0] as any;
      expect(item).toMatchObject({ type: "reasoning", content: [{ type: "reasoning_text", text: want.reasoning_content }] });
      expect(r.output_text).toBe(want.content ?? "");
      const off = await c.responses.create({ model: "m", input: "Think.", max_output_tokens: 12, temperature: 0 }); // no reasoning asked
      expect(off.output.map((o) => o.type)).toEqual(["message"]);
      let deltas = "";
      for await (const ev of await c.responses.create({ model: "m", input: "Think.", max_output_tokens: 12, temperature: 0, reasoning: { effort: "high" }, stream: true }))
        if ((ev as any).type === "response.reasoning_text.delta") deltas += (ev as any).delta;
      expect(deltas).toBe(want.reasoning_content);
    } finally { await t.stop(); }
  });

  const weather = { type: "function" as const, name: "get_weather", description: "Weather of a city", strict: true,
    parameters: { type: "object", properties: { city: { type: "string", enum: ["Paris", "Rome", "Oslo"] } }, required: ["city"], additionalProperties: false } };
  const chatTools = [{ type: "function", function: { name: weather.name, description: weather.description, parameters: weather.parameters } }];

  test("a forced function: a function_call item with the chat route's arguments; streamed as the API's call events", async () => {
    const want = ((await (await post(s.url, "/v1/chat/completions", { messages: [{ role: "user", content: "Weather?" }], max_tokens: 48, temperature: 0,
      tools: chatTools, tool_choice: { type: "function", function: { name: "get_weather" } } })).json()) as any).choices[0].message.tool_calls[0];
    const r = await client.responses.create({ model: "m", input: "Weather?", max_output_tokens: 48, temperature: 0, tools: [weather],
      tool_choice: { type: "function", name: "get_weather" } });
    const call = r.output.find((o) => o.type === "function_call") as any;
    expect(call).toMatchObject({ type: "function_call", name: "get_weather", arguments: want.function.arguments, status: "completed" });
    expect(typeof JSON.parse(call.arguments).city).toBe("string");
    expect(call.call_id).toMatch(/^call_/);
    const stream = await client.responses.create({ model: "m", input: "Weather?", max_output_tokens: 48, temperature: 0, tools: [weather],
      tool_choice: { type: "function", name: "get_weather" }, stream: true });
    const types: string[] = [];
    let args = "";
    for await (const ev of stream) { types.push(ev.type); if (ev.type === "response.function_call_arguments.delta") args += ev.delta; }
    expect(types).toEqual(["response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done", "response.completed"]);
    expect(args).toBe(call.arguments);
  });

  test("earlier function_call / function_call_output items render as the chat route's tool turns", async () => {
    const t = await startTiny({ slots: 1, chatTemplate: TOOL_TURNS_TEMPLATE });
    try {
      const args = JSON.stringify({ city: "Paris" });
      const want = ((await (await post(t.url, "/v1/chat/completions", { max_tokens: 8, temperature: 0, tools: chatTools, messages: [
        { role: "user", content: "Weather?" }, { role: "assistant", content: "", tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: args } }] },
        { role: "tool", content: "sunny", tool_call_id: "call_1" }] })).json()) as any);
      const c = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: "x", maxRetries: 0, timeout: 20000 });
      const r = await c.responses.create({ model: "m", max_output_tokens: 8, temperature: 0, tools: [weather], input: [
        { role: "user", content: "Weather?" }, { type: "reasoning", id: "rs_1", summary: [] } as any, // (sent back by agents: left out)
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: args },
        { type: "function_call_output", call_id: "call_1", output: "sunny" }] });
      expect(r.usage?.input_tokens).toBe(want.usage.prompt_tokens);
      expect(r.output_text).toBe(want.choices[0].message.content ?? "");
    } finally { await t.stop(); }
  });

  test("structured outputs (text.format json_schema / json_object): the chat route's response_format output, echoed format", async () => {
    const schema = { type: "object", properties: { a: { type: "integer" }, b: { enum: ["x", "y"] } }, required: ["a", "b"], additionalProperties: false };
    const r = await client.responses.create({ model: "m", input: "Hi", max_output_tokens: 40, temperature: 0,
      text: { format: { type: "json_schema", name: "s", schema, strict: true } } });
    const want = await (await post(s.url, "/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }], max_tokens: 40, temperature: 0,
      response_format: { type: "json_schema", json_schema: { name: "s", schema, strict: true } } })).json() as any;
    expect(r.output_text).toBe(want.choices[0].message.content);
    const v = JSON.parse(r.output_text);
    expect(Number.isInteger(v.a) && ["x", "y"].includes(v.b)).toBe(true);
    expect((r as any).text.format).toMatchObject({ type: "json_schema", name: "s" });
    const o = await client.responses.create({ model: "m", input: "Hi", max_output_tokens: 40, temperature: 0, text: { format: { type: "json_object" } } });
    expect(typeof JSON.parse(o.output_text)).toBe("object");
  });

  test("previous_response_id goes on from a stored response (its turns and output, not its instructions); GET returns it, DELETE forgets it; store: false keeps none", async () => {
    const first = await client.responses.create({ model: "m", instructions: "Be brief.", input: "Hi", max_output_tokens: 6, temperature: 0 });
    const second = await client.responses.create({ model: "m", previous_response_id: first.id, input: "More?", max_output_tokens: 6, temperature: 0 });
    // the same as sending the whole conversation (no instructions: they are not carried over)
    const want = await chat([{ role: "user", content: "Hi" }, { role: "assistant", content: first.output_text }, { role: "user", content: "More?" }], 6);
    expect(second.output_text).toBe(want.choices[0].message.content);
    expect(second.usage!.input_tokens).toBe(want.usage.prompt_tokens);
    const third = await client.responses.create({ model: "m", previous_response_id: second.id, input: "And?", max_output_tokens: 6, temperature: 0 });
    const want3 = await chat([{ role: "user", content: "Hi" }, { role: "assistant", content: first.output_text }, { role: "user", content: "More?" },
      { role: "assistant", content: second.output_text }, { role: "user", content: "And?" }], 6);
    expect(third.output_text).toBe(want3.choices[0].message.content);
    const { output_text: _, ...sent } = JSON.parse(JSON.stringify(second)); // (output_text: the SDK's convenience field)
    expect(((await (await fetch(`${s.url}/v1/responses/${second.id}`)).json()) as any)).toEqual(sent);
    await client.responses.delete(first.id);
    expect((await fetch(`${s.url}/v1/responses/${first.id}`)).status).toBe(404);
    expect((await fetch(`${s.url}/v1/responses/${first.id}`, { method: "DELETE" })).status).toBe(404);
    const unstored = await client.responses.create({ model: "m", input: "Hi", max_output_tokens: 2, temperature: 0, store: false });
    expect((await fetch(`${s.url}/v1/responses/${unstored.id}`)).status).toBe(404);
    const r = await post(s.url, "/v1/responses", { input: "x", previous_response_id: unstored.id });
    expect(r.status).toBe(404);
  });

  test("refusals name the field", async () => {
    for (const [body, param] of [[{ input: "x", tools: [{ type: "web_search" }] }, "tools.0.type"], [{ input: [] }, "input"],
      [{ input: "x", text: { format: { type: "json_schema" } } }, "text.format.name"], [{ input: "x", previous_response_id: "resp-unknown" }, "previous_response_id"],
      [{ input: "x", text: { format: { type: "json_schema", name: "s", schema: { type: "strin" } } } }, "text.format.schema.type"],
      [{ input: "x", text: { format: { type: "xml" } } }, "text.format.type"],
      [{ input: [{ role: "user", content: [{ type: "input_image", image_url: "u" }] }] }, "input"]] as const) {
      const r = await post(s.url, "/v1/responses", body);
      expect(r.status).toBe("previous_response_id" in body ? 404 : 400);
      expect(((await r.json()) as any).error.param).toStartWith(param);
    }
  });
});
