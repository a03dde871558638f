// POST /v1/messages: Anthropic's Messages API over the same engine, for clients built on the Anthropic SDK (as
// llama-server offers it): `system` and user / assistant turns (string or text-block content) through the chat
// template, `max_tokens` (required), `stop_sequences`, `temperature` / `top_p` / `top_k`, `thinking` (GLM's
// enable_thinking: a `thinking` content block before the text), and `stream` as Anthropic's named SSE events
// (message_start, content_block_start / _delta / _stop, message_delta, message_stop); /v1/messages/count_tokens.
// Tools are refused (the OpenAI route has them). Errors in Anthropic's shape {type: "error", error: {type, message}}. State: per request.
import { z } from "zod";
import type { EngineClient } from "./engine-client.ts";
import { responseId, run, sseResponse, type Done } from "./gen-stream.ts";
import { fromWorker, type ApiError } from "./http-errors.ts";
import type { GenRequest, ReqEvent } from "./protocol.ts";
import { nullish } from "./schemas.ts";
import { readRequest, type RouteOptions } from "./routes-common.ts";
import { ThinkSplit } from "./think.ts";

const TextBlock = z.object({ type: z.literal("text"), text: z.string() });
const Content = z.union([z.string(), z.array(TextBlock).min(1)]);
const refused = (what: string) => z.unknown().refine(() => false, { message: `${what} is not supported on /v1/messages (use /v1/chat/completions)` });
export const MessagesRequest = z.object({
  model: nullish(z.string().max(256)),
  max_tokens: z.int().min(1, "must be ≥ 1"),
  messages: z.array(z.object({ role: z.enum(["user", "assistant"]), content: Content })).min(1),
  system: nullish(z.union([z.string(), z.array(TextBlock)])),
  stop_sequences: nullish(z.array(z.string().min(1)).max(16)),
  temperature: nullish(z.number().min(0).max(2)),
  top_p: nullish(z.number().gt(0).max(1)),
  top_k: nullish(z.int().min(0)),
  stream: nullish(z.boolean()),
  metadata: nullish(z.record(z.string(), z.unknown())),
  thinking: nullish(z.discriminatedUnion("type", [z.object({ type: z.literal("enabled"), budget_tokens: z.int().min(1) }), z.object({ type: z.literal("disabled") })])),
  tools: nullish(refused("tools")),
  tool_choice: nullish(refused("tool_choice")),
});
type MessagesRequest = z.infer<typeof MessagesRequest>;

