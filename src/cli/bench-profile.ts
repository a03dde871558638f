// `hummingbird bench profile`: where a decode step's (or a prefill's) time goes. Decodes N concurrent sequences as
// one ragged batch (the server's continuous-batching step), or prefills one prompt, with every libhb call timed —
// each FFI symbol wrapped for the duration and restored after — and reports per kind of call its calls,
// microseconds and weight bytes per step, plus the time between libhb calls (TypeScript: routing, cache bookkeeping, sampling, FFI
// marshalling). State: the wrapped symbol table, only while timeCalls runs.
import { cpus } from "node:os";
import { Fmt, hb, MANY_DESC, MANY_W, MOE_TAB, poolNote, poolSince, poolWidth, weightBytes } from "../native/hb.ts";
import { probeBandwidth } from "../engine/rates.ts";
import { forward } from "../engine/forward.ts";
import { loadModel, type Model } from "../engine/model.ts";
import { argmax, Session } from "../engine/session.ts";
import { RunState } from "../engine/state.ts";
import { attachExperts, EXPERT_HELP, expertFlags, expertOptions, type ExpertStore } from "../engine/experts/index.ts";
import { benchModelDir, benchPrompt } from "../model/bench-model.ts";
import { type Command, intOption, parseCli, UsageError } from "./common.ts";

const help = `usage: hummingbird bench profile [--model DIR] [--streams 1,8] [--steps 128] [--warmup 64] [--random-ids] [--exact] [--json]
       hummingbird bench profile --prefill N [--model DIR] [--steps 8] [--warmup 2] [--exact] [--json]

Decodes --streams sequences at once (each stream count in turn; one ragged batch per step, as the server's
continuous batching runs them) after a 16-token prompt each, --steps steps replayed after an untimed pass over
the same positions (at least --warmup steps: caches grown and mapped, as a server's reused slots), every libhb call
timed, and prints per kind of call (symbol; matmuls: the formats and shapes of their matrices, so the routed
experts' batched calls are one kind whatever the union; S is the stream count) its calls and microseconds per step
and share of the step, the TypeScript time before its calls (since the previous libhb call) and the GB/s of the
weights its calls read (the kernels' own byte counter), then the total time between libhb calls, the profiler's own
bookkeeping, and the expert bytes read from disk meanwhile; then the same steps
unprofiled (best of 3): aggregate tok/s, the weight bytes read per step (each expert of the union once) and the
step's time against those bytes at the probe's bandwidth (the union roofline). With --prefill N: the same
for --steps prefills of an N-token prompt (default 8, after --warmup untimed ones, default 2) instead. Compare
kinds within one run. Without --model: the bench preset. --random-ids: each step feeds pseudo-random token ids instead
of the greedy ones (a random model's greedy streams repeat themselves and share their experts; real ones do not).
${EXPERT_HELP}`;

/** per step: calls, microseconds inside them, microseconds of TypeScript since the previous libhb call before them, and
 *  the MB of weights they read (the kernels' counter, hb_wbytes) */
export interface ProfileRow { kind: string; calls: number; us: number; beforeUs: number; mb: number }
/** a step: one decode step of `streams` rows, or one prefill; overheadUs: the profiler's own bookkeeping per step
 *  (outside both the calls and the TypeScript time); positions: the first and last position of stream 0 in a step */
export interface Profile { mode: "decode" | "prefill"; streams: number; steps: number; positions: [number, number]; stepUs: number; tokS: number; betweenUs: number; overheadUs: number; rows: ProfileRow[]; expertMBRead?: number;
  /** decode: the same steps without the profiler (best of 3 passes) — step time, aggregate tok/s, the weight bytes
   *  the kernels read per step (each expert of the union once) and that time against bytes ÷ the probe's bandwidth */
  plain?: { stepUs: number; tokS: number; weightMB: number; probeGBs: number; idealUs: number; ofIdeal: number } }

const FMT = Object.fromEntries(Object.entries(Fmt).map(([k, v]) => [v, k]));

