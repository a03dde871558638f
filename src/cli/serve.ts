// `hummingbird serve`: the OpenAI-compatible HTTP server (+ POST /v1/mux), or the mux protocol on
// stdin/stdout with --stdio. Parses flags, picks the model (--model, else the embedded demo model), says loudly which model is served, and runs until SIGINT/SIGTERM.
import { EXPERT_HELP, expertFlags, expertOptions, WARMUP_HELP, warmupFlags, warmupOption } from "../engine/experts/index.ts";
import { DEVICE_HELP, deviceFlags, deviceOptions } from "./device.ts";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { ctxPastLimit, apiKeyOption, cacheRamOption, connectionFlags, connectionOptions, corsOption, drainTimeoutOption, samplingFlags, samplingOption, slotSavePath, templateKwargsOption, tlsOption } from "./serve-flags.ts";
import { EngineClient } from "../server/engine-client.ts";
import { type Server, startServer } from "../server/server.ts";
import type { ServeConfig } from "../server/config.ts";
import { PREFILL_CHUNK } from "../engine/serving/config.ts";
import { DRAFT_LEN } from "../engine/speculative.ts";
import { runStdio } from "../server/stdio.ts";
import { POOLINGS } from "../engine/pooling.ts";
import { startStatsLog } from "../server/stats-log.ts";
import { applyLaunch, LAUNCH_HELP, launchFlags, launchOptions, rewriteLaunchArgs } from "./launch-compat.ts";
import { choice, defaultModel, threadsAndTemplate, intOption, KV_HELP, kvOption, parseCli, QUALITY_HELP, qualityFlags, qualityOptions, REASONING_HELP, reasoningFlags, reasoningOptions, UsageError, type Command } from "./common.ts";

