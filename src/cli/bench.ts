// `hummingbird bench`: end-to-end throughput of one model in one run: prefill tok/s of a P-token prompt, greedy
// decode tok/s over G tokens, the weight bytes read per decoded token (counted by the matmul kernels, not derived
// from shapes), the machine's memory read bandwidth (libhb's probe: a 1 GiB buffer read by every pool thread) and the
// roofline fraction bytes/token × tok/s ÷ bandwidth. Both vary on a shared machine: each timed run is preceded by its
// own probe and the report takes the best of each. `benchModel` is also used by bench/run.ts. Stateless.
import { cpus } from "node:os";
import { type Command, parseCli, intOption, QUALITY_HELP, qualityFlags, qualityOptions, UsageError } from "./common.ts";
import { policyReport, type QualityPolicy } from "../engine/quality.ts";
import { loadModel, type Model } from "../engine/model.ts";
import { argmax, Session } from "../engine/session.ts";
import { hb, poolNote, poolSince, poolWidth, weightBytes } from "../native/hb.ts";
import { probeBandwidth } from "../engine/rates.ts";
import { attachExperts, EXPERT_HELP, expertFlags, expertOptions, warmExperts } from "../engine/experts/index.ts";
import { benchCold } from "../engine/experts/bench-cold.ts";
import { benchModelDir, benchPrompt } from "../model/bench-model.ts";
import { benchDevice, formatDeviceBench } from "../device/bench.ts";
import { command as serveBench } from "./bench-serve.ts";
import { command as profileBench } from "./bench-profile.ts";
import { formatLayers, perLayer } from "./bench-layers.ts";
import { gib, kvBytesPerToken, runStateBytes } from "../engine/experts/budget.ts";
import { detectRam } from "../engine/experts/memory.ts";
import { residentBytes } from "../engine/experts/attach.ts";
import { totalmem } from "node:os";

const help = `usage: hummingbird bench [--model DIR] [--prompt-tokens 128] [--gen 64] [--reps 2] [--warmup 8] [--threads N]
       [--exact] [--json] [--experts-per-token K] [--router-top-p P] [--cold [--expert-cache N]] [--device vulkan|webgpu [--kv-budget ROWS]]
       hummingbird bench serve [--model DIR] [--tokens N] [--streams 1,4,8]
       hummingbird bench profile [--model DIR] [--streams 1,8] [--steps 128]   (time per kind of libhb call)
       hummingbird bench --per-layer [--model DIR] [--contexts 1024,8192,32768] [--prompt-tokens 128] [--gen 8] [--warmup 4]
                         [--expert-cache N [--direct]]   (per layer: attention, indexer, dense FFN / shared expert, routed experts)

Without --model: the bench preset (seed 1; int4g64 experts, int8 dense), made once into a cache folder.
--cold: expert streaming from a dropped page cache: the experts' read GB/s against the disk's own
  sequential rate of the same files (measured in the same run), hit rates at 1/8, 1/4, 1/2 of the
  experts (or --expert-cache N). --device vulkan|webgpu: the device chain (Vulkan, or WebGPU on Dawn) against the CPU in the same run
  (tok/s, bytes crossing per token, share of time per frame).
--per-layer: per decoder layer, ms of attention (norm, MLA + indexer projections, core), the DSA indexer's scores +
  selection, the dense FFN or shared expert, the routed experts (router included), for a --prompt-tokens prefill
  and --gen decode steps at each of --contexts cached tokens (the KV of a 128-token prompt repeated up to the
  context: synthetic rows, real sizes). Every expert cached in RAM (read before the runs); with
  --expert-cache N a second pass streams them through N slots per layer (--direct: O_DIRECT), with bytes read.
  Prints the KV bytes per token and how many tokens fit in RAM beside the weights.

Loads the model, runs --warmup untimed generations (the experts read, buffers grown and the JIT's optimizing
tiers reached: a server's steady state), then --reps timed ones (the same conversation emptied
each time: prefill of --prompt-tokens pseudo-random ids, then --gen greedy single-token decode steps),
each preceded by a memory read-bandwidth probe (1 GiB read by every pool thread). Reports the best
prefill and decode rates, the weight bytes the matmul kernels read per decoded token (counted), the best
bandwidth, and the roofline fraction (bytes/token × decode tok/s ÷ bandwidth). --exact: f32 activations (default: fast mode). --threads: pool size (default: HB_THREADS
or the physical cores). The machine may be shared: compare runs made in the same invocation.
--experts-per-token / --router-top-p: time the model under a quality policy (as serve's; reported in the result).
${QUALITY_HELP}
${EXPERT_HELP}`;

