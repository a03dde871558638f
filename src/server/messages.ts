// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API over the same engine (fields:
// docs/api.md): system and content-block turns through the chat template, `thinking` (a thinking block; its budget
// enforced), `tools` (tools.ts: each call a tool_use block, stop_reason "tool_use"), `output_config.format`, and
// `stream` as Anthropic's named SSE events. Errors in Anthropic's shape. State: per request.
import { z } from "zod";
import type { EngineClient } from "./engine-client.ts";
import { responseId, run, sseResponse, type Done } from "./gen-stream.ts";
import { fromWorker, type ApiError } from "./http-errors.ts";
import type { GenRequest, GrammarSpec, ReqEvent } from "../engine/serving/protocol.ts";
import { jsonObject, list } from "./bounded.ts";
import { grammarAs, MAX_MESSAGES, nullish, StopString, templateOf, type ChatRequest } from "./schemas.ts";
import { templateMessages } from "./chat.ts";
import { scansForCalls, type Tool, type ToolCall, type ToolChoice } from "./tools.ts";
import { basicSampling, defaultsOf, readRequest, type Defaults, type RouteOptions } from "./routes-common.ts";
import { ReplySplit } from "./reply.ts";

const TextBlock = z.object({ type: z.literal("text"), text: z.string() });
const Block = z.union([
  TextBlock,
  z.object({ type: z.literal("tool_use"), id: z.string().max(256), name: z.string().max(256), input: jsonObject }),
  z.object({ type: z.literal("tool_result"), tool_use_id: z.string().max(256), content: nullish(z.union([z.string(), list(TextBlock, { max: MAX_MESSAGES })])), is_error: nullish(z.boolean()) }),
  z.looseObject({ type: z.enum(["thinking", "redacted_thinking"]) }), // sent back from earlier turns: the turn's reasoning_content
], { message: "content blocks are text, tool_use, tool_result or thinking" });
const Content = z.union([z.string(), list(Block, { min: 1, max: MAX_MESSAGES })]);
const AnthropicTool = z.object({
  type: nullish(z.literal("custom", { message: "only custom (client) tools are supported" })),
  name: z.string().regex(/^[a-zA-Z0-9_.-]{1,64}$/, "must be 1-64 letters, digits, _ . -"),
  description: nullish(z.string()), input_schema: jsonObject,
});
const OutputFormat = z.object({ type: z.literal("json_schema", { message: "only json_schema output formats are supported" }),
  schema: z.union([jsonObject, z.boolean()]) });
export const MessagesRequest = z.object({
  model: nullish(z.string().max(256)),
  max_tokens: z.int().min(1, "must be ≥ 1"),
  messages: list(z.object({ role: z.enum(["user", "assistant"]), content: Content }), { min: 1, max: MAX_MESSAGES }),
  system: nullish(z.union([z.string(), list(TextBlock, { max: MAX_MESSAGES })])),
  stop_sequences: nullish(list(StopString, { max: 16 })),
  temperature: nullish(z.number().min(0).max(2)),
  top_p: nullish(z.number().gt(0).max(1)),
  top_k: nullish(z.int().min(0)),
  stream: nullish(z.boolean()),
  metadata: nullish(jsonObject),
  thinking: nullish(z.discriminatedUnion("type", [z.object({ type: z.literal("enabled"), budget_tokens: z.int().min(1) }), z.object({ type: z.literal("disabled") })])),
  tools: nullish(list(AnthropicTool, { max: 128 })),
  // structured outputs: output_config.format (and the beta's top-level output_format): a JSON schema the text follows
  output_config: nullish(z.looseObject({ format: nullish(OutputFormat) })),
  output_format: nullish(OutputFormat),
  tool_choice: nullish(z.discriminatedUnion("type", [
    z.looseObject({ type: z.enum(["auto", "any", "none"]), disable_parallel_tool_use: nullish(z.boolean()) }),
    z.looseObject({ type: z.literal("tool"), name: z.string(), disable_parallel_tool_use: nullish(z.boolean()) }),
  ])),
});
type MessagesRequest = z.infer<typeof MessagesRequest>;