const help = `usage: hummingbird serve [DIR | --model DIR] [--host 127.0.0.1] [--port 8080] [--slots N] [--ctx N | --ctx-size N]
                         [--queue N] [--scheduling-policy fcfs|priority] [--prefill-chunk N] [--attn auto|naive|absorbed] [--api-key KEY | --api-key-file F]
                         [--draft ngram|mtp|off] [--draft-len K] [--stdio] [--exact] [--threads N]
                         [--alias NAME] [--chat-template FILE] [--cors ORIGIN[,ORIGIN…]] [--no-ui] [--quiet] [--disable-log-stats]
                         [--slot-save-path DIR] [--cache-ram MIB] [--reasoning-budget N [--reasoning-budget-message TEXT]]
                         [--chat-template-kwargs JSON] [--generation-config auto|vllm] [--kv-cache-dtype f32|f16|q8]
                         [--pooling last|mean|cls|none] [--ssl-keyfile F --ssl-certfile F] [--temp T] [--top-p P] [--top-k K]
                         [--min-p P] [--repeat-penalty R] [--override-generation-config JSON] [--drain-timeout S]
                         [--timeout S] [--max-connections N] [--allowed-hosts H[,H…]|*] [--accept-any-model]
                         [expert and device options below]

Serve a model: OpenAI-compatible HTTP (POST /v1/chat/completions, /v1/completions, /v1/embeddings, GET /v1/models,
/health, /metrics, /slots, /props), the multiplexed SUBMIT/DATA/DONE protocol (POST /v1/mux) and a chat page
at /. Each finished request is logged on stderr (its tokens, speed and finish reason), and every 10 s of work
the engine's stats (as vLLM logs them), unless --quiet.
The port is bound before the model loads: /health answers 503 {"status":"loading"} until ready.

options:
  --model DIR      model directory (default: the embedded int8 demo model); also given as the one positional
                   argument (vLLM's \`vllm serve MODEL\`) or -m (llama-server's)
  --host H         address to bind (default 127.0.0.1; expose deliberately)
  --port P         TCP port (default 8080; 0 = pick a free one)
  --slots N        KV slots = concurrent conversations (default 4; also spelled --max-num-seqs, as vLLM, and
                   --parallel, as llama-server)
  --ctx N          context limit per slot in tokens (default min(4096, max_position_embeddings); also spelled
                   --max-model-len, as vLLM). Past max_position_embeddings it is refused, as vLLM refuses it, unless
                   HB_ALLOW_LONG_MAX_MODEL_LEN=1 (or vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1): then a warning
  -c, --ctx-size N llama-server's: the context of all slots together, each slot getting N / slots
  --queue N        requests that may wait for a slot before 429 / OVERLOADED (default max(16, 4·slots))
  --scheduling-policy P  fcfs (default: the queue in arrival order; a request naming a priority is refused) |
                   priority: requests' \`priority\` orders the queue, lower first, and a strictly more urgent one
                   preempts the least urgent running request when no slot is free (vLLM's); that one resumes later
                   with the same output
  --prefill-chunk N  prompt tokens prefilled per step, between the decode steps of running streams
                   (default 128; larger: faster prompts, longer pauses for the streams decoding meanwhile); also
                   spelled --max-num-batched-tokens (vLLM) and -b / --batch-size (llama-server)
  --attn A         attention form: absorbed (default) | naive | auto (cost model); a fixed form makes
                   results (greedy, or sampled with a seed) bitwise independent of prefill chunking,
                   prefix reuse and the other requests in the batch (auto picks the naive form for early
                   prefill chunks: ~1-2% faster prefill here, but low bits then depend on the cache state)
  --draft D        speculative decoding, verified in the same step as the streams' other rows; lossless
                   (greedy output is token-identical, sampled output keeps its distribution):
                   ngram (prompt lookup: what followed the latest earlier match of the last 1-3 tokens) |
                   mtp (chained drafts of the model's MTP head) | off (default)
  --draft-len K    draft tokens per step (default 4 for ngram, 3 for mtp); each request pauses drafting by
                   itself while too few of its drafts are kept to pay for their rounds
  --api-key KEY    require "Authorization: Bearer KEY" (all routes but /health); several keys: KEY1,KEY2 (as
                   llama-server takes them)
  --api-key-file F the keys from a file, one a line (llama-server's; not visible in the process list); without
                   either, the HB_API_KEY environment variable if set
  --alias NAME     the model id /v1/models reports and responses carry (default: the directory's name; also
                   spelled --served-model-name, as vLLM does)
  --chat-template FILE  a Jinja chat template used instead of the model's tokenizer_config.json one
  --chat-template-kwargs JSON  template variables of requests that give none, e.g. '{"enable_thinking": true}'
                   (thinking on unless a request turns it off); a request's chat_template_kwargs override
                   them (llama-server's flag; vLLM's spelling --default-chat-template-kwargs too)
  --temp T, --top-p P, --top-k K, --min-p P, --repeat-penalty R  the server's defaults for requests that name none
                   (llama-server's flags; --temperature too), over the model's generation_config.json; or as
                   vLLM takes them: --override-generation-config '{"temperature": 0.6, "top_p": 0.95}'
  --generation-config G  auto (default): requests that name no temperature, top_p, top_k, min_p or
                   repetition_penalty get the model's generation_config.json values (as vLLM does);
                   vllm: the API's own defaults (temperature 1, top_p 1, no top-k, min-p or penalty)
  --ssl-keyfile F --ssl-certfile F  serve HTTPS with this PEM private key and certificate (chain) instead of HTTP
                   (vLLM's names; llama-server's --ssl-key-file / --ssl-cert-file too)
  --pooling P      how the embeddings routes pool a prompt's final hidden states (after the final norm): last
                   (default: the last token's, as vLLM pools decoder-only models) | mean | cls (the first token's) |
                   none (every token's, on POST /embedding only); llama-server's flag
  --cors ORIGINS   let browsers on these origins call the API (comma-separated, e.g. http://localhost:3000;
                   * = any origin); default: no CORS headers at all
  --threads N      compute threads (default: HB_THREADS, else the physical cores)
  --no-ui          no chat page at / (it holds no data; its requests carry the API key typed into it); also
                   llama-server's --no-webui
  --quiet          no line per finished request on stderr, and no stats lines
  --disable-log-stats  no stats line every 10 s of work (throughput, running / waiting requests, KV cache use,
                   prefix and expert cache hit rates; vLLM's lines and flag)
  --cache-ram MIB  a host-memory prompt cache of this many MiB (llama-server's flag; default 0: off): a slot's
                   conversation about to be overwritten is parked there, and a later prompt starting with it gets
                   its KV rows back instead of prefilling them (reserved in the RAM plan)
  --slot-save-path DIR  allow POST /slots/{id}?action=save|restore {"filename"} (a slot's KV cache to DIR/filename
                   and back into any idle slot: later prompts with that prefix prefill only the rest) and
                   ?action=erase; created if missing (llama-server's flag and API)
${REASONING_HELP}
${KV_HELP}
${QUALITY_HELP}
${LAUNCH_HELP}
  --timeout S      seconds a silent client keeps its connection: between requests on a kept-alive connection,
                   and while its request body stalls (default 10; vLLM keeps idle connections 5 s, llama-server's
                   --timeout is a 600 s read timeout; above 255, Bun's limit, idle connections get 255). Never while
                   the server works: a quiet prefill, a long generation or a stream is not cut. A connection that
                   sends no complete request head within ~10 s is closed regardless. A stream's client that takes
                   none of its output for S seconds is dropped (its requests cancelled, the connection reset); past
                   512 KiB of unread output its requests pause, and after 1 s yield their slots to waiting ones.
                   A request body that comes slower than ~16 KiB/s is cut after S seconds (Bun's rule)
  --max-connections N  requests in progress at once (streams and mux sessions included; default 1024): beyond,
                   the mux session without live ids for longest is closed to make room (ERROR 0
                   OVERLOADED), else 503 {"code": "too_many_connections"} and the connection is closed
  --allowed-hosts H  the Host headers answered besides the bound address and localhost (comma-separated names or
                   addresses; * = any). Default: any when bound to 0.0.0.0 / :: (as vLLM), else only those: a page
                   on another site reaching this port by DNS rebinding gets 403. POST bodies must be
                   Content-Type: application/json (415 otherwise; /v1/mux: any non-form type, e.g.
                   application/octet-stream), so cross-site forms cannot use the API without a key
  --accept-any-model  requests may name any \`model\` (default: a name other than the served id, --alias, or the
                   model directory is refused with 404 model_not_found, as vLLM does)
  --drain-timeout S  on SIGTERM (or SIGINT) drain first: new requests get 503 with Retry-After, /health 503
                   {"status":"draining"} (balancers take the replica out), running requests and streams finish for
                   up to S seconds (default 30), then exit 0; a second signal exits at once (docs/serving.md)
  --stdio          speak the mux protocol on stdin/stdout instead of HTTP (logs on stderr)
  --exact          f32 activations (default: int8 activations for quantized weights, the fast mode)
  -h, --help       this help

${EXPERT_HELP}
${WARMUP_HELP}
${DEVICE_HELP}`;

