// Options, small answers and the common start of a generation route (body -> zod -> grammar ->
// submit -> first event) shared by the HTTP routes. No state.
import type { z } from "zod";
import { basename } from "node:path";
import type { EngineClient } from "./engine-client.ts";
import type { FlowOwner } from "./out-flow.ts";
import { run, type Running } from "./gen-stream.ts";
import { apiError, errorResponse, fromWorker, readJson, type ApiError } from "./http-errors.ts";
import type { GenRequest, GrammarSpec, ReqEvent } from "../engine/serving/protocol.ts";
import { biasOutside, grammarOf, zodError } from "./schemas.ts";
import type { SamplingDefaults } from "../model/config.ts";
import type { ResponseStore } from "./responses-store.ts";
import type { HttpConfig } from "./config.ts";
import type { RequestDefaults, SchedulingPolicy } from "../engine/serving/config.ts";
import type { UnknownFields } from "./unknown-fields.ts";

export interface RouteOptions {
  /** maxBody: bytes of a JSON body (413 above); maxRowValues: values one /embedding response may carry under pooling
   *  none (default MAX_ROW_VALUES); maxReplyBytes: bytes a reply collected whole may reach (default MAX_REPLY_BYTES);
   *  acceptAnyModel: a request may name any `model` (else one not served is a 404) */
  http: Pick<HttpConfig, "maxRowValues" | "maxReplyBytes" | "acceptAnyModel"> & { maxBody: number };
  defaults: RequestDefaults; // what a request that names none gets (sampling, template variables, pooling, ...)
  schedulingPolicy?: SchedulingPolicy; // priority: requests may name a priority (else one is refused)
  fingerprint: string;    // system_fingerprint of responses
  responses?: ResponseStore; // the Responses API's stored responses (previous_response_id)
  unknownFields?: UnknownFields; // names the unknown fields of request bodies, once each (absent: silent)
}

/** What a request that names none gets: the chat template's variables (--chat-template-kwargs) and the sampling
 *  parameters of the model's generation_config.json (vLLM's --generation-config auto; `vllm`: the API's own). */
export interface Defaults { template?: Record<string, unknown>; sampling: SamplingDefaults }
export const defaultsOf = (engine: EngineClient, o: RouteOptions): Defaults =>
  ({ template: o.defaults.templateKwargs, sampling: { ...(o.defaults.generationConfig === "vllm" ? {} : engine.info?.sampling ?? {}), ...o.defaults.sampling } });
type Basic = { temperature?: number | null; top_p?: number | null; min_p?: number | null; top_k?: number | null };
/** temperature, top_p, min_p, top_k: the request's, else the model's defaults, else the API's (1, 1, 0, off) */
export const basicSampling = (b: Basic, s: SamplingDefaults) => ({
  temperature: b.temperature ?? s.temperature ?? 1, top_p: b.top_p ?? s.top_p ?? 1, min_p: b.min_p ?? s.min_p ?? 0,
  top_k: Math.max(0, b.top_k ?? s.top_k ?? 0), // (−1: off, as 0)
});

/** The 503 while the model loads (or after it failed to load). */
export function notReadyError(engine: EngineClient): ApiError {
  return engine.state === "failed"
    ? apiError(503, `the model failed to load: ${engine.error}`, null, "model_failed")
    : apiError(503, "the model is still loading; retry when GET /health answers 200", null, "model_loading");
}
export const notReady = (engine: EngineClient): Response => errorResponse(notReadyError(engine));

/** A request body read, validated by `schema` and checked against a loaded model, or the ApiError why not (each
 *  route answers it in its own error shape). */
export async function readRequest<T>(req: Request, o: RouteOptions, schema: z.ZodType<T>, engine: EngineClient):
  Promise<{ ok: true; data: T } | { ok: false; error: ApiError }> {
  const b = await readJson(req, o.http.maxBody);
  if (!b.ok) return b;
  const p = schema.safeParse(b.value);
  if (!p.success) return { ok: false, error: zodError(p.error) };
  o.unknownFields?.note(new URL(req.url).pathname, b.value, schema);
  if (engine.state !== "ready") return { ok: false, error: notReadyError(engine) };
  const wrong = modelRefused(p.data, engine, o);
  if (wrong) return { ok: false, error: wrong };
  return { ok: true, data: p.data };
}

