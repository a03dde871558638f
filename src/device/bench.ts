// Device-chain benchmark: prefill and greedy-decode tok/s of one model on the Vulkan chain and on the CPU in the
// same run (same prompt, same mode), whether the greedy tokens agree, the bytes crossing host <-> device per decoded
// token, the share of decode time in each frame and the dense-weight HBM roofline (what each figure counts: on
// benchDevice). `benchDevice(modelDir, opts)` is the API (wired into `hummingbird bench --device vulkan|webgpu` by
// the CLI); `bun bench.ts --model DIR` runs it as a script. On lavapipe the figures only show it works. Stateless.
import { benchPrompt } from "../model/bench-model.ts";
import { parseArgs } from "node:util";
import { loadModel, type Model } from "../engine/model.ts";
import { argmax, Session } from "../engine/session.ts";
import type { ForwardOpts } from "../engine/forward.ts";
import { type ChainOpts, type ChainStats, DeviceChain } from "./chain.ts";

export interface DeviceBenchOpts {
  promptTokens?: number; // prefill length (default 128)
  gen?: number;          // decoded tokens per run (default 32)
  reps?: number;         // timed runs after one warm-up, best kept (default 2)
  exact?: boolean;       // f32 activations on the CPU side too (default false: fast mode)
  chain?: ChainOpts;     // device, layers, KV budget...
  hbmBytesPerSec?: number; // roofline bandwidth (default 4.8e12)
  cpu?: boolean;         // also time the CPU (default true)
}

export interface Shares { a1: number; host: number; a2: number; split: number; record: number; other: number }
export interface Rates { prefill_tok_s: number; decode_tok_s: number; tokens: number[] }
export interface DeviceBenchResult {
  model: string; device: string; layers: number; mode: "exact" | "fast"; prompt_tokens: number; gen: number;
  device_prefill_tok_s: number; device_decode_tok_s: number; cpu_prefill_tok_s: number | null; cpu_decode_tok_s: number | null;
  tokens_match: boolean | null;
  bytes_up_per_token: number; bytes_down_per_token: number; kv_upload_bytes_per_token: number;
  decode_shares: Shares;   // fractions of the decode wall time
  device_weight_bytes: number; kv_mirror_bytes: number; hbm_gb_s: number; hbm_roofline: number;
  kv_split: { blk: number; slots: number; window: number } | null; split_frames: number; split_cpu_keys: number;
  fallbacks: number;
}


const snap = (s: ChainStats) => ({ ...s, perLayer: [] as ChainStats["perLayer"] });

/** One generation on a fresh Session: timed prefill, `gen` timed greedy steps; the decode's stats delta. */
function once(m: Model, prompt: number[], gen: number, opts: ForwardOpts, chain: DeviceChain | null) {
  const s = new Session(m, opts), tokens: number[] = [];
  const t0 = performance.now();
  let tok = argmax(s.feed(prompt));
  const t1 = performance.now(), before = chain ? snap(chain.stats) : null;
  for (let i = 0; i < gen; i++) { tokens.push(tok); tok = argmax(s.feed([tok])); }
  const t2 = performance.now();
  const after = chain ? snap(chain.stats) : null;
  return { prefill: prompt.length / ((t1 - t0) / 1000), decode: gen > 0 ? gen / ((t2 - t1) / 1000) : 0, ms: t2 - t1, tokens, before, after };
}

function best(m: Model, prompt: number[], o: Required<Pick<DeviceBenchOpts, "gen" | "reps">>, fo: ForwardOpts, chain: DeviceChain | null) {
  once(m, prompt, o.gen, fo, chain); // warm-up: pipelines, caches, page faults
  let r = once(m, prompt, o.gen, fo, chain), pre = r.prefill;
  for (let i = 1; i < Math.max(1, o.reps); i++) {
    const x = once(m, prompt, o.gen, fo, chain);
    pre = Math.max(pre, x.prefill);
    if (x.decode > r.decode) r = x;
  }
  return { ...r, prefill: pre };
}

