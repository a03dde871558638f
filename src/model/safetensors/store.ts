// A model's tensors: one .safetensors file or shards via model.safetensors.index.json, merged into one
// TensorStore (a tensor in two files, an index that disagrees with the shards, or quant.* metadata that
// differs between shards are ModelErrors). State: a TensorStore owns the SafeFiles (fds) it was built from.
import * as fs from "node:fs";
import { basename, join } from "node:path";
import { z } from "zod";
import { fromZod, ModelError, readJsonFile, show } from "../errors.ts";
import type { SafeFile, TensorInfo } from "./file.ts";
import { openSafetensors } from "./header.ts";

/** All tensors of one model. get() throws a ModelError naming a missing tensor. */
export class TensorStore {
  constructor(
    readonly path: string,
    readonly files: SafeFile[],
    private readonly map: Map<string, TensorInfo>,
    readonly metadata: Record<string, string>,
  ) {}
  has(name: string): boolean { return this.map.has(name); }
  get(name: string): TensorInfo {
    const t = this.map.get(name);
    if (!t) throw new ModelError("missing tensor", { file: this.path, tensor: name });
    return t;
  }
  names(): string[] { return [...this.map.keys()]; }
  close(): void { for (const f of this.files) f.close(); }
}

export const INDEX_FILE = "model.safetensors.index.json";
export const SINGLE_FILE = "model.safetensors";
const MAX_INDEX = 256 * 1024 * 1024;
const IndexJson = z.looseObject({
  metadata: z.unknown().optional(),
  weight_map: z.record(z.string().min(1), z.string().min(1)),
});

/** Open a model directory (model.safetensors, or shards via the index), or a single .safetensors path. */
export function openModel(path: string): TensorStore {
  let st: fs.Stats;
  try {
    st = fs.statSync(path);
  } catch (e) {
    throw new ModelError(`cannot open: ${(e as Error).message}`, { file: path }, { cause: e });
  }
  if (st.isFile()) return storeOf(path, [openSafetensors(path)]);
  const index = join(path, INDEX_FILE);
  if (fs.existsSync(index)) return openSharded(path, index);
  const single = join(path, SINGLE_FILE);
  if (fs.existsSync(single)) return storeOf(path, [openSafetensors(single)]);
  throw new ModelError(`neither ${SINGLE_FILE} nor ${INDEX_FILE} found`, { file: path });
}

function openSharded(dir: string, index: string): TensorStore {
  const raw = readJsonFile(index, MAX_INDEX);
  const r = IndexJson.safeParse(raw);
  if (!r.success) throw fromZod(r.error, { file: index });
  const wm = r.data.weight_map;
  const shards = [...new Set(Object.values(wm))];
  for (const s of shards) {
    if (s !== basename(s) || s === "." || s === ".." || s.includes("\\") || s.includes("\0"))
      throw new ModelError(`shard ${show(s)} is not a plain file name`, { file: index, field: "weight_map" });
  }
  const files: SafeFile[] = [];
  try {
    for (const s of shards) {
      const p = join(dir, s);
      if (!fs.existsSync(p)) {
        const t = Object.keys(wm).find((k) => wm[k] === s);
        throw new ModelError(`mapped file ${s} does not exist`, { file: index, tensor: t, field: "weight_map" });
      }
      files.push(openSafetensors(p));
    }
    const store = storeOf(dir, files);
    for (const [name, s] of Object.entries(wm)) {
      const t = store.has(name) ? store.get(name) : null;
      if (!t) throw new ModelError(`not found in ${s}, where the index maps it`, { file: index, tensor: name, field: "weight_map" });
      if (basename(t.file) !== s) throw new ModelError(`index maps it to ${s} but it is in ${basename(t.file)}`, { file: index, tensor: name, field: "weight_map" });
    }
    return store;
  } catch (e) {
    for (const f of files) f.close();
    throw e;
  }
}

/** Merge files into a store: a tensor in two files is an error; metadata merged (quant.* must agree). */
function storeOf(path: string, files: SafeFile[]): TensorStore {
  const map = new Map<string, TensorInfo>();
  const metadata: Record<string, string> = Object.create(null);
  try {
    for (const f of files) {
      for (const [name, t] of f.tensors) {
        const prev = map.get(name);
        if (prev) throw new ModelError(`also in ${prev.file}`, { file: f.path, tensor: name, field: "name" });
        map.set(name, t);
      }
      for (const [k, v] of Object.entries(f.metadata)) {
        if (!Object.hasOwn(metadata, k)) metadata[k] = v;
        else if (k.startsWith("quant.") && metadata[k] !== v)
          throw new ModelError(`${show(v)} disagrees with ${show(metadata[k])} in another shard`, { file: f.path, field: `__metadata__.${k}` });
      }
    }
  } catch (e) {
    for (const f of files) f.close();
    throw e;
  }
  return new TensorStore(path, files, map, metadata);
}
