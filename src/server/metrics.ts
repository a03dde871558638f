// GET /metrics: Prometheus text exposition of the engine client's totals, its latency histograms (time to the
// first token, to the end) and the worker's latest stats (busy slots, queue depth, decode tok/s, the expert
// cache). No state of its own.
import { Histogram, type EngineClient } from "./engine-client.ts";

export function metricsText(engine: EngineClient, httpRequests: number): string {
  const t = engine.totals, s = engine.stats;
  const lines: string[] = [];
  const metric = (name: string, type: "counter" | "gauge", help: string, v: number) => {
    lines.push(`# HELP hummingbird_${name} ${help}`, `# TYPE hummingbird_${name} ${type}`, `hummingbird_${name} ${Number.isFinite(v) ? v : 0}`);
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
  metric("model_loaded", "gauge", "1 when the model is loaded", engine.state === "ready" ? 1 : 0);
  const histogram = (name: string, help: string, h: Histogram) => {
    lines.push(`# HELP hummingbird_${name} ${help}`, `# TYPE hummingbird_${name} histogram`);
    let n = 0;
    Histogram.BOUNDS.forEach((b, i) => { n += h.counts[i]; lines.push(`hummingbird_${name}_bucket{le="${b}"} ${n}`); });
    n += h.counts[Histogram.BOUNDS.length];
    lines.push(`hummingbird_${name}_bucket{le="+Inf"} ${n}`, `hummingbird_${name}_sum ${h.sum}`, `hummingbird_${name}_count ${n}`);
  };
  histogram("time_to_first_token_seconds", "seconds from a request's submission to its first token", engine.ttft);
  histogram("request_latency_seconds", "seconds from a request's submission to its end (requests that finished)", engine.e2e);
  const x = s.experts;
  if (x) {
    metric("expert_cache_hit_rate", "gauge", "routed-expert uses served from RAM (pinned or cached)", x.hitRate);
    metric("expert_cache_hits_total", "counter", "routed-expert uses served from RAM", x.hits);
    metric("expert_cache_misses_total", "counter", "routed-expert uses that needed a disk read", x.misses);
    metric("expert_bytes_read_total", "counter", "bytes of experts read from disk", x.bytesRead);
    metric("expert_read_gigabytes_per_second", "gauge", "expert read rate over the I/O pool's busy time", x.readGBs);
    metric("expert_wait_ms_per_token", "gauge", "time the forward blocked on expert reads, per token", x.waitMsPerToken);
  }
  return lines.join("\n") + "\n";
}