/**
 * Call kinds without allocating per call (garbage would bring collections into the timed gaps): a numeric
 * signature per call — the symbol, and for matmuls the formats and shapes of their matrices (a batched call: its
 * distinct (format, rows) pairs in order of appearance, so the routed experts' calls are one kind whatever the
 * union) — mapped to a kind index; its label is made once, on first sight.
 */
class Kinds {
  readonly labels: string[] = [];
  readonly calls: number[] = [];
  readonly ms: number[] = [];
  readonly before: number[] = [];
  readonly bytes: number[] = [];
  private ids = new Map<number, number>();
  private pairs = new Float64Array(64);
  id(sym: number, name: string, a0: unknown, a1: unknown, a2: unknown, a3: unknown, a4: unknown, a5: unknown, a6: unknown): number {
    let sig = sym, np = 0, moe = "";
    const mm = name === "hb_matmul_q8" || name === "hb_matmul", many = name === "hb_matmul_many";
    // a MoE layer's routed experts (hb_moe_up / hb_moe_down): the format and shape of the union's first expert, from
    // its row of the table (packMat's fmt, gs, O, ...; gate O = F, down O = D)
    const tab = name === "hb_moe_up" ? a5 : name === "hb_moe_down" ? a6 : null;
    if (tab instanceof Float64Array && a2 instanceof Int32Array && (a1 as number) > 0) {
      const b = a2[0] * MOE_TAB, fmt = tab[b + (name === "hb_moe_up" ? 0 : 2 * MANY_W)], F = tab[b + 2], D = tab[b + 2 * MANY_W + 2];
      sig = ((sym * 8 + fmt) * 2 ** 20 + F) * 2 ** 20 + D;
      moe = name === "hb_moe_up" ? `${name} ${FMT[fmt]} ${F}x${D} (gate, up)` : `${name} ${FMT[fmt]} ${D}x${F}`;
    }
    // a MoE layer in one call (hb_moe_layer, the router's call first): its shape from the parameters (p: E, K, ..., D, F)
    if (name === "hb_moe_layer" && a5 instanceof Float64Array) {
      const E = a5[0], D = a5[6], F = a5[7];
      sig = ((sym * 1024 + E) * 2 ** 20 + F) * 2 ** 20 + D;
      moe = `${name} ${E} experts ${F}x${D} (router, shared gate, up; gate, up, down)`;
    }
    if (mm) sig = ((sym * 8 + (a0 as number)) * 2 ** 20 + (a4 as number)) * 2 ** 20 + (a5 as number);
    else if (many) {
      const n = a1 as number, d = a2 as Float64Array;
      for (let k = 0; k < n && np < 64; k++) {
        const p = d[MANY_DESC * k] * 2 ** 24 + d[MANY_DESC * k + 2];
        let seen = false;
        for (let j = 0; j < np && !seen; j++) seen = this.pairs[j] === p;
        if (!seen) { this.pairs[np++] = p; sig = (sig * 1000003 + p) % 2 ** 52; }
      }
      sig = (sig * 1000003 + (a3 as number)) % 2 ** 52;
    }
    let id = this.ids.get(sig);
    if (id === undefined) {
      id = this.labels.length;
      this.ids.set(sig, id);
      this.labels.push(moe ? moe : mm ? `${name} ${FMT[a0 as number]} ${a4}x${a5}`
        : many ? `${name} ${Array.from(this.pairs.subarray(0, np), (p) => `${FMT[Math.floor(p / 2 ** 24)]} ${p % 2 ** 24}x${a3}`).join(", ")}` : name);
      this.calls.push(0); this.ms.push(0); this.before.push(0); this.bytes.push(0);
    }
    return id;
  }
}

