// Model directory report for `hummingbird inspect`: shape from config.json, tensor count and byte budget from the
// safetensors headers (no tensor data is read). Classifies every tensor into a storage format (f32/bf16/f16/fp8/
// int8/int4/int4g<gs>/int2; `name.qs` scales count with their matrix, FP8 `*_scale_inv` with theirs) and splits
// resident bytes from routed-expert bytes. Refuses what `serve` refuses at load, by the same code (loadConfig,
// openModel, weights.ts checkWeights on headers only, loadTokenizer with its chat template).
// Stateless: opens the store, reads headers, closes it.
import { loadConfig, type Config } from "./config.ts";
import { planTensors } from "./make-model.ts";
import { openModel, type TensorInfo, type TensorStore } from "./safetensors.ts";
import { loadTokenizer } from "./tokenizer.ts";
import { checkWeights } from "./weights.ts";
import { FORMATS, fitting, fmtName } from "./formats.ts";

export interface InspectReport {
  model_dir: string;
  model_type: string;
  vocab_size: number;
  hidden_size: number;
  num_layers: number;
  dense_layers: number[];
  moe_layers: number[];
  indexer_types: ("full" | "shared")[];
  n_routed_experts: number;
  experts_per_token: number;
  n_shared_experts: number;
  /** MTP tensors present (`model.layers.L.eh_proj.weight`) */
  mtp: boolean;
  tensors: number;
  total_bytes: number;
  bytes_by_dtype: Record<string, number>;
  bytes_by_format: Record<string, number>;
  /** everything except routed experts (what stays in memory when experts are paged) */
  resident_bytes: number;
  routed_expert_bytes: number;
  /** number of stored (layer, expert) groups, MTP layer included */
  experts_stored: number;
  /** bytes of the largest single expert (gate + up + down, with scales) */
  per_expert_bytes: number;
}

const EXPERT_RE = /^model\.layers\.(\d+)\.mlp\.experts\.(\d+)\./;

/** Logical [O, I] of every weight the config implies (from the generator's plan of spec §2). */
function logicalShapes(cfg: Config): Map<string, number[]> {
  try {
    return new Map(planTensors(cfg, "f32").map((t) => [t.name, t.shape]));
  } catch {
    return new Map(); // e.g. q_lora_rank null with an indexer: fall back to stored shapes
  }
}

/** Storage format of one quantized U8 matrix `name` with F32 scales `name.qs` (formats.md). */
export function quantFormat(store: TensorStore, t: TensorInfo, logical?: number[]): string {
  const stamp = store.metadata[`quant.${t.name}`];
  if (stamp) return stamp.replace(/-row$/, "");
  const qs = store.get(`${t.name}.qs`);
  const O = logical?.[0] ?? t.shape[0];
  const I = logical?.[1];
  if (O === undefined || I === undefined) return "u8-quant";
  const f = fitting(O, I, t.nbytes, qs.numel)[0]; // (the first where several fit: serve's load refuses those)
  return f ? fmtName(f) : "u8-quant";
}

/** Format of every tensor; `.qs` and `_scale_inv` companions take their matrix's format. */
function formats(store: TensorStore, cfg: Config): Map<string, string> {
  const logical = logicalShapes(cfg);
  const fmt = new Map<string, string>();
  const base: Record<string, string> = { F8_E4M3: "fp8", F8_E5M2: "fp8", I8: "int8" };
  for (const f of FORMATS) if (f.scales === "none") base[f.dtype] = f.name;
  for (const name of store.names()) {
    const t = store.get(name);
    if (t.dtype === "U8" && store.has(`${name}.qs`)) fmt.set(name, quantFormat(store, t, logical.get(name)));
    else fmt.set(name, base[t.dtype] ?? t.dtype.toLowerCase());
  }
  for (const name of store.names()) {
    const parent = name.endsWith(".qs") ? name.slice(0, -3) : name.endsWith("_scale_inv") ? name.slice(0, -"_scale_inv".length) : null;
    if (parent !== null && fmt.has(parent) && parent !== name) fmt.set(name, fmt.get(parent)!);
  }
  return fmt;
}