const ERROR_TYPES: Record<number, string> = { 400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error" };
export const anthropicError = (e: ApiError) => ({ type: "error", error: { type: ERROR_TYPES[e.status] ?? "api_error", message: e.message } });
const errorResponse = (e: ApiError) => Response.json(anthropicError(e), { status: e.status });
const text = (c: string | { text: string }[]) => (typeof c === "string" ? c : c.map((b) => b.text).join(""));

function toGen(b: Omit<MessagesRequest, "max_tokens"> & { max_tokens?: number }): GenRequest {
  const system = b.system == null ? [] : [{ role: "system", content: text(b.system) }];
  return {
    prompt: { kind: "chat", messages: [...system, ...b.messages.map((m) => ({ role: m.role, content: text(m.content) }))], enableThinking: b.thinking?.type === "enabled" },
    slot: "auto", max_tokens: b.max_tokens, temperature: b.temperature ?? 1, top_p: b.top_p ?? 1, min_p: 0, top_k: b.top_k ?? 0,
    stop: b.stop_sequences ?? [],
  };
}

/** POST /v1/messages/count_tokens: the prompt's tokens as /v1/messages would render it ({input_tokens}) */
export async function countTokens(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const p = await readRequest(req, o, MessagesRequest.partial({ max_tokens: true }), engine);
  if (!p.ok) return errorResponse(p.error);
  const r = await engine.call({ op: "tokenize", prompt: toGen(p.data).prompt, pieces: false, generationPrompt: true });
  if (!r.ok) return errorResponse({ status: 400, message: r.detail, type: "", param: "messages", code: null });
  return Response.json({ input_tokens: (r.value as { ids: number[] }).ids.length });
}

const stopReason = (d: Done) => (d.reason === "length" ? "max_tokens" : d.stop_text !== undefined ? "stop_sequence" : "end_turn");

export async function messages(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const p = await readRequest(req, o, MessagesRequest, engine);
  if (!p.ok) return errorResponse(p.error);
  const b = p.data, r = run(engine, toGen(b), req.signal), first = await r.q.next();
  if (first.t === "error") { r.abandon(); return errorResponse(fromWorker(first.code, first.detail, "messages")); }
  const id = responseId("msg"), model = engine.info!.model, thinking = b.thinking?.type === "enabled";
  let split = new ThinkSplit(thinking, false);
  // blocks in order of appearance: [kind, text]; a kind change opens the next block
  const blocks: ["thinking" | "text", string][] = [];
  const add = (kind: "thinking" | "text", s: string, emit: (ev: object) => void) => {
    if (!s) return;
    const last = blocks[blocks.length - 1];
    if (!last || last[0] !== kind) {
      if (last) emit({ type: "content_block_stop", index: blocks.length - 1 });
      blocks.push([kind, ""]);
      emit({ type: "content_block_start", index: blocks.length - 1, content_block: kind === "text" ? { type: "text", text: "" } : { type: "thinking", thinking: "" } });
    }
    blocks[blocks.length - 1][1] += s;
    emit({ type: "content_block_delta", index: blocks.length - 1, delta: kind === "text" ? { type: "text_delta", text: s } : { type: "thinking_delta", thinking: s } });
  };
  /** every event until done (or an error) through `emit` (`started` once the prompt is accepted); the done event */
  const drive = async (emit: (ev: object) => void, started: (e: Extract<ReqEvent, { t: "accept" }>) => void = () => {}):
    Promise<Done | Extract<ReqEvent, { t: "error" }>> => {
    for (let e: ReqEvent = first; ; e = await r.q.next()) {
      if (e.t === "accept") { split = new ThinkSplit(thinking, e.think); started(e); }
      else if (e.t === "tok" || e.t === "done") {
        const d = split.take(e.text, e.t === "tok" ? e.mark : undefined);
        add("thinking", d.reasoning_content ?? "", emit);
        add("text", d.content ?? "", emit);
        if (e.t === "done") return e;
      } else if (e.t === "error") return e;
    }
  };
  const usage = (d: Done) => ({ input_tokens: d.prompt_tokens, output_tokens: d.emitted, cache_read_input_tokens: d.cached_tokens });
  const content = () => blocks.map(([kind, s]) => (kind === "text" ? { type: "text", text: s } : { type: "thinking", thinking: s, signature: "" }));

  if (b.stream) {
    return sseResponse(async (send) => {
      const d = await drive(send, (a) => send({ type: "message_start", message: { id, type: "message", role: "assistant", model, content: [],
        stop_reason: null, stop_sequence: null, usage: { input_tokens: a.prompt_tokens, output_tokens: 0, cache_read_input_tokens: a.cached_tokens } } }));
      if (d.t === "error") { send(anthropicError(fromWorker(d.code, d.detail, "messages"))); return false; }
      if (blocks.length) send({ type: "content_block_stop", index: blocks.length - 1 });
      send({ type: "message_delta", delta: { stop_reason: stopReason(d), stop_sequence: d.stop_text ?? null }, usage: { output_tokens: d.emitted } });
      send({ type: "message_stop" });
      return true;
    }, r.abandon, "named");
  }
  const d = await drive(() => {});
  if (d.t === "error") return errorResponse(fromWorker(d.code, d.detail, "messages"));
  return Response.json({ id, type: "message", role: "assistant", model, content: content(), stop_reason: stopReason(d), stop_sequence: d.stop_text ?? null, usage: usage(d) });
}
