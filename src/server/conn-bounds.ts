// Connection bounds of the HTTP server: the idle timeout that closes silent clients (a kept-alive connection between
// requests, a request body that stalls; Bun closes a connection that sends no complete request head within ~10 s by
// itself), its lifting while the server works on a request (a quiet prefill, a long non-streamed generation, an SSE or
// mux stream: progress is never cut), and the cap on requests in progress (503 and the connection closed beyond it).
// State: per request, the hook that lifts its timeout once its body is read.
import type { Server } from "bun";
import { apiError, errorBody } from "./http-errors.ts";

/** seconds a silent client keeps its connection (--timeout; vLLM keeps idle connections 5 s, llama-server 5 s idle
 *  and a 600 s read timeout; Bun's own default is 10) */
export const DEFAULT_TIMEOUT = 10;
/** requests in progress at once (--max-connections): each holds its connection (streams, mux sessions, bodies) */
export const DEFAULT_MAX_CONNECTIONS = 1024;
/** the largest idle timeout Bun.serve takes */
export const MAX_IDLE_TIMEOUT = 255;

const lift = new WeakMap<Request, () => void>();
/** The request's body has been read: silence from now on is the server's own work, not a stalled client. */
export function bodyRead(req: Request): void { lift.get(req)?.(); }

export interface Bounds { idleTimeout: number; fetch(req: Request, srv: Server<unknown>, next: (r: Request) => Response | Promise<Response>): Promise<Response> }

export function connectionBounds(timeout = DEFAULT_TIMEOUT, maxConnections = DEFAULT_MAX_CONNECTIONS): Bounds {
  const idle = Math.min(Math.max(1, Math.round(timeout)), MAX_IDLE_TIMEOUT);
  return {
    idleTimeout: idle,
    async fetch(req, srv, next) {
      if (srv.pendingRequests > maxConnections) // (the count includes this request)
        return new Response(errorBody(apiError(503, `server busy: ${maxConnections} requests are in progress (serve --max-connections); retry later`,
          null, "too_many_connections")), { status: 503, headers: { "content-type": "application/json", connection: "close", "retry-after": "1" } });
      const set = (s: number) => { try { srv.timeout(req, s); } catch { /* the connection is gone */ } };
      // mux: a full-duplex session whose client may pause between frames; other bodies are read under the timeout
      if (new URL(req.url).pathname === "/v1/mux") set(0); else lift.set(req, () => set(0));
      let res: Response;
      try { res = await next(req); } catch (e) { set(idle); throw e; }
      const ct = res.headers.get("content-type") ?? "";
      if (!res.body || !/^(text\/event-stream|application\/octet-stream)/.test(ct)) { set(idle); return res; }
      // a stream: quiet while it lasts (prefill, a slow model), the idle timeout again once it ends
      const body = res.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({ flush: () => set(idle) }));
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    },
  };
}
