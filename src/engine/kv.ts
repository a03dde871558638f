// KV state of one conversation (one sequence): the compressed MLA cache per layer and the DSA indexer
// keys on full layers. Row t holds absolute position t. The host copy is canonical; a device mirror
// (src/device/) follows it through `version`, which every write path bumps. The MLA cache is f32, or (`dtype`) IEEE halves
// or int8 blocks (hb.ts KvDtype: half or ~3.6x less memory; fast mode on the CPU path, the absorbed attention form);
// indexer keys stay f32.
import type { Config } from "../model/config.ts";
import { kvRowElems, type KvDtype, type KvRows } from "../native/hb.ts";

export class KVCache {
  /** Tokens stored (rows [0, len) are valid). */
  len = 0;
  /** Rows allocated per layer. */
  cap = 0;
  /** Bumped by every host write (append, truncate, restore): lets mirrors detect staleness. */
  version = 0;
  /** recent writes: (version after the write, first row written), for mirrors catching up */
  private writes: { v: number; from: number }[] = [];
  /** per layer [cap, kv_lora + qk_rope values]: c_kv (kv_a_layernorm'd latent) ‖ k_pe (roped), in `dtype` (rowElems
   *  array elements per row) */
  readonly kv: KvRows[];
  /** array elements per row of kv (kvRowElems) */
  readonly rowElems: number;
  /** per layer [cap, index_head_dim] indexer keys (LayerNorm + roped), null where the layer has none */
  readonly ik: (Float32Array | null)[];
  readonly kvWidth: number;
  readonly ikWidth: number;

  /** `indexed[i]`: layer i stores indexer keys (a `full` DSA layer). */
  constructor(cfg: Config, readonly nLayers: number, readonly indexed: boolean[], initialCap = 64, readonly dtype: KvDtype = "f32") {
    this.kvWidth = cfg.kv_lora_rank + cfg.qk_rope_head_dim;
    this.ikWidth = cfg.index_head_dim;
    this.rowElems = kvRowElems(dtype, this.kvWidth);
    this.kv = Array.from({ length: nLayers }, () => this.rows(0));
    this.ik = indexed.map(() => null);
    this.reserve(initialCap);
  }

  /** Ensure room for `n` rows (grows in powers of two, keeping the contents). */
  reserve(n: number): void {
    if (n <= this.cap) return;
    let cap = Math.max(this.cap, 16);
    while (cap < n) cap *= 2;
    for (let i = 0; i < this.nLayers; i++) {
      const kv = this.rows(cap);
      kv.set(this.kv[i].subarray(0, this.len * this.rowElems) as never);
      this.kv[i] = kv;
      if (this.indexed[i]) {
        const ik = new Float32Array(cap * this.ikWidth);
        const old = this.ik[i];
        if (old) ik.set(old.subarray(0, this.len * this.ikWidth));
        this.ik[i] = ik;
      }
    }
    this.cap = cap;
  }

  /** Drop rows [n, len): the conversation continues from position n. */
  truncate(n: number): void {
    if (n < 0 || n > this.len) throw new Error(`KVCache.truncate(${n}) outside [0, ${this.len}]`);
    this.len = n;
    this.wrote(n);
  }

  private rows(cap: number): KvRows {
    const n = cap * this.rowElems;
    return this.dtype === "f16" ? new Uint16Array(n) : this.dtype === "q8" ? new Uint8Array(n) : new Float32Array(n);
  }

  /** layer i's rows as f32 (paths that take no f16 / q8 cache: the GPU chain, slot files, the naive form) */
  f32(i: number): Float32Array {
    const a = this.kv[i];
    if (!(a instanceof Float32Array)) throw new Error(`an ${this.dtype} KV cache runs on the CPU path only (no device chain, slot files or naive attention form)`);
    return a;
  }

  /** Record a host write of rows from `from` on (every write path calls this). */
  wrote(from: number): void {
    this.version++;
    this.writes.push({ v: this.version, from });
    if (this.writes.length > 64) this.writes.shift();
  }

  /** Lowest row written since version `v` (Infinity: none; 0 when the log no longer reaches back);
   *  `skipOnce`: leave out one write from that row (a reader's own rows, logged after it read them). */
  lowestSince(v: number, skipOnce = -1): number {
    if (v >= this.version) return Infinity;
    if (this.writes.length === 0 || this.writes[0].v > v + 1) return 0;
    let lo = Infinity;
    for (const w of this.writes) {
      if (w.v <= v) continue;
      if (w.from === skipOnce) { skipOnce = -1; continue; }
      lo = Math.min(lo, w.from);
    }
    return lo;
  }
}
