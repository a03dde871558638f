// The Hono app: routes, bearer auth (--api-key; /health, its aliases /v1/health and /ping, and the chat page at / stay open), OpenAI-shaped
// 404/500s, and CORS only for the origins --cors names (otherwise browsers on other origins get no
// Access-Control headers). State: an HTTP request count.
import { type Context, Hono } from "hono";
import { cors } from "hono/cors";
import { timingSafeEqual } from "node:crypto";
import { chatCompletions } from "./chat.ts";
import { anthropicError, countTokens, messages } from "./messages.ts";
import { completions } from "./completions.ts";
import { embeddings, llamaEmbedding } from "./embeddings.ts";
import type { EngineClient } from "./engine-client.ts";
import { apiError, errorResponse } from "./http-errors.ts";
import { browserGuard } from "./browser-guard.ts";
import { metricsText } from "./metrics.ts";
import { muxHttp } from "./mux-http.ts";
import { basicSampling, defaultsOf, notReady, type RouteOptions } from "./routes-common.ts";
import { applyTemplate, detokenize, tokenize } from "./tokenize.ts";
import { slotAction } from "./slot-files.ts";
import { llamaCompletion } from "./llama-completion.ts";
import { deleteResponse, responses, storedResponse } from "./responses.ts";
import { ResponseStore } from "./responses-store.ts";
import type { Drain } from "./drain.ts";
import type { HttpConfig } from "./config.ts";
import { sessionKey } from "./affinity.ts";
import { policyReport } from "../engine/quality.ts";
import chatPage from "./ui.html" with { type: "text" };

/** Paths answered without the API key: the health checks (load balancers and orchestrators call them bare). */
const OPEN = new Set(["/health", "/v1/health", "/ping"]);

/** http: serve's HTTP options (cors: origins allowed to call from a browser, "*": any, absent or empty: none; ui: the
 *  chat page at /, default on; host: the bound address); hosts: the Host names answered (null: any; absent: no check) */
export interface AppOptions extends RouteOptions { http: RouteOptions["http"] & HttpConfig; drain?: Drain /* serve's graceful drain */;
  hosts?: Set<string> | null }

/** the key as `Authorization: Bearer <key>` (OpenAI clients) or `x-api-key: <key>` (Anthropic's) */
/** the bearer token (or Anthropic's x-api-key) is one of the keys (several: comma-separated, as llama-server takes them) */
function keyMatches(bearer: string | undefined, xKey: string | undefined, keys: string): boolean {
  const given = /^Bearer +(.+)$/i.exec(bearer ?? "")?.[1] ?? xKey; // (the scheme is case-insensitive: RFC 7235)
  if (given === undefined) return false;
  const a = Buffer.from(given);
  let ok = false;
  for (const k of keys.split(",")) { const b = Buffer.from(k); ok = (k !== "" && a.length === b.length && timingSafeEqual(a, b)) || ok; }
  return ok;
}