/** Profile `steps` greedy decode steps of `streams` sequences at once on m (its experts attached by the caller). */
export function profileDecode(m: Model, o: { streams: number; steps: number; warmup: number; exact?: boolean; experts?: ExpertStore; probe?: number;
  randomIds?: boolean }): Profile {
  const V = m.cfg.vocab_size, st = new RunState(m.cfg), N = o.streams;
  st.exact = !!o.exact;
  const ss = Array.from({ length: N }, () => new Session(m, { exact: o.exact, hidden: false }, { st }));
  const first = ss.map((s, i) => argmax(s.feed(benchPrompt(V, 16 + i)).slice())), toks = first.slice();
  const step = () => {
    forward(m, st, ss.map((s, i) => ({ kv: s.kv, r0: i, n: 1, pos0: s.kv.len })), toks, { logits: "last", exact: o.exact });
    for (let i = 0; i < N; i++) toks[i] = o.randomIds ? (toks[i] * 40503 + 12345 + i) % V : argmax(st.logits.subarray(i * V, (i + 1) * V));
  };
  // warm-up over the positions the timed steps will use, then back to the prompts: the KV caches have grown and
  // their pages are mapped (as a server's reused slots are), so page faults stay out of the profile. The steps
  // bypass the sessions' token lists, so the caches are cut back directly (Session.truncate would see nothing to do).
  const cut = () => ss.forEach((s, i) => { s.kv.truncate(16 + i); toks[i] = first[i]; });
  for (let i = 0; i < Math.max(o.warmup, o.steps); i++) step();
  cut();
  if (ss.some((s, i) => s.kv.len !== 16 + i)) throw new Error("bench profile: the caches were not cut back to the prompts");
  let best = Infinity, bytes = 0;
  const probe = o.probe ?? probeBandwidth(); // this stream count's own (a shared machine's bandwidth drifts)
  for (let pass = 0; pass < 3; pass++) { // unprofiled: the step's own time and its weight bytes (the union's)
    if (pass > 0) cut();
    weightBytes(true);
    const t0 = performance.now();
    for (let i = 0; i < o.steps; i++) step();
    best = Math.min(best, (performance.now() - t0) / o.steps);
    bytes = weightBytes() / o.steps;
  }
  cut();
  const r = timeCalls(step, o.steps, o.experts);
  const idealUs = (1e6 * bytes) / probe;
  return { mode: "decode", streams: N, steps: o.steps, positions: [16, ss[0].kv.len - 1], tokS: (N * o.steps) / (r.ms / 1000), ...r.per,
    plain: { stepUs: 1000 * best, tokS: N / (best / 1000), weightMB: bytes / 1e6, probeGBs: probe / 1e9, idealUs, ofIdeal: (1000 * best) / idealUs } };
}

/** Profile `reps` prefills of a `tokens`-token prompt on m (after `warmup` untimed ones: caches grown and mapped). */
export function profilePrefill(m: Model, o: { tokens: number; reps: number; warmup: number; exact?: boolean; experts?: ExpertStore }): Profile {
  const s = new Session(m, { exact: o.exact, hidden: false }), prompt = benchPrompt(m.cfg.vocab_size, o.tokens);
  const step = () => { s.truncate(0); s.feed(prompt); };
  for (let i = 0; i < Math.max(1, o.warmup); i++) step();
  const r = timeCalls(step, o.reps, o.experts);
  return { mode: "prefill", streams: 1, steps: o.reps, positions: [0, o.tokens - 1], tokS: (o.tokens * o.reps) / (r.ms / 1000), ...r.per };
}

/**
 * `steps` runs of `step` with every libhb call timed (each FFI symbol wrapped for the duration, restored after):
 * the total ms, and per step the kinds of call, the time between calls and the profiler's own bookkeeping.
 */
