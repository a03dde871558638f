// GET /metrics: Prometheus text exposition of the engine client's totals, its latency histograms (time to the
// first token, to the end) and the worker's latest stats (busy slots, queue depth, decode tok/s, the expert
// cache); then the same figures under vLLM's names (with its model_name label) and llama-server's, so dashboards
// built for either read this server. No state of its own.
import { Histogram, type EngineClient } from "./engine-client.ts";
import { flowTotals } from "./out-flow.ts";
import { boundsTotals } from "./conn-bounds.ts";

/** KV rows in use over all slots, and that as a share of every slot's context rows; `running`: only the rows of slots
 *  running a request (vLLM's meaning: an idle slot's kept conversation is free to reuse, as vLLM's cached blocks are) */
export function kvUsage(engine: EngineClient, running = false): { tokens: number; share: number } {
  const s = engine.stats, cap = (engine.info?.ctx ?? 0) * s.slots.length;
  const tokens = s.slots.reduce((a, x) => a + (running && x.state === "idle" ? 0 : x.tokens), 0);
  return { tokens, share: cap > 0 ? tokens / cap : 0 };
}

export function metricsText(engine: EngineClient, httpRequests: number): string {
  const t = engine.totals, s = engine.stats;
  const lines: string[] = [];
  const metric = (name: string, type: "counter" | "gauge", help: string, v: number, full = `hummingbird_${name}`, labels = "") => {
    lines.push(`# HELP ${full} ${help}`, `# TYPE ${full} ${type}`, `${full}${labels} ${Number.isFinite(v) ? v : 0}`);
  };
  metric("http_requests_total", "counter", "HTTP requests received", httpRequests);
  metric("requests_total", "counter", "generation requests submitted to the engine", t.requests);
  metric("requests_finished_total", "counter", "generations that ended normally", t.finished);
  metric("requests_failed_total", "counter", "generations that ended with an error or were cancelled", t.failed);
  metric("prompt_tokens_total", "counter", "prompt tokens of admitted requests", t.prompt_tokens);
  metric("prompt_tokens_cached_total", "counter", "prompt tokens reused from a slot's KV cache", t.cached_tokens);
  metric("generated_tokens_total", "counter", "tokens generated", t.generated_tokens);
  metric("decode_tokens_per_second", "gauge", "generated tokens per second, all slots, last window", s.decode_tok_s);
  metric("draft_tokens_total", "counter", "draft tokens verified (speculative decoding)", s.drafted);
  metric("draft_tokens_accepted_total", "counter", "draft tokens kept", s.accepted);
  metric("queue_depth", "gauge", "requests waiting for a slot", s.queue);
  metric("slots_busy", "gauge", "slots running a request", s.busy);
  metric("slots_total", "gauge", "KV slots", engine.info?.slots ?? 0);
  metric("preemptions_total", "counter", "running requests sent back to the queue for a more urgent one, or for a waiting one while their client was not reading", s.preemptions);
  metric("requests_held", "gauge", "requests paused because their client is not reading their stream", s.held);
  metric("stalled_clients_dropped_total", "counter", "streams reset because their client read nothing for --timeout", flowTotals.dropped);
  metric("idle_sessions_closed_total", "counter", "mux sessions without live ids closed to make room past --max-connections", boundsTotals.idleStreamsClosed);
  metric("model_loaded", "gauge", "1 when the model is loaded", engine.state === "ready" ? 1 : 0);
  const q = engine.info?.quality ?? null; // the opt-in quality policies (0: off, the model as trained)
  metric("experts_per_token", "gauge", "routed experts run per token under --experts-per-token (0: off, the model's own)", q?.expertsPerToken ?? 0);
  metric("router_top_p", "gauge", "--router-top-p: each token keeps its chosen experts up to this routing weight (0: off)", q?.routerTopP ?? 0);
  const histogram = (name: string, help: string, h: Histogram, full = `hummingbird_${name}`, label = "") => {
    lines.push(`# HELP ${full} ${help}`, `# TYPE ${full} histogram`);
    let n = 0;
    const l = label ? `${label},` : "", tail = label ? `{${label}}` : "";
    Histogram.BOUNDS.forEach((b, i) => { n += h.counts[i]; lines.push(`${full}_bucket{${l}le="${b}"} ${n}`); });
    n += h.counts[Histogram.BOUNDS.length];
    lines.push(`${full}_bucket{${l}le="+Inf"} ${n}`, `${full}_sum${tail} ${h.sum}`, `${full}_count${tail} ${n}`);
  };
  histogram("time_to_first_token_seconds", "seconds from a request's submission to its first token", engine.ttft);
  histogram("request_latency_seconds", "seconds from a request's submission to its end (requests that finished)", engine.e2e);
  const pc = s.promptCache;
  if (pc) {
    metric("prompt_cache_bytes", "gauge", "bytes of parked conversations' KV rows in host memory (--cache-ram)", pc.bytes);
    metric("prompt_cache_budget_bytes", "gauge", "the prompt cache's budget", pc.budget);
    metric("prompt_cache_entries", "gauge", "parked conversations", pc.entries);
    metric("prompt_cache_hits_total", "counter", "prompts that took a parked conversation's rows back", pc.hits);
    metric("prompt_cache_evictions_total", "counter", "parked conversations dropped for room", pc.evicted);
  }
  const x = s.experts;
  if (x) {
    metric("expert_cache_hit_rate", "gauge", "routed-expert uses served from RAM (pinned or cached)", x.hitRate);
    metric("expert_cache_hits_total", "counter", "routed-expert uses served from RAM", x.hits);
    metric("expert_cache_misses_total", "counter", "routed-expert uses that needed a disk read", x.misses);
    metric("expert_bytes_read_total", "counter", "bytes of experts read from disk", x.bytesRead);
    metric("expert_read_gigabytes_per_second", "gauge", "expert read rate over the I/O pool's busy time", x.readGBs);
    metric("expert_wait_ms_per_token", "gauge", "time the forward blocked on expert reads, per token", x.waitMsPerToken);
    metric("expert_prefetch_used_total", "counter", "routed-expert uses served by a speculative or piloted prefetch", x.prefetchHits);
    metric("expert_pilot_hit_rate", "gauge", "--expert-prefetch pilot: share of the experts used that the pilot had predicted", x.pilotHitRate);
  }
  // vLLM's names (model_name label) and llama-server's, for the dashboards made for them
  const model = `model_name="${(engine.info?.model ?? "").replace(/["\\\n]/g, "_")}"`, lb = `{${model}}`;
  const { tokens: kvTokens, share: kvUse } = kvUsage(engine);
  metric("", "gauge", "requests running", s.busy, "vllm:num_requests_running", lb);
  metric("", "gauge", "requests waiting", s.queue, "vllm:num_requests_waiting", lb);
  metric("", "counter", "prompt tokens", t.prompt_tokens, "vllm:prompt_tokens_total", lb);
  metric("", "counter", "generated tokens", t.generated_tokens, "vllm:generation_tokens_total", lb);
  // vLLM's finished_reason label: stop, length, abort (ours: a request stopped early by its client)
  const reasons = [["stop", "stop"], ["length", "length"], ["abort", "stopped"]] as const;
  lines.push("# HELP vllm:request_success_total requests that finished", "# TYPE vllm:request_success_total counter");
  for (const [theirs, ours] of reasons) lines.push(`vllm:request_success_total{${model},finished_reason="${theirs}"} ${engine.finishedBy[ours]}`);
  metric("", "counter", "prompt tokens looked up in the prefix cache", t.prompt_tokens, "vllm:prefix_cache_queries_total", lb);
  metric("", "counter", "prompt tokens found in the prefix cache", t.cached_tokens, "vllm:prefix_cache_hits_total", lb);
  metric("", "gauge", "KV cache rows of running requests over all slots' rows (1 = full)", kvUsage(engine, true).share, "vllm:kv_cache_usage_perc", lb);
  metric("", "counter", "preemptions", s.preemptions, "vllm:num_preemptions_total", lb);
  histogram("", "seconds to the first token", engine.ttft, "vllm:time_to_first_token_seconds", model);
  histogram("", "seconds to the end of a request", engine.e2e, "vllm:e2e_request_latency_seconds", model);
  metric("", "counter", "prompt tokens processed", t.prompt_tokens - t.cached_tokens, "llamacpp:prompt_tokens_total");
  metric("", "counter", "tokens generated", t.generated_tokens, "llamacpp:tokens_predicted_total");
  metric("", "gauge", "generated tokens per second", s.decode_tok_s, "llamacpp:predicted_tokens_seconds");
  metric("", "gauge", "requests processing", s.busy, "llamacpp:requests_processing");
  metric("", "gauge", "requests deferred", s.queue, "llamacpp:requests_deferred");
  metric("", "gauge", "KV cache usage (1 = full)", kvUse, "llamacpp:kv_cache_usage_ratio");
  metric("", "gauge", "KV cache tokens", kvTokens, "llamacpp:kv_cache_tokens");
  return lines.join("\n") + "\n";
}