export function makeApp(engine: EngineClient, o: AppOptions): Hono {
  const app = new Hono();
  let httpRequests = 0;
  const ro: RouteOptions = { ...o, responses: o.responses ?? new ResponseStore() }; // (the Responses API's memory)

  const http = o.http;
  if (http.cors?.length) { // before the key check: preflights carry no credentials, and errors need the headers too
    app.use("*", cors({
      origin: http.cors.includes("*") ? "*" : http.cors,
      allowMethods: ["GET", "POST", "OPTIONS"],
      allowHeaders: ["Authorization", "Content-Type", "x-api-key", "anthropic-version", "X-Request-Id", "X-Session-Id"],
      exposeHeaders: ["X-Request-Id", "X-Session-Id"],
      maxAge: 600,
    }));
  }
  if (o.hosts !== undefined) app.use("*", browserGuard(o.hosts, http.host ?? "127.0.0.1")); // (DNS rebinding, cross-site form posts)
  const ui = http.ui !== false, started = Math.floor(Date.now() / 1000); // (/v1/models' `created`: when this server started)
  app.use("*", async (c, next) => {
    httpRequests++;
    // X-Request-Id on every response: the client's (as vLLM and OpenAI's API echo it; ≤ 255 of [A-Za-z0-9_=-]) or a new one
    const given = c.req.header("x-request-id"), rid = given && given.length <= 255 && !/[^\w\-=]/.test(given) ? given : crypto.randomUUID();
    const open = OPEN.has(c.req.path) || (ui && c.req.path === "/"); // the page holds no data: its calls carry the key
    if (http.apiKey && !open && !keyMatches(c.req.header("authorization"), c.req.header("x-api-key"), http.apiKey)) {
      const e = apiError(401, "missing or invalid API key (Authorization: Bearer <key>, or x-api-key: <key>)", null, "invalid_api_key");
      const r = c.req.path.startsWith("/v1/messages") ? Response.json(anthropicError(e), { status: 401 }) : errorResponse(e);
      r.headers.set("x-request-id", rid);
      return r;
    }
    const refused = o.drain?.refusal(c.req.path); // (draining: 503 + Retry-After, but for the health checks and figures)
    if (refused) return (refused.headers.set("x-request-id", rid), refused);
    await next();
    c.res.headers.set("x-request-id", rid);
    const session = sessionKey(c.req.raw); // the header's or body's session key, for a balancer's affinity (affinity.ts)
    if (session) c.res.headers.set("x-session-id", session);
  });

  const health = (c: Context) => {
    if (o.drain?.draining) return c.json({ status: "draining" }, 503);
    if (engine.state === "ready") return c.json({ status: "ok" });
    if (engine.state === "loading") return c.json({ status: "loading" }, 503);
    return c.json({ status: "error", message: engine.error }, 503);
  };
  for (const p of OPEN) app.get(p, health); // (/v1/health: llama-server's alias; /ping: vLLM's)

  const model = () => {
    const i = engine.info!;
    return { id: i.model, object: "model", created: started, owned_by: "hummingbird", max_model_len: i.ctx, // (vLLM's field)
      meta: { slots: i.slots, ctx: i.ctx, vocab: i.vocab, threads: i.threads } };
  };
  const models = (c: Context) => (engine.state !== "ready" ? notReady(engine) : c.json({ object: "list", data: [model()] }));
  app.get("/v1/models", models);
  app.get("/models", models); // llama-server's alias
  app.get("/v1/models/:id{.+}", (c) => { // OpenAI's "retrieve model" (ids may hold slashes)
    if (engine.state !== "ready") return notReady(engine);
    const id = c.req.param("id");
    return id === engine.info!.model ? c.json(model())
      : errorResponse(apiError(404, `The model '${id}' does not exist (this server serves '${engine.info!.model}')`, "model", "model_not_found"));
  });

  if (ui) app.get("/", (c) => c.html(chatPage as unknown as string)); // (a text import: a string, whatever bun-types says of .html)
  app.get("/version", (c) => c.json({ version: o.fingerprint.replace(/^hummingbird-/, "") })); // vLLM's
  // llama-server's /props (its web UI and some clients read the context size and chat template there)
  app.get("/props", (c) => {
    if (engine.state !== "ready") return notReady(engine);
    const i = engine.info!, d = defaultsOf(engine, o);
    return c.json({
      model_alias: i.model, model_path: i.dir, total_slots: i.slots, chat_template: i.chatTemplate ?? "",
      // what a chat or completions request that names none gets (the model's generation_config.json, else the API's)
      default_generation_settings: { n_ctx: i.ctx, params: { ...basicSampling({}, d.sampling), repeat_penalty: d.sampling.repetition_penalty ?? 1 },
        ...(d.template ? { chat_template_kwargs: d.template } : {}) },
      modalities: { vision: false, audio: false }, build_info: o.fingerprint,
      // the opt-in router policies (--experts-per-token, --router-top-p; null: off, the model as trained)
      quality_policies: policyReport(i.quality),
    });
  });
  app.get("/metrics", () => new Response(metricsText(engine, httpRequests), { headers: { "content-type": "text/plain; version=0.0.4" } }));
  app.post("/slots/:id", (c) => slotAction(c.req.raw, c.req.param("id"), c.req.query("action"), engine, o));
  app.get("/slots", (c) => {
    const st = engine.stats;
    // llama-server's ?fail_on_no_slot=1: a 503 while every slot is busy (or none is up yet), for load balancers
    if (/^(1|true)$/i.test(c.req.query("fail_on_no_slot") ?? "") && st.busy >= st.slots.length)
      return errorResponse(apiError(503, "no slot available", null, "no_slot_available"));
    return c.json({ slots: st.slots, busy: st.busy, queue: st.queue });
  });
  for (const p of ["/v1/chat/completions", "/chat/completions"]) app.post(p, (c) => chatCompletions(c.req.raw, engine, o));
  for (const p of ["/v1/completions", "/completions"]) app.post(p, (c) => completions(c.req.raw, engine, o)); // (the unversioned: llama-server's aliases)
  app.post("/completion", (c) => llamaCompletion(c.req.raw, engine, o)); // llama-server's own
  app.post("/v1/messages", (c) => messages(c.req.raw, engine, o));
  app.post("/v1/responses", (c) => responses(c.req.raw, engine, ro));
  app.get("/v1/responses/:id", (c) => storedResponse(c.req.param("id"), ro));
  app.delete("/v1/responses/:id", (c) => deleteResponse(c.req.param("id"), ro));
  app.post("/v1/embeddings", (c) => embeddings(c.req.raw, engine, o));
  for (const p of ["/embedding", "/embeddings"]) app.post(p, (c) => llamaEmbedding(c.req.raw, engine, o)); // llama-server's own
  app.post("/v1/messages/count_tokens", (c) => countTokens(c.req.raw, engine, o));
  app.post("/v1/mux", (c) => muxHttp(c.req.raw, engine));
  app.post("/tokenize", (c) => tokenize(c.req.raw, engine, o));
  app.post("/detokenize", (c) => detokenize(c.req.raw, engine, o));
  app.post("/apply-template", (c) => applyTemplate(c.req.raw, engine, o));

  app.notFound((c) => errorResponse(apiError(404, `no route ${c.req.method} ${c.req.path}`, null, "not_found")));
  app.onError((e) => errorResponse(apiError(500, `internal error: ${e.message}`, null, "internal_error")));
  return app;
}
