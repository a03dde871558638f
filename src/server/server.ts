// Starts `hummingbird serve` in-process: binds the HTTP port FIRST (so /health answers 503 while the
// model loads), then starts the engine worker that loads the model. Returns the port and a stop().
import type { Hono } from "hono";
import { EngineClient } from "./engine-client.ts";
import { makeApp } from "./app.ts";
import { connectionBounds } from "./conn-bounds.ts";
import { hostAllowList } from "./browser-guard.ts";
import { Drain } from "./drain.ts";
import type { WorkerOptions } from "./protocol.ts";
import type { Pooling } from "../engine/pooling.ts";
import type { SamplingDefaults } from "../model/config.ts";

export interface ServeOptions extends Omit<WorkerOptions, "queue" | "chunk"> {
  host?: string;
  port?: number;           // 0 = ephemeral
  queue?: number;          // waiting requests beyond the slots (default max(16, 4·slots))
  chunk?: number;          // prefill tokens per scheduler step (default PREFILL_CHUNK)
  apiKey?: string;
  cors?: string[];         // origins browsers may call from ("*": any; default none)
  ui?: boolean;            // the chat page at / (default true; --no-ui)
  log?: (line: string) => void; // one line per finished request (serve: stderr unless --quiet)
  maxBody?: number;        // JSON body limit in bytes (default 8 MiB)
  templateKwargs?: Record<string, unknown>; // chat template variables of requests that name none (--chat-template-kwargs)
  generationConfig?: "auto" | "vllm"; // sampling defaults: the model's generation_config.json (default) or the API's
  pooling?: Pooling;       // how /v1/embeddings pools a prompt's hidden states (--pooling; default last)
  maxRowValues?: number;   // values one /embedding response may carry under pooling none (tests lower it)
  tls?: { key: string; cert: string }; // PEM texts: HTTPS instead of HTTP (--ssl-keyfile / --ssl-certfile)
  sampling?: SamplingDefaults; // the server's sampling defaults, over generation_config.json (--temp, --override-generation-config, ...)
  schedulingPolicy?: "fcfs" | "priority"; // priority: requests may name one (lower first in the queue)
  timeout?: number;        // seconds a silent client keeps its connection (--timeout; default DEFAULT_TIMEOUT)
  maxConnections?: number; // requests in progress at once, beyond: 503 (--max-connections; default DEFAULT_MAX_CONNECTIONS)
  allowedHosts?: string[]; // Host names answered besides the bound address and localhost ("*": any; --allowed-hosts)
  acceptAnyModel?: boolean; // requests may name any `model` (--accept-any-model; default: another name is a 404)
}

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
/** Prompt tokens prefilled per scheduler step (beside the decode rows of running streams). 128 rather than 64:
 *  a 1024-token prompt prefilled ~13% faster on the bench model (1659-1778 vs 1458-1528 tok/s, three rounds of
 *  chunks 64 / 128 / 256 / 512 in turn; 256 gained ~3% more) at the price of longer steps for the streams
 *  decoding meanwhile. */
export const PREFILL_CHUNK = 128;

export function startServer(o: ServeOptions): Server {
  let app: Hono | null = null;
  const drain = new Drain();
  const bounds = connectionBounds(o.timeout, o.maxConnections);
  const server = Bun.serve({
    hostname: o.host ?? "127.0.0.1",
    port: o.port ?? 8080,
    idleTimeout: bounds.idleTimeout, // (lifted while a request is worked on: streams may stay quiet during prefill)
    ...(o.tls ? { tls: o.tls } : {}),
    fetch: (req, srv) => bounds.fetch(req, srv, (r) => app!.fetch(r)),
  });
  const { host: _h, port: _p, apiKey: _k, cors: _c, ui: _u, log: _l, maxBody: _b, pooling: _pl, maxRowValues: _mr, tls: _t, sampling: _s, schedulingPolicy: _sp, timeout: _to, maxConnections: _mc, allowedHosts: _ah, acceptAnyModel: _am, ...w } = o;
  const engine = new EngineClient({ ...w, queue: o.queue ?? Math.max(16, 4 * o.slots), chunk: o.chunk ?? PREFILL_CHUNK, preempt: o.schedulingPolicy === "priority" }, o.log);
  app = makeApp(engine, { apiKey: o.apiKey, cors: o.cors, ui: o.ui, maxBody: o.maxBody ?? 8 * 1024 * 1024, fingerprint: `hummingbird-${VERSION}`,
    templateKwargs: o.templateKwargs, generationConfig: o.generationConfig, pooling: o.pooling, maxRowValues: o.maxRowValues, sampling: o.sampling,
    priorities: o.schedulingPolicy === "priority", drain, hosts: hostAllowList(o.host ?? "127.0.0.1", o.allowedHosts), bound: o.host ?? "127.0.0.1",
    acceptAnyModel: o.acceptAnyModel });
  const host = server.hostname!.includes(":") ? `[${server.hostname}]` : server.hostname;
  return {
    port: server.port!, url: `${o.tls ? "https" : "http"}://${host}:${server.port}`, engine,
    stop: async () => { await server.stop(true); engine.close(); },
    drain: (ms) => { drain.begin(); return drain.settle(() => server.pendingRequests, ms); },
  };
}
