// POST /v1/responses: OpenAI's Responses API over the same engine (vLLM and llama-server offer it; newer OpenAI SDK
// clients call it): `input` as a string or message items (input_text / output_text parts), `instructions` (the system
// turn), `max_output_tokens`, `temperature` / `top_p`, `reasoning` (GLM thinking: a reasoning item before the
// message), and `stream` as the API's named SSE events (response.created ... response.output_text.delta ...
// response.completed / response.incomplete, each with its sequence_number). Tools, previous_response_id and
// non-text formats are refused with a 400 naming them (the chat route has tools). Errors in the OpenAI shape. State:
// per request.
import { z } from "zod";
import type { EngineClient } from "./engine-client.ts";
import { responseId, run, sseResponse, type Done } from "./gen-stream.ts";
import { errorResponse, fromWorker } from "./http-errors.ts";
import type { GenRequest, ReqEvent } from "./protocol.ts";
import { nullish } from "./schemas.ts";
import { readRequest, type RouteOptions } from "./routes-common.ts";
import { ThinkSplit } from "./think.ts";

const refused = (what: string) => z.unknown().refine((v) => v == null || (Array.isArray(v) && v.length === 0),
  { message: `${what} is not supported on /v1/responses (use /v1/chat/completions)` });
const Part = z.object({ type: z.enum(["input_text", "output_text"], { message: "only input_text / output_text parts are supported" }), text: z.string() });
const Item = z.object({
  type: nullish(z.literal("message", { message: "only message items are supported" })),
  role: z.enum(["user", "assistant", "system", "developer"]),
  content: z.union([z.string(), z.array(Part)]),
});
const ResponsesRequest = z.object({
  model: nullish(z.string().max(256)),
  input: z.union([z.string(), z.array(Item).min(1, "input must not be empty")]),
  instructions: nullish(z.string()),
  max_output_tokens: nullish(z.int().min(1, "must be ≥ 1")),
  temperature: nullish(z.number().min(0).max(2)),
  top_p: nullish(z.number().gt(0).max(1)),
  stream: nullish(z.boolean()),
  reasoning: nullish(z.object({ effort: nullish(z.enum(["none", "minimal", "low", "medium", "high"])) })),
  text: nullish(z.object({ format: nullish(z.object({ type: z.literal("text", { message: "only text output is supported here" }) })) })),
  store: nullish(z.boolean()), metadata: nullish(z.record(z.string(), z.unknown())), user: nullish(z.string()),
  tools: nullish(refused("tools")), previous_response_id: nullish(refused("previous_response_id")),
});
type ResponsesRequest = z.infer<typeof ResponsesRequest>;

const partsText = (c: string | { text: string }[]) => (typeof c === "string" ? c : c.map((p) => p.text).join(""));
const thinks = (b: ResponsesRequest) => b.reasoning != null && b.reasoning.effort !== "none" && b.reasoning.effort !== "minimal";

function toGen(b: ResponsesRequest): GenRequest {
  const items = typeof b.input === "string" ? [{ role: "user", content: b.input }] : b.input.map((m) => ({ role: m.role === "developer" ? "system" : m.role, content: partsText(m.content) }));
  return {
    prompt: { kind: "chat", messages: [...(b.instructions ? [{ role: "system", content: b.instructions }] : []), ...items], enableThinking: thinks(b) },
    slot: "auto", max_tokens: b.max_output_tokens ?? undefined, temperature: b.temperature ?? 1, top_p: b.top_p ?? 1, min_p: 0, top_k: 0, stop: [],
  };
}

