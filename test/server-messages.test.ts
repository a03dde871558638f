// POST /v1/messages (Anthropic's Messages API) on the shared fixture: the reply equals /v1/chat/completions' for
// the same conversation (greedy), with Anthropic's shapes (content blocks, stop_reason, usage); streamed as named
// events whose text deltas add up to the same text; stop_sequences reported; tool use (a forced tool: a tool_use
// block with the chat route's arguments, streamed as input_json deltas; tool_use / tool_result turns rendered as the
// chat route's tool turns); structured outputs (output_config.format); Anthropic-shaped errors; the API key as x-api-key.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, startTiny, TOOL_TURNS_TEMPLATE } from "./server.helpers.ts";

describe.skipIf(!hasTiny)("serve: /v1/messages", () => {
  let s: Server;
  const KEY = "sk-msg";
  beforeAll(async () => { s = await startTiny({ slots: 2, apiKey: KEY }); });
  afterAll(() => s.stop());
  const auth = { "x-api-key": KEY };
  const system = "You are terse.", turns = [{ role: "user", content: "Hello" }, { role: "assistant", content: "Hi." }, { role: "user", content: [{ type: "text", text: "Tell me a story." }] }];
  const chat = async (max: number, stop?: string[]) => (await (await post(s.url, "/v1/chat/completions", {
    messages: [{ role: "system", content: system }, ...turns.map((t) => ({ role: t.role, content: typeof t.content === "string" ? t.content : t.content[0].text }))],
    max_tokens: max, temperature: 0, ...(stop ? { stop } : {}),
  }, { authorization: `Bearer ${KEY}` })).json()) as any;

  test("a reply equal to the chat route's, in Anthropic's shape", async () => {
    const want = await chat(10);
    const res = await post(s.url, "/v1/messages", { model: "any", system, messages: turns, max_tokens: 10, temperature: 0 }, auth);
    expect(res.status).toBe(200);
    const m = (await res.json()) as any;
    expect(m).toMatchObject({ type: "message", role: "assistant", stop_sequence: null });
    expect(m.id).toMatch(/^msg-/);
    expect(m.content).toEqual([{ type: "text", text: want.choices[0].message.content }]);
    expect(m.stop_reason).toBe(want.choices[0].finish_reason === "length" ? "max_tokens" : "end_turn");
    expect(m.usage).toMatchObject({ input_tokens: want.usage.prompt_tokens, output_tokens: want.usage.completion_tokens });
  });

  test("streamed: named events in Anthropic's order, text deltas adding up to the reply", async () => {
    const whole = (await (await post(s.url, "/v1/messages", { system, messages: turns, max_tokens: 10, temperature: 0 }, auth)).json()) as any;
    const res = await post(s.url, "/v1/messages", { system, messages: turns, max_tokens: 10, temperature: 0, stream: true }, auth);
    const events = (await res.text()).split("\n\n").filter(Boolean).map((b) => {
      const [ev, data] = b.split("\n");
      return { name: ev.slice("event: ".length), data: JSON.parse(data.slice("data: ".length)) };
    });
    for (const e of events) expect(e.data.type).toBe(e.name);
    const names = events.map((e) => e.name);
    expect(names[0]).toBe("message_start");
    expect(events[0].data.message.usage.input_tokens).toBe(whole.usage.input_tokens);
    expect(names.slice(-2)).toEqual(["message_delta", "message_stop"]);
    expect(names[1]).toBe("content_block_start");
    expect(names.at(-3)).toBe("content_block_stop");
    expect(events.filter((e) => e.name === "content_block_delta").map((e) => e.data.delta.text).join("")).toBe(whole.content[0].text);
    expect(events.at(-2)!.data).toMatchObject({ delta: { stop_reason: whole.stop_reason }, usage: { output_tokens: whole.usage.output_tokens } });
  });

  test("count_tokens: the input tokens /v1/messages reports, thinking on or off", async () => {
    for (const thinking of [undefined, { type: "enabled", budget_tokens: 16 }]) {
      const body = { system, messages: turns, ...(thinking ? { thinking } : {}) };
      const n = (await (await post(s.url, "/v1/messages/count_tokens", body, auth)).json()) as any;
      const m = (await (await post(s.url, "/v1/messages", { ...body, max_tokens: 1, temperature: 0 }, auth)).json()) as any;
      expect(n).toEqual({ input_tokens: m.usage.input_tokens });
    }
    const bad = await post(s.url, "/v1/messages/count_tokens", { messages: "x" }, auth);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error.type).toBe("invalid_request_error");
  });

  test("stop_sequences end the reply before the stop text and are reported", async () => {
    const text = (await chat(24)).choices[0].message.content as string;
    const stop = text.slice(4, 7);
    expect(stop.trim().length).toBeGreaterThan(0);
    const m = (await (await post(s.url, "/v1/messages", { system, messages: turns, max_tokens: 24, temperature: 0, stop_sequences: ["\u0001never", stop] }, auth)).json()) as any;
    expect(m.content[0].text).toBe(text.slice(0, text.indexOf(stop)));
    expect(m).toMatchObject({ stop_reason: "stop_sequence", stop_sequence: stop });
  });

  const weather = { name: "get_weather", description: "Weather of a city",
    input_schema: { type: "object", properties: { city: { type: "string", enum: ["Paris", "Rome", "Oslo"] } }, required: ["city"], additionalProperties: false } };
  const chatTools = [{ type: "function", function: { name: weather.name, description: weather.description, parameters: weather.input_schema } }];

  test("tool use: a forced tool gives a tool_use block with the chat route's arguments, streamed as input_json deltas", async () => {
    const want = ((await (await post(s.url, "/v1/chat/completions", { messages: [{ role: "user", content: "Weather?" }], max_tokens: 48, temperature: 0,
      tools: chatTools, tool_choice: { type: "function", function: { name: "get_weather" } } }, { authorization: `Bearer ${KEY}` })).json()) as any).choices[0].message.tool_calls[0];
    const body = { messages: [{ role: "user", content: "Weather?" }], max_tokens: 48, temperature: 0, tools: [weather], tool_choice: { type: "tool", name: "get_weather" } };
    const m = (await (await post(s.url, "/v1/messages", body, auth)).json()) as any;
    expect(m.stop_reason).toBe("tool_use");
    expect(m.content).toHaveLength(1);
    expect(m.content[0]).toMatchObject({ type: "tool_use", name: "get_weather", input: JSON.parse(want.function.arguments) });
    const any = (await (await post(s.url, "/v1/messages", { ...body, tool_choice: { type: "any" } }, auth)).json()) as any;
    expect(any.content.map((c: any) => c.type)).toContain("tool_use");
    // disable_parallel_tool_use: one tool_use at most, as the chat route's parallel_tool_calls false
    const one = ((await (await post(s.url, "/v1/chat/completions", { messages: [{ role: "user", content: "Weather?" }], max_tokens: 48, temperature: 0,
      tools: chatTools, tool_choice: "required", parallel_tool_calls: false }, { authorization: `Bearer ${KEY}` })).json()) as any).choices[0].message.tool_calls;
    const single = (await (await post(s.url, "/v1/messages", { ...body, tool_choice: { type: "any", disable_parallel_tool_use: true } }, auth)).json()) as any;
    const uses = single.content.filter((c: any) => c.type === "tool_use");
    expect(uses.length).toBeLessThanOrEqual(1);
    expect(uses.map((u: any) => u.input)).toEqual(one.map((c: any) => JSON.parse(c.function.arguments)));
    const res = await post(s.url, "/v1/messages", { ...body, stream: true }, auth);
    const events = (await res.text()).split("\n\n").filter(Boolean).map((b) => JSON.parse(b.split("\n")[1].slice("data: ".length)));
    expect(events.map((e) => e.type)).toEqual(["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]);
    expect(events[1].content_block).toMatchObject({ type: "tool_use", name: "get_weather", input: {} });
    expect(JSON.parse(events[2].delta.partial_json)).toEqual(m.content[0].input);
    expect(events[4].delta.stop_reason).toBe("tool_use");
  });

  test("tool_use / tool_result turns render as the chat route's tool turns", async () => {
    const t = await startTiny({ slots: 1, chatTemplate: TOOL_TURNS_TEMPLATE });
    try {
      const want = (await (await post(t.url, "/v1/chat/completions", { max_tokens: 6, temperature: 0, tools: chatTools, messages: [
        { role: "user", content: "Weather?" },
        { role: "assistant", content: "Let me look.", tool_calls: [{ id: "toolu_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
        { role: "tool", content: "sunny", tool_call_id: "toolu_1" }] })).json()) as any;
      const m = (await (await post(t.url, "/v1/messages", { max_tokens: 6, temperature: 0, tools: [weather], messages: [
        { role: "user", content: "Weather?" },
        { role: "assistant", content: [{ type: "thinking", thinking: "hm", signature: "" }, { type: "text", text: "Let me look." }, { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "sunny" }] }] }] })).json()) as any;
      expect(m.usage.input_tokens).toBe(want.usage.prompt_tokens);
      expect(m.content.filter((c: any) => c.type === "text").map((c: any) => c.text).join("")).toBe(want.choices[0].message.content ?? "");
      // count_tokens counts what the template renders of the tools too
      const body = { tools: [weather], messages: [{ role: "user", content: "Weather?" }] };
      const n = (await (await post(t.url, "/v1/messages/count_tokens", body)).json()) as any;
      const bare = (await (await post(t.url, "/v1/messages/count_tokens", { messages: body.messages })).json()) as any;
      expect(n.input_tokens).toBeGreaterThan(bare.input_tokens);
      expect(n.input_tokens).toBe(((await (await post(t.url, "/v1/messages", { ...body, max_tokens: 1, temperature: 0 })).json()) as any).usage.input_tokens);
    } finally { await t.stop(); }
  });

  test("structured outputs: output_config.format (and the beta's output_format) constrain the text as the chat route's json_schema", async () => {
    const schema = { type: "object", properties: { a: { type: "integer" }, b: { enum: ["x", "y"] } }, required: ["a", "b"], additionalProperties: false };
    const want = (await (await post(s.url, "/v1/chat/completions", { messages: [{ role: "user", content: "Hello" }], max_tokens: 40, temperature: 0,
      response_format: { type: "json_schema", json_schema: { name: "output", schema } } }, { authorization: `Bearer ${KEY}` })).json()) as any;
    for (const f of [{ output_config: { format: { type: "json_schema", schema } } }, { output_format: { type: "json_schema", schema } }]) {
      const m = (await (await post(s.url, "/v1/messages", { messages: [{ role: "user", content: "Hello" }], max_tokens: 40, temperature: 0, ...f }, auth)).json()) as any;
      expect(m.content).toEqual([{ type: "text", text: want.choices[0].message.content }]);
      const v = JSON.parse(m.content[0].text);
      expect(Number.isInteger(v.a) && ["x", "y"].includes(v.b)).toBe(true);
    }
    const res = await post(s.url, "/v1/messages", { messages: turns, max_tokens: 4, output_config: { format: { type: "json_schema", schema: { type: "strin" } } } }, auth);
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error.message).toContain("output_config.format.schema.type");
  });

  test("bad requests and a missing key: Anthropic-shaped errors naming the field", async () => {
    const bad = async (body: object, headers: Record<string, string>, status: number, type: string, says: string) => {
      const res = await post(s.url, "/v1/messages", body, headers);
      expect(res.status).toBe(status);
      const e = (await res.json()) as any;
      expect(e.type).toBe("error");
      expect(e.error.type).toBe(type);
      expect(e.error.message).toContain(says);
    };
    await bad({ messages: turns }, auth, 400, "invalid_request_error", "max_tokens");
    await bad({ messages: [], max_tokens: 4 }, auth, 400, "invalid_request_error", "messages");
    await bad({ messages: turns, max_tokens: 4, tools: [{ name: "x" }] }, auth, 400, "invalid_request_error", "tools.0.input_schema");
    await bad({ messages: turns, max_tokens: 4, tools: [{ type: "web_search_20250305", name: "w", input_schema: {} }] }, auth, 400, "invalid_request_error", "tools.0.type");
    await bad({ messages: turns, max_tokens: 4, tools: [weather], tool_choice: { type: "tool", name: "nope" } }, auth, 400, "invalid_request_error", "no tool is named");
    await bad({ messages: [{ role: "system", content: "x" }], max_tokens: 4 }, auth, 400, "invalid_request_error", "messages.0.role");
    await bad({ messages: turns, max_tokens: 4 }, {}, 401, "authentication_error", "x-api-key");
    await bad({ messages: turns, max_tokens: 4 }, { "x-api-key": "wrong" }, 401, "authentication_error", "API key");
  });

  test("a full queue: 429 rate_limit_error with Retry-After, as the chat route's", async () => {
    const t = await startTiny({ slots: 1, queue: 1 });
    const ac = new AbortController(), long = () => fetch(`${t.url}/v1/completions`, { method: "POST", signal: ac.signal,
      headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: "The", max_tokens: 3000, ignore_eos: true, stream: true }) });
    try {
      const running = await long(), waiting = long().catch(() => null); // the slot's, then the queue's one place
      await running.body!.getReader().read();
      await Bun.sleep(100);
      const res = await post(t.url, "/v1/messages", { messages: turns, max_tokens: 4 }, {});
      expect(res.status).toBe(429);
      expect(res.headers.get("retry-after")).toBe("1");
      expect(((await res.json()) as any).error.type).toBe("rate_limit_error");
      ac.abort();
      await waiting;
    } finally { await t.stop(); }
  });
});
