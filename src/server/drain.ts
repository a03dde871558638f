// Graceful drain (serve's first SIGTERM / SIGINT): once begun, new requests are refused with 503 and Retry-After,
// /health answers 503 {"status":"draining"} so a balancer takes this replica out, and the requests already running
// finish; `settle` waits for them up to a grace period. State: when draining began (0: serving).
import { apiError, errorResponse } from "./http-errors.ts";

/** Paths still answered while draining: the health checks (they answer "draining") and the figures. */
const STILL_OPEN = new Set(["/health", "/v1/health", "/ping", "/metrics", "/version"]);

export class Drain {
  since = 0;
  get draining(): boolean { return this.since > 0; }
  begin(): void { if (!this.since) this.since = Date.now(); }

  /** The refusal of a request that arrives while draining (null: answer it). Retry-After 1: through a balancer
   *  the retry lands on another replica at once. */
  refusal(path: string): Response | null {
    if (!this.draining || STILL_OPEN.has(path)) return null;
    const r = errorResponse(apiError(503, "this server is draining (shutting down): send the request to another replica", null, "server_draining"));
    r.headers.set("retry-after", "1");
    r.headers.set("connection", "close");
    return r;
  }

  /** Resolves true once `pending()` (the requests still being answered) reaches 0, false when `timeoutMs` passed first. */
  async settle(pending: () => number, timeoutMs: number): Promise<boolean> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      if (pending() === 0) return true;
      if (Date.now() >= end) return false;
      await Bun.sleep(Math.min(50, Math.max(1, end - Date.now())));
    }
  }
}
