// `hummingbird bench --per-layer`: per decoder layer, where a decode step (at several contexts) and a prefill go:
// attention (norm, MLA + indexer projections, core), the indexer's scores + select (its hb symbols wrapped), the dense
// FFN or shared expert (timed alone on the same input) and the routed experts (MoE call less shared, router included),
// timed through forward's onPart hook. Contexts are reached by repeating a short prompt's KV rows (MLA cache and
// indexer keys): real sizes, synthetic contents. State: the wrapped indexer symbols, only during an instrumented step.
import { hb } from "../native/hb.ts";
import { forward, type PartHook } from "../engine/forward.ts";
import { mlp } from "../engine/moe.ts";
import { Session } from "../engine/session.ts";
import { RunState } from "../engine/state.ts";
import type { Model } from "../engine/model.ts"; import type { KVCache } from "../engine/kv.ts";
import type { ExpertStore } from "../engine/experts/index.ts";
import { benchPrompt } from "../model/bench-model.ts";

/** microseconds per step of one layer's parts (ffnUs: the dense MLP or the shared expert; routedUs: MoE layers) */
export interface LayerCost { layer: number; kind: "dense" | "moe"; attnUs: number; indexerUs: number; ffnUs: number; routedUs: number }
/** one measured run: a decode step at `ctx` cached tokens (or a prefill of `ctx` tokens); stepUs: plain forward
 *  (uninstrumented); restUs: the instrumented step's time outside the layers' parts (embed, head, norms, adds) */
export interface LayerRun { mode: "decode" | "prefill"; ctx: number; steps: number; stepUs: number; restUs: number; layers: LayerCost[];
  /** expert MB read over the 2 × steps measured forwards (each step plain, then timed) */
  expertMBRead?: number; readGBs?: number }

const IX = ["hb_index_scores", "hb_index_scores_q8", "hb_ik_quant", "hb_dsa_select"];

/** Repeat rows [0, n) of every layer's MLA cache and indexer keys up to `ctx` rows. */
export function extendKv(kv: KVCache, ctx: number): void {
  const n = kv.len;
  if (n < 1 || ctx <= n) return;
  kv.reserve(ctx);
  for (let i = 0; i < kv.nLayers; i++)
    for (let t = n; t < ctx; t += n) {
      const m = Math.min(n, ctx - t);
      kv.kv[i].copyWithin(t * kv.rowElems, 0, m * kv.rowElems);
      kv.ik[i]?.copyWithin(t * kv.ikWidth, 0, m * kv.ikWidth);
    }
  kv.len = ctx;
  kv.wrote(n);
}

/** One forward of `ids` on kv with each layer's parts added into acc (µs; forward's onPart hook); returns the
 *  instrumented wall µs (wall) and that less the time spent timing the shared experts on their own (us). */
function instrumented(m: Model, st: RunState, kv: KVCache, ids: number[], acc: LayerCost[], scratch: Float32Array[]): Timed {
  const L = hb() as unknown as Record<string, (...a: unknown[]) => unknown>, saved = IX.map((k) => L[k]), ix = { us: 0 };
  IX.forEach((k, j) => { const f = saved[j]; if (f) L[k] = (...a: unknown[]) => { const t = performance.now(), r = f(...a); ix.us += 1000 * (performance.now() - t); return r; }; });
  const now = () => 1000 * performance.now(), D = m.cfg.hidden_size, [xs, ys] = scratch;
  let aside = 0, t = 0, ix0 = 0;
  const onPart: PartHook = (layer, part, rows) => {
    const w = m.w.layers[layer], c = acc[layer], sh = w?.moe?.shared ?? null;
    if (!c) return; // (the MTP layer: not timed)
    if (part === "attn" || part === "ffn") {
      if (part === "ffn" && sh) xs.set(st.xb.subarray(0, rows * D));
      ix0 = ix.us; t = now(); return;
    }
    const us = now() - t;
    if (part === "attn-end") { c.attnUs += us - (ix.us - ix0); c.indexerUs += ix.us - ix0; return; }
    if (!w.moe) { c.ffnUs += us; return; }
    let shUs = 0;
    if (sh) { // the shared expert alone, best of two (a preemption in one run must not be taken from the routed part)
      shUs = Infinity;
      for (let k = 0; k < 2; k++) { const t1 = now(); mlp(st, sh, xs, rows, ys); const d = now() - t1; shUs = Math.min(shUs, d); aside += d; }
    }
    c.ffnUs += shUs;
    c.routedUs += us - shUs; // the MoE call less the shared expert's own time: router + routed experts
  };
  const t0 = now();
  try {
    forward(m, st, [{ kv, r0: 0, n: ids.length, pos0: kv.len }], ids, { logits: "last", onPart });
  } finally { IX.forEach((k, j) => { if (saved[j]) L[k] = saved[j]; }); }
  const wall = now() - t0;
  return { wall, us: wall - aside };
}
interface Timed { wall: number; us: number }

const blank = (m: Model): LayerCost[] => m.w.layers.map((w, layer) => ({ layer, kind: w.moe ? "moe" : "dense", attnUs: 0, indexerUs: 0, ffnUs: 0, routedUs: 0 }));
const parts = (x: LayerCost) => x.attnUs + x.indexerUs + x.ffnUs + x.routedUs;
const K = ["attnUs", "indexerUs", "ffnUs", "routedUs"] as const;

/**
 * `n` rounds of a plain step then its instrumented replay (`reset` before each: the same positions); the faster half
 * of each kind of step is kept (preemptions on a shared machine land in the slower half): the plain mean, and the
 * instrumented parts' means with the rest of the instrumented time.
 */