/** warmup: untimed generations before the timed ones (JSC compiles the per-step TypeScript to its optimizing
 *  tiers over the first few hundred steps; a server runs in that steady state) */
export interface BenchOpts { promptTokens: number; gen: number; reps: number; exact: boolean; warmup: number; quality?: QualityPolicy }
export interface Timing { prefill_tok_s: number; decode_tok_s: number; bytes_per_token: number }
export interface BenchResult extends Timing {
  model: string; cpu: string; threads: number; simd: string; mode: "exact" | "fast"; prompt_tokens: number; gen: number;
  decode_ms_per_token: number; membw_gb_s: number; roofline: number;
  /** jobs the pool ran with fewer threads than it has, and its drops (ffi/pool_width.h: the cores were contended) */
  pool_narrowed: number; pool_drops: number;
  quality_policies: ReturnType<typeof policyReport>;
}


/** One generation on `s` (emptied first): timed prefill of the prompt, then `gen` timed greedy decode steps. */
function once(s: Session, prompt: number[], gen: number): Timing {
  s.truncate(0);
  const t0 = performance.now();
  let tok = argmax(s.feed(prompt));
  const t1 = performance.now();
  weightBytes(true);
  for (let i = 0; i < gen; i++) tok = argmax(s.feed([tok]));
  const t2 = performance.now();
  const bytes = weightBytes();
  return {
    prefill_tok_s: prompt.length / ((t1 - t0) / 1000),
    decode_tok_s: gen > 0 ? gen / ((t2 - t1) / 1000) : 0,
    bytes_per_token: gen > 0 ? bytes / gen : 0,
  };
}

/**
 * Best-of-reps timings after o.warmup untimed runs (at least one), each rep preceded by a bandwidth probe (best
 * kept too). One Session serves every run (emptied in between), as a server's would: buffers are allocated,
 * experts read and the JIT warm during the warm-up, not in the timed runs.
 */
export function timeModel(m: Model, o: BenchOpts, probe: () => number = () => 0): Timing & { bw: number } {
  const prompt = benchPrompt(m.cfg.vocab_size, o.promptTokens), s = new Session(m, { exact: o.exact, hidden: false, ...(o.quality ? { quality: o.quality } : {}) });
  for (let i = 0; i < Math.max(1, o.warmup); i++) once(s, prompt, o.gen);
  const best = { prefill_tok_s: 0, decode_tok_s: 0, bytes_per_token: 0, bw: 0 };
  for (let r = 0; r < Math.max(1, o.reps); r++) {
    best.bw = Math.max(best.bw, probe());
    const t = once(s, prompt, o.gen);
    best.prefill_tok_s = Math.max(best.prefill_tok_s, t.prefill_tok_s);
    best.decode_tok_s = Math.max(best.decode_tok_s, t.decode_tok_s);
    best.bytes_per_token = t.bytes_per_token;
  }
  return best;
}

export function benchModel(m: Model, o: BenchOpts): BenchResult {
  const p0 = poolWidth(), { bw, ...t } = timeModel(m, o, () => probeBandwidth(2)), pool = poolSince(p0);
  return {
    model: m.dir, cpu: cpus()[0]?.model.trim() || "unknown CPU", threads: hb().hb_nthreads(), simd: String(hb().hb_simd_name()),
    mode: o.exact ? "exact" : "fast",
    prompt_tokens: o.promptTokens, gen: o.gen, ...t,
    decode_ms_per_token: t.decode_tok_s > 0 ? 1000 / t.decode_tok_s : 0,
    membw_gb_s: bw / 1e9, roofline: bw > 0 ? (t.bytes_per_token * t.decode_tok_s) / bw : 0,
    ...pool,
    quality_policies: policyReport(o.quality),
  };
}

