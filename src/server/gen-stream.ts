// Plumbing shared by the OpenAI routes: a request's events as an awaitable queue (abandoned when the
// client goes away), the SSE response (`data: {json}` lines, then `data: [DONE]`), response ids and
// the usage object. State: one queue per request.
import type { EngineClient, Handle } from "./engine-client.ts";
import type { GenRequest, ReqEvent } from "./protocol.ts";

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

export interface Running { q: EventQueue; h: Handle; abandon(): void }

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
  return { q, h, abandon };
}

const enc = new TextEncoder();

/**
 * An SSE response: `produce` sends JSON objects (each one `data:` line) and returns when done; then
 * `data: [DONE]` closes the stream unless `produce` returned false (after an error event).
 * A client disconnect calls `onCancel`.
 */
export function sseResponse(produce: (send: (obj: unknown) => void) => Promise<boolean>, onCancel: () => void): Response {
  let closed = false;
  const body = new ReadableStream<Uint8Array>({
    async start(ctl) {
      const send = (obj: unknown) => {
        if (!closed) ctl.enqueue(enc.encode(`data: ${JSON.stringify(obj)}\n\n`));
      };
      try {
        const ok = await produce(send);
        if (!closed && ok) ctl.enqueue(enc.encode("data: [DONE]\n\n"));
      } catch (e) {
        send({ error: { message: `internal error: ${(e as Error).message}`, type: "server_error", param: null, code: "internal_error" } });
      }
      if (!closed) { closed = true; ctl.close(); }
    },
    cancel() {
      closed = true;
      onCancel();
    },
  });
  return new Response(body, {
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" },
  });
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