function measure(m: Model, n: number, reset: () => void, plain: () => void, inst: (acc: LayerCost[]) => Timed) {
  const P: number[] = [], I: (Timed & { acc: LayerCost[] })[] = [];
  for (let i = 0; i < n; i++) {
    reset();
    const t = performance.now();
    plain();
    P.push(1000 * (performance.now() - t));
    reset();
    const acc = blank(m);
    I.push({ ...inst(acc), acc });
  }
  // instrumented steps ranked by their whole wall time: ranked by `us`, a step whose shared-expert timing was preempted
  // (a large `aside`) would look fast and be kept
  const h = Math.max(1, n >> 1), fast = P.sort((a, b) => a - b).slice(0, h), kept = I.sort((a, b) => a.wall - b.wall).slice(0, h);
  const layers = blank(m);
  for (const { acc } of kept) acc.forEach((x, i) => K.forEach((k) => { layers[i][k] += x[k] / h; }));
  const instUs = kept.reduce((a, x) => a + x.us, 0) / h;
  return { stepUs: fast.reduce((a, x) => a + x, 0) / h, restUs: instUs - layers.reduce((a, x) => a + parts(x), 0), layers };
}

export interface LayerOpts { contexts: number[]; steps: number; warmup: number; prefill: number; fill?: number; experts?: ExpertStore }

/** A prefill of o.prefill tokens, then per context: decode steps at that many cached tokens (KV extended from a
 *  `fill`-token prompt, default min(128, ctx)), each measured plain (stepUs) and instrumented (the parts). */
export function perLayer(m: Model, o: LayerOpts): LayerRun[] {
  const V = m.cfg.vocab_size, D = m.cfg.hidden_size, out: LayerRun[] = [];
  const rows = Math.max(o.prefill, 1), st = new RunState(m.cfg), scratch = [new Float32Array(rows * D), new Float32Array(rows * D)];
  const stats = (r: LayerRun, x = o.experts?.stats()) => (x ? { ...r, expertMBRead: x.bytesRead / 1e6, readGBs: x.readGBs } : r);
  if (o.prefill > 0) {
    const s = new Session(m, { hidden: false }, { st }), p = benchPrompt(V, o.prefill), reps = Math.max(2, o.steps >> 2);
    const args = [() => s.kv.truncate(0), () => { forward(m, st, [{ kv: s.kv, r0: 0, n: p.length, pos0: 0 }], p, { logits: "last" }); },
      (acc: LayerCost[]) => instrumented(m, st, s.kv, p, acc, scratch)] as const;
    measure(m, Math.max(1, o.warmup >> 2), ...args);
    o.experts?.resetStats();
    out.push(stats({ mode: "prefill", ctx: o.prefill, steps: reps, ...measure(m, reps, ...args) }));
  }
  for (const ctx of o.contexts) {
    // a state of one row sized once for the run (RunState keeps naive-form scratch of T × H × (2·dn + dr + dv) floats)
    const s = new Session(m, { hidden: false }), tok = [1], st = new RunState(m.cfg, 1, ctx + o.warmup + o.steps + 8);
    s.feed(benchPrompt(V, Math.min(o.fill ?? 128, ctx)));
    extendKv(s.kv, ctx);
    let i = 0;
    // each position twice (plain, instrumented), a different token each time: both steps route afresh (an expert
    // cache would otherwise serve the replay the experts the plain step has just read)
    const args = [() => { s.kv.truncate(ctx + (i >> 1)); tok[0] = (7 + 31 * i++) % V; },
      () => { forward(m, st, [{ kv: s.kv, r0: 0, n: 1, pos0: s.kv.len }], tok, { logits: "last" }); },
      (acc: LayerCost[]) => instrumented(m, st, s.kv, tok, acc, scratch)] as const;
    measure(m, o.warmup, ...args);
    i = 0; o.experts?.resetStats();
    out.push(stats({ mode: "decode", ctx, steps: o.steps, ...measure(m, o.steps, ...args) }));
    Bun.gc(true);
  }
  return out;
}

export function formatLayers(runs: LayerRun[], kvBytesPerToken: number): string {
  const f = (us: number) => (us / 1000).toFixed(2).padStart(9);
  const lines = [`${"run".padEnd(16)} ${"layer".padEnd(9)} ${"attn ms".padStart(9)} ${"indexer".padStart(9)} ${"ffn/shd".padStart(9)} ${"routed".padStart(9)} ${"sum".padStart(9)}`];
  for (const r of runs) {
    const name = `${r.mode} ${r.ctx}`;
    for (const x of r.layers) lines.push(`${name.padEnd(16)} ${`${x.layer} ${x.kind}`.padEnd(9)} ${f(x.attnUs)} ${f(x.indexerUs)} ${f(x.ffnUs)} ${f(x.routedUs)} ${f(parts(x))}`);
    lines.push(`${name.padEnd(16)} step ${f(r.stepUs)} ms plain, rest (embed, head, norms) ${(r.restUs / 1000).toFixed(2)} ms` +
      (r.mode === "decode" ? `, KV ${(r.ctx * kvBytesPerToken / 2 ** 20).toFixed(1)} MiB` : "") +
      (r.expertMBRead !== undefined ? `, experts read ${(r.expertMBRead / (2 * r.steps)).toFixed(1)} MB a step (${r.readGBs!.toFixed(2)} GB/s; ` +
        `${(r.expertMBRead / 1000).toFixed(1)} GB over the ${2 * r.steps} measured, plain and timed)` : ""));
  }
  return lines.join("\n");
}