export function formatResult(r: BenchResult): string {
  const mb = (r.bytes_per_token / 1e6).toFixed(1);
  return [
    `model ${r.model}: ${r.mode} mode, ${r.threads} thread(s) of ${r.cpu}, ${r.simd}` +
      (r.quality_policies.experts_per_token !== null ? `, --experts-per-token ${r.quality_policies.experts_per_token}` : "") +
      (r.quality_policies.router_top_p !== null ? `, --router-top-p ${r.quality_policies.router_top_p}` : ""),
    `prefill  ${r.prefill_tok_s.toFixed(1)} tok/s (${r.prompt_tokens} tokens)`,
    `decode   ${r.decode_tok_s.toFixed(1)} tok/s (${r.decode_ms_per_token.toFixed(2)} ms/token, ${r.gen} tokens)`,
    `weights  ${mb} MB read per decoded token`,
    `memory   ${r.membw_gb_s.toFixed(1)} GB/s read bandwidth (probe)`,
    `roofline ${(100 * r.roofline).toFixed(1)}% (${mb} MB × ${r.decode_tok_s.toFixed(1)} tok/s ÷ ${r.membw_gb_s.toFixed(1)} GB/s)`,
    ...(poolNote(r) ? [`pool     ${poolNote(r)}`] : []),
  ].join("\n");
}

export const command: Command = {
  summary: "prefill / decode throughput, weight bytes per token and the memory roofline",
  help,
  run(argv) {
    if (argv[0] === "serve") return serveBench.run(argv.slice(1));
    if (argv[0] === "profile") return profileBench.run(argv.slice(1));
    const s = { type: "string" } as const;
    const r = parseCli(argv, { model: s, "prompt-tokens": s, gen: s, reps: s, warmup: s, threads: s, exact: { type: "boolean" },
      json: { type: "boolean" }, cold: { type: "boolean" }, device: s, "per-layer": { type: "boolean" }, contexts: s, "kv-budget": s, ...expertFlags, ...qualityFlags }, help);
    if (!r) return (console.log(help), 0);
    const v = r.values;
    const int = (k: string, d: number) => (v[k as keyof typeof v] === undefined ? d : intOption(String(v[k as keyof typeof v]), k, help));
    const o: BenchOpts = { promptTokens: int("prompt-tokens", 128), gen: int("gen", 64), reps: int("reps", 2), exact: !!v.exact,
      warmup: int("warmup", 8) };
    if (o.promptTokens < 1) throw new UsageError("--prompt-tokens must be ≥ 1", help);
    const xo = expertOptions(v, help);
    if (v.threads !== undefined) hb().hb_init(intOption(v.threads, "threads", help));
    const dir = v.model ?? benchModelDir();
    const { quality } = qualityOptions(v, dir, help, (l) => process.stderr.write(`hummingbird bench: ${l}\n`));
    if (quality) o.quality = quality;
    if (quality && (v.cold || v.device !== undefined)) throw new UsageError("--experts-per-token / --router-top-p time the CPU decode: not with --cold or --device", help);
    const out = (res: unknown, text: string) => process.stdout.write((v.json ? JSON.stringify(res) : text) + "\n");
    if (v.cold) {
      const res = benchCold({ dir, slots: xo.slots ? [xo.slots] : undefined, tokens: o.gen, direct: xo.direct, mmap: xo.mmap,
        prefetch: xo.prefetch, policy: xo.policy });
      const runs = res.runs.map((x) => `${String(x.slots).padStart(4)} slots (${(100 * x.fraction).toFixed(1)}% of the experts): hit rate ${(100 * x.decode.hitRate).toFixed(1)}%, ` +
        `read ${x.decode.readGBs.toFixed(2)} GB/s = ${(100 * x.decode.readGBs / res.diskSeqGBs).toFixed(0)}% of the disk, wait ${x.decode.waitMsPerToken.toFixed(1)} ms/token, ${x.decodeTokS.toFixed(1)} tok/s` +
        (x.decode.prefetchIssued > 0 ? `; prefetched ${x.decode.prefetchIssued}, used ${x.decode.prefetchHits}` : "") +
        (res.prefetch === "pilot" ? `, pilot predicted ${(100 * x.decode.pilotHitRate).toFixed(1)}% of the experts used` : ""));
      out(res, [`cold experts (${res.mode} reads): disk sequential ${res.diskSeqGBs.toFixed(2)} GB/s over ${(res.fileBytes / 1e9).toFixed(2)} GB`, ...runs].join("\n"));
      return 0;
    }
    if (v["per-layer"]) return layers(dir, v.contexts ?? "1024,8192,32768", o, xo, v.json ? out : null);
    if (v.device !== undefined) {
      if (v.device !== "vulkan" && v.device !== "webgpu") throw new UsageError("--device: bench compares the device chain against the CPU; give --device vulkan or webgpu", help);
      const kvBudgetRows = v["kv-budget"] === undefined ? undefined : intOption(v["kv-budget"], "kv-budget", help);
      const res = benchDevice(dir, { promptTokens: o.promptTokens, gen: o.gen, reps: o.reps, exact: o.exact, chain: { kvBudgetRows, api: v.device } });
      out(res, formatDeviceBench(res));
      return 0;
    }
    const m = loadModel(dir);
    const experts = attachExperts(m, { ...xo, ctx: o.promptTokens + o.gen + 64, rows: o.promptTokens });
    try {
      const res = benchModel(m, o);
      out(res, formatResult(res));
    } finally {
      experts.close();
    }
    return 0;
  },
};