/** Benchmark the device chain (and the CPU) on the model in `modelDir` (or an already loaded Model).
 *  Bytes crossing per decoded token: activations up/down + KV rows uploaded to the mirrors. Shares of decode time,
 *  from the chain's stats: A1 = blocked on the device's dense frame, host step = routed experts, A2 = blocked on the
 *  shared-expert frame after the host step, KV split = the CPU's partial attention, recording, the rest. Roofline:
 *  device weight bytes × decode tok/s ÷ HBM bandwidth (default 4.8 TB/s, an H200; routed experts stay on the CPU and
 *  are not in that figure). */
export function benchDevice(modelDir: string | Model, opts: DeviceBenchOpts = {}): DeviceBenchResult {
  const m = typeof modelDir === "string" ? loadModel(modelDir) : modelDir;
  const o = { promptTokens: opts.promptTokens ?? 128, gen: opts.gen ?? 32, reps: opts.reps ?? 2 };
  if (!(o.promptTokens >= 1 && o.gen >= 1)) throw new RangeError("benchDevice: promptTokens and gen must be ≥ 1");
  const exact = opts.exact ?? false, hbm = opts.hbmBytesPerSec ?? 4.8e12;
  const prompt = benchPrompt(m.cfg.vocab_size, o.promptTokens);
  const chain = DeviceChain.open(m, opts.chain ?? {});
  try {
    const dev = best(m, prompt, o, { exact, executor: chain }, chain);
    const cpu = opts.cpu === false ? null : best(m, prompt, o, { exact }, null);
    const a = dev.after!, b = dev.before!, d = (k: keyof ChainStats) => (a[k] as number) - (b[k] as number);
    const ms = Math.max(dev.ms, 1e-9), sh = { a1: d("waitMs"), host: d("hostMs"), a2: d("a2Ms"), split: d("splitMs"), record: d("recordMs") };
    const other = Math.max(0, ms - sh.a1 - sh.host - sh.a2 - sh.split - sh.record);
    const frac = (x: number) => x / ms;
    return {
      model: m.dir, device: chain.device, layers: chain.n, mode: exact ? "exact" : "fast", prompt_tokens: o.promptTokens, gen: o.gen,
      device_prefill_tok_s: dev.prefill, device_decode_tok_s: dev.decode,
      cpu_prefill_tok_s: cpu?.prefill ?? null, cpu_decode_tok_s: cpu?.decode ?? null,
      tokens_match: cpu ? cpu.tokens.every((t, i) => t === dev.tokens[i]) : null,
      bytes_up_per_token: d("bytesUp") / o.gen, bytes_down_per_token: d("bytesDown") / o.gen, kv_upload_bytes_per_token: d("mirrorBytes") / o.gen,
      decode_shares: { a1: frac(sh.a1), host: frac(sh.host), a2: frac(sh.a2), split: frac(sh.split), record: frac(sh.record), other: frac(other) },
      device_weight_bytes: chain.weightBytes, kv_mirror_bytes: chain.mirrorBytes, hbm_gb_s: hbm / 1e9,
      hbm_roofline: (chain.weightBytes * dev.decode) / hbm,
      kv_split: chain.split, split_frames: d("splitLayers"), split_cpu_keys: d("splitKeys"), fallbacks: a.fallbacks,
    };
  } finally {
    chain.close();
  }
}

