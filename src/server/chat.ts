// POST /v1/chat/completions: validates the body, renders the chat template in the worker, and answers
// as one chat.completion or as SSE chat.completion.chunk's. Thinking: with
// `chat_template_kwargs.enable_thinking: true` the text between <think> and </think> (or from the start
// when the prompt ends with <think>) goes to `reasoning_content`; otherwise think tags are dropped.
// `response_format` json_object / json_schema and `grammar` (GBNF) constrain the output from its first
// token, so a constrained generation renders the template with thinking off (no reasoning_content).
// State: per request only (the think split).
import type { EngineClient } from "./engine-client.ts";
import { finishReason, responseId, sseResponse, usage } from "./gen-stream.ts";
import { errorJson, errorResponse, fromWorker } from "./http-errors.ts";
import type { GenRequest, GrammarSpec, ReqEvent } from "./protocol.ts";
import { ChatRequest, contentText, penaltiesOf } from "./schemas.ts";
import { startGeneration, type RouteOptions } from "./routes-common.ts";
import { ThinkSplit } from "./think.ts";
import { templateArguments, ToolOutput, type ToolCall } from "./tools.ts";

type Tok = Extract<ReqEvent, { t: "tok" }>;

const toolsOf = (b: ChatRequest) => (b.tool_choice === "none" ? [] : b.tools ?? []);

function toGen(b: ChatRequest, grammar: GrammarSpec | null): GenRequest {
  const messages = b.messages.map((m) => ({
    role: m.role === "developer" ? "system" : m.role, content: contentText(m.content),
    ...(m.tool_calls ? { tool_calls: m.tool_calls.map((c) => ({ ...c, function: { name: c.function.name, arguments: templateArguments(c.function.arguments) } })) } : {}),
    ...(m.tool_call_id != null ? { tool_call_id: m.tool_call_id } : {}), ...(m.name != null ? { name: m.name } : {}),
  }));
  const logprobs = b.logprobs ? (b.top_logprobs ?? 0) : undefined;
  const tools = toolsOf(b);
  return {
    // constrained output starts at the first generated token, so thinking is off (the template closes it)
    prompt: { kind: "chat", messages, enableThinking: grammar ? false : (b.chat_template_kwargs?.enable_thinking ?? false), ...(tools.length ? { tools } : {}) },
    keepSpecial: tools.length > 0 && (b.tool_choice ?? "auto") === "auto",
    slot: b.slot ?? "auto",
    max_tokens: b.max_completion_tokens ?? b.max_tokens ?? undefined,
    temperature: b.temperature ?? 1, top_p: b.top_p ?? 1, min_p: b.min_p ?? 0, top_k: b.top_k ?? 0,
    seed: b.seed ?? undefined, logprobs, stop: b.stop == null ? [] : typeof b.stop === "string" ? [b.stop] : b.stop,
    ...(grammar ? { grammar } : {}), penalties: penaltiesOf(b),
  };
}

function lpEntry(e: Tok) {
  const bytes = (s: string) => [...new TextEncoder().encode(s)];
  return {
    token: e.tt ?? "", logprob: e.lp ?? 0, bytes: bytes(e.tt ?? ""),
    top_logprobs: (e.top ?? []).map((t) => ({ token: t.text, logprob: t.lp, bytes: bytes(t.text) })),
  };
}

