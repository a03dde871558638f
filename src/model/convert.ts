// The converter: an HF model directory (f32/bf16/f16, or FP8 e4m3 with weight_scale_inv) -> a
// quantized container (formats.md), one tensor at a time so memory stays small whatever the model.
// Each routed expert's six tensors are written next to each other (one pread per expert). Shards are
// planned up front, written via tmp + rename, and on a rerun kept if their header matches the plan
// (resume). Holds no state beyond one conversion.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "./config.ts";
import { ModelError } from "./errors.ts";
import { dequantize, quantCounts, quantize } from "./quant.ts";
import { fmtName, isGrouped, parseFmt, type QFormat } from "./formats.ts";
import { openModel, openSafetensors, readBytes, readF32, type TensorStore, type TensorOut, writeSafetensors } from "./safetensors.ts";
import { Fmt } from "../native/hb.ts";

export interface ConvertOpts {
  experts: QFormat; dense: QFormat; mtp: QFormat;
  shardBytes?: number;                       // default 4 GiB
  onProgress?: (doneBytes: number, totalBytes: number) => void;
}
interface Out extends TensorOut { bytes: number; src: string }

const EXPERT = /^model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight$/;
const SIDE_FILES = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"];

/** Output format of a source tensor: null = copy as f32 vector/float, else the matrix format. */
function roleFormat(name: string, shape: number[], L: number, o: ConvertOpts): QFormat | null {
  if (shape.length !== 2 || name.endsWith("mlp.gate.weight") || name === "model.embed_tokens.weight") return null;
  const layer = /^model\.layers\.(\d+)\./.exec(name);
  if (layer && Number(layer[1]) >= L) return o.mtp;
  return EXPERT.test(name) ? o.experts : o.dense;
}

function plan(store: TensorStore, L: number, o: ConvertOpts): Out[] {
  const head: Out[] = [], experts: Out[] = [];
  for (const name of store.names()) {
    if (name.endsWith("_scale_inv")) continue; // consumed by readF32 for its FP8 weight
    const t = store.get(name);
    const f = roleFormat(name, t.shape, L, o);
    const list = EXPERT.test(name) ? experts : head;
    if (!f || f.fmt === Fmt.f32) {
      list.push({ name, dtype: "F32", shape: t.shape, bytes: 4 * t.numel, src: name, data: () => readF32(t, null, store) });
      continue;
    }
    const [O, I] = t.shape, [nb, ns] = quantCounts(f, O, I);
    let q: ReturnType<typeof quantize> | null = null;
    const get = () => (q ??= quantize(f, readF32(t, null, store), O, I));
    list.push({ name, dtype: "U8", shape: [O, nb / O], bytes: nb, src: name, data: () => get().q });
    list.push({ name: `${name}.qs`, dtype: "F32", shape: isGrouped(f.fmt) ? [O, ns / O] : [O], bytes: 4 * ns, src: name,
      data: () => { const s = get().scales; q = null; return s; } });
  }
  // experts grouped per (layer, expert): gate, gate.qs, up, up.qs, down, down.qs
  const key = (n: string) => { const m = EXPERT.exec(n.replace(/\.qs$/, ""))!; return [Number(m[1]), Number(m[2]), ["gate", "up", "down"].indexOf(m[3]), n.endsWith(".qs") ? 1 : 0]; };
  experts.sort((a, b) => { const x = key(a.name), y = key(b.name); for (let i = 0; i < 4; i++) if (x[i] !== y[i]) return x[i] - y[i]; return 0; });
  return [...head, ...experts];
}

/** Split into shards of at most shardBytes, never splitting one expert's tensors. */
function shard(outs: Out[], max: number): Out[][] {
  const shards: Out[][] = [[]];
  let size = 0;
  outs.forEach((t, i) => {
    const m = EXPERT.exec(t.name.replace(/\.qs$/, ""));
    const startsUnit = !m || (m[3] === "gate" && !t.name.endsWith(".qs"));
    const prev = i > 0 ? EXPERT.exec(outs[i - 1].name.replace(/\.qs$/, "")) : null;
    const sameExpert = m && prev && m[1] === prev[1] && m[2] === prev[2];
    if (size > 0 && size + t.bytes > max && (startsUnit || !sameExpert)) { shards.push([]); size = 0; }
    shards[shards.length - 1].push(t);
    size += t.bytes;
  });
  return shards;
}

