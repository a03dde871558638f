// `hummingbird bench profile`: where a decode step's time goes. Decodes N concurrent sequences as one ragged batch
// (the server's continuous-batching step) with every libhb call timed — each FFI symbol wrapped for the duration
// and restored after — and reports per kind of call its calls and microseconds per step, plus the time between
// libhb calls (TypeScript: routing, cache bookkeeping, sampling, FFI marshalling). State: the wrapped symbol table,
// only while profileDecode runs.
import { Fmt, hb, MANY_DESC } from "../engine/hb.ts";
import { forward } from "../engine/forward.ts";
import { loadModel, type Model } from "../engine/model.ts";
import { Session } from "../engine/session.ts";
import { RunState } from "../engine/state.ts";
import { attachExperts, EXPERT_HELP, expertFlags, expertOptions, type ExpertStore } from "../engine/experts/index.ts";
import { benchModelDir, benchPrompt } from "../model/bench-model.ts";
import { type Command, intOption, parseCli, UsageError } from "./common.ts";

const help = `usage: hummingbird bench profile [--model DIR] [--streams 1,8] [--steps 128] [--warmup 64] [--exact] [--json]

Decodes --streams sequences at once (each stream count in turn; one ragged batch per step, as the server's
continuous batching runs them) after a 16-token prompt each and --warmup untimed steps, with every libhb call
timed, and prints per kind of call (symbol; matmuls: the formats and shapes of their matrices, so the routed
experts' batched calls are one kind whatever the union) its calls and microseconds per step and share of the
step, the TypeScript time before its calls (since the previous libhb call), then the total time between libhb
calls and the expert bytes read from disk meanwhile. The timing
adds ~0.1 us per call; compare kinds within one run. Without --model: the bench preset.
${EXPERT_HELP}`;

/** per step: calls, microseconds inside them, and microseconds of TypeScript since the previous libhb call before them */
export interface ProfileRow { kind: string; calls: number; us: number; beforeUs: number }
/** overheadUs: the profiler's own bookkeeping per step (outside both the calls and the TypeScript time) */
export interface Profile { streams: number; steps: number; stepUs: number; tokS: number; betweenUs: number; overheadUs: number; rows: ProfileRow[]; expertMBRead?: number }

const FMT = Object.fromEntries(Object.entries(Fmt).map(([k, v]) => [v, k]));
/** the kind of a libhb call, from its symbol and arguments (matmuls: formats and shape) */
function kindOf(name: string, a: unknown[]): string {
  if (name === "hb_matmul_q8" || name === "hb_matmul") return `${name} ${FMT[a[0] as number]} ${a[4]}x${a[5]} S=${a[7]}`;
  if (name !== "hb_matmul_many") return name;
  const n = a[1] as number, d = a[2] as Float64Array, I = a[3] as number, shapes = new Set<string>();
  for (let k = 0; k < n; k++) shapes.add(`${FMT[d[MANY_DESC * k]]} ${d[MANY_DESC * k + 2]}x${I}`);
  return `${name} ${[...shapes].join(", ")}`;
}

/** Profile `steps` greedy decode steps of `streams` sequences at once on m (its experts attached by the caller). */
export function profileDecode(m: Model, o: { streams: number; steps: number; warmup: number; exact?: boolean; experts?: ExpertStore }): Profile {
  const V = m.cfg.vocab_size, st = new RunState(m.cfg), N = o.streams;
  st.exact = !!o.exact;
  const ss = Array.from({ length: N }, () => new Session(m, { exact: o.exact }, { st }));
  const argmax = (l: Float32Array) => { let b = 0; for (let i = 1; i < l.length; i++) if (l[i] > l[b]) b = i; return b; };
  const toks = ss.map((s, i) => argmax(s.feed(benchPrompt(V, 16 + i)).slice()));
  const step = () => {
    forward(m, st, ss.map((s, i) => ({ kv: s.kv, r0: i, n: 1, pos0: s.kv.len })), toks, { logits: "last", exact: o.exact });
    for (let i = 0; i < N; i++) toks[i] = argmax(st.logits.subarray(i * V, (i + 1) * V));
  };
  for (let i = 0; i < o.warmup; i++) step();
  const L = hb() as unknown as Record<string, (...a: unknown[]) => unknown>, saved = { ...L };
  const acc = new Map<string, { calls: number; ms: number; before: number }>();
  let last = 0, between = 0, overhead = 0;
  for (const [name, f] of Object.entries(saved)) {
    if (typeof f !== "function") continue;
    L[name] = (...a: unknown[]) => {
      const t0 = performance.now(), gap = last ? t0 - last : 0;
      between += gap;
      const r = f(...a), t1 = performance.now(), k = kindOf(name, a), e = acc.get(k) ?? { calls: 0, ms: 0, before: 0 };
      e.calls++; e.ms += t1 - t0; e.before += gap;
      acc.set(k, e);
      last = performance.now();
      overhead += last - t1;
      return r;
    };
  }
  let ms = 0;
  o.experts?.resetStats();
  try {
    const t0 = performance.now();
    for (let i = 0; i < o.steps; i++) step();
    ms = performance.now() - t0;
  } finally { Object.assign(L, saved); }
  const per = (x: number) => (1000 * x) / o.steps;
  const rows = [...acc].map(([kind, e]) => ({ kind, calls: e.calls / o.steps, us: per(e.ms), beforeUs: per(e.before) })).sort((p, q) => q.us + q.beforeUs - p.us - p.beforeUs);
  return { streams: N, steps: o.steps, stepUs: per(ms), tokS: (N * o.steps) / (ms / 1000), betweenUs: per(between), overheadUs: per(overhead), rows,
    ...(o.experts ? { expertMBRead: o.experts.stats().bytesRead / 1e6 } : {}) };
}