function timeCalls(step: () => void, steps: number, experts?: ExpertStore) {
  const L = hb() as unknown as Record<string, (...a: unknown[]) => unknown>, saved = { ...L }, K = new Kinds();
  const wbytes = saved.hb_wbytes as (reset: number) => number | bigint; // the kernels' byte counter, not wrapped
  experts?.resetStats(); // before the symbols are wrapped: its calls are not the steps'
  const t = { last: 0, between: 0, overhead: 0, bytes: Number(wbytes(0)) };
  /** after a call of symbol `sym` that ran from t0 to t1 */
  const note = (sym: number, name: string, t0: number, t1: number, a0: unknown, a1: unknown, a2: unknown, a3: unknown, a4: unknown, a5: unknown, a6: unknown) => {
    const gap = t0 - t.last, k = K.id(sym, name, a0, a1, a2, a3, a4, a5, a6);
    const b = Number(wbytes(0));
    t.between += gap; K.calls[k]++; K.ms[k] += t1 - t0; K.before[k] += gap; K.bytes[k] += b - t.bytes; t.bytes = b;
    t.last = performance.now();
    t.overhead += t.last - t1;
  };
  Object.entries(saved).forEach(([name, f], sym) => {
    if (typeof f !== "function") return;
    // a wrapper of the symbol's own arity: rest parameters would allocate an array per call
    const args = Array.from({ length: f.length }, (_, i) => `a${i}`), pad = [...args, "u", "u", "u", "u", "u", "u", "u"].slice(0, 7);
    L[name] = new Function("f", "note", "sym", "name", `const u = undefined; return function (${args.join(", ")}) {
      const t0 = performance.now(), r = f(${args.join(", ")}), t1 = performance.now();
      note(sym, name, t0, t1, ${pad.join(", ")});
      return r;
    };`)(f, note, sym, name) as (...a: unknown[]) => unknown;
  });
  let ms = 0;
  try {
    const t0 = performance.now();
    t.last = t0; // the first step's head, before its first call, is TypeScript before that call
    for (let i = 0; i < steps; i++) step();
    ms = performance.now() - t0;
  } finally { Object.assign(L, saved); }
  const per = (x: number) => (1000 * x) / steps;
  const rows = K.labels.map((kind, k) => ({ kind, calls: K.calls[k] / steps, us: per(K.ms[k]), beforeUs: per(K.before[k]), mb: K.bytes[k] / steps / 1e6 }))
    .sort((p, q) => q.us + q.beforeUs - p.us - p.beforeUs);
  return { ms, per: { stepUs: per(ms), betweenUs: per(t.between), overheadUs: per(t.overhead), rows,
    ...(experts ? { expertMBRead: experts.stats().bytesRead / 1e6 } : {}) } };
}

export function formatProfile(p: Profile): string {
  const pct = (us: number) => `${((100 * us) / p.stepUs).toFixed(1).padStart(5)}%`;
  const lines = [p.mode === "prefill"
    ? `prefill of ${p.positions[1] + 1} tokens: ${p.stepUs.toFixed(0)} us each, ${p.tokS.toFixed(1)} tok/s (${p.steps} prefills)`
    : `${p.streams} stream(s): ${p.stepUs.toFixed(0)} us per step, ${p.tokS.toFixed(1)} tok/s (${p.steps} steps, positions ${p.positions.join("-")})`,
    `${"us/step".padStart(9)} ${"share".padStart(6)} ${"calls".padStart(6)} ${"us/call".padStart(8)} ${"TS before".padStart(10)} ${"GB/s".padStart(6)}  kind`];
  const gbs = (r: ProfileRow) => (r.mb > 0 && r.us > 0 ? ((1e3 * r.mb) / r.us).toFixed(1) : "").padStart(6);
  const big = (r: ProfileRow) => r.us + r.beforeUs >= 0.005 * p.stepUs;
  for (const r of p.rows) if (big(r)) lines.push(`${r.us.toFixed(1).padStart(9)} ${pct(r.us)} ${r.calls.toFixed(1).padStart(6)} ${(r.us / r.calls).toFixed(1).padStart(8)} ${r.beforeUs.toFixed(1).padStart(10)} ${gbs(r)}  ${r.kind}`);
  const small = p.rows.filter((r) => !big(r)), sum = (f: (r: ProfileRow) => number) => small.reduce((a, r) => a + f(r), 0);
  if (small.length) lines.push(`${sum((r) => r.us).toFixed(1).padStart(9)} ${pct(sum((r) => r.us))} ${sum((r) => r.calls).toFixed(1).padStart(6)} ${"".padStart(8)} ${sum((r) => r.beforeUs).toFixed(1).padStart(10)} ${"".padStart(6)}  ${small.length} other kinds (< 0.5% each)`);
  lines.push(`${p.betweenUs.toFixed(1).padStart(9)} ${pct(p.betweenUs)} ${"".padStart(6)} ${"".padStart(8)} ${"".padStart(10)} ${"".padStart(6)}  between libhb calls (TypeScript; the column "TS before" splits it by the call that follows)`);
  lines.push(`${p.overheadUs.toFixed(1).padStart(9)} ${pct(p.overheadUs)}${"".padStart(34)}  the profiler's own bookkeeping`);
  if (p.expertMBRead !== undefined) lines.push(`expert weights read from disk meanwhile: ${p.expertMBRead.toFixed(1)} MB`);
  const q = p.plain;
  if (q) lines.push(`unprofiled: ${q.stepUs.toFixed(0)} us per step, ${q.tokS.toFixed(1)} tok/s in all; weights ${q.weightMB.toFixed(1)} MB per step (the union) ÷ ` +
    `${q.probeGBs.toFixed(1)} GB/s (probe) = ${q.idealUs.toFixed(0)} us: the step takes ${q.ofIdeal.toFixed(2)}× that`);
  return lines.join("\n");
}

