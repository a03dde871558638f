// POST /v1/responses: OpenAI's Responses API over the same engine (fields: docs/api.md): `input` as a string or
// items, `instructions`, `reasoning` (a reasoning item), function `tools` (as the chat route, tools.ts; each call a
// function_call item), `stream` as the API's named SSE events with sequence numbers. Finished responses are kept in
// responses-store.ts for previous_response_id and GET /v1/responses/{id} unless store: false. Other tool types: 400.
// State: per request (the store is the app's).
import { z } from "zod";
import type { EngineClient } from "./engine-client.ts";
import { responseId, run, sseResponse, type Done } from "./gen-stream.ts";
import { apiError, errorResponse, fromWorker } from "./http-errors.ts";
import type { Turn } from "./responses-store.ts";
import type { GenRequest, GrammarSpec } from "../engine/serving/protocol.ts";
import { jsonObject, list } from "./bounded.ts";
import { grammarAs, MAX_MESSAGES, nullish, templateOf, type ChatRequest } from "./schemas.ts";
import { templateMessages } from "./chat.ts";
import { scansForCalls, type Tool, type ToolCall, type ToolChoice } from "./tools.ts";
import { basicSampling, defaultsOf, readRequest, type Defaults, type RouteOptions } from "./routes-common.ts";
import { ReplySplit } from "./reply.ts";

const Part = z.object({ type: z.enum(["input_text", "output_text"], { message: "only input_text / output_text parts are supported" }), text: z.string() });
const Message = z.object({
  type: nullish(z.literal("message")), role: z.enum(["user", "assistant", "system", "developer"]), content: z.union([z.string(), list(Part, { max: MAX_MESSAGES })]),
});
const Call = z.object({ type: z.literal("function_call"), call_id: z.string().max(256), name: z.string().max(256), arguments: z.string() });
const CallOutput = z.object({ type: z.literal("function_call_output"), call_id: z.string().max(256), output: z.string() });
// reasoning items a client sends back: their text becomes the next assistant turn's reasoning_content (GLM's templates
// show the current tool chain's reasoning; earlier turns' they drop)
const Text = z.looseObject({ text: z.string() });
const Reasoning = z.looseObject({ type: z.literal("reasoning"), content: nullish(list(Text, { max: MAX_MESSAGES })), summary: nullish(list(Text, { max: MAX_MESSAGES })) });
const Item = z.union([Message, Call, CallOutput, Reasoning], { message: "items are messages, function_call, function_call_output or reasoning" });
const FunctionTool = z.object({
  type: z.literal("function", { message: "only function tools are supported" }),
  name: z.string().regex(/^[a-zA-Z0-9_.-]{1,64}$/, "must be 1-64 letters, digits, _ . -"),
  description: nullish(z.string()), parameters: nullish(jsonObject), strict: nullish(z.boolean()),
});
const ResponsesRequest = z.object({
  model: nullish(z.string().max(256)),
  input: z.union([z.string(), list(Item, { min: 1, minMessage: "input must not be empty", max: MAX_MESSAGES })]),
  instructions: nullish(z.string()),
  max_output_tokens: nullish(z.int().min(1, "must be ≥ 1")),
  temperature: nullish(z.number().min(0).max(2)),
  top_p: nullish(z.number().gt(0).max(1)),
  stream: nullish(z.boolean()),
  reasoning: nullish(z.object({ effort: nullish(z.enum(["none", "minimal", "low", "medium", "high"])) })),
  // structured outputs (what the SDK's responses.parse sends): the chat route's response_format, spelled flat
  text: nullish(z.object({ format: nullish(z.discriminatedUnion("type", [
    z.looseObject({ type: z.literal("text") }),
    z.looseObject({ type: z.literal("json_object") }),
    z.looseObject({ type: z.literal("json_schema"), name: z.string().min(1, "must not be empty").max(64), description: nullish(z.string()),
      schema: z.union([jsonObject, z.boolean()]), strict: nullish(z.boolean()) }),
  ], { message: "type must be text, json_object or json_schema" })) })),
  tools: nullish(list(FunctionTool, { max: 128 })),
  tool_choice: nullish(z.union([z.enum(["none", "auto", "required"]), z.object({ type: z.literal("function"), name: z.string() })],
    { message: 'must be "none", "auto", "required" or {type: "function", name}' })),
  parallel_tool_calls: nullish(z.boolean()),
  store: nullish(z.boolean()), metadata: nullish(jsonObject), user: nullish(z.string()),
  previous_response_id: nullish(z.string().max(256)),
});
type ResponsesRequest = z.infer<typeof ResponsesRequest>;