const ERROR_TYPES: Record<number, string> = { 400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error" };
export const anthropicError = (e: ApiError) => ({ type: "error", error: { type: ERROR_TYPES[e.status] ?? "api_error", message: e.message } });
const errorResponse = (e: ApiError) => Response.json(anthropicError(e), { status: e.status });
const text = (c: string | { type?: string; text?: string }[] | null | undefined) =>
  c == null ? "" : typeof c === "string" ? c : c.map((b) => (b.type === "text" || b.type === undefined ? b.text ?? "" : "")).join("");

/** the request's tools and tool_choice as the chat route takes them (single: disable_parallel_tool_use) */
function toolsOf(b: Pick<MessagesRequest, "tools" | "tool_choice">): { tools: Tool[]; choice: ToolChoice; single: boolean } {
  const c = b.tool_choice;
  return {
    single: c?.disable_parallel_tool_use === true,
    tools: (b.tools ?? []).map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.input_schema } })),
    choice: c == null || c.type === "auto" ? "auto" : c.type === "none" ? "none" : c.type === "any" ? "required" : { type: "function", function: { name: (c as { name: string }).name } },
  };
}

/** the turns as chat messages: tool_use blocks become the assistant's tool_calls, tool_result blocks tool turns */
function chatMessages(b: Pick<MessagesRequest, "system" | "messages">): ChatRequest["messages"] {
  const out: ChatRequest["messages"] = b.system == null ? [] : [{ role: "system", content: text(b.system) }];
  for (const m of b.messages) {
    if (typeof m.content === "string") { out.push({ role: m.role, content: m.content }); continue; }
    for (const r of m.content) if (r.type === "tool_result") out.push({ role: "tool", content: text((r as { content?: string | { type: string; text: string }[] | null }).content), tool_call_id: (r as { tool_use_id: string }).tool_use_id });
    const calls = m.content.filter((k) => k.type === "tool_use").map((k) => {
      const u = k as { id: string; name: string; input: Record<string, unknown> };
      return { id: u.id, type: "function" as const, function: { name: u.name, arguments: JSON.stringify(u.input) } };
    });
    const t = text(m.content as { type?: string; text?: string }[]);
    const thought = m.content.map((k) => (k.type === "thinking" ? (k as { thinking?: unknown }).thinking : undefined)).filter((x) => typeof x === "string").join("");
    if (t || calls.length || !m.content.some((k) => k.type === "tool_result"))
      out.push({ role: m.role, content: t, ...(calls.length ? { tool_calls: calls } : {}), ...(thought && m.role === "assistant" ? { reasoning_content: thought } : {}) });
  }
  return out;
}

/** (d: the server's defaults; its enable_thinking when the request has no `thinking`) */
function toGen(b: Omit<MessagesRequest, "max_tokens"> & { max_tokens?: number }, grammar: GrammarSpec | null, d: Defaults): GenRequest {
  const { tools, choice } = toolsOf(b), rendered = choice === "none" ? [] : tools;
  const t = templateOf(b.thinking ? { enable_thinking: b.thinking.type === "enabled" } : null, d.template);
  return {
    prompt: { kind: "chat", messages: templateMessages(chatMessages(b)), ...t,
      ...(rendered.length ? { tools: rendered } : {}) },
    keepSpecial: scansForCalls(rendered, choice), ...(grammar ? { grammar } : {}),
    slot: "auto", max_tokens: b.max_tokens, ...basicSampling(b, d.sampling),
    stop: b.stop_sequences ?? [],
    ...(b.thinking?.type === "enabled" ? { think_budget: b.thinking.budget_tokens } : {}), // (enforced: forced </think>)
  };
}

/** the forced-call grammar of the request's tools, or its output format's (errors name output_config.format) */
function grammarFor(b: Pick<MessagesRequest, "tools" | "tool_choice" | "output_config" | "output_format">): GrammarSpec | null | ApiError {
  const { tools, choice, single } = toolsOf(b);
  const f = b.output_config?.format ?? b.output_format, field = b.output_config?.format ? "output_config.format" : "output_format";
  return grammarAs({ tools, tool_choice: choice, parallel_tool_calls: !single,
    response_format: f ? { type: "json_schema", json_schema: { name: "output", schema: f.schema as Record<string, unknown> } } : null }, field);
}

/** POST /v1/messages/count_tokens: the prompt's tokens as /v1/messages would render it ({input_tokens}) */
export async function countTokens(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const p = await readRequest(req, o, MessagesRequest.partial({ max_tokens: true }), engine);
  if (!p.ok) return errorResponse(p.error);
  const g = grammarFor(p.data);
  if (g && "status" in g) return errorResponse(g);
  const r = await engine.call({ op: "tokenize", prompt: toGen(p.data, g, defaultsOf(engine, o)).prompt, pieces: false });
  if (!r.ok) return errorResponse({ status: 400, message: r.detail, type: "", param: "messages", code: null });
  return Response.json({ input_tokens: (r.value as { ids: number[] }).ids.length });
}

const stopReason = (d: Done, calls: boolean) =>
  (d.reason === "length" ? "max_tokens" : calls ? "tool_use" : d.stop_text !== undefined ? "stop_sequence" : "end_turn");

