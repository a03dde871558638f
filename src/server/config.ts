// `hummingbird serve`'s options, typed once: ServeConfig, parsed by src/cli/serve.ts and handed down by sub-object —
// `http` to the HTTP app (src/server/server.ts, app.ts), `{ engine, scheduler, defaults }` (WorkerConfig,
// src/engine/serving/config.ts) to the engine worker, `defaults` to the routes too. One name per option all the way down.
// Types and pure helpers only. No state.
import type { EngineConfig, RequestDefaults, SchedulerConfig, WorkerConfig } from "../engine/serving/config.ts";

/** The HTTP server: the listening socket, access, limits (server.ts, app.ts). Not sent to the worker. */
export interface HttpConfig {
  host?: string;           // default 127.0.0.1
  port?: number;           // 0 = ephemeral (default 8080)
  tls?: { key: string; cert: string }; // PEM texts: HTTPS instead of HTTP (--ssl-keyfile / --ssl-certfile)
  apiKey?: string;
  cors?: string[];         // origins browsers may call from ("*": any; default none)
  ui?: boolean;            // the chat page at / (default true; --no-ui)
  timeout?: number;        // seconds a silent client keeps its connection (--timeout; default DEFAULT_TIMEOUT)
  maxConnections?: number; // requests in progress at once, beyond: 503 (--max-connections; default DEFAULT_MAX_CONNECTIONS)
  allowedHosts?: string[]; // Host names answered besides the bound address and localhost ("*": any; --allowed-hosts)
  maxBody?: number;        // JSON body limit in bytes (default DEFAULT_MAX_BODY)
  bodyBudget?: number;     // bytes of request bodies being read at once, all together (default BODY_BUDGET_BODIES × maxBody)
  maxRowValues?: number;   // values one /embedding response may carry under pooling none (tests lower it)
  maxReplyBytes?: number;  // bytes a reply collected whole may reach (gen-stream.ts MAX_REPLY_BYTES; tests lower it)
  acceptAnyModel?: boolean; // requests may name any `model` (--accept-any-model; default: another name is a 404)
  log?: (line: string) => void; // one line per finished request (serve: stderr unless --quiet)
  warn?: (line: string) => void; // the unknown fields of requests, each named once (default: stderr)
}
export const DEFAULT_MAX_BODY = 8 * 1024 * 1024;

export interface ServeConfig extends WorkerConfig { http: HttpConfig }

/** Every option of ServeConfig in one flat bag, by the same names (in-process callers and tests: startServer). */
export type FlatServeConfig = EngineConfig & SchedulerConfig & RequestDefaults & HttpConfig;

const KEYS = {
  engine: ["dir", "alias", "chatTemplate", "threads", "exact", "quality", "attn", "kvDtype", "experts", "warmup", "device", "deviceLayers",
    "kvBudgetRows", "loadDelayMs"],
  scheduler: ["slots", "ctx", "longCtx", "queue", "chunk", "draft", "schedulingPolicy", "cacheRam", "slotSavePath"],
  defaults: ["sampling", "generationConfig", "templateKwargs", "thinkBudget", "budgetMessage", "maxTokens", "seed", "pooling"],
  http: ["host", "port", "tls", "apiKey", "cors", "ui", "timeout", "maxConnections", "allowedHosts", "maxBody", "bodyBudget", "maxRowValues", "maxReplyBytes",
    "acceptAnyModel", "log", "warn"],
} as const satisfies { [K in keyof ServeConfig]: readonly (keyof ServeConfig[K])[] };
// (a field added to a sub-object but not to KEYS fails to compile here)
type Covers<T, L extends readonly PropertyKey[]> = Exclude<keyof T, L[number]> extends never ? true : false;
const _covered: [Covers<EngineConfig, typeof KEYS.engine>, Covers<SchedulerConfig, typeof KEYS.scheduler>,
  Covers<RequestDefaults, typeof KEYS.defaults>, Covers<HttpConfig, typeof KEYS.http>] = [true, true, true, true];
void _covered;

/** A flat bag split into ServeConfig's sub-objects (absent options stay absent). */
export function serveConfig(o: FlatServeConfig): ServeConfig {
  const flat = o as unknown as Record<string, unknown>;
  const pick = <K extends keyof ServeConfig>(k: K) =>
    Object.fromEntries(KEYS[k].filter((f) => flat[f] !== undefined).map((f) => [f, flat[f]]));
  const known = new Set<string>(Object.values(KEYS).flat());
  const unknown = Object.keys(flat).filter((k) => !known.has(k));
  if (unknown.length) throw new Error(`serveConfig: unknown options ${unknown.join(", ")}`);
  return { engine: pick("engine") as unknown as EngineConfig, scheduler: pick("scheduler") as unknown as SchedulerConfig,
    defaults: pick("defaults"), http: pick("http") };
}
