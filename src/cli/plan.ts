// `hummingbird plan`: the forecast of a model on this machine without running it (src/engine/plan.ts): from a config
// alone (the weight formats given) or a model directory (its files' bytes), this machine's rates measured now or a saved
// profile (src/engine/rates.ts), a RAM budget and a disk rate. Prints the figures (or JSON). No state.
import { resolve } from "node:path";
import { loadConfig, parseConfig, type Config } from "../model/config.ts";
import { planTensors } from "../model/make-model.ts";
import { readJsonFile } from "../model/errors.ts";
import { fitting, floatFormat, fmtName, parseFmt, type QFormat } from "../model/formats.ts";
import { openModel } from "../model/safetensors.ts";
import { footprint, forecast, formatBytes, storeBytes } from "../engine/plan.ts";
import { gemmRate, measureRates, readRates, type Rates } from "../engine/rates.ts";
import { hb } from "../native/hb.ts";
import { kvOption, KV_HELP, numOption, parseCli, UsageError, type Command } from "./common.ts";
import { writeFileSync } from "node:fs";
import { formatForecast } from "./plan-format.ts";

const help = `usage: hummingbird plan (--model DIR | --config config.json [--experts int4g64] [--dense int8] [--mtp int8]) --ram-gb R
                        [--disk-gbs D] [--ctx 4096] [--prompt 128] [--kv-cache-dtype f32|f16|q8]
                        [--profile FILE | --save-profile FILE] [--threads N] [--device cpu] [--json]

Forecast a model on this machine without loading it: bytes resident, the expert cache serve would plan in R GiB
(experts/budget.ts), its hit-rate range (uniform routing: cache share; Zipf(1) routing, the hottest cached: the high
end), decode tok/s (weight bytes read per token ÷ the rate the matmul kernels stream them from RAM at one row,
missed experts ÷ the disk rate) and prefill tok/s of --prompt tokens (multiply-adds ÷ the matmul rates measured at
the rows each matrix gets), and the KV cache at --ctx.

options:
  --model DIR      a model directory: its config and its tensors' stored bytes
  --config FILE    a config.json alone (GLM-5's works without weights); --experts / --dense / --mtp: the
                   formats assumed (convert's defaults: int4g64, int8, int8; the embedding, routers and
                   vectors f32)
  --ram-gb R       the RAM budget in GiB (as serve's --ram-gb)
  --disk-gbs D     the disk's read rate in GB/s for the experts the cache misses (needed when some miss)
  --ctx N          context for the KV figures and decode's attention reads (default 4096)
  --prompt N       prompt tokens for the prefill figure (default 128)
${KV_HELP}
  --profile FILE   the machine's rates from a saved profile instead of measuring (a few seconds)
  --save-profile FILE  measure the rates at 1..128 rows (this model's shapes) and save them as a profile
  --threads N      pool size for the measurement (default HB_THREADS, else the physical cores)
  --device cpu     the forecast is of the CPU path (the only one it models)
  --json           the figures as one JSON object`;

const fmt = (v: string | undefined, flag: string, dflt: string): QFormat => {
  const f = parseFmt(v ?? dflt);
  if (!f) throw new UsageError(`--${flag} must be a weight format (f32|bf16|int8|int4|int2|int4g<gs>), got ${JSON.stringify(v)}`, help);
  return f;
};

/** The stored format of one tensor: its `quant.` stamp, the format its byte and scale counts fit, or its float dtype. */
function storedFormat(store: ReturnType<typeof openModel>, name: string, O: number, I: number): QFormat {
  const stamp = store.metadata[`quant.${name}`], t = store.get(name);
  const f = stamp ? parseFmt(stamp) : t.dtype === "U8" && store.has(`${name}.qs`) ? fitting(O, I, t.nbytes, store.get(`${name}.qs`).numel)[0] : null;
  const fl = floatFormat(t.dtype);
  if (f) return f;
  if (fl !== undefined) return { fmt: fl, gs: 0 };
  throw new UsageError(`--model: cannot tell the format of ${name} (${t.dtype})`, help);
}

/** The matrices each rate is measured on: a MoE layer's (else the first layer's) attention and shared expert or MLP
 *  ("dense"), and one routed expert's gate, up, down ("experts"). */
function mixShapes(cfg: Config): Record<"dense" | "experts", [number, number][]> {
  const i = Math.max(0, cfg.layer_kinds.indexOf("moe")), p = `model.layers.${i}.`;
  const dense = planTensors(cfg, "bf16").filter((t) => t.name.startsWith(p) && t.shape.length === 2 && !/experts\.\d+\.|mlp\.gate\.weight/.test(t.name));
  const F = cfg.moe_intermediate_size, D = cfg.hidden_size;
  return { dense: dense.map((t) => t.shape as [number, number]), experts: [[F, D], [F, D], [D, F]] };
}