export async function messages(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const p = await readRequest(req, o, MessagesRequest, engine);
  if (!p.ok) return errorResponse(p.error);
  const b = p.data, grammar = grammarFor(b);
  if (grammar && "status" in grammar) return errorResponse(grammar);
  const gen = toGen(b, grammar, defaultsOf(engine, o)), r = run(engine, gen, req.signal), first = await r.q.next();
  if (first.t === "error") { r.abandon(); return errorResponse(fromWorker(first.code, first.detail, "messages")); }
  const id = responseId("msg"), model = engine.info!.model, thinking = gen.prompt.kind === "chat" ? gen.prompt.enableThinking : false;
  const { tools, choice, single } = toolsOf(b), reply = new ReplySplit(thinking, tools, choice, single);
  // blocks in order of appearance: [kind, text]; a kind change (or a call) opens the next block
  const blocks: (["thinking" | "text", string] | ["tool_use", ToolCall])[] = [];
  const add = (kind: "thinking" | "text", s: string, emit: (ev: object) => void) => {
    if (!s) return;
    const last = blocks[blocks.length - 1];
    if (!last || last[0] !== kind) {
      if (last) emit({ type: "content_block_stop", index: blocks.length - 1 });
      blocks.push([kind, ""]);
      emit({ type: "content_block_start", index: blocks.length - 1, content_block: kind === "text" ? { type: "text", text: "" } : { type: "thinking", thinking: "" } });
    }
    (blocks[blocks.length - 1] as [string, string])[1] += s;
    emit({ type: "content_block_delta", index: blocks.length - 1, delta: kind === "text" ? { type: "text_delta", text: s } : { type: "thinking_delta", thinking: s } });
  };
  const addCall = (c: ToolCall, emit: (ev: object) => void) => {
    if (blocks.length) emit({ type: "content_block_stop", index: blocks.length - 1 });
    blocks.push(["tool_use", c]);
    emit({ type: "content_block_start", index: blocks.length - 1, content_block: { type: "tool_use", id: c.id, name: c.function.name, input: {} } });
    emit({ type: "content_block_delta", index: blocks.length - 1, delta: { type: "input_json_delta", partial_json: c.function.arguments } });
  };
  /** every event until done (or an error) through `emit` (`started` once the prompt is accepted); the done event */
  const drive = (emit: (ev: object) => void, started?: (e: Extract<ReqEvent, { t: "accept" }>) => void) => reply.drive(first, () => r.q.next(),
    { reasoning: (s) => add("thinking", s, emit), content: (s) => add("text", s, emit), call: (c) => addCall(c, emit), accepted: started });
  const usage = (d: Done) => ({ input_tokens: d.prompt_tokens, output_tokens: d.emitted, cache_read_input_tokens: d.cached_tokens });
  /** a call's input: its arguments (a call cut by max_tokens — stop_reason "max_tokens" — has none whole: {}) */
  const input = (c: ToolCall) => { try { return JSON.parse(c.function.arguments); } catch { return {}; } };
  const content = () => blocks.map((bk) => bk[0] === "tool_use"
    ? { type: "tool_use", id: bk[1].id, name: bk[1].function.name, input: input(bk[1]) }
    : bk[0] === "text" ? { type: "text", text: bk[1] } : { type: "thinking", thinking: bk[1], signature: "" });
  const called = () => blocks.some((bk) => bk[0] === "tool_use");

  if (b.stream) {
    return sseResponse(req, async (send) => {
      const d = await drive(send, (a) => send({ type: "message_start", message: { id, type: "message", role: "assistant", model, content: [],
        stop_reason: null, stop_sequence: null, usage: { input_tokens: a.prompt_tokens, output_tokens: 0, cache_read_input_tokens: a.cached_tokens } } }));
      if (d.t === "error") { send(anthropicError(fromWorker(d.code, d.detail, "messages"))); return false; }
      if (blocks.length) send({ type: "content_block_stop", index: blocks.length - 1 });
      send({ type: "message_delta", delta: { stop_reason: stopReason(d, called()), stop_sequence: d.stop_text ?? null }, usage: { output_tokens: d.emitted } });
      send({ type: "message_stop" });
      return true;
    }, r, "named");
  }
  const d = await drive(() => {});
  if (d.t === "error") return errorResponse(fromWorker(d.code, d.detail, "messages"));
  return Response.json({ id, type: "message", role: "assistant", model, content: content(), stop_reason: stopReason(d, called()), stop_sequence: d.stop_text ?? null, usage: usage(d) });
}