export function formatProfile(p: Profile): string {
  const pct = (us: number) => `${((100 * us) / p.stepUs).toFixed(1).padStart(5)}%`;
  const lines = [`${p.streams} stream(s): ${p.stepUs.toFixed(0)} us per step, ${p.tokS.toFixed(1)} tok/s (${p.steps} steps)`,
    `${"us/step".padStart(9)} ${"share".padStart(6)} ${"calls".padStart(6)} ${"us/call".padStart(8)} ${"TS before".padStart(10)}  kind`];
  const big = (r: ProfileRow) => r.us + r.beforeUs >= 0.005 * p.stepUs;
  for (const r of p.rows) if (big(r)) lines.push(`${r.us.toFixed(1).padStart(9)} ${pct(r.us)} ${r.calls.toFixed(1).padStart(6)} ${(r.us / r.calls).toFixed(1).padStart(8)} ${r.beforeUs.toFixed(1).padStart(10)}  ${r.kind}`);
  const small = p.rows.filter((r) => !big(r)), sum = (f: (r: ProfileRow) => number) => small.reduce((a, r) => a + f(r), 0);
  if (small.length) lines.push(`${sum((r) => r.us).toFixed(1).padStart(9)} ${pct(sum((r) => r.us))} ${sum((r) => r.calls).toFixed(1).padStart(6)} ${"".padStart(8)} ${sum((r) => r.beforeUs).toFixed(1).padStart(10)}  ${small.length} other kinds (< 0.5% each)`);
  lines.push(`${p.betweenUs.toFixed(1).padStart(9)} ${pct(p.betweenUs)} ${"".padStart(6)} ${"".padStart(8)} ${"".padStart(10)}  between libhb calls (TypeScript; the column "TS before" splits it by the call that follows)`);
  lines.push(`${p.overheadUs.toFixed(1).padStart(9)} ${pct(p.overheadUs)}${"".padStart(28)}  the profiler's own bookkeeping`);
  if (p.expertMBRead !== undefined) lines.push(`expert weights read from disk meanwhile: ${p.expertMBRead.toFixed(1)} MB`);
  return lines.join("\n");
}

export const command: Command = {
  summary: "where a decode step's time goes, per kind of libhb call",
  help,
  run(argv) {
    const s = { type: "string" } as const;
    const r = parseCli(argv, { model: s, streams: s, steps: s, warmup: s, exact: { type: "boolean" }, json: { type: "boolean" }, ...expertFlags }, help);
    if (!r) return (console.log(help), 0);
    const v = r.values;
    const streams = (v.streams ?? "1,8").split(",").map((x) => intOption(x.trim(), "streams", help));
    if (streams.some((n) => n < 1 || n > 256)) throw new UsageError("--streams: counts in [1, 256]", help);
    const steps = v.steps === undefined ? 128 : intOption(v.steps, "steps", help), warmup = v.warmup === undefined ? 64 : intOption(v.warmup, "warmup", help);
    if (steps < 1) throw new UsageError("--steps must be ≥ 1", help);
    const m = loadModel(v.model ?? benchModelDir());
    const experts = attachExperts(m, { ...expertOptions(v, help), ctx: 16 + Math.max(...streams) + warmup + steps + 64, rows: 16,
      sessions: Math.max(...streams) });
    try {
      const res = streams.map((n) => profileDecode(m, { streams: n, steps, warmup, exact: !!v.exact, experts }));
      console.log(v.json ? JSON.stringify(res) : res.map(formatProfile).join("\n\n"));
    } finally { experts.close(); }
    return 0;
  },
};