function shardMatches(path: string, ts: Out[]): boolean {
  if (!existsSync(path)) return false;
  try {
    const f = openSafetensors(path);
    try { return f.tensors.size === ts.length && ts.every((t) => f.tensors.get(t.name)?.nbytes === t.bytes); } finally { f.close(); }
  } catch { return false; }
}

export function convert(inDir: string, outDir: string, o: ConvertOpts): { shards: number; bytes: number; resumed: number } {
  const cfg = loadConfig(inDir), store = openModel(inDir);
  try {
    mkdirSync(outDir, { recursive: true });
    const outs = plan(store, cfg.num_hidden_layers, o), shards = shard(outs, o.shardBytes ?? 4 * 2 ** 30);
    const total = outs.reduce((a, t) => a + t.bytes, 0);
    const stamps: Record<string, string> = {};
    for (const t of outs) {
      const f = roleFormat(t.src, store.get(t.src).shape, cfg.num_hidden_layers, o);
      if (t.dtype === "U8" && f) stamps[`quant.${t.name}`] = fmtName(f);
    }
    const names = shards.map((_, i) => shards.length === 1 ? "model.safetensors" : `model-${String(i + 1).padStart(5, "0")}-of-${String(shards.length).padStart(5, "0")}.safetensors`);
    const weightMap: Record<string, string> = {};
    let done = 0, resumed = 0;
    shards.forEach((ts, i) => {
      const path = join(outDir, names[i]);
      const meta: Record<string, string> = { format: "hummingbird" };
      for (const t of ts) if (stamps[`quant.${t.name}`]) meta[`quant.${t.name}`] = stamps[`quant.${t.name}`];
      if (shardMatches(path, ts)) { resumed++; done += ts.reduce((a, t) => a + t.bytes, 0); }
      else writeSafetensors(path, ts.map((t) => ({ ...t, data: () => { const d = (t.data as () => ArrayBufferView)(); done += t.bytes; o.onProgress?.(done, total); return d; } })), meta);
      for (const t of ts) weightMap[t.name] = names[i];
    });
    if (shards.length > 1) writeFileSync(join(outDir, "model.safetensors.index.json"), JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 1));
    for (const f of SIDE_FILES) if (existsSync(join(inDir, f))) writeFileSync(join(outDir, f), readFileSync(join(inDir, f)));
    verify(store, outDir, outs);
    return { shards: shards.length, bytes: total, resumed };
  } finally { store.close(); }
}

/** Headers and sizes of every tensor, and a sampled dequantization check against the source. */
function verify(src: TensorStore, outDir: string, outs: Out[]): void {
  const out = openModel(outDir);
  try {
    for (const t of outs) if (out.get(t.name).nbytes !== t.bytes) throw new ModelError(`has ${out.get(t.name).nbytes} bytes, planned ${t.bytes}`, { file: outDir, tensor: t.name });
    const quant = outs.filter((t) => t.dtype === "U8");
    const n = Math.min(8, quant.length);
    for (let k = 0; k < n; k++) {
      const t = quant[Math.floor((k * quant.length) / n)], info = src.get(t.src);
      const f = parseFmt(out.metadata[`quant.${t.name}`])!;
      const w = readF32(info, null, src), q = readBytes(out.get(t.name)), s = readF32(out.get(`${t.name}.qs`));
      const [O, I] = info.shape, rb = q.length / O, ns = s.length / O;
      for (let o = 0; o < O; o += Math.max(1, O >> 3)) {
        const row = dequantize(f, q.subarray(o * rb, (o + 1) * rb), s.subarray(o * ns, (o + 1) * ns), 1, I);
        for (let i = 0; i < I; i++) {
          const sc = s[o * ns + (f.gs ? Math.floor(i / f.gs) : 0)];
          if (!(Math.abs(row[i] - w[o * I + i]) <= sc * 0.5001 + 1e-7))
            throw new ModelError(`verify: element (${o}, ${i}) dequantizes to ${row[i]}, source ${w[o * I + i]}`, { file: outDir, tensor: t.name });
        }
      }
    }
  } finally { out.close(); }
}
