// End-to-end benchmark (`bun run bench`): the bench-preset model (generated with seed 1, converted to
// int4g64 experts / int8 dense / int8 MTP; both cached) measured by `hummingbird bench`'s code in one
// process, in three configurations — fast mode with every pool thread (the default), exact mode, and fast
// mode on one thread — each against bandwidth probes made with the same thread count, then the ratios
// (fast / exact, N threads / 1, prefill / decode). The machine may be shared: trust the ratios of one run
// more than absolute figures across runs. Holds no state beyond the cache directory.
// Usage: bun bench/run.ts [--cache DIR] [--prompt-tokens 128] [--gen 64] [--reps 2] [--warmup 8] [--json]
//        (cache: $HB_BENCH_CACHE or ~/.cache/hummingbird/bench; HB_THREADS caps the pool)
import { parseArgs } from "node:util";
import { benchModelDir } from "../src/model/bench-model.ts";
import { loadModel } from "../src/engine/model.ts";
import { hb } from "../src/native/hb.ts";
import { attachExperts } from "../src/engine/experts/index.ts";
import { benchModel, formatResult, type BenchResult } from "../src/cli/bench.ts";

const { values: v } = parseArgs({
  options: { cache: { type: "string" }, "prompt-tokens": { type: "string" }, gen: { type: "string" }, reps: { type: "string" },
    warmup: { type: "string" }, json: { type: "boolean" } },
});
const num = (s: string | undefined, d: number) => (s === undefined ? d : Math.max(1, Math.floor(Number(s)) || d));
const modelDir = benchModelDir(v.cache);
const lib = hb(), N = lib.hb_init(Number(process.env.HB_THREADS ?? 0) || 0);
const o = { promptTokens: num(v["prompt-tokens"], 128), gen: num(v.gen, 64), reps: num(v.reps, 2), warmup: num(v.warmup, 8) };
const m = loadModel(modelDir);
const experts = attachExperts(m, { quiet: true, ctx: o.promptTokens + o.gen + 64, rows: o.promptTokens });
const runs: { name: string; r: BenchResult }[] = [];
try {
  const configs: [string, number, boolean][] = [[`fast, ${N} threads`, N, false], [`exact, ${N} threads`, N, true]];
  if (N > 1) configs.push(["fast, 1 thread", 1, false]);
  for (const [name, threads, exact] of configs) {
    lib.hb_init(threads);
    const r = benchModel(m, { ...o, exact });
    runs.push({ name, r });
    if (!v.json) console.log(`\n== ${name}\n${formatResult(r)}`);
  }
} finally {
  experts.close();
  lib.hb_init(N);
}

const [fast, exact, one] = runs.map((x) => x.r);
const ratio = (a: number, b: number) => (b > 0 ? a / b : 0);
const ratios = {
  decode_fast_over_exact: ratio(fast.decode_tok_s, exact.decode_tok_s),
  prefill_fast_over_exact: ratio(fast.prefill_tok_s, exact.prefill_tok_s),
  ...(one ? { decode_threads_over_1: ratio(fast.decode_tok_s, one.decode_tok_s), prefill_threads_over_1: ratio(fast.prefill_tok_s, one.prefill_tok_s) } : {}),
  prefill_over_decode: ratio(fast.prefill_tok_s, fast.decode_tok_s),
};
if (v.json) console.log(JSON.stringify({ runs: runs.map((x) => ({ name: x.name, ...x.r })), ratios }));
else {
  console.log("\n== ratios (same run)");
  console.log(`decode  fast / exact      ${ratios.decode_fast_over_exact.toFixed(2)}x`);
  console.log(`prefill fast / exact      ${ratios.prefill_fast_over_exact.toFixed(2)}x`);
  if (one) {
    console.log(`decode  ${N} threads / 1     ${ratios.decode_threads_over_1!.toFixed(2)}x`);
    console.log(`prefill ${N} threads / 1     ${ratios.prefill_threads_over_1!.toFixed(2)}x`);
  }
  console.log(`prefill / decode (fast)   ${ratios.prefill_over_decode.toFixed(2)}x`);
  console.log(`roofline (fast, ${N} threads) ${(100 * fast.roofline).toFixed(1)}%`);
}
