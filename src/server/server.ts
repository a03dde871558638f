// Starts `hummingbird serve` in-process from a ServeConfig (config.ts): binds the HTTP port FIRST (so /health answers
// 503 while the model loads), then starts the engine worker that loads the model ({ engine, scheduler, defaults }) and
// the HTTP app (`http`, `defaults`). Returns the port and a stop().
import type { Hono } from "hono";
import { EngineClient } from "./engine-client.ts";
import { makeApp } from "./app.ts";
import { BODY_BUDGET_BODIES, connectionBounds } from "./conn-bounds.ts";
import { hostAllowList } from "./browser-guard.ts";
import { Drain } from "./drain.ts";
import { DEFAULT_MAX_BODY, type FlatServeConfig, serveConfig, type ServeConfig } from "./config.ts";
import { UnknownFields } from "./unknown-fields.ts";

/** serve's options as one flat bag, each by its ServeConfig name (the suites' startTiny, in-process callers). */
export type ServeOptions = FlatServeConfig;

export interface Server {
  port: number;
  url: string;
  engine: EngineClient;
  stop(): Promise<void>;
  /** begin draining (new requests 503, /health 503 "draining"); resolves true once the requests being answered have
   *  finished, false when `timeoutMs` passed first */
  drain(timeoutMs: number): Promise<boolean>;
}

export const VERSION = "0.1.0";

/** Start serving `config` (or the same options as one flat bag). */
export function startServer(o: ServeConfig | ServeOptions): Server {
  const c = "http" in o && "engine" in o ? o : serveConfig(o as ServeOptions), http = c.http;
  const bound = http.host ?? "127.0.0.1";
  let app: Hono | null = null;
  const drain = new Drain();
  const maxBody = http.maxBody ?? DEFAULT_MAX_BODY;
  const bounds = connectionBounds(http.timeout, http.maxConnections, http.bodyBudget ?? BODY_BUDGET_BODIES * maxBody);
  const server = Bun.serve({
    hostname: bound,
    port: http.port ?? 8080,
    idleTimeout: bounds.idleTimeout, // (lifted while a request is worked on: streams may stay quiet during prefill)
    development: false, // no error pages with stacks for clients, and a stream dropped for a stalled client (out-flow.ts) not logged as a crash
    ...(http.tls ? { tls: http.tls } : {}),
    fetch: (req, srv) => bounds.fetch(req, srv, (r) => app!.fetch(r)),
  });
  const engine = new EngineClient({ engine: c.engine, scheduler: c.scheduler, defaults: c.defaults }, http.log);
  app = makeApp(engine, { http: { ...http, maxBody }, defaults: c.defaults,
    schedulingPolicy: c.scheduler.schedulingPolicy, fingerprint: `hummingbird-${VERSION}`, drain, hosts: hostAllowList(bound, http.allowedHosts),
    unknownFields: new UnknownFields(http.warn ?? ((l) => void process.stderr.write(`hummingbird serve: ${l}\n`))) });
  const host = server.hostname!.includes(":") ? `[${server.hostname}]` : server.hostname;
  return {
    port: server.port!, url: `${http.tls ? "https" : "http"}://${host}:${server.port}`, engine,
    stop: async () => { await server.stop(true); engine.close(); },
    drain: (ms) => { drain.begin(); return drain.settle(() => server.pendingRequests, ms); },
  };
}
