// Options, small answers and the common start of a generation route (body -> zod -> grammar ->
// submit -> first event) shared by the HTTP routes. No state.
import type { z } from "zod";
import type { EngineClient } from "./engine-client.ts";
import { run, type Running } from "./gen-stream.ts";
import { apiError, errorResponse, fromWorker, readJson, type ApiError } from "./http-errors.ts";
import type { GenRequest, GrammarSpec, ReqEvent } from "./protocol.ts";
import { biasOutside, grammarOf, zodError } from "./schemas.ts";

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

export interface Started<T> { data: T; gen: GenRequest; r: Running; first: ReqEvent }

/**
 * Read and validate the body, resolve its grammar, submit it and wait for the first event. Any failure
 * on the way is answered as a Response (OpenAI error shape; `promptField` names the prompt's field).
 */
export async function startGeneration<T extends Parameters<typeof grammarOf>[0] & Parameters<typeof biasOutside>[0]>(req: Request, engine: EngineClient,
  o: RouteOptions, schema: z.ZodType<T>, toGen: (b: T, g: GrammarSpec | null) => GenRequest, promptField: string,
  check: (b: T) => ApiError | null = () => null): Promise<Response | Started<T>> {
  const body = await readJson(req, o.maxBody);
  if (!body.ok) return errorResponse(body.error);
  const p = schema.safeParse(body.value);
  if (!p.success) return errorResponse(zodError(p.error));
  const bad = check(p.data);
  if (bad) return errorResponse(bad);
  const grammar = grammarOf(p.data);
  if (grammar && "status" in grammar) return errorResponse(grammar);
  if (engine.state !== "ready") return notReady(engine);
  const outside = biasOutside(p.data, engine.info!.vocab);
  if (outside) return errorResponse(outside);
  const gen = toGen(p.data, grammar);
  const r = run(engine, gen, req.signal);
  const first = await r.q.next();
  if (first.t === "error") return errorResponse(fromWorker(first.code, first.detail, promptField));
  return { data: p.data, gen, r, first };
}
