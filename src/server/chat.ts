// POST /v1/chat/completions: validates the body, renders the chat template in the worker, and answers as one
// chat.completion or SSE chunks. With thinking on (asked, or the template's default: engine/serving/pipeline.ts thinkingOf) the text inside
// <think> goes to `reasoning_content` (and `reasoning`); a grammar / response_format then constrains from the token
// after </think>. `n` choices run as n generations (seed + i), streamed interleaved by index.
// State: per request only (each choice's think split, tool calls and accumulated message).
import type { EngineClient } from "./engine-client.ts";
import { collectChoices, finishReason, promptLogprobs, responseId, sseResponse, streamChoices, timings, TokenIds, usageAll, usageSoFar, type ChoiceView, type Done, type Progress, type Tok } from "./gen-stream.ts";
import { errorJson, errorResponse, fromWorker } from "./http-errors.ts";
import type { GenRequest, GrammarSpec, ReqEvent } from "../engine/serving/protocol.ts";
import type { ChatMessage } from "../model/tokenizer.ts";
import { budgetOf, ChatRequest, contentText, templateOf, penaltiesOf, samplersOf, stoppingOf } from "./schemas.ts";
import { basicSampling, defaultsOf, startGeneration, type Defaults, type RouteOptions } from "./routes-common.ts";
import { ReplySplit } from "./reply.ts";
import { scansForCalls, templateArguments, type Tool, type ToolCall, type ToolChoice } from "./tools.ts";


const toolsOf = (b: ChatRequest) => (b.tool_choice === "none" ? [] : b.tools ?? []);

/** Request messages as the chat template takes them (also POST /tokenize's). */
export function templateMessages(ms: ChatRequest["messages"]): ChatMessage[] {
  return ms.map((m) => {
    const thought = m.reasoning_content ?? m.reasoning; // (either name)
    return {
      role: m.role === "developer" ? "system" : m.role, content: contentText(m.content),
      ...(m.tool_calls ? { tool_calls: m.tool_calls.map((c) => ({ ...c, function: { name: c.function.name, arguments: templateArguments(c.function.arguments) } })) } : {}),
      ...(m.tool_call_id != null ? { tool_call_id: m.tool_call_id } : {}), ...(m.name != null ? { name: m.name } : {}),
      ...(thought != null ? { reasoning_content: thought } : {}),
    };
  });
}

function toGen(b: ChatRequest, grammar: GrammarSpec | null, d: Defaults): GenRequest {
  const messages = templateMessages(b.messages);
  const logprobs = b.logprobs ? (b.top_logprobs ?? 0) : undefined;
  const tools = toolsOf(b);
  return {
    prompt: { kind: "chat", messages, ...templateOf(b.reasoning_effort == null ? b.chat_template_kwargs : {
      reasoning_effort: b.reasoning_effort, enable_thinking: b.reasoning_effort !== "none" && b.reasoning_effort !== "minimal", ...b.chat_template_kwargs,
    }, d.template), ...(tools.length ? { tools } : {}),
      ...(b.add_generation_prompt === false ? { generationPrompt: false } : {}), ...(b.continue_final_message ? { continueFinal: true } : {}) },
    keepSpecial: scansForCalls(tools, b.tool_choice ?? "auto") || b.skip_special_tokens === false,
    slot: b.slot ?? "auto",
    max_tokens: b.max_completion_tokens ?? b.max_tokens ?? undefined,
    ...(b.max_completion_tokens != null ? { max_tokens_field: "max_completion_tokens" } : b.max_tokens != null ? { max_tokens_field: "max_tokens" } : {}),
    ...basicSampling(b, d.sampling),
    seed: b.seed ?? undefined, logprobs, stop: b.stop == null ? [] : typeof b.stop === "string" ? [b.stop] : b.stop,
    ...(grammar ? { grammar } : {}), penalties: penaltiesOf(b, undefined, d.sampling.repetition_penalty), ...stoppingOf(b), ...samplersOf(b), ...budgetOf(b),
    ...(b.prompt_logprobs != null ? { prompt_logprobs: b.prompt_logprobs } : {}),
  };
}

function lpEntry(e: Tok) {
  const bytes = (s: string) => [...new TextEncoder().encode(s)];
  return {
    token: e.tt ?? "", logprob: e.lp ?? 0, bytes: bytes(e.tt ?? ""),
    top_logprobs: (e.top ?? []).map((t) => ({ token: t.text, logprob: t.lp, bytes: bytes(t.text) })),
  };
}

/** One choice: the think split, then its tool calls; accumulates the whole message (non-streaming). */
class ChatChoice implements ChoiceView {
  private readonly reply: ReplySplit;
  private content = "";
  private reasoning = "";
  private readonly calls: ToolCall[] = [];
  private readonly lps: ReturnType<typeof lpEntry>[] = []; // (for `final`: none kept while streaming)
  streaming?: boolean;
  /** vLLM's prompt_logprobs, once the prompt is prefilled (pk: how many alternatives; undefined: not asked) */
  plp: ReturnType<typeof promptLogprobs> | undefined;

  /** ids: return_token_ids (null: not asked) */
  constructor(thinking: boolean | undefined, tools: Tool[], choice: ToolChoice, private readonly wantLp: boolean, private readonly pk?: number, single = false,
    readonly ids: TokenIds | null = null) {
    this.reply = new ReplySplit(thinking, tools, choice, single);
  }

