// Options and small answers shared by the HTTP routes. No state.
import type { EngineClient } from "./engine-client.ts";
import { apiError, errorResponse } from "./http-errors.ts";

export interface RouteOptions {
  maxBody: number;        // bytes of a JSON body (413 above)
  fingerprint: string;    // system_fingerprint of responses
}

/** 503 while the model loads (or after it failed to load). */
export function notReady(engine: EngineClient): Response {
  return engine.state === "failed"
    ? errorResponse(apiError(503, `the model failed to load: ${engine.error}`, null, "model_failed"))
    : errorResponse(apiError(503, "the model is still loading; retry when GET /health answers 200", null, "model_loading"));
}