const partsText = (c: string | { text: string }[]) => (typeof c === "string" ? c : c.map((p) => p.text).join(""));
/** thinking: asked by `reasoning` (effort none / minimal: off), else the server's enable_thinking; and the template's
 *  other variables (the server's) */
const template = (b: ResponsesRequest, defaults?: Record<string, unknown>) =>
  templateOf(b.reasoning != null ? { enable_thinking: b.reasoning.effort !== "none" && b.reasoning.effort !== "minimal" } : null, defaults);
/** the request's tools and tool_choice as the chat route takes them */
const toolsOf = (b: ResponsesRequest): { tools: Tool[]; choice: ToolChoice } => {
  const c = b.tool_choice ?? "auto";
  return {
    tools: (b.tools ?? []).map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.parameters, strict: t.strict } })),
    choice: typeof c === "object" ? { type: "function", function: { name: c.name } } : c,
  };
};

/** the request's constraint: a forced tool call, or text.format as the chat route's response_format (errors name text.format) */
function formatGrammar(b: ResponsesRequest, tools: Tool[], choice: ToolChoice) {
  const f = b.text?.format;
  const rf = f == null || f.type !== "json_schema" ? f
    : { type: "json_schema" as const, json_schema: { name: f.name, schema: f.schema as Record<string, unknown>, strict: f.strict } };
  return grammarAs({ tools, tool_choice: choice, parallel_tool_calls: b.parallel_tool_calls, response_format: rf as ChatRequest["response_format"] }, "text.format");
}

/** the request's input items as chat turns: function_call items join one assistant turn's tool_calls, outputs become
 *  tool turns, a reasoning item's text is the next assistant turn's reasoning_content (its content, else its summary) */
function inputTurns(b: ResponsesRequest): Turn[] {
  const out: Turn[] = [];
  if (typeof b.input === "string") return [{ role: "user", content: b.input }];
  let thought = "";
  const withThought = (t: Turn): Turn => { const r = thought ? { ...t, reasoning_content: thought } : t; thought = ""; return r; };
  for (const it of b.input) {
    if (it.type === "function_call") {
      const last = out.at(-1), call = { id: it.call_id, type: "function" as const, function: { name: it.name, arguments: it.arguments } };
      if (last?.role === "assistant" && (last.tool_calls || !last.content)) (last.tool_calls ??= []).push(call);
      else out.push(withThought({ role: "assistant", content: "", tool_calls: [call] }));
    } else if (it.type === "function_call_output") out.push({ role: "tool", content: it.output, tool_call_id: it.call_id });
    else if (it.type === "reasoning") thought += (it.content?.length ? it.content : it.summary ?? []).map((p) => p.text).join("");
    else out.push(it.role === "assistant" ? withThought({ role: it.role, content: partsText(it.content) }) : { role: it.role, content: partsText(it.content) });
  }
  return out;
}

/** history: the stored conversation continued (previous_response_id), then this request's input as turns */
function toGen(b: ResponsesRequest, grammar: GrammarSpec | null, d: Defaults, history: Turn[]): GenRequest {
  const { tools, choice } = toolsOf(b), rendered = choice === "none" ? [] : tools, t = template(b, d.template);
  const messages: ChatRequest["messages"] = [...(b.instructions ? [{ role: "system" as const, content: b.instructions }] : []), ...history];
  return {
    prompt: { kind: "chat", messages: templateMessages(messages), ...t,
      ...(rendered.length ? { tools: rendered } : {}) },
    keepSpecial: scansForCalls(rendered, choice), ...(grammar ? { grammar } : {}),
    slot: "auto", max_tokens: b.max_output_tokens ?? undefined, ...basicSampling(b, d.sampling), stop: [],
  };
}