  onAccept(e: Extract<ReqEvent, { t: "accept" }>): void { this.reply.accept(e); }
  onPrompt(e: Extract<ReqEvent, { t: "prompt" }>): object[] {
    if (this.pk !== undefined && e.toks) this.plp = promptLogprobs(e.toks, this.pk);
    return [];
  }

  /** the deltas of one event's text: reasoning / content, then the tool calls it completed */
  private take(text: string, mark: "think" | "/think" | undefined, end: boolean, cut = false): object[] {
    const out = this.reply.take(text, mark, end, cut), from = this.calls.length;
    const delta: { content?: string; reasoning_content?: string; reasoning?: string } = {};
    if (out.reasoning) { delta.reasoning_content = delta.reasoning = out.reasoning; this.reasoning += out.reasoning; }
    if (out.content) { delta.content = out.content; this.content += out.content; }
    this.calls.push(...out.calls);
    const objs: object[] = Object.keys(delta).length ? [{ delta, logprobs: null, finish_reason: null }] : [];
    if (out.calls.length) objs.push({ delta: { tool_calls: out.calls.map((c, i) => ({ index: from + i, ...c })) }, logprobs: null, finish_reason: null });
    return objs;
  }

  /** "length" first: a call cut by it is incomplete (its arguments the text so far) */
  private finish(e: Done) { return e.reason !== "length" && this.calls.length ? "tool_calls" : finishReason(e.reason); }

  onTok(e: Tok): object[] {
    const objs = this.take(e.text, e.mark, false);
    if (this.ids) {
      this.ids.push(e.id);
      if (objs.length === 0 && this.wantLp) objs.push({ delta: {}, logprobs: null, finish_reason: null });
      this.ids.attach(objs);
    }
    if (!this.wantLp) return objs;
    const lp = lpEntry(e);
    if (!this.streaming) this.lps.push(lp);
    if (objs.length === 0) objs.push({ delta: {}, logprobs: null, finish_reason: null });
    (objs[0] as { logprobs: unknown }).logprobs = { content: [lp] };
    return objs;
  }

  onDone(e: Done): object[] {
    const objs = [...this.take(e.text, undefined, true, e.reason === "length"), { delta: {}, logprobs: null, finish_reason: this.finish(e) }];
    return this.ids ? this.ids.attach(objs) : objs;
  }

  final(e: Done): object {
    const message = {
      role: "assistant", content: this.calls.length && !this.content ? null : this.content,
      ...(this.calls.length ? { tool_calls: this.calls } : {}), ...(this.reply.thinking ? { reasoning_content: this.reasoning, reasoning: this.reasoning } : {}),
    };
    return { message, logprobs: this.wantLp ? { content: this.lps } : null, finish_reason: this.finish(e), ...(this.ids ? { token_ids: this.ids.all } : {}) };
  }
}

export async function chatCompletions(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const started = await startGeneration(req, engine, o, ChatRequest, (b, g) => toGen(b, g, defaultsOf(engine, o)), "messages", (b) =>
    b.top_logprobs != null && !b.logprobs
      ? { status: 400, message: "top_logprobs requires logprobs: true", type: "invalid_request_error", param: "top_logprobs", code: "invalid_value" }
      : null);
  if (started instanceof Response) return started;
  const { data, runs, abandon } = started;
  const id = responseId("chatcmpl"), created = Math.floor(Date.now() / 1000), model = engine.info!.model;
  const base = { id, created, model, system_fingerprint: o.fingerprint };
  const gen = runs[0].gen;
  const views = runs.map((run) => new ChatChoice(gen.prompt.kind === "chat" ? gen.prompt.enableThinking : false, toolsOf(data), data.tool_choice ?? "auto",
    gen.logprobs !== undefined, gen.prompt_logprobs, data.parallel_tool_calls === false, gen.return_ids ? new TokenIds(run.first) : null));
  const promptIds = views[0].ids ? { prompt_token_ids: views[0].ids.prompt } : {}; // (vLLM's: the request's, beside the choices)

  if (data.stream) {
    const withUsage = data.stream_options?.include_usage === true, running = withUsage && data.stream_options?.continuous_usage_stats === true;
    const chunk = (choices: object[], p?: Progress, d?: Done) => ({ ...base, object: "chat.completion.chunk", choices,
      ...(withUsage ? { usage: running && p ? usageSoFar(p) : null } : {}), ...(d && runs.length === 1 ? { timings: timings(d) } : {}) });
    return sseResponse(req, async (send) => {
      send({ ...chunk(runs.map((_, i) => ({ index: i, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }))), ...promptIds });
      const r = await streamChoices(runs, views, abandon, (c, p, d) => send(chunk(c, p, d)));
      if (!Array.isArray(r)) { send(errorJson(fromWorker(r.code, r.detail, "messages"))); return false; }
      if (withUsage) send({ ...base, object: "chat.completion.chunk", choices: [], usage: usageAll(r) });
      return true;
    }, started);
  }

  const r = await collectChoices(runs, views, abandon, o.http.maxReplyBytes);
  if ("t" in r) return errorResponse(fromWorker(r.code, r.detail, "messages"));
  return Response.json({ ...base, object: "chat.completion", choices: r.choices, usage: usageAll(r.dones),
    ...(runs.length === 1 ? { timings: timings(r.dones[0]) } : {}), // (llama-server's)
    ...(views[0].plp ? { prompt_logprobs: views[0].plp } : {}), ...promptIds }); // (vLLM's: the prompt's, shared by the choices)
}