/** The 404 for a request naming a model this server does not serve (as vLLM answers; its id, the model directory or
 *  its name are accepted), unless --accept-any-model. */
export function modelRefused(b: unknown, engine: EngineClient, o: RouteOptions): ApiError | null {
  const m = (b as { model?: unknown }).model, i = engine.info!;
  if (typeof m !== "string" || o.http.acceptAnyModel || m === i.model || m === i.dir || m === basename(i.dir)) return null;
  return apiError(404, `The model '${m}' does not exist (this server serves '${i.model}'; serve --accept-any-model to take any name)`, "model", "model_not_found");
}

/** The 400 for a request naming a priority while the server schedules first come, first served (as vLLM refuses it). */
export function priorityRefused(b: { priority?: number | null }, o: RouteOptions): ApiError | null {
  return b.priority && o.schedulingPolicy !== "priority"
    ? apiError(400, "priority: priority scheduling is off (serve --scheduling-policy priority)", "priority", "invalid_value") : null;
}

/** One choice of a request: its generation request, its events (`first` already taken from the queue). */
export interface Run { gen: GenRequest; r: Running; first: ReqEvent }
export interface Started<T> extends FlowOwner { data: T; runs: Run[] }

/**
 * Read and validate the body, resolve its grammar, submit the `n` choices of each of its prompts (seed + i each
 * when a seed is given) and wait for their first events. Any failure on the way is answered as a Response (OpenAI error
 * shape; `promptField` names the prompt's field); a failed choice abandons the others.
 */
export async function startGeneration<T extends Parameters<typeof grammarOf>[0] & Parameters<typeof biasOutside>[0] & { n?: number | null; slot?: number | null }>(
  req: Request, engine: EngineClient, o: RouteOptions, schema: z.ZodType<T>, toGen: (b: T, g: GrammarSpec | null) => GenRequest | GenRequest[],
  promptField: string, check: (b: T) => ApiError | null = () => null): Promise<Response | Started<T>> {
  const body = await readJson(req, o.http.maxBody);
  if (!body.ok) return errorResponse(body.error);
  const p = schema.safeParse(body.value);
  if (!p.success) return errorResponse(zodError(p.error));
  o.unknownFields?.note(new URL(req.url).pathname, body.value, schema);
  const n = p.data.n ?? 1;
  const bad = priorityRefused(p.data, o) ?? check(p.data);
  if (bad) return errorResponse(bad);
  const grammar = grammarOf(p.data);
  if (grammar && "status" in grammar) return errorResponse(grammar);
  if (engine.state !== "ready") return notReady(engine);
  const wrong = modelRefused(p.data, engine, o);
  if (wrong) return errorResponse(wrong);
  const outside = biasOutside(p.data, engine.info!.vocab);
  if (outside) return errorResponse(outside);
  const perPrompt = [toGen(p.data, grammar)].flat();
  if (perPrompt.length * n > 1 && p.data.slot != null)
    return errorResponse(apiError(400, `${n > 1 ? "n" : "prompt"}: several choices cannot share one pinned slot`, n > 1 ? "n" : promptField, "invalid_value"));
  // each prompt's choices in turn (choice index = prompt · n + i), seed + i for the i-th when a seed is given
  // every choice after the first joins it in the queue (a batch is not refused for its own size: ≤ MAX_CHOICES)
  const gens = perPrompt.flatMap((gen) => Array.from({ length: n }, (_, i) => (i > 0 && gen.seed !== undefined ? { ...gen, seed: gen.seed + i } : gen)))
    .map((g, k) => (k > 0 ? { ...g, joined: true } : g));
  // a prompt's later choices take its first choice's ids (tokenized once, not n times: worker.ts)
  const rs: Running[] = [];
  gens.forEach((g, k) => rs.push(run(engine, k % n > 0 ? { ...g, share: rs[k - 1].h.rid } : g, req.signal)));
  const abandon = () => { for (const r of rs) r.abandon(); };
  const firsts = await Promise.all(rs.map((r) => r.q.next()));
  const failed = firsts.find((e) => e.t === "error");
  if (failed?.t === "error") {
    abandon();
    return errorResponse(fromWorker(failed.code, failed.detail, promptField));
  }
  return { data: p.data, runs: gens.map((g, i) => ({ gen: g, r: rs[i], first: firsts[i] })), abandon, hold: (on) => { for (const r of rs) r.hold(on); } };
}
