// The HTTP side's handle on the engine worker: starts it (the model loads there), routes request
// events to their subscribers by request id, keeps the counters and latency histograms /metrics reports
// and, given a log, writes one line per finished request. State: the worker, load status, the live request
// callbacks, the latest worker stats, the totals, the histograms and the live requests' start times.
import type { Call, FinishReason, FromWorker, GenRequest, ReadyInfo, ReqEvent, Stats, ToWorker } from "../engine/serving/protocol.ts";
import type { WorkerConfig } from "../engine/serving/config.ts";
import { workerSpec } from "../engine/serving/worker-spec.ts";

export type Reply = { ok: true; value: unknown } | { ok: false; detail: string };

export interface Handle {
  rid: number;
  cancel(): void;
  stop(): void;
  /** on: its client is not taking its output, so the engine stops decoding it (out-flow.ts); off: it goes on */
  hold(on: boolean): void;
}

export interface Totals {
  requests: number;          // submitted to the worker
  finished: number;          // ended with done
  failed: number;            // ended with an error (cancelled included)
  prompt_tokens: number;     // of accepted requests
  cached_tokens: number;
  generated_tokens: number;
}

/** A Prometheus histogram of seconds (cumulative buckets at render time). */
export class Histogram {
  static readonly BOUNDS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
  readonly counts = new Array<number>(Histogram.BOUNDS.length + 1).fill(0); // the last: above every bound
  sum = 0;
  observe(s: number): void {
    let i = 0;
    while (i < Histogram.BOUNDS.length && s > Histogram.BOUNDS[i]) i++;
    this.counts[i]++;
    this.sum += s;
  }
}

export class EngineClient {
  state: "loading" | "ready" | "failed" = "loading";
  info: ReadyInfo | null = null;
  error = "";
  readonly ready: Promise<ReadyInfo>;
  stats: Stats = { busy: 0, queue: 0, decode_tok_s: 0, drafted: 0, accepted: 0, slots: [], preemptions: 0, held: 0 };
  readonly totals: Totals = { requests: 0, finished: 0, failed: 0, prompt_tokens: 0, cached_tokens: 0, generated_tokens: 0 };
  /** the finished requests by why they ended (vLLM's request_success_total{finished_reason}) */
  readonly finishedBy: Record<FinishReason, number> = { stop: 0, length: 0, stopped: 0 };
  private worker: Worker;
  private subs = new Map<number, (ev: ReqEvent) => void>();
  private calls = new Map<number, (r: Reply) => void>();
  private nextRid = 1;
  private accepted = new Map<number, { prompt: number; cached: number; t0: number }>();
  /** seconds from submission to the first token, and to the end (requests that ended with done) */
  readonly ttft = new Histogram();
  readonly e2e = new Histogram();
  private started = new Map<number, { t0: number; first: boolean }>();

  /** config: the worker's part of ServeConfig; log: one line per finished request (tokens, speed, why it ended), as
   *  llama-server and vLLM print them */
  constructor(config: WorkerConfig, private readonly log?: (line: string) => void) {
    let ok!: (i: ReadyInfo) => void, fail!: (e: Error) => void;
    this.ready = new Promise((a, b) => { ok = a; fail = b; });
    this.ready.catch(() => {}); // observed through `state`; callers that await it handle it
    // the worker gets the env as it is now (bin.ts sets HB_LIB)
    this.worker = new Worker(workerSpec("worker.ts"), { env: { ...process.env } } as Bun.WorkerOptions);
    this.worker.onmessage = (e: MessageEvent<FromWorker>) => this.onMessage(e.data, ok, fail);
    this.worker.onerror = (e) => {
      const msg = `engine worker crashed: ${e.message}`;
      if (this.state === "loading") fail(new Error(msg));
      this.state = "failed";
      this.error = msg;
      for (const [rid, cb] of this.subs) cb({ t: "error", rid, code: "INTERNAL", detail: msg });
      this.subs.clear();
      for (const cb of this.calls.values()) cb({ ok: false, detail: msg });
      this.calls.clear();
    };
    this.send({ t: "init", config });
  }

  private send(m: ToWorker): void {
    this.worker.postMessage(m);
  }

