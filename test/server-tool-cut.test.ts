// A tool call cut by the token limit is an incomplete call, never content: the forced output's JSON cut (named: the
// arguments so far; required: the whole elements, then the open one) and an open GLM call at a "length" end (auto),
// in tools.ts; on the chat route (finish_reason "length", content null, streamed as tool_call deltas), the Responses
// API (a function_call item "incomplete" as the response is) and the Messages API (a tool_use block, stop_reason
// "max_tokens").
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "../src/server/server.ts";
import { cutCalls, ToolOutput, type Tool } from "../src/server/tools.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, sseData, startTiny } from "./server.helpers.ts";

const LONG = "a_rather_long_parameter_name_to_be_cut";
const TOOLS: Tool[] = [
  { type: "function", function: { name: "note", parameters: { type: "object", properties: { [LONG]: { type: "string" } }, required: [LONG], additionalProperties: false } } },
  { type: "function", function: { name: "other", parameters: { type: "object" } } },
];

describe("cut tool calls", () => {
  test("forced JSON cut: named keeps the text so far; required the whole elements and the open one", () => {
    expect(cutCalls('  {"city": "Par', { type: "function", function: { name: "note" } }, TOOLS))
      .toMatchObject({ incomplete: true, calls: [{ function: { name: "note", arguments: '{"city": "Par' } }] });
    const r = cutCalls('[{"name": "other", "parameters": {"a": "}]\\""}}, {"name": "note", "parameters": {"x": [1, ', "required", TOOLS);
    expect(r.incomplete).toBe(true);
    expect(r.calls.map((c) => [c.function.name, c.function.arguments])).toEqual([["other", '{"a":"}]\\""}'], ["note", '{"x": [1, ']]);
    expect(cutCalls('[{"name": "other", "parameters": {}}', "required", TOOLS)).toMatchObject({ incomplete: false, calls: [{ function: { name: "other" } }] });
    expect(cutCalls('[{"na', "required", TOOLS)).toEqual({ calls: [], incomplete: false }); // (no name yet, two tools)
    expect(cutCalls('[{"na', "required", [TOOLS[0]]).calls[0].function.name).toBe("note"); // (the only tool)
  });

  test("forced and auto outputs at a length end give no content; auto ended by stop keeps the open call as text", () => {
    const forced = new ToolOutput(TOOLS, "required");
    expect(forced.push('[{"name": "note", "parameters": {"').content).toBe("");
    expect(forced.finish(true)).toMatchObject({ content: "", incomplete: true, calls: [{ function: { name: "note", arguments: '{"' } }] });
    const auto = () => { const o = new ToolOutput(TOOLS, "auto"); o.push("Let me. <tool_call>note\n<arg_key>x</arg_key>\n<arg_value>1</arg_value>\n<arg_"); return o; };
    const a = auto().finish(true);
    expect(a).toMatchObject({ content: "", incomplete: true, calls: [{ function: { name: "note" } }] });
    expect(JSON.parse(a.calls[0].function.arguments)).toEqual({ x: 1 });
    expect(auto().finish(false)).toMatchObject({ content: "<tool_call>note\n<arg_key>x</arg_key>\n<arg_value>1</arg_value>\n<arg_", calls: [] });
  });
});

describe.skipIf(!hasTiny)("serve: a forced call cut by the token limit", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 2 }); });
  afterAll(() => s.stop());
  const msgs = [{ role: "user", content: "Take a note." }];
  const named = { type: "function", function: { name: "note" } };

  test("chat completions: an incomplete call, finish_reason length, content null (whole and streamed)", async () => {
    for (const [tool_choice, tools] of [[named, TOOLS], ["required", [TOOLS[0]]]] as const) { // (required: the only tool's name)
      const body = { messages: msgs, tools, tool_choice, max_tokens: 3, temperature: 0 };
      const c = ((await (await post(s.url, "/v1/chat/completions", body)).json()) as any).choices[0];
      expect(c.finish_reason).toBe("length");
      expect(c.message.content).toBeNull();
      expect(c.message.tool_calls).toHaveLength(1);
      expect(c.message.tool_calls[0].function.name).toBe("note");
      expect(() => JSON.parse(c.message.tool_calls[0].function.arguments)).toThrow(); // (cut)
      const chunks = sseData(await (await post(s.url, "/v1/chat/completions", { ...body, stream: true })).text()).filter((d) => d !== "[DONE]").map((d) => JSON.parse(d));
      const deltas = chunks.flatMap((k) => k.choices.map((x: any) => x.delta));
      expect(deltas.map((d) => d.content ?? "").join("")).toBe("");
      expect(deltas.flatMap((d) => d.tool_calls ?? []).map((t: any) => t.function.arguments)).toEqual([c.message.tool_calls[0].function.arguments]);
      expect(chunks.at(-1).choices[0].finish_reason).toBe("length");
    }
  });

  test("responses: a function_call item incomplete, as the response is; no message item", async () => {
    const body = { input: "Take a note.", max_output_tokens: 3, temperature: 0, tool_choice: { type: "function", name: "note" },
      tools: TOOLS.map((t) => ({ type: "function", name: t.function.name, parameters: t.function.parameters })) };
    const r = (await (await post(s.url, "/v1/responses", body)).json()) as any;
    expect(r.status).toBe("incomplete");
    expect(r.output.map((o: any) => [o.type, o.status])).toEqual([["function_call", "incomplete"]]);
    const events = (await (await post(s.url, "/v1/responses", { ...body, stream: true })).text()).split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)));
    expect(events.find((e) => e.type === "response.output_item.done").item.status).toBe("incomplete");
    expect(events.at(-1).type).toBe("response.incomplete");
    // a text reply cut short: its message item is incomplete too
    const t = (await (await post(s.url, "/v1/responses", { input: "Tell me a story.", max_output_tokens: 3, temperature: 0 })).json()) as any;
    expect([t.status, t.output.at(-1).status]).toEqual(["incomplete", "incomplete"]);
  });

  test("messages: a tool_use block (input {} while cut), stop_reason max_tokens, no text", async () => {
    const r = (await (await post(s.url, "/v1/messages", { messages: msgs, max_tokens: 3, temperature: 0, tool_choice: { type: "tool", name: "note" },
      tools: TOOLS.map((t) => ({ name: t.function.name, input_schema: t.function.parameters })) })).json()) as any;
    expect(r.stop_reason).toBe("max_tokens");
    expect(r.content).toMatchObject([{ type: "tool_use", name: "note", input: {} }]);
  });
});