const add = (m: Record<string, number>, k: string, v: number) => (m[k] = (m[k] ?? 0) + v);

/** The report of a model directory `serve` would load; refused (a ModelError) where serve's load would be. */
export function inspectModel(dir: string): InspectReport {
  return storeReport(dir, true);
}

/** The report; `check` false: of any store config.json describes, even one serve would refuse (e.g. a few tensors). */
export function storeReport(dir: string, check = false): InspectReport {
  const cfg = loadConfig(dir);
  const store = openModel(dir);
  try {
    if (check) { checkWeights(store, cfg); loadTokenizer(dir); }
    const fmt = formats(store, cfg);
    const bytes_by_dtype: Record<string, number> = {};
    const bytes_by_format: Record<string, number> = {};
    const perExpert = new Map<string, number>();
    let total = 0, routed = 0;
    for (const name of store.names()) {
      const t = store.get(name);
      total += t.nbytes;
      add(bytes_by_dtype, t.dtype, t.nbytes);
      add(bytes_by_format, fmt.get(name)!, t.nbytes);
      const m = EXPERT_RE.exec(name);
      if (m) {
        routed += t.nbytes;
        const key = `${m[1]}.${m[2]}`;
        perExpert.set(key, (perExpert.get(key) ?? 0) + t.nbytes);
      }
    }
    const L = cfg.num_hidden_layers;
    const layers = cfg.layer_kinds.map((k, i) => [k, i] as const);
    return {
      model_dir: dir,
      model_type: cfg.model_type,
      vocab_size: cfg.vocab_size,
      hidden_size: cfg.hidden_size,
      num_layers: L,
      dense_layers: layers.filter(([k]) => k === "dense").map(([, i]) => i),
      moe_layers: layers.filter(([k]) => k === "moe").map(([, i]) => i),
      indexer_types: cfg.indexer_types,
      n_routed_experts: cfg.n_routed_experts,
      experts_per_token: cfg.num_experts_per_tok,
      n_shared_experts: cfg.n_shared_experts,
      mtp: store.has(`model.layers.${L}.eh_proj.weight`),
      tensors: store.names().length,
      total_bytes: total,
      bytes_by_dtype,
      bytes_by_format,
      resident_bytes: total - routed,
      routed_expert_bytes: routed,
      experts_stored: perExpert.size,
      per_expert_bytes: Math.max(0, ...perExpert.values()),
    };
  } finally {
    store.close();
  }
}

/** The report as an aligned two-column table. `fmtBytes` renders byte counts. */
export function formatReport(r: InspectReport, fmtBytes: (n: number) => string): string {
  const b = (n: number) => `${fmtBytes(n)} (${n})`;
  const list = (xs: readonly (string | number)[]) => (xs.length ? xs.join(", ") : "-");
  const rows: [string, string][] = [
    ["model", r.model_dir],
    ["model_type", r.model_type],
    ["vocab_size", String(r.vocab_size)],
    ["hidden_size", String(r.hidden_size)],
    ["num_layers", String(r.num_layers)],
    ["dense_layers", list(r.dense_layers)],
    ["moe_layers", list(r.moe_layers)],
    ["indexer_types", list(r.indexer_types)],
    ["experts", `${r.n_routed_experts} routed, top-${r.experts_per_token}, ${r.n_shared_experts} shared`],
    ["mtp", r.mtp ? "yes" : "no"],
    ["tensors", String(r.tensors)],
    ["total", b(r.total_bytes)],
    ...Object.entries(r.bytes_by_dtype).map(([k, v]): [string, string] => [`  dtype ${k}`, b(v)]),
    ...Object.entries(r.bytes_by_format).map(([k, v]): [string, string] => [`  format ${k}`, b(v)]),
    ["resident (no experts)", b(r.resident_bytes)],
    ["routed experts", `${b(r.routed_expert_bytes)} in ${r.experts_stored} experts`],
    ["per expert", b(r.per_expert_bytes)],
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join("\n");
}