export async function responses(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const p = await readRequest(req, o, ResponsesRequest, engine);
  if (!p.ok) return errorResponse(p.error);
  const b = p.data, { tools, choice } = toolsOf(b);
  const grammar = formatGrammar(b, tools, choice);
  if (grammar && "status" in grammar) return errorResponse(grammar);
  const prev = b.previous_response_id != null ? o.responses?.get(b.previous_response_id) : undefined;
  if (b.previous_response_id != null && !prev)
    return errorResponse(apiError(404, `previous_response_id: no stored response ${JSON.stringify(b.previous_response_id)} (this server keeps the last ${o.responses?.maxEntries ?? 0} responses, up to ${(o.responses?.maxBytes ?? 0) >> 20} MiB, in memory)`, "previous_response_id", "not_found"));
  const history = [...(prev?.turns ?? []), ...inputTurns(b)];
  const gen = toGen(b, grammar, defaultsOf(engine, o), history), r = run(engine, gen, req.signal), first = await r.q.next();
  if (first.t === "error") { r.abandon(); return errorResponse(fromWorker(first.code, first.detail, "input")); }
  const id = responseId("resp"), created = Math.floor(Date.now() / 1000), model = engine.info!.model;
  const reply = new ReplySplit(gen.prompt.kind === "chat" ? gen.prompt.enableThinking : false, tools, choice, b.parallel_tool_calls === false);
  let seq = 0;
  // output items in order of appearance: reasoning, message text, function calls (a text item opened by its first text)
  type Out = { kind: "reasoning" | "message"; id: string; text: string } | { kind: "function_call"; id: string; call: ToolCall };
  const items: Out[] = [];
  let cut = false; // the response ended at max_output_tokens: its last item (a call cut short, or the text) is incomplete
  const state = (it: Out, done: boolean) => (!done ? "in_progress" : cut && it === items.at(-1) ? "incomplete" : "completed");
  const item = (it: Out, done: boolean) => it.kind === "function_call"
    ? { type: "function_call", id: it.id, call_id: it.call.id, name: it.call.function.name, arguments: done ? it.call.function.arguments : "", status: state(it, done) }
    : it.kind === "reasoning"
      ? { type: "reasoning", id: it.id, summary: [], content: done ? [{ type: "reasoning_text", text: it.text }] : [] }
      : { type: "message", id: it.id, status: state(it, done), role: "assistant", content: done ? [{ type: "output_text", text: it.text, annotations: [] }] : [] };
  const response = (status: string, d: Done | null) => ({
    id, object: "response", created_at: created, status, model, output: d ? items.map((it) => item(it, true)) : [],
    usage: d ? { input_tokens: d.prompt_tokens, input_tokens_details: { cached_tokens: d.cached_tokens }, output_tokens: d.emitted,
      output_tokens_details: { reasoning_tokens: 0 }, total_tokens: d.prompt_tokens + d.emitted } : null,
    incomplete_details: d?.reason === "length" ? { reason: "max_output_tokens" } : null, error: null,
    instructions: b.instructions ?? null, max_output_tokens: b.max_output_tokens ?? null, temperature: gen.temperature, top_p: gen.top_p,
    parallel_tool_calls: b.parallel_tool_calls ?? true, tool_choice: b.tool_choice ?? "auto", tools: b.tools ?? [],
    text: { format: b.text?.format ?? { type: "text" } },
  });
  const closeItem = (emit: (ev: object) => void) => {
    const at = items.length - 1, it = items[at];
    if (it.kind === "function_call") {
      emit({ type: "response.function_call_arguments.done", item_id: it.id, output_index: at, arguments: it.call.function.arguments });
    } else if (it.kind === "message") {
      emit({ type: "response.output_text.done", item_id: it.id, output_index: at, content_index: 0, text: it.text });
      emit({ type: "response.content_part.done", item_id: it.id, output_index: at, content_index: 0, part: { type: "output_text", text: it.text, annotations: [] } });
    } else emit({ type: "response.reasoning_text.done", item_id: it.id, output_index: at, content_index: 0, text: it.text });
    emit({ type: "response.output_item.done", output_index: at, item: item(it, true) });
  };
  const addCall = (call: ToolCall, emit: (ev: object) => void) => {
    if (items.length) closeItem(emit);
    const it: Out = { kind: "function_call", id: responseId("fc"), call }, at = items.push(it) - 1;
    emit({ type: "response.output_item.added", output_index: at, item: item(it, false) });
    emit({ type: "response.function_call_arguments.delta", item_id: it.id, output_index: at, delta: call.function.arguments });
  };
  const add = (kind: "reasoning" | "message", s: string, emit: (ev: object) => void) => {
    if (!s) return;
    if (items.at(-1)?.kind !== kind) {
      if (items.length) closeItem(emit);
      items.push({ kind, id: responseId(kind === "message" ? "msg" : "rs"), text: "" });
      const at = items.length - 1, it = items[at];
      emit({ type: "response.output_item.added", output_index: at, item: item(it, false) });
      if (kind === "message") emit({ type: "response.content_part.added", item_id: it.id, output_index: at, content_index: 0, part: { type: "output_text", text: "", annotations: [] } });
    }
    const at = items.length - 1, it = items[at] as Extract<Out, { text: string }>;
    it.text += s;
    emit({ type: kind === "message" ? "response.output_text.delta" : "response.reasoning_text.delta", item_id: it.id, output_index: at, content_index: 0, delta: s });
  };
  const drive = async (emit: (ev: object) => void) => {
    const d = await reply.drive(first, () => r.q.next(),
      { reasoning: (s) => add("reasoning", s, emit), content: (s) => add("message", s, emit), call: (c) => addCall(c, emit) });
    cut = d.t === "done" && d.reason === "length";
    return d;
  };
  const status = (d: Done) => (d.reason === "length" ? "incomplete" : "completed");
  /** the finished response, kept for previous_response_id unless store: false: its turns, then its output as one */
  const keep = (d: Done) => {
    const res = response(status(d), d);
    if (b.store === false || !o.responses) return res;
    const joined = (k: "message" | "reasoning") => items.flatMap((it) => (it.kind === k ? [it.text] : [])).join("");
    const text = joined("message"), thought = joined("reasoning"), calls = items.flatMap((it) => (it.kind === "function_call" ? [it.call] : []));
    o.responses.put(id, { turns: [...history, { role: "assistant", content: text, ...(calls.length ? { tool_calls: calls } : {}),
      ...(thought ? { reasoning_content: thought } : {}) }], response: res });
    return res;
  };

  if (b.stream) {
    return sseResponse(req, async (send) => {
      const emit = (ev: object) => send({ ...ev, sequence_number: seq++ });
      emit({ type: "response.created", response: response("in_progress", null) });
      emit({ type: "response.in_progress", response: response("in_progress", null) });
      const d = await drive(emit);
      if (d.t === "error") { const e = fromWorker(d.code, d.detail, "input"); emit({ type: "error", code: e.code, message: e.message, param: e.param }); return false; }
      if (items.length) closeItem(emit);
      emit({ type: `response.${status(d)}`, response: keep(d) });
      return true;
    }, r, "named");
  }
  const d = await drive(() => {});
  if (d.t === "error") return errorResponse(fromWorker(d.code, d.detail, "input"));
  return Response.json(keep(d));
}

const notStored = (id: string) => errorResponse(apiError(404, `no stored response ${JSON.stringify(id)}`, "response_id", "not_found"));
/** GET /v1/responses/{id}: a stored response (404 when this server holds none of that id) */
export function storedResponse(id: string, o: RouteOptions): Response {
  const s = o.responses?.get(id);
  return s ? Response.json(s.response) : notStored(id);
}
/** DELETE /v1/responses/{id}: forget a stored response */
export function deleteResponse(id: string, o: RouteOptions): Response {
  return o.responses?.delete(id) ? Response.json({ id, object: "response", deleted: true }) : notStored(id);
}