export async function chatCompletions(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const started = await startGeneration(req, engine, o, ChatRequest, toGen, "messages", (b) =>
    b.top_logprobs != null && !b.logprobs
      ? { status: 400, message: "top_logprobs requires logprobs: true", type: "invalid_request_error", param: "top_logprobs", code: "invalid_value" }
      : null);
  if (started instanceof Response) return started;
  const { data, gen, r, first } = started;
  const id = responseId("chatcmpl"), created = Math.floor(Date.now() / 1000), model = engine.info!.model;
  const base = { id, created, model, system_fingerprint: o.fingerprint };
  const wantLp = gen.logprobs !== undefined;
  let split = new ThinkSplit(gen.prompt.kind === "chat" && gen.prompt.enableThinking, false);
  const tools = new ToolOutput(toolsOf(data), data.tool_choice ?? "auto");
  const finish = (reason: "stop" | "length" | "stopped") => (tools.ncalls > 0 ? "tool_calls" : finishReason(reason));
  const callDelta = (calls: ToolCall[], from: number) => ({ tool_calls: calls.map((c, i) => ({ index: from + i, ...c })) });
  /** think split, then tool calls: the deltas of one event's text */
  const deltas = (text: string, mark?: "think" | "/think", end = false) => {
    const d = split.take(text, mark), from = tools.ncalls;
    const out = d.content !== undefined ? tools.push(d.content) : { content: "", calls: [] };
    if (end) { const f = tools.finish(); out.content += f.content; out.calls.push(...f.calls); }
    const delta: { content?: string; reasoning_content?: string } = {};
    if (d.reasoning_content !== undefined) delta.reasoning_content = d.reasoning_content;
    if (out.content) delta.content = out.content;
    return { delta, calls: out.calls, from };
  };

  if (data.stream) {
    const withUsage = data.stream_options?.include_usage === true;
    const chunk = (delta: object, lp: unknown, finish: string | null) => ({
      ...base, object: "chat.completion.chunk",
      choices: [{ index: 0, delta, logprobs: lp, finish_reason: finish }], ...(withUsage ? { usage: null } : {}),
    });
    return sseResponse(async (send) => {
      let e: ReqEvent = first;
      send(chunk({ role: "assistant", content: "" }, null, null));
      for (;;) {
        if (e.t === "accept") split = new ThinkSplit(split.enabled, e.think);
        else if (e.t === "tok") {
          const { delta, calls, from } = deltas(e.text, e.mark);
          if (Object.keys(delta).length || wantLp) send(chunk(delta, wantLp ? { content: [lpEntry(e)] } : null, null));
          if (calls.length) send(chunk(callDelta(calls, from), null, null));
        } else if (e.t === "done") {
          const { delta, calls, from } = deltas(e.text, undefined, true);
          if (Object.keys(delta).length) send(chunk(delta, null, null));
          if (calls.length) send(chunk(callDelta(calls, from), null, null));
          send(chunk({}, null, finish(e.reason)));
          if (withUsage) send({ ...base, object: "chat.completion.chunk", choices: [], usage: usage(e) });
          return true;
        } else if (e.t === "error") {
          send(errorJson(fromWorker(e.code, e.detail, "messages")));
          return false;
        }
        e = await r.q.next();
      }
    }, r.abandon);
  }

  let content = "", reasoning = "";
  const lps: ReturnType<typeof lpEntry>[] = [], calls: ToolCall[] = [];
  for (let e: ReqEvent = first; ; e = await r.q.next()) {
    if (e.t === "accept") split = new ThinkSplit(split.enabled, e.think);
    else if (e.t === "tok" || e.t === "done") {
      const d = e.t === "tok" ? deltas(e.text, e.mark) : deltas(e.text, undefined, true);
      content += d.delta.content ?? "";
      reasoning += d.delta.reasoning_content ?? "";
      calls.push(...d.calls);
      if (e.t === "tok" && wantLp) lps.push(lpEntry(e));
      if (e.t === "done") {
        const message = {
          role: "assistant", content: calls.length && !content ? null : content,
          ...(calls.length ? { tool_calls: calls } : {}), ...(split.enabled ? { reasoning_content: reasoning } : {}),
        };
        return Response.json({
          ...base, object: "chat.completion",
          choices: [{ index: 0, message, logprobs: wantLp ? { content: lps } : null, finish_reason: finish(e.reason) }],
          usage: usage(e),
        });
      }
    } else if (e.t === "error") return errorResponse(fromWorker(e.code, e.detail, "messages"));
  }
}
