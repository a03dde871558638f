// Cold-cache expert streaming bench (to be wired as `hummingbird bench --model DIR --expert-cache N
// --cold`): measures the disk's own sequential read rate of the model files (single stream, 16 MiB
// preads, page cache dropped first), then for each cache size drops the model files' page cache
// (posix_fadvise DONTNEED), prefills, and decodes greedily, reporting the experts' read GB/s (bytes
// over the I/O pool's busy time, and over the forward's wait time), hit rate and wait per token.
// Stateless; `bun src/engine/experts/bench-cold.ts --model DIR [...]` prints the report as JSON.
import { statSync } from "node:fs";
import { parseArgs } from "node:util";
import { loadModel, type Model } from "../model.ts";
import { pread } from "../../native/hb.ts";
import { weightBytes } from "../../native/mem.ts";
import { Session, argmax } from "../session.ts";
import { attachExperts, type ExpertOptions } from "./attach.ts";
import * as io from "./io.ts";
import type { ExpertStats } from "./stats.ts";

export interface ColdBenchOpts {
  dir: string;
  /** cache slots per layer to run (default E/8, E/4, E/2) */
  slots?: number[];
  /** decode steps per run (default 32) and prompt length (default 16) */
  tokens?: number;
  promptLen?: number;
  direct?: boolean;
  mmap?: boolean;
  prefetch?: ExpertOptions["prefetch"];
  policy?: ExpertOptions["policy"];
  /** decode inputs: the greedy token (default) or teacher-forced pseudo-random ids (a random model's greedy
   *  continuation repeats itself, and so do its experts) */
  inputs?: "greedy" | "random";
  /** skip the sequential-read measurement */
  noSeq?: boolean;
  log?: (line: string) => void;
}

export interface ColdRun {
  slots: number;
  fraction: number;
  prefill: ExpertStats;
  decode: ExpertStats;
  decodeTokS: number;
  /** decode: bytes read / forward wait time (what the compute side sees) */
  decodeWaitGBs: number;
}

export interface ColdReport {
  model: string;
  mode: "buffered" | "direct" | "mmap";
  files: number;
  fileBytes: number;
  /** the disk's sequential rate of the same files: one stream of 16 MiB preads after a drop */
  diskSeqGBs: number;
  prefetch: string;
  runs: ColdRun[];
}

/** Drop the page cache of every file (clean pages only; no root needed). */
export function dropPageCache(files: string[]): void {
  for (const f of files) {
    const fd = io.openRaw(f, false);
    if (fd < 0) continue;
    io.fadvise(fd, io.Advice.dontneed);
    io.closeFd(fd);
  }
}

/** Sequential read rate of files in GB/s (16 MiB preads; O_DIRECT when asked). */
export function sequentialRate(files: string[], direct: boolean): number {
  dropPageCache(files);
  const CH = 16 << 20, buf = weightBytes(CH); // (aligned for O_DIRECT)
  let bytes = 0;
  const t0 = performance.now();
  for (const f of files) {
    let fd = io.openRaw(f, direct);
    if (fd < 0) fd = io.openRaw(f, false);
    const size = statSync(f).size;
    for (let off = 0; off < size; off += CH) {
      const n = pread(fd, buf, Math.min(CH, direct ? CH : size - off), off);
      if (n <= 0) break;
      bytes += n;
    }
    io.closeFd(fd);
  }
  const s = (performance.now() - t0) / 1000;
  dropPageCache(files);
  return bytes / s / 1e9;
}

function modelFiles(m: Model): string[] {
  return m.store.files.map((f) => f.path);
}

/** One cold run: the page cache dropped, a prefill, then `tokens` greedy decode steps on a fresh store. */
export function oneRun(m: Model, slots: number, o: ColdBenchOpts): ColdRun {
  const E = m.cfg.n_routed_experts, V = m.cfg.vocab_size;
  const n = o.promptLen ?? 16, steps = o.tokens ?? 32;
  const prompt = Array.from({ length: n }, (_, i) => (i * 7919 + 13) % V);
  const store = attachExperts(m, { slots, direct: o.direct, mmap: o.mmap, prefetch: o.prefetch, policy: o.policy, learn: false, quiet: true, log: o.log, ctx: n + steps + 1, rows: n });
  try {
    dropPageCache(modelFiles(m));
    const s = new Session(m);
    let logits = s.feed(prompt);
    const prefill = store.stats();
    store.resetStats();
    const t0 = performance.now();
    for (let k = 0; k < steps; k++) logits = s.feed([o.inputs === "random" ? (k * 40503 + 12345) % V : argmax(logits, V)]);
    const dt = (performance.now() - t0) / 1000;
    const decode = store.stats();
    return { slots, fraction: slots / E, prefill, decode, decodeTokS: steps / dt, decodeWaitGBs: decode.waitMs > 0 ? decode.bytesRead / (decode.waitMs / 1000) / 1e9 : 0 };
  } finally {
    store.close();
  }
}

export function benchCold(o: ColdBenchOpts): ColdReport {
  const m = loadModel(o.dir);
  try {
    const E = m.cfg.n_routed_experts;
    const files = modelFiles(m);
    const slots = o.slots ?? [Math.max(1, E / 8), Math.max(1, E / 4), Math.max(1, E / 2)].map(Math.round);
    io.startPool();
    const diskSeqGBs = o.noSeq ? 0 : sequentialRate(files, !!o.direct);
    const runs = slots.map((k) => oneRun(m, k, o));
    return {
      model: o.dir, mode: o.mmap ? "mmap" : o.direct ? "direct" : "buffered", files: files.length,
      fileBytes: files.reduce((a, f) => a + statSync(f).size, 0), diskSeqGBs, prefetch: String(o.prefetch ?? "auto"), runs,
    };
  } finally {
    m.store.close();
  }
}

if (import.meta.main) {
  const { values: v } = parseArgs({ options: {
    model: { type: "string" }, "expert-cache": { type: "string", multiple: true }, tokens: { type: "string" }, prompt: { type: "string" },
    direct: { type: "boolean" }, mmap: { type: "boolean" }, prefetch: { type: "string" }, policy: { type: "string" }, "no-seq": { type: "boolean" },
  } });
  if (!v.model) { console.error("usage: bun src/engine/experts/bench-cold.ts --model DIR [--expert-cache N]... [--tokens N] [--prompt N] [--direct|--mmap] [--prefetch on|off|auto|pilot] [--policy lru|lfru] [--no-seq]"); process.exit(2); }
  const r = benchCold({
    dir: v.model, slots: v["expert-cache"]?.map(Number), tokens: v.tokens ? Number(v.tokens) : undefined,
    promptLen: v.prompt ? Number(v.prompt) : undefined, direct: v.direct, mmap: v.mmap, prefetch: v.prefetch as ExpertOptions["prefetch"],
    policy: v.policy as ExpertOptions["policy"], noSeq: v["no-seq"],
  });
  console.log(JSON.stringify(r, null, 1));
}
