// Plumbing shared by the OpenAI routes: a request's events as an awaitable queue (abandoned when the
// client goes away), the SSE response (`data: {json}` lines, then `data: [DONE]`; its flow bounded by out-flow.ts),
// the choices streamed or collected whole (a whole reply's size bounded: MAX_REPLY_BYTES), response ids and the usage
// object. State: one queue per request.
import type { EngineClient, Handle } from "./engine-client.ts";
import { type FlowOwner, OutFlow } from "./out-flow.ts";
import { stallMs } from "./conn-bounds.ts";
import type { GenRequest, PromptTok, ReqEvent } from "../engine/serving/protocol.ts";

export class EventQueue {
  private items: ReqEvent[] = [];
  private waiter: ((e: ReqEvent) => void) | null = null;

  push(e: ReqEvent): void {
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w(e);
    } else this.items.push(e);
  }

  next(): Promise<ReqEvent> {
    const e = this.items.shift();
    if (e) return Promise.resolve(e);
    return new Promise((res) => { this.waiter = res; });
  }
}

export interface Running extends FlowOwner { q: EventQueue; h: Handle }

/** Submit and queue the events; a client abort (signal) abandons (cancels) the request. */
export function run(engine: EngineClient, req: GenRequest, signal: AbortSignal): Running {
  const q = new EventQueue();
  const h = engine.submit(req, (e) => q.push(e));
  const abandon = () => {
    engine.abandon(h);
    q.push({ t: "error", rid: h.rid, code: "CANCELLED", detail: "the client went away" }); // ends a waiting reader
  };
  if (signal.aborted) abandon();
  else signal.addEventListener("abort", abandon, { once: true });
  return { q, h, abandon, hold: (on) => h.hold(on) };
}

const enc = new TextEncoder();

/**
 * An SSE response to `req`: `produce` sends JSON objects (each one `data:` line) and returns when done; then
 * `data: [DONE]` closes the stream unless `produce` returned false (after an error event). style "named"
 * (Anthropic's Messages, OpenAI's Responses): each data line after `event: <its type>`, no [DONE]; "plain"
 * (llama-server's /completion): no [DONE].
 * `owner`'s requests are held while the client is not reading, and abandoned when it goes away or stalls (out-flow.ts).
 */
export function sseResponse(req: Request, produce: (send: (obj: unknown) => void) => Promise<boolean>, owner: FlowOwner,
  style: "openai" | "named" | "plain" = "openai"): Response {
  const flow = new OutFlow(owner, stallMs(req));
  // named events (Anthropic's, the Responses API's): `event: <type>` before the data line, no [DONE] at the end
  const send = (obj: unknown) => {
    if (flow.closed) return;
    const name = style === "named" ? `event: ${(obj as { type: string }).type}\n` : "";
    flow.write(enc.encode(`${name}data: ${JSON.stringify(obj)}\n\n`));
  };
  void (async () => {
    try {
      const ok = await produce(send);
      if (ok && style === "openai") flow.write(enc.encode("data: [DONE]\n\n"));
    } catch (e) {
      const message = `internal error: ${(e as Error).message}`;
      send(style === "named" ? { type: "error", error: { type: "api_error", message } }
        : { error: { message, type: "server_error", param: null, code: "internal_error" } });
    }
    flow.close();
  })();
  return new Response(flow.stream, {
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" },
  });
}

/** A 200 JSON response written piece by piece (`pieces` yields its text): the HTTP thread takes a turn between pieces
 *  and stops while the client has more than HOLD_BYTES unread (out-flow.ts), so a large reply costs neither one long
 *  block of this thread nor its whole text in memory. */
export function jsonPieces(req: Request, pieces: Iterator<string>): Response {
  let held = false, gone = false, resume: (() => void) | null = null;
  const flow = new OutFlow({ hold: (on) => { held = on; if (!on) resume?.(); }, abandon: () => { gone = true; resume?.(); } }, stallMs(req));
  void (async () => {
    try {
      for (let p = pieces.next(); !p.done && !gone; p = pieces.next()) {
        flow.write(enc.encode(p.value));
        while (held && !gone) await new Promise<void>((r) => (resume = r));
        await new Promise((r) => setImmediate(r));
      }
    } catch { /* the body ends here: the client sees JSON cut short, not a hang */ }
    flow.close();
  })();
  return new Response(flow.stream, { headers: { "content-type": "application/json;charset=utf-8" } });
}