async function run(argv: string[]): Promise<number> {
  const s = { type: "string" } as const;
  const r = parseCli(argv, { model: s, config: s, experts: s, dense: s, mtp: s, "ram-gb": s, "disk-gbs": s, ctx: s, prompt: s,
    "kv-cache-dtype": s, profile: s, "save-profile": s, threads: s, device: s, json: { type: "boolean" } }, help);
  if (!r) return (process.stdout.write(help + "\n"), 0);
  const v = r.values;
  if ((v.model === undefined) === (v.config === undefined)) throw new UsageError("give one of --model DIR or --config FILE", help);
  if (v.model !== undefined && (v.experts ?? v.dense ?? v.mtp) !== undefined) throw new UsageError("--experts / --dense / --mtp go with --config (a model's files say their formats)", help);
  if (v.device !== undefined && v.device !== "cpu") throw new UsageError(`--device ${v.device}: the forecast models the CPU path only (--device cpu)`, help);
  if (v.profile !== undefined && v["save-profile"] !== undefined) throw new UsageError("--profile and --save-profile exclude each other", help);
  if (v["ram-gb"] === undefined) throw new UsageError("missing required option --ram-gb", help);
  const ramGb = numOption(v["ram-gb"], "ram-gb", 0.01, 1 << 20, help)!;
  const disk = numOption(v["disk-gbs"], "disk-gbs", 0.001, 1e4, help);
  const ctx = numOption(v.ctx, "ctx", 1, 1 << 24, help) ?? 4096, prompt = numOption(v.prompt, "prompt", 1, 1 << 16, help) ?? 128;
  if (!Number.isInteger(ctx) || !Number.isInteger(prompt)) throw new UsageError(`--${Number.isInteger(ctx) ? "prompt" : "ctx"} must be an integer`, help);
  const kvDtype = kvOption(v, help).kvDtype ?? "f32";
  let cfg, fp, formats: { experts: QFormat; dense: QFormat; mtp?: QFormat }, source: string;
  if (v.config !== undefined) {
    const file = resolve(v.config);
    cfg = parseConfig(readJsonFile(file, 16 << 20), undefined, file);
    const f = { experts: fmt(v.experts, "experts", "int4g64"), dense: fmt(v.dense, "dense", "int8"), mtp: fmt(v.mtp, "mtp", "int8") };
    fp = footprint(cfg, formatBytes(f, cfg.num_hidden_layers));
    formats = f;
    source = `${v.config} (formats assumed)`;
  } else {
    const dir = resolve(v.model!);
    cfg = loadConfig(dir);
    const store = openModel(dir);
    try {
      const moe = cfg.layer_kinds.indexOf("moe"), D = cfg.hidden_size;
      const e = `model.layers.${moe}.mlp.experts.0.gate_proj.weight`;
      formats = { experts: moe < 0 ? { fmt: 0, gs: 0 } : storedFormat(store, e, cfg.moe_intermediate_size, D),
        dense: storedFormat(store, "model.layers.0.self_attn.q_a_proj.weight", cfg.q_lora_rank ?? D, D) };
      fp = footprint(cfg, storeBytes(store));
    } finally { store.close(); }
    source = v.model!;
  }
  const names = { dense: fmtName(formats.dense), experts: fmtName(formats.experts) };
  const Se = Math.max(1, Math.round((prompt * cfg.num_experts_per_tok) / cfg.n_routed_experts));
  const shapes = mixShapes(cfg);
  if (v.threads !== undefined) hb().hb_init(numOption(v.threads, "threads", 1, 256, help)!);
  let rates: Rates, ratesFrom = "measured now";
  if (v.profile !== undefined) {
    rates = readRates(resolve(v.profile));
    ratesFrom = v.profile;
    if (JSON.stringify(rates.shapes) !== JSON.stringify(shapes))
      process.stderr.write(`hummingbird: warning: ${v.profile}: its rates were measured on ${rates.shapes ? "other matrix shapes than this model's" : "matrix shapes it does not record"}; they may not fit this model\n`);
  }
  else {
    const Ss = v["save-profile"] !== undefined ? [1, 2, 4, 8, 16, 32, 64, 128] : null;
    const at = (mix: "dense" | "experts", S: number[]) => S.map((n) => ({ mix, f: formats[mix], S: n, shapes: shapes[mix] }));
    rates = measureRates(Ss ? [...at("dense", Ss), ...at("experts", Ss)] : [...at("dense", [1, prompt]), ...at("experts", [...new Set([1, Se])])]);
    if (v["save-profile"] !== undefined) { writeFileSync(resolve(v["save-profile"]), JSON.stringify({ ...rates, shapes }, null, 1) + "\n"); ratesFrom = `measured now, saved to ${v["save-profile"]}`; }
  }
  const gemm = (mix: "dense" | "experts", S: number) => gemmRate(rates, mix, names[mix], S, v.profile ?? "profile");
  let f;
  try {
    f = forecast({ cfg, fp, ram: ramGb * 2 ** 30, diskBps: disk === undefined ? undefined : disk * 1e9, membw: rates.membw_gb_s * 1e9,
      gemm, ctx, prompt, kvDtype });
  } catch (e) {
    if (e instanceof RangeError) throw new UsageError(`--disk-gbs is needed: at --ram-gb ${ramGb} the expert cache holds only part of the experts`, help);
    throw e;
  }
  const res = { source, formats: names, rates, rates_from: ratesFrom, ram_gb: ramGb, disk_gb_s: disk ?? null, ctx, prompt, kv_dtype: kvDtype, footprint: fp, ...f };
  process.stdout.write((v.json ? JSON.stringify(res) : formatForecast(cfg, res, gemm)) + "\n");
  return 0;
}

export const command: Command = { summary: "forecast a model's memory, expert cache, decode and prefill tok/s on this machine", help, run };
