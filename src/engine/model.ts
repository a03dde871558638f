// A loaded model: Config + read-only Weights + the tensor store they view. Owns the open shard files
// (closed by `close`). Activations live in RunState, conversations in KVCache — never here.
import { loadConfig, type Config } from "../model/config.ts";
import { openModel, type TensorStore } from "../model/safetensors.ts";
import { loadWeights, type Weights } from "../model/weights.ts";
import { KVCache } from "./kv.ts";
import type { KvDtype } from "../native/hb.ts";

export interface Model { dir: string; cfg: Config; w: Weights; store: TensorStore }

export function loadModel(dir: string): Model {
  const cfg = loadConfig(dir);
  const store = openModel(dir);
  const w = loadWeights(store, cfg);
  return { dir, cfg, w, store };
}

/** A fresh conversation cache for the main layers. */
export function newKV(m: Model, cap = 64, dtype: KvDtype = "f32"): KVCache {
  const c = m.cfg;
  const indexed = c.indexer_types.map((t) => c.has_dsa && t === "full");
  return new KVCache(c, c.num_hidden_layers, indexed, cap, dtype);
}

/** A fresh cache for the MTP layer (dense attention over MTP positions: no indexer keys). */
export function newMtpKV(m: Model, cap = 64, dtype: KvDtype = "f32"): KVCache {
  return new KVCache(m.cfg, 1, [false], cap, dtype);
}