export const command: Command = {
  summary: "where a decode step's (or a prefill's) time goes, per kind of libhb call",
  help,
  run(argv) {
    const s = { type: "string" } as const;
    const r = parseCli(argv, { model: s, streams: s, steps: s, warmup: s, prefill: s, exact: { type: "boolean" }, "random-ids": { type: "boolean" }, json: { type: "boolean" }, ...expertFlags }, help);
    if (!r) return (console.log(help), 0);
    const v = r.values, prefill = v.prefill === undefined ? 0 : intOption(v.prefill, "prefill", help);
    if (v.prefill !== undefined && prefill < 1) throw new UsageError("--prefill must be ≥ 1", help);
    if (prefill && (v.streams !== undefined || v["random-ids"])) throw new UsageError("--prefill profiles one prompt: no --streams or --random-ids", help);
    const streams = (v.streams ?? "1,8").split(",").map((x) => intOption(x.trim(), "streams", help));
    if (streams.some((n) => n < 1 || n > 256)) throw new UsageError("--streams: counts in [1, 256]", help);
    const steps = v.steps === undefined ? (prefill ? 8 : 128) : intOption(v.steps, "steps", help);
    const warmup = v.warmup === undefined ? (prefill ? 2 : 64) : intOption(v.warmup, "warmup", help);
    if (steps < 1) throw new UsageError("--steps must be ≥ 1", help);
    const m = loadModel(v.model ?? benchModelDir());
    const experts = attachExperts(m, { ...expertOptions(v, help), ctx: Math.max(prefill, 16 + Math.max(...streams) + warmup + steps) + 64,
      rows: Math.max(16, prefill), sessions: prefill ? 1 : Math.max(...streams) });
    try {
      const o = { steps, warmup, exact: !!v.exact, experts, randomIds: !!v["random-ids"] }, p0 = poolWidth();
      const res = prefill ? [profilePrefill(m, { ...o, tokens: prefill, reps: steps })] : streams.map((n) => profileDecode(m, { ...o, streams: n }));
      const pool = poolSince(p0), note = poolNote(pool);
      const cpu = cpus()[0]?.model.trim() || "unknown CPU", on = `${hb().hb_nthreads()} thread(s) of ${cpu}, ${String(hb().hb_simd_name())}`;
      console.log(v.json ? JSON.stringify(res.map((p) => ({ ...p, cpu, ...pool }))) : `${on}\n${res.map(formatProfile).join("\n\n")}${note ? `\npool: ${note}` : ""}`);
    } finally { experts.close(); }
    return 0;
  },
};