/** --draft ngram|mtp|off and --draft-len K (1..16, default DRAFT_LEN) as the engine's draft options (off: none);
 *  also `chat`'s and `bench serve`'s */
export function draftOption(draft: string | undefined, len: string | undefined, help: string): { kind: "ngram" | "mtp"; len: number } | undefined {
  const kind = draft === undefined ? "off" : choice(draft, "draft", ["ngram", "mtp", "off"] as const, help);
  if (kind === "off" && len !== undefined) throw new UsageError("--draft-len needs --draft ngram or mtp", help);
  if (kind === "off") return undefined;
  const k = len === undefined ? DRAFT_LEN[kind] : intOption(len, "draft-len", help);
  if (k < 1 || k > 16) throw new UsageError("--draft-len must be in [1, 16]", help);
  return { kind, len: k };
}

const log = (s: string) => process.stderr.write(`hummingbird serve: ${s}\n`);

async function run(argv: string[]): Promise<number> {
  const r = parseCli(rewriteLaunchArgs(argv), {
    model: { type: "string", short: "m" }, host: { type: "string" }, port: { type: "string" }, slots: { type: "string" },
    ctx: { type: "string" }, queue: { type: "string" }, "prefill-chunk": { type: "string" }, "max-num-batched-tokens": { type: "string" }, "batch-size": { type: "string", short: "b" }, attn: { type: "string" }, "api-key": { type: "string" }, "api-key-file": { type: "string" }, stdio: { type: "boolean" },
    draft: { type: "string" }, "draft-len": { type: "string" }, alias: { type: "string", short: "a" }, "served-model-name": { type: "string" },
    "max-model-len": { type: "string" }, "ctx-size": { type: "string", short: "c" }, "max-num-seqs": { type: "string" }, parallel: { type: "string" }, "chat-template": { type: "string" },
    cors: { type: "string" }, threads: { type: "string", short: "t" }, "no-ui": { type: "boolean" }, quiet: { type: "boolean" }, "disable-log-stats": { type: "boolean" }, "slot-save-path": { type: "string" }, exact: { type: "boolean" }, ...reasoningFlags,
    "chat-template-kwargs": { type: "string" }, "default-chat-template-kwargs": { type: "string" }, "generation-config": { type: "string" },
    pooling: { type: "string" }, "scheduling-policy": { type: "string" }, "cache-ram": { type: "string" }, "ssl-keyfile": { type: "string" }, "ssl-certfile": { type: "string" }, "ssl-key-file": { type: "string" },
    "ssl-cert-file": { type: "string" }, "drain-timeout": { type: "string" }, ...connectionFlags, ...samplingFlags, ...launchFlags, "kv-cache-dtype": { type: "string" }, ...expertFlags, ...warmupFlags, ...deviceFlags, ...qualityFlags,
  }, help, true);
  if (!r) return (process.stdout.write(help + "\n"), 0);
  const v = r.values;
  if (r.positionals.length > 1) throw new UsageError(`one model directory, not ${r.positionals.length}: ${r.positionals.join(" ")}`, help);
  if (r.positionals.length === 1) {
    if (v.model !== undefined) throw new UsageError(`give the model directory once: ${r.positionals[0]} or --model ${v.model}`, help);
    v.model = r.positionals[0];
  }
  // vLLM's and llama-server's spellings of the same options
  for (const [ours, theirs] of [["alias", ["served-model-name"]], ["ctx", ["max-model-len"]], ["slots", ["max-num-seqs", "parallel"]],
    ["prefill-chunk", ["max-num-batched-tokens", "batch-size"]]] as const)
    for (const t of theirs) {
      if (v[t] === undefined) continue;
      if (v[ours] !== undefined) throw new UsageError(`give --${ours} or --${t}, not both`, help);
      v[ours] = v[t];
    }
  const port = v.port === undefined ? 8080 : intOption(v.port, "port", help);
  if (port > 65535) throw new UsageError("--port must be ≤ 65535", help);
  const slots = v.slots === undefined ? 4 : intOption(v.slots, "slots", help);
  if (slots < 1 || slots > 256) throw new UsageError("--slots must be in [1, 256]", help);
  if (v.ctx !== undefined && v["ctx-size"] !== undefined) throw new UsageError("give --ctx (or --max-model-len) or --ctx-size, not both", help);
  const ctx = v.ctx !== undefined ? intOption(v.ctx, "ctx", help) : v["ctx-size"] !== undefined ? Math.floor(intOption(v["ctx-size"], "ctx-size", help) / slots) : undefined;
  if (ctx !== undefined && ctx < 2)
    throw new UsageError(v.ctx !== undefined ? "--ctx must be ≥ 2" : `--ctx-size is shared by the ${slots} slots: it must give each at least 2 tokens`, help);
  const queue = v.queue === undefined ? undefined : intOption(v.queue, "queue", help);
  const chunk = v["prefill-chunk"] === undefined ? PREFILL_CHUNK : intOption(v["prefill-chunk"], "prefill-chunk", help);
  if (chunk < 1 || chunk > 65536) throw new UsageError("--prefill-chunk must be in [1, 65536]", help);
  const dir = resolve(v.model ?? defaultModel("serving", log, help));
  if (!existsSync(dir)) throw new UsageError(`model directory ${dir} does not exist`, help);
  const given = v["max-model-len"] !== undefined ? `--max-model-len ${v["max-model-len"]}` : v.ctx !== undefined ? `--ctx ${v.ctx}` : `--ctx-size ${v["ctx-size"]} (${ctx} a slot)`;
  const longCtx = ctx !== undefined && ctxPastLimit(dir, ctx, given, help, log);
  const attn = v.attn === undefined ? "absorbed" : choice(v.attn, "attn", ["auto", "naive", "absorbed"] as const, help);
  const apiKey = apiKeyOption(v["api-key"], v["api-key-file"], help);
  const launch = launchOptions(v, help); // llama-server's / vLLM's spellings: -ngl, -ctk / -ctv, -n, --seed, ...
  applyLaunch(v, launch, help);
  const dev = deviceOptions(v, help);
  // (parsed in this order: the first bad flag is the one reported)
  const draft = draftOption(v.draft, v["draft-len"], help), exact = !!v.exact, experts = expertOptions(v, help), warmup = warmupOption(v, help);
  const text = threadsAndTemplate(v, help), slotDir = slotSavePath(v["slot-save-path"], help), reasoning = reasoningOptions(v, help), kv = kvOption(v, help);
  const quality = qualityOptions(v, dir, help, log);
  const cacheRam = v["cache-ram"] !== undefined ? cacheRamOption(v["cache-ram"], help) : undefined;
  const templateKwargs = templateKwargsOption(v["chat-template-kwargs"], v["default-chat-template-kwargs"], help);
  if (v.alias !== undefined && v.alias.trim() === "") throw new UsageError("--alias must not be empty", help);
  const tls = tlsOption(v, help);
  const ui = !v["no-ui"] && !v["no-webui"];
  // a line per finished request, and vLLM's stats lines every 10 s of work
  const requestLog = v.quiet || !launch.logRequests ? undefined : log, statsLog = !v.quiet && !v["disable-log-stats"];
  const drainS = drainTimeoutOption(v["drain-timeout"], help);
  if (tls && v.stdio) throw new UsageError("--ssl-keyfile / --ssl-certfile serve HTTPS: not with --stdio", help);
  const generationConfig = v["generation-config"] === undefined ? undefined : choice(v["generation-config"], "generation-config", ["auto", "vllm"] as const, help);
  const pooling = v.pooling === undefined ? undefined : choice(v.pooling, "pooling", POOLINGS, help), sampling = samplingOption(v, help);
  const schedulingPolicy = v["scheduling-policy"] === undefined ? undefined : choice(v["scheduling-policy"], "scheduling-policy", ["fcfs", "priority"] as const, help);
  const cors = corsOption(v.cors, help), connection = connectionOptions(v, help);
  // the options, parsed once: the engine worker gets { engine, scheduler, defaults }, the HTTP app `http` (and `defaults`)
  const config: ServeConfig = {
    engine: { dir, alias: v.alias, attn, exact, ...quality, experts, warmup, device: dev.mode, deviceLayers: dev.layers, kvBudgetRows: dev.kvBudgetRows, ...text, ...kv },
    scheduler: { slots, ctx, longCtx, queue, chunk, draft, schedulingPolicy, slotSavePath: slotDir, ...(cacheRam !== undefined ? { cacheRam } : {}) },
    defaults: { sampling, generationConfig, templateKwargs, pooling, ...reasoning,
      ...(launch.maxTokens !== undefined ? { maxTokens: launch.maxTokens } : {}), ...(launch.seed !== undefined ? { seed: launch.seed } : {}) },
    http: { host: v.host ?? "127.0.0.1", port, apiKey, cors, ...connection, ui, log: requestLog, tls },
  };

  if (v.stdio) {
    log(`SERVING MODEL ${dir} on stdin/stdout (mux protocol), ${slots} slots; loading…`);
    const { engine: e, scheduler, defaults } = config;
    const engine = new EngineClient({ engine: e, scheduler, defaults }, requestLog);
    engine.ready.then((i) => log(`model ${i.model} ready (ctx ${i.ctx}, vocab ${i.vocab})`), (e: Error) => log(`model failed to load: ${e.message}`));
    if (statsLog) startStatsLog(engine, log);
    await runStdio(engine, Bun.stdin.stream(), (b) => { process.stdout.write(b); });
    engine.close();
    return engine.state === "failed" ? 2 : 0;
  }

  let s: Server;
  try { s = startServer(config); } catch (e) { // (the port taken, an address this machine does not have)
    log(`cannot listen on ${config.http.host}:${port}: ${(e as Error).message}`);
    return 1;
  }
  log(`listening on ${s.url}${ui ? ` (chat page: ${s.url}/)` : ""}`);
  const host = v.host ?? "127.0.0.1";
  if (!apiKey && !["127.0.0.1", "::1", "localhost"].includes(host) && !host.startsWith("127."))
    log(`WARNING: listening on ${host} without --api-key: anyone who can reach this port can use the model`);
  log(`SERVING MODEL ${dir} with ${slots} slots${apiKey ? ", API key required" : ""}; loading…`);
  try {
    const i = await s.engine.ready;
    log(`model ${i.model} ready on ${s.url} (ctx ${i.ctx}, vocab ${i.vocab}, ${i.slots} slots, ${i.threads} threads)`);
    if (statsLog) startStatsLog(s.engine, log);
  } catch (e) {
    log(`model failed to load: ${(e as Error).message}`);
    await s.stop();
    return 2;
  }
  const sig = await new Promise<string>((res) => {
    process.once("SIGINT", () => res("SIGINT"));
    process.once("SIGTERM", () => res("SIGTERM"));
  });
  const now = (why: string) => { log(`${why}: exiting now, requests still running are cut`); process.exit(1); };
  process.once("SIGINT", () => now("second signal (SIGINT)"));
  process.once("SIGTERM", () => now("second signal (SIGTERM)"));
  log(`${sig}: draining (new requests get 503; running ones have up to ${drainS} s to finish)`);
  const drained = await s.drain(drainS * 1000);
  log(drained ? "drained; shutting down" : `--drain-timeout ${drainS} s passed with requests still running; shutting down`);
  await s.stop();
  return 0;
}

export const command: Command = { summary: "serve a model over OpenAI-compatible HTTP and the mux protocol", help, run };
