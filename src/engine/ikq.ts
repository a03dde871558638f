// Fast mode's int8 copy of the DSA indexer keys (ffi/dsa.h): per conversation (KVCache) and indexed layer,
// every key quantized once (hb_ik_quant, blocks of 16 keys) so that scoring reads a quarter of the bytes.
// The f32 keys in the KVCache stay canonical: a copy follows them through the cache's write log (every
// write path calls KVCache.wrote), plus the rows the running forward has just written (it logs them only
// after its layers: that one log entry, from the rows' first position, is then not a change). State: the
// copies, held weakly by their KVCache.
import { ikQuant, type IkQ8 } from "../native/hb.ts";
import type { KVCache } from "./kv.ts";

/** rows [0, rows) hold the keys as of the cache's `version`, rows [fresh, rows) written by the running forward */
interface Copy extends IkQ8 { rows: number; version: number; fresh: number }
const copies = new WeakMap<KVCache, Copy[]>();

/** The int8 keys of `layer`, valid for rows [0, upto); rows [from, upto) were just written. */
export function ikQ8(kv: KVCache, layer: number, from: number, upto: number): IkQ8 {
  const ik = kv.ik[layer];
  if (!ik) throw new Error(`layer ${layer}: KV cache holds no indexer keys`);
  if (!(0 <= from && from <= upto && upto <= kv.cap)) throw new Error(`ikQ8: rows [${from}, ${upto}) outside the cache's ${kv.cap}`);
  const hd = kv.ikWidth, rows16 = Math.ceil(kv.cap / 16) * 16;
  let list = copies.get(kv);
  if (!list) copies.set(kv, (list = []));
  let c = list[layer];
  if (!c || c.dk.length < rows16) { // (re)allocated with the cache's capacity, whole blocks of 16 keys
    const n: Copy = { k8: new Uint8Array(rows16 * hd), dk: new Float32Array(rows16), rows: 0, version: -1, fresh: -1 };
    if (c) { n.k8.set(c.k8); n.dk.set(c.dk); n.rows = c.rows; n.version = c.version; n.fresh = c.fresh; }
    list[layer] = c = n;
  }
  const lo = Math.min(c.rows, kv.lowestSince(c.version, c.fresh), from);
  if (lo < upto) ikQuant(ik, hd, lo, upto, c);
  c.rows = upto;
  c.version = kv.version;
  c.fresh = from;
  return c;
}
