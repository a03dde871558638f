// Connection bounds of the HTTP server: the idle timeout that closes silent clients (a kept-alive connection between
// requests, a request body that stalls; Bun closes a connection that sends no complete request head within ~10 s by
// itself, and one whose body comes slower than ~16 KiB/s once the timeout has passed: uWS's throughput rule), its
// lifting while the server works on a request (a quiet prefill, a long non-streamed generation, an SSE or mux stream:
// progress is never cut), the cap on requests in progress (past it the mux session idle longest is closed to make
// room, else 503 and the connection closed), the budget of request-body bytes being read by all requests together
// (readJson's buffers: 503 and the connection closed for the request that would pass it), Retry-After on every 429
// and 503, and the idle timeout streams use for a client that stops reading (stallMs: out-flow.ts). State per server:
// the body bytes held and the idle streams that may be closed; per request, the hook that lifts its timeout once its
// body is read, the bytes its body holds (mux: the frame being read) and the timeout.
import type { Server } from "bun";
import { apiError, errorBody, type ApiError } from "./http-errors.ts";

/** seconds a silent client keeps its connection (--timeout; vLLM keeps idle connections 5 s, llama-server 5 s idle
 *  and a 600 s read timeout; Bun's own default is 10) */
export const DEFAULT_TIMEOUT = 10;
/** requests in progress at once (--max-connections): each holds its connection (streams, mux sessions, bodies) */
export const DEFAULT_MAX_CONNECTIONS = 1024;
/** the largest idle timeout Bun.serve takes */
export const MAX_IDLE_TIMEOUT = 255;

/** bytes of request bodies being read at once, all requests together, as multiples of one body's limit (a stalled
 *  8 MiB upload held 8 MiB of the server's memory: 1024 of them, --max-connections' default, ~8 GiB) */
export const BODY_BUDGET_BODIES = 64;

/** counts in this process (/metrics) */
export const boundsTotals = { idleStreamsClosed: 0 };

/** A long-lived stream that keeps its connection while it has no work (a mux session without live ids). `since`:
 *  when its work last ended (null while it has some); `close`: end it, telling its client why. */
export interface IdleStream { since(): number | null; close(why: string): void }

interface Held { lift(): void; bytes: number; refused: boolean; pool: { used: number; limit: number }; idle: number; streams: Set<IdleStream> }
const held = new WeakMap<Request, Held>();
/** ms the request's client may take none of a stream's waiting bytes before it is dropped (out-flow.ts): the
 *  server's idle timeout (DEFAULT_TIMEOUT for a request that did not come through connectionBounds) */
export const stallMs = (req: Request): number => 1000 * (held.get(req)?.idle ?? DEFAULT_TIMEOUT);
/** The request's body has been read: silence from now on is the server's own work, not a stalled client. */
export function bodyRead(req: Request): void { held.get(req)?.lift(); }
/** The request now keeps n bytes of its body (readJson's chunks; a mux frame being read): null, or the 503 (nothing more
 *  kept) when that would take the bodies being read past the server's budget */
export function bodyHold(req: Request, n: number): ApiError | null {
  const h = held.get(req);
  if (!h) return null;
  if (n > h.bytes && h.pool.used + n - h.bytes > h.pool.limit) {
    h.refused = true;
    return apiError(503, `server busy: the request bodies being read hold this server's budget of ${h.pool.limit} bytes; retry later`,
      null, "too_many_body_bytes");
  }
  h.pool.used += n - h.bytes; h.bytes = n;
  return null;
}
/** The request no longer keeps its body's bytes (read and parsed, or given up). */
export function bodyDone(req: Request): void { bodyHold(req, 0); }
/** The request is a long-lived stream that may be closed when idle and a request needs its connection: the returned
 *  function takes it off that list (its end). */
export function idleStream(req: Request, s: IdleStream): () => void {
  const set = held.get(req)?.streams;
  set?.add(s);
  return () => { set?.delete(s); };
}

/** Close the stream idle longest, if any: true when one was closed. (No grace for a session just opened: with one,
 *  sessions reopened faster than it kept the cap full for everyone; measured with 1 s, 64 fresh sessions turned away
 *  5,626 requests in that second.) */
function closeIdle(streams: Set<IdleStream>, maxConnections: number): boolean {
  let best: IdleStream | null = null, at = Infinity;
  for (const s of streams) { const t = s.since(); if (t !== null && t < at) { best = s; at = t; } }
  if (!best) return false;
  streams.delete(best);
  boundsTotals.idleStreamsClosed++;
  best.close(`idle session closed: the server is at its ${maxConnections} connections (serve --max-connections) and another client needed one`);
  return true;
}

export interface Bounds { idleTimeout: number; fetch(req: Request, srv: Server<unknown>, next: (r: Request) => Response | Promise<Response>): Promise<Response> }

/** bodyBudget: bytes of request bodies being read at once (bodyHold) */
export function connectionBounds(timeout = DEFAULT_TIMEOUT, maxConnections = DEFAULT_MAX_CONNECTIONS, bodyBudget = Infinity): Bounds {
  const idle = Math.min(Math.max(1, Math.round(timeout)), MAX_IDLE_TIMEOUT), pool = { used: 0, limit: bodyBudget };
  const streams = new Set<IdleStream>();
  return {
    idleTimeout: idle,
    async fetch(req, srv, next) {
      // (the count includes this request; an idle stream closed now leaves the count a moment later)
      if (srv.pendingRequests > maxConnections && !closeIdle(streams, maxConnections))
        return new Response(errorBody(apiError(503, `server busy: ${maxConnections} requests are in progress (serve --max-connections); retry later`,
          null, "too_many_connections")), { status: 503, headers: { "content-type": "application/json", connection: "close", "retry-after": "1" } });
      const set = (s: number) => { try { srv.timeout(req, s); } catch { /* the connection is gone */ } };
      // mux: a full-duplex session whose client may pause between frames; other bodies are read under the timeout
      const h: Held = { lift: () => set(0), bytes: 0, refused: false, pool, idle, streams };
      held.set(req, h);
      if (new URL(req.url).pathname === "/v1/mux") set(0);
      let res: Response;
      try { res = await next(req); } catch (e) { set(idle); throw e; } finally { bodyDone(req); }
      if (h.refused) res.headers.set("connection", "close");
      // a 429 or 503 of any route (the queue full, the server busy or loading) says when to come back: the OpenAI and
      // Anthropic SDKs wait Retry-After before their retry
      if ((res.status === 429 || res.status === 503) && !res.headers.has("retry-after")) res.headers.set("retry-after", "1");
      const ct = res.headers.get("content-type") ?? "";
      if (!res.body || !/^(text\/event-stream|application\/octet-stream)/.test(ct)) { set(idle); return res; }
      // a stream: quiet while it lasts (prefill, a slow model), the idle timeout again once it ends
      const body = res.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({ flush: () => set(idle) }));
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    },
  };
}