export function formatDeviceBench(r: DeviceBenchResult): string {
  const kb = (x: number) => (x / 1024).toFixed(1), pc = (x: number) => `${(100 * x).toFixed(1)}%`, f = (x: number | null) => (x === null ? "-" : x.toFixed(1));
  const s = r.decode_shares, mb = r.device_weight_bytes / 1e6;
  return [
    `model ${r.model}: ${r.layers} layers on ${r.device}, ${r.mode} mode, prompt ${r.prompt_tokens}, gen ${r.gen}`,
    `prefill  device ${f(r.device_prefill_tok_s)} tok/s   cpu ${f(r.cpu_prefill_tok_s)} tok/s`,
    `decode   device ${f(r.device_decode_tok_s)} tok/s   cpu ${f(r.cpu_decode_tok_s)} tok/s   greedy tokens ${r.tokens_match === null ? "(no cpu run)" : r.tokens_match ? "match" : "DIFFER"}` +
      (r.tokens_match === false && r.mode === "fast" ? " (fast mode: the CPU's dense matmuls use int8 activations, the device f32; use --exact to compare)" : ""),
    `crossing ${kb(r.bytes_up_per_token)} KiB up, ${kb(r.bytes_down_per_token)} KiB down, ${kb(r.kv_upload_bytes_per_token)} KiB KV uploads per decoded token`,
    `decode   A1 wait ${pc(s.a1)}, host step ${pc(s.host)}, A2 wait ${pc(s.a2)}, KV split ${pc(s.split)}, recording ${pc(s.record)}, other ${pc(s.other)}`,
    `weights  ${mb.toFixed(1)} MB dense on the device, KV mirrors ${(r.kv_mirror_bytes / 1e6).toFixed(1)} MB` +
      (r.kv_split ? ` (split: ${r.kv_split.slots}×${r.kv_split.blk} rows/layer, ${r.split_frames} split frames, ${r.split_cpu_keys} CPU keys)` : ""),
    `roofline ${pc(r.hbm_roofline)} of ${r.hbm_gb_s.toFixed(0)} GB/s (${mb.toFixed(1)} MB × ${f(r.device_decode_tok_s)} tok/s; routed experts run on the CPU)`,
    ...(r.fallbacks ? [`WARNING: ${r.fallbacks} forward(s) fell back to the CPU (device lost)`] : []),
  ].join("\n");
}

const HELP = `usage: bun src/device/bench.ts --model DIR [--prompt-tokens 128] [--gen 32] [--reps 2] [--exact] [--layers N]
       [--device NAME|INDEX] [--kv-budget ROWS] [--hbm-gbs 4800] [--no-cpu] [--json]`;

if (import.meta.main) {
  try {
    const { values: v } = parseArgs({ args: process.argv.slice(2), strict: true, options: {
      model: { type: "string" }, "prompt-tokens": { type: "string" }, gen: { type: "string" }, reps: { type: "string" },
      exact: { type: "boolean" }, layers: { type: "string" }, device: { type: "string" }, "kv-budget": { type: "string" },
      "hbm-gbs": { type: "string" }, "no-cpu": { type: "boolean" }, json: { type: "boolean" }, help: { type: "boolean", short: "h" },
    } });
    if (v.help) { console.log(HELP); process.exit(0); }
    if (!v.model) throw new Error(`--model is required\n${HELP}`);
    const num = (x: string | undefined, name: string) => {
      if (x === undefined) return undefined;
      const n = Number(x);
      if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a non-negative number, got ${JSON.stringify(x)}`);
      return n;
    };
    const r = benchDevice(v.model, {
      promptTokens: num(v["prompt-tokens"], "prompt-tokens"), gen: num(v.gen, "gen"), reps: num(v.reps, "reps"), exact: !!v.exact,
      cpu: !v["no-cpu"], hbmBytesPerSec: v["hbm-gbs"] === undefined ? undefined : num(v["hbm-gbs"], "hbm-gbs")! * 1e9,
      chain: { layers: num(v.layers, "layers"), device: v.device, kvBudgetRows: num(v["kv-budget"], "kv-budget") },
    });
    console.log(v.json ? JSON.stringify(r) : formatDeviceBench(r));
  } catch (e) {
    console.error(e instanceof Error ? e.message : String(e));
    process.exit(1);
  }
}