/** bench --per-layer: the mmap'd pass, then (given --expert-cache) the streamed one; the KV budget beside the weights. */
function layers(dir: string, list: string, o: BenchOpts, xo: ReturnType<typeof expertOptions>, json: ((r: unknown, t: string) => void) | null): number {
  const contexts = list.split(",").map((x) => intOption(x.trim(), "contexts", help));
  if (contexts.some((c) => c < 1)) throw new UsageError("--contexts: positive token counts", help);
  const m = loadModel(dir), ctx = Math.max(...contexts) + o.gen + o.warmup + 64, kvb = kvBytesPerToken(m.cfg);
  const weights = residentBytes(m), all = m.store.names().filter((n) => { const x = /^model\.layers\.(\d+)\.mlp\.experts\./.exec(n); return x && +x[1] < m.cfg.num_hidden_layers; })
    .reduce((a, n) => a + m.store.get(n).nbytes, 0);
  // the RAM pass holds every expert, the KV of the longest context and the run state: skipped, saying so, where they
  // do not fit the RAM budget (--ram-gb, else MemAvailable) rather than swapping or being killed
  const ram = detectRam(xo.ramGb).bytes, need = weights + all + ctx * kvb + runStateBytes(m.cfg, Math.max(1, o.promptTokens), ctx);
  const inRam = need <= ram;
  if (!inRam && !xo.slots) throw new UsageError(`--per-layer: every expert in RAM at ${Math.max(...contexts)} tokens needs ${gib(need)}, the budget is ${gib(ram)}: give --expert-cache N for a pass from disk`, help);
  if (!inRam) process.stderr.write(`hummingbird bench: the pass with every expert in RAM is skipped: it needs ${gib(need)} at ${Math.max(...contexts)} tokens, the budget is ${gib(ram)}\n`);
  const passes = [...(inRam ? [{ name: "experts in RAM (every expert cached, warmed before)", x: { slots: m.cfg.n_routed_experts, warm: true } }] : []),
    ...(xo.slots ? [{ name: `experts streamed through ${xo.slots} slots/layer${xo.direct ? " (O_DIRECT)" : ""}`, x: { slots: xo.slots, direct: xo.direct } }] : [])];
  const head = `KV ${kvb} bytes/token (f32 MLA cache + indexer keys); RAM ${(totalmem() / 2 ** 30).toFixed(1)} GiB, resident weights ${(weights / 2 ** 30).toFixed(2)} GiB: ` +
    `KV budget ${Math.floor((totalmem() - weights) / kvb)} tokens beside them, ${Math.floor(Math.max(0, totalmem() - weights - all) / kvb)} beside them and every routed expert (${(all / 2 ** 30).toFixed(2)} GiB)`;
  const res = passes.map((p) => {
    const experts = attachExperts(m, { ...p.x, ctx, rows: o.promptTokens, quiet: true });
    if ("warm" in p.x) warmExperts(experts, { warm: true, log: (l) => process.stderr.write(l + "\n") });
    try { return { pass: p.name, runs: perLayer(m, { contexts, steps: o.gen, warmup: o.warmup, prefill: o.promptTokens, experts }) }; } finally { experts.close(); }
  });
  const text = [head, ...res.map((r) => `${r.pass}:\n${formatLayers(r.runs, kvb)}`)].join("\n");
  if (json) json({ kv_bytes_per_token: kvb, resident_bytes: weights, ram_bytes: totalmem(), passes: res }, text);
  else console.log(text);
  return 0;
}