export async function responses(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const p = await readRequest(req, o, ResponsesRequest, engine);
  if (!p.ok) return errorResponse(p.error);
  const b = p.data, r = run(engine, toGen(b), req.signal), first = await r.q.next();
  if (first.t === "error") { r.abandon(); return errorResponse(fromWorker(first.code, first.detail, "input")); }
  const id = responseId("resp"), created = Math.floor(Date.now() / 1000), model = engine.info!.model;
  let split = new ThinkSplit(thinks(b), false), seq = 0;
  // output items in order of appearance: a reasoning item, then the message (each opened by its first text)
  const items: { kind: "reasoning" | "message"; id: string; text: string }[] = [];
  const item = (it: (typeof items)[number], done: boolean) => it.kind === "reasoning"
    ? { type: "reasoning", id: it.id, summary: [], content: done ? [{ type: "reasoning_text", text: it.text }] : [] }
    : { type: "message", id: it.id, status: done ? "completed" : "in_progress", role: "assistant", content: done ? [{ type: "output_text", text: it.text, annotations: [] }] : [] };
  const response = (status: string, d: Done | null) => ({
    id, object: "response", created_at: created, status, model, output: d ? items.map((it) => item(it, true)) : [],
    usage: d ? { input_tokens: d.prompt_tokens, input_tokens_details: { cached_tokens: d.cached_tokens }, output_tokens: d.emitted,
      output_tokens_details: { reasoning_tokens: 0 }, total_tokens: d.prompt_tokens + d.emitted } : null,
    incomplete_details: d?.reason === "length" ? { reason: "max_output_tokens" } : null, error: null,
    instructions: b.instructions ?? null, max_output_tokens: b.max_output_tokens ?? null, temperature: b.temperature ?? 1, top_p: b.top_p ?? 1,
    parallel_tool_calls: false, tool_choice: "auto", tools: [],
  });
  const closeItem = (emit: (ev: object) => void) => {
    const at = items.length - 1, it = items[at];
    if (it.kind === "message") {
      emit({ type: "response.output_text.done", item_id: it.id, output_index: at, content_index: 0, text: it.text });
      emit({ type: "response.content_part.done", item_id: it.id, output_index: at, content_index: 0, part: { type: "output_text", text: it.text, annotations: [] } });
    } else emit({ type: "response.reasoning_text.done", item_id: it.id, output_index: at, content_index: 0, text: it.text });
    emit({ type: "response.output_item.done", output_index: at, item: item(it, true) });
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
    const at = items.length - 1, it = items[at];
    it.text += s;
    emit({ type: kind === "message" ? "response.output_text.delta" : "response.reasoning_text.delta", item_id: it.id, output_index: at, content_index: 0, delta: s });
  };
  const drive = async (emit: (ev: object) => void): Promise<Done | Extract<ReqEvent, { t: "error" }>> => {
    for (let e: ReqEvent = first; ; e = await r.q.next()) {
      if (e.t === "accept") split = new ThinkSplit(thinks(b), e.think);
      else if (e.t === "tok" || e.t === "done") {
        const d = split.take(e.text, e.t === "tok" ? e.mark : undefined);
        add("reasoning", d.reasoning_content ?? "", emit);
        add("message", d.content ?? "", emit);
        if (e.t === "done") return e;
      } else if (e.t === "error") return e;
    }
  };
  const status = (d: Done) => (d.reason === "length" ? "incomplete" : "completed");

  if (b.stream) {
    return sseResponse(async (send) => {
      const emit = (ev: object) => send({ ...ev, sequence_number: seq++ });
      emit({ type: "response.created", response: response("in_progress", null) });
      emit({ type: "response.in_progress", response: response("in_progress", null) });
      const d = await drive(emit);
      if (d.t === "error") { const e = fromWorker(d.code, d.detail, "input"); emit({ type: "error", code: e.code, message: e.message, param: e.param }); return false; }
      if (items.length) closeItem(emit);
      emit({ type: `response.${status(d)}`, response: response(status(d), d) });
      return true;
    }, r.abandon, "named");
  }
  const d = await drive(() => {});
  if (d.t === "error") return errorResponse(fromWorker(d.code, d.detail, "input"));
  return Response.json(response(status(d), d));
}
