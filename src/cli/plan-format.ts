// `hummingbird plan`'s text report: the forecast's figures (src/engine/plan.ts) as lines, each with what it assumes.
// No state.
import type { Config } from "../model/config.ts";
import type { Footprint, Forecast } from "../engine/plan.ts";
import type { Rates } from "../engine/rates.ts";
import { fmtBytes } from "./common.ts";

export interface PlanReport extends Forecast {
  source: string; formats: { dense: string; experts: string }; rates: Rates; rates_from: string; ram_gb: number;
  disk_gb_s: number | null; ctx: number; prompt: number; kv_dtype: string; footprint: Footprint;
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const gb = (n: number) => `${(n / 1e9).toFixed(2)} GB`;
const num = (x: number) => (x >= 100 ? x.toFixed(0) : x.toPrecision(3));
const tps = ([a, b]: [number, number]) => (Math.abs(a - b) < 0.005 * b ? num(b) : `${num(a)} .. ${num(b)}`);

export function formatForecast(cfg: Config, r: PlanReport, gemm: (w: "dense" | "experts", S: number) => { macs: number; bytes: number }): string {
  const fp = r.footprint, b = r.budget, moe = fp.moeLayers, E = cfg.n_routed_experts;
  const mtp = cfg.num_nextn_predict_layers >= 1 ? " + MTP" : "";
  const disk = r.disk_gb_s === null ? "" : ` at ${r.disk_gb_s} GB/s`;
  return [
    `model     ${r.source}: ${cfg.num_hidden_layers} layers (${moe} MoE)${mtp}, ${E} experts top-${cfg.num_experts_per_tok}; experts ${r.formats.experts}, dense ${r.formats.dense}`,
    `rates     ${r.rates.threads} thread(s), ${r.rates.simd} (${r.rates_from}): memory ${r.rates.membw_gb_s.toFixed(1)} GB/s (probe); ` +
      `one row from RAM: dense ${r.formats.dense} ${(gemm("dense", 1).bytes / 1e9).toFixed(1)} GB/s, experts ${r.formats.experts} ${(gemm("experts", 1).bytes / 1e9).toFixed(1)} GB/s; ` +
      `dense ${(gemm("dense", r.prompt).macs / 1e9).toFixed(1)} GMAC/s at ${r.prompt} rows, experts ${(gemm("experts", r.rowsPerExpert).macs / 1e9).toFixed(1)} GMAC/s at ${r.rowsPerExpert}`,
    `resident  ${fmtBytes(fp.residentBytes)} (everything but the routed experts; lm_head ${fmtBytes(fp.lmHeadBytes)})`,
    `experts   ${fmtBytes(fp.expertBytes)} each; ${b.slots === E ? "all" : b.slots} of ${E} per layer cached = ${fmtBytes(b.cacheBytes)} of ${fmtBytes(r.expertsOnDisk)} (${pct(r.cacheShare)})`,
    `RAM       ${r.ram_gb} GiB: resident + KV + activations + working ${fmtBytes(b.workingBytes)} + headroom ${fmtBytes(b.headroom)}; projected peak ${fmtBytes(b.peak)}${b.fits ? "" : " (does not fit)"}`,
    `KV        ${fmtBytes(r.kvBytesPerToken)} per token (${r.kv_dtype}, indexer keys and the MTP layer included); ${r.ctx} tokens: ${fmtBytes(r.kvBytes)}`,
    `hit rate  ${r.hit[0] === r.hit[1] ? pct(r.hit[0]) : `${pct(r.hit[0])} (uniform routing) .. ${pct(r.hit[1])} (Zipf(1) routing, the hottest cached)`}`,
    `decode    ${tps(r.decode)} tok/s: per token ${gb(r.readPerToken.dense)} dense + ${gb(r.readPerToken.routed)} routed + ${gb(r.readPerToken.attention)} attention at ${r.ctx} tokens; misses from disk${disk}`,
    `prefill   ${tps(r.prefill)} tok/s over ${r.prompt} tokens (${r.rowsPerExpert} rows per expert call)`,
    ...b.warnings.map((w) => `warning   ${w}`),
  ].join("\n");
}