let counter = 0;
export function responseId(prefix: string): string {
  counter = (counter + 1) % 1e9;
  return `${prefix}-${Date.now().toString(36)}${counter.toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
}

export function usage(d: Extract<ReqEvent, { t: "done" }>) {
  return {
    prompt_tokens: d.prompt_tokens,
    completion_tokens: d.emitted,
    total_tokens: d.prompt_tokens + d.emitted,
    prompt_tokens_details: { cached_tokens: d.cached_tokens },
  };
}

export function finishReason(r: "stop" | "length" | "stopped"): "stop" | "length" {
  return r === "length" ? "length" : "stop";
}

const MARK_TEXT = { think: "<think>", "/think": "</think>" } as const;
/** A token event's text with its think tag written out (completions and mux show tags literally). */
export function literalText(e: Extract<ReqEvent, { t: "tok" }>): string {
  return e.mark ? e.text + MARK_TEXT[e.mark] : e.text;
}

export type Done = Extract<ReqEvent, { t: "done" }>;

/** llama-server's `timings` of a finished request: the prompt's new (uncached) tokens over the prefill's time, the
 *  generated tokens over theirs (a decode rate over n − 1 steps: the first token comes with the prompt) */
export function timings(d: Done) {
  const prompt_n = d.prompt_tokens - d.cached_tokens, steps = d.emitted - 1;
  return {
    cache_n: d.cached_tokens, prompt_n, prompt_ms: d.prompt_ms,
    prompt_per_token_ms: prompt_n > 0 ? d.prompt_ms / prompt_n : 0, prompt_per_second: d.prompt_ms > 0 ? (prompt_n * 1000) / d.prompt_ms : 0,
    predicted_n: d.emitted, predicted_ms: d.predicted_ms,
    predicted_per_token_ms: steps > 0 ? d.predicted_ms / steps : 0, predicted_per_second: d.decode_tok_s,
  };
}
export type Tok = Extract<ReqEvent, { t: "tok" }>;

/** vLLM's return_token_ids for one choice: the prompt's ids (its queued event's) and the generated ids, whole or as
 *  the deltas since the last object they were attached to (streaming). */
export class TokenIds {
  readonly prompt: number[];
  readonly all: number[] = [];
  private pending: number[] = [];
  constructor(first: ReqEvent) { this.prompt = first.t === "queued" ? first.ids ?? [] : []; }
  push(id: number): void { this.all.push(id); this.pending.push(id); }
  /** objs with the ids since the last call on the first of them (none: kept for the next) */
  attach(objs: object[]): object[] {
    if (objs.length && this.pending.length) { Object.assign(objs[0], { token_ids: this.pending }); this.pending = []; }
    return objs;
  }
}
/** One choice of a request as the routes see it: `first` was already taken from the queue. */
interface ChoiceRun { r: Running; first: ReqEvent }

/** What a route makes of one choice's events (choice objects without their index). */
export interface ChoiceView {
  /** set by streamChoices: the choice is sent as it comes, so nothing is kept for `final` (a stream of 100k tokens with
   *  top_logprobs 20 kept ~350 MB of entries on the HTTP thread until it ended) */
  streaming?: boolean;
  onAccept?(e: Extract<ReqEvent, { t: "accept" }>): void;
  /** the stream's choice objects for the echoed prompt */
  onPrompt?(e: Extract<ReqEvent, { t: "prompt" }>): object[];
  /** the stream's choice objects for a token */
  onTok(e: Tok): object[];
  /** the stream's last choice objects (the last carries finish_reason) */
  onDone(e: Done): object[];
  /** the whole choice, after onDone */
  final(e: Done): object;
}

/** usage of a request's choices, `n` per prompt: each prompt's tokens counted once, the completions summed */
export function usageAll(ds: Done[], n = ds.length) {
  let prompt = 0, cached = 0;
  for (let i = 0; i < ds.length; i += n) { prompt += ds[i].prompt_tokens; cached += ds[i].cached_tokens; }
  const c = ds.reduce((a, d) => a + d.emitted, 0);
  return { prompt_tokens: prompt, completion_tokens: c, total_tokens: prompt + c, prompt_tokens_details: { cached_tokens: cached } };
}

/** Each choice's prompt tokens (once accepted), cached prompt tokens and tokens so far: usage while streaming. */
export interface Progress { prompt: number[]; cached: number[]; emitted: number[] }

/** usage so far (vLLM's continuous_usage_stats), counted as usageAll counts the finished choices */
export function usageSoFar(p: Progress, n = p.prompt.length) {
  let prompt = 0, cached = 0;
  for (let i = 0; i < p.prompt.length; i += n) { prompt += p.prompt[i]; cached += p.cached[i]; }
  const c = p.emitted.reduce((a, x) => a + x, 0);
  return { prompt_tokens: prompt, completion_tokens: c, total_tokens: prompt + c, prompt_tokens_details: { cached_tokens: cached } };
}

/** bytes a reply collected whole may reach (its JSON, estimated as its events come: replyBytes); past them the request
 *  ends with a 400 that asks for a stream. Its entries take ~2.3× that on the heap: 32 MiB is ~21k tokens with
 *  top_logprobs 20, where n = 16 choices at a 128k context could ask for 2M (~7 GB of entries). */
export const MAX_REPLY_BYTES = 32 << 20;

/** a token's or an echoed prompt's share of a whole reply's JSON, estimated (its text, its logprobs' entries) */
function replyBytes(e: ReqEvent): number {
  const entries = (top: { text: string }[] | null | undefined) => (top ?? []).reduce((a, t) => a + 48 + t.text.length, 0);
  if (e.t === "tok") return 16 + e.text.length + (e.lp === undefined ? 0 : 48 + (e.tt?.length ?? 0) + entries(e.top));
  if (e.t === "prompt") return e.text.length + (e.toks ?? []).reduce((a, t) => a + 48 + t.tt.length + entries(t.top), 0);
  return 0;
}

/** Feed each choice's events to its view until done; the first error abandons the rest and is returned. `maxBytes`:
 *  what the reply may take (replyBytes, all choices together), when collected whole. */
async function drive(runs: ChoiceRun[], views: ChoiceView[], abandon: () => void,
  emit: (i: number, objs: object[], done?: Done) => void, progress?: Progress, maxBytes = Infinity): Promise<Done[] | Extract<ReqEvent, { t: "error" }>> {
  let failed: Extract<ReqEvent, { t: "error" }> | null = null, bytes = 0;
  const dones = await Promise.all(runs.map(async (run, i) => {
    for (let e = run.first; ; e = await run.r.q.next()) {
      if (failed) return null;
      if (maxBytes < Infinity && (bytes += replyBytes(e)) > maxBytes) {
        failed = { t: "error", rid: e.rid, code: "BAD_REQUEST", detail: `reply passed ${maxBytes} bytes: stream it (stream: true), or ask for fewer tokens, choices or logprobs` };
        abandon();
        return null;
      }
      if (e.t === "accept") { views[i].onAccept?.(e); if (progress) { progress.prompt[i] = e.prompt_tokens; progress.cached[i] = e.cached_tokens; } }
      else if (e.t === "prompt") emit(i, views[i].onPrompt?.(e) ?? []);
      else if (e.t === "tok") { if (progress) progress.emitted[i]++; emit(i, views[i].onTok(e)); }
      else if (e.t === "done") { emit(i, views[i].onDone(e), e); return e; }
      else if (e.t === "error") { failed = e; abandon(); return null; }
    }
  }));
  return failed ?? (dones as Done[]);
}

/** Stream the choices' chunks as they come (`send` wraps choice objects in a chunk; a choice's last chunk comes with
 *  its done event). */
export function streamChoices(runs: ChoiceRun[], views: ChoiceView[], abandon: () => void,
  send: (choices: object[], progress: Progress, done?: Done) => void): Promise<Done[] | Extract<ReqEvent, { t: "error" }>> {
  const progress: Progress = { prompt: runs.map(() => 0), cached: runs.map(() => 0), emitted: runs.map(() => 0) };
  for (const v of views) v.streaming = true;
  return drive(runs, views, abandon, (i, objs, done) => objs.forEach((c, k) => send([{ index: i, ...c }], progress, k === objs.length - 1 ? done : undefined)), progress);
}

/** Every choice whole, in index order (or the first error; past maxBytes of reply, estimated, a BAD_REQUEST). */
export async function collectChoices(runs: ChoiceRun[], views: ChoiceView[], abandon: () => void, maxBytes = MAX_REPLY_BYTES):
  Promise<{ choices: object[]; dones: Done[] } | Extract<ReqEvent, { t: "error" }>> {
  const r = await drive(runs, views, abandon, () => {}, undefined, maxBytes);
  return Array.isArray(r) ? { choices: r.map((d, i) => ({ index: i, ...views[i].final(d) })), dones: r } : r;
}

/** vLLM's prompt_logprobs: null for the first token, then per token {id: {logprob, rank, decoded_token}} for it and
 *  its k most likely alternatives (rank: 1 + the ids more likely; the alternatives' are their place in that list) */
export function promptLogprobs(toks: PromptTok[], k: number) {
  return toks.map((t) => {
    if (t.lp === null) return null;
    const out: Record<string, { logprob: number; rank: number; decoded_token: string }> = {};
    out[t.id] = { logprob: t.lp, rank: t.rank ?? 0, decoded_token: t.tt };
    (t.top ?? []).slice(0, k).forEach((a, i) => { out[a.id] ??= { logprob: a.lp, rank: i + 1, decoded_token: a.text }; });
    return out;
  });
}