  private onMessage(ev: FromWorker, ok: (i: ReadyInfo) => void, fail: (e: Error) => void): void {
    switch (ev.t) {
      case "ready": this.state = "ready"; this.info = ev.info; ok(ev.info); return;
      case "fatal": this.state = "failed"; this.error = ev.message; fail(new Error(ev.message)); return;
      case "stats": this.stats = ev.stats; return;
      case "reply": this.calls.get(ev.rid)?.(ev); this.calls.delete(ev.rid); return;
    }
    if (ev.t === "accept") {
      this.totals.prompt_tokens += ev.prompt_tokens; this.totals.cached_tokens += ev.cached_tokens;
      if (this.log) this.accepted.set(ev.rid, { prompt: ev.prompt_tokens, cached: ev.cached_tokens, t0: performance.now() });
    } else if (ev.t === "tok") {
      this.totals.generated_tokens++;
      const st = this.started.get(ev.rid);
      if (st && !st.first) { st.first = true; this.ttft.observe((performance.now() - st.t0) / 1000); }
    } else if (ev.t === "done") {
      this.totals.finished++;
      this.finishedBy[ev.reason]++;
      const st = this.started.get(ev.rid);
      if (st) this.e2e.observe((performance.now() - st.t0) / 1000);
    } else if (ev.t === "error") this.totals.failed++;
    if (ev.t === "done" || ev.t === "error") this.started.delete(ev.rid);
    if (this.log && (ev.t === "done" || ev.t === "error")) this.logEnd(ev);
    const cb = this.subs.get(ev.rid);
    if (ev.t === "done" || ev.t === "error") this.subs.delete(ev.rid);
    cb?.(ev);
  }

  private logEnd(ev: Extract<ReqEvent, { t: "done" | "error" }>): void {
    const a = this.accepted.get(ev.rid);
    this.accepted.delete(ev.rid);
    if (ev.t === "error") { this.log!(`request ${ev.rid}: ${ev.code === "CANCELLED" ? "cancelled" : `failed (${ev.code}: ${ev.detail})`}`); return; }
    const s = a ? (performance.now() - a.t0) / 1000 : 0;
    this.log!(`request ${ev.rid}: ${ev.prompt_tokens} prompt tokens (${ev.cached_tokens} cached) + ${ev.emitted} generated in ${s.toFixed(2)} s, ` +
      `decode ${ev.decode_tok_s.toFixed(1)} tok/s, ${ev.reason}`);
  }

  /** Ask the worker's tokenizer (answered between two scheduler steps). */
  call(c: Call): Promise<Reply> {
    if (this.state === "failed") return Promise.resolve({ ok: false, detail: this.error });
    const rid = this.nextRid++;
    return new Promise((res) => { this.calls.set(rid, res); this.send({ t: "call", rid, call: c }); });
  }

  /** Submit a generation; `on` receives its events until (and including) done or error. */
  submit(req: GenRequest, on: (ev: ReqEvent) => void): Handle {
    const rid = this.nextRid++;
    this.totals.requests++;
    // (token ids that cannot fit a slot are refused here, as the worker would, before they are copied to it: 1M ids
    // took this thread ~80 ms to send)
    const n = req.prompt.kind === "ids" && !req.truncate ? req.prompt.ids.length : 0, ctx = this.info?.ctx ?? Infinity;
    if (this.state === "failed" || n >= ctx) {
      const e: ReqEvent = n >= ctx ? { t: "error", rid, code: "CONTEXT_EXCEEDED", detail: `${n} ${ctx}` } : { t: "error", rid, code: "INTERNAL", detail: this.error };
      this.totals.failed++;
      queueMicrotask(() => on(e));
      return { rid, cancel: () => {}, stop: () => {}, hold: () => {} };
    }
    this.subs.set(rid, on);
    this.started.set(rid, { t0: performance.now(), first: false });
    this.send({ t: "submit", rid, req });
    // (each asked of the engine once: 500k STOP frames of one mux id sent it ~10k messages before its DONE came back)
    const sent = { cancel: false, stop: false };
    const once = (t: "cancel" | "stop") => { if (!sent[t] && this.subs.has(rid)) { sent[t] = true; this.send({ t, rid }); } };
    return {
      rid,
      cancel: () => once("cancel"),
      stop: () => once("stop"),
      hold: (on) => { if (this.subs.has(rid)) this.send({ t: "hold", rid, on }); },
    };
  }

  /** Cancel a request and stop listening to it (its final event is dropped). */
  abandon(h: Handle): void {
    if (!this.subs.has(h.rid)) return;
    this.subs.set(h.rid, () => {});
    this.send({ t: "cancel", rid: h.rid });
  }

  close(): void {
    this.worker.terminate();
  }
}
