// KV persistence of one slot (`<state dir>/slot-N.kv`): a conversation's cache on disk, so a restart
// resumes it without re-prefilling. Holds the open file, its committed record count and tokens.
//
// Layout (little-endian):
//   header (HEADER_BYTES, one page):
//     0  "HBKV"          4  u32 version (1)    8  u32 header bytes    12 u32 record bytes
//     16 u64 count (records committed)          24 u32 JSON length     28 JSON shape (below)
//   records, fixed size, record i at header + i·recordBytes:
//     u32 token, u32 crc32(payload), payload f32 = per layer: c_kv‖k_pe row [kv_lora+rope]
//     (+ indexer key row [index_head_dim] on `full` DSA layers), then (MTP models) the main
//     hidden row [D].
// The JSON names the model's shape (model_type, vocab_size, hidden_size, num_hidden_layers,
// kv_lora_rank, qk_rope_head_dim, index_head_dim, indexed_layers, hidden_rows) and a weights
// fingerprint; a file from another model is refused naming the first mismatching field.
// MTP state is NOT stored: the hidden rows let Session.mtpSync re-derive the MTP cache in one
// batched MTP-layer forward at the first draft after a load.
// Crash safety: records are appended, fdatasync'd, and only then is `count` rewritten (8 aligned
// bytes in the first page) and synced. kill -9 at any moment leaves a file whose count names only
// complete records; bytes past it are ignored (and cut when the file is reopened). Shrinking
// (truncate/prefix change) writes the smaller count first. Records within the count are checked
// by CRC; a bad one ends the load there.
import { closeSync, existsSync, fdatasyncSync, fstatSync, ftruncateSync, openSync, readSync, renameSync, writeSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { ModelError } from "../model/errors.ts";
import type { Model } from "./model.ts";
import { Session } from "./session.ts";
import type { ForwardOpts } from "./forward.ts";

export const KV_VERSION = 1;
const MAGIC = 0x564b4248; // "HBKV"
const HEADER_BYTES = 4096;
const COUNT_AT = 16;

export const slotPath = (dir: string, slot: number) => join(dir, `slot-${slot}.kv`);

const Shape = z.object({
  model_type: z.string(), vocab_size: z.number().int(), hidden_size: z.number().int(),
  num_hidden_layers: z.number().int(), kv_lora_rank: z.number().int(), qk_rope_head_dim: z.number().int(),
  index_head_dim: z.number().int(), indexed_layers: z.array(z.number().int()), hidden_rows: z.boolean(),
  weights: z.string(),
});
type Shape = z.infer<typeof Shape>;

/** A cheap fingerprint of the weights: wyhash of the first 64 KiB of embed and lm_head. */
function fingerprint(m: Model): string {
  const bytes = (d: ArrayBufferView) => new Uint8Array(d.buffer, d.byteOffset, Math.min(d.byteLength, 65536));
  return Bun.hash.wyhash(bytes(m.w.embed.data), Bun.hash.wyhash(bytes(m.w.lm_head.data))).toString(16);
}

export function modelShape(m: Model): Shape {
  const c = m.cfg;
  return {
    model_type: c.model_type, vocab_size: c.vocab_size, hidden_size: c.hidden_size, num_hidden_layers: c.num_hidden_layers,
    kv_lora_rank: c.kv_lora_rank, qk_rope_head_dim: c.qk_rope_head_dim, index_head_dim: c.index_head_dim,
    indexed_layers: c.indexer_types.flatMap((t, i) => (c.has_dsa && t === "full" ? [i] : [])),
    hidden_rows: m.w.mtp !== null, weights: fingerprint(m),
  };
}

function floatsPerRecord(s: Shape): number {
  return s.num_hidden_layers * (s.kv_lora_rank + s.qk_rope_head_dim) + s.indexed_layers.length * s.index_head_dim
    + (s.hidden_rows ? s.hidden_size : 0);
}

export interface KvFileOpts { /** fdatasync after data and after the count (default true) */ durable?: boolean }

export class KvFile {
  /** tokens of the committed records */
  readonly tokens: number[] = [];
  readonly recordBytes: number;
  private readonly shape: Shape;
  private readonly durable: boolean;

  private constructor(readonly path: string, private fd: number, readonly m: Model, o: KvFileOpts) {
    this.shape = modelShape(m);
    this.recordBytes = 8 + 4 * floatsPerRecord(this.shape);
    this.durable = o.durable ?? true;
  }

  get count(): number { return this.tokens.length; }

  /** Open (creating if missing) the slot file for model m; refuses another model's file. */
  static open(path: string, m: Model, o: KvFileOpts = {}): KvFile {
    if (!existsSync(path)) {
      // created whole under a temporary name, then renamed: the slot path never holds half a header
      const tmp = `${path}.${process.pid}.tmp`, fd = openSync(tmp, "w");
      try { new KvFile(tmp, fd, m, o).writeHeader(); } finally { closeSync(fd); }
      renameSync(tmp, path);
    }
    const fd = openSync(path, "r+");
    try {
      const f = new KvFile(path, fd, m, o);
      f.readHeader();
      return f;
    } catch (e) {
      closeSync(fd);
      throw e;
    }
  }

  close(): void {
    if (this.fd >= 0) closeSync(this.fd);
    this.fd = -1;
  }

  private writeHeader(): void {
    const json = new TextEncoder().encode(JSON.stringify({ format: "hummingbird-kv", ...this.shape }));
    if (28 + json.length > HEADER_BYTES) throw new Error(`${this.path}: header JSON too large`);
    const b = new Uint8Array(HEADER_BYTES), dv = new DataView(b.buffer);
    dv.setUint32(0, MAGIC, true); dv.setUint32(4, KV_VERSION, true); dv.setUint32(8, HEADER_BYTES, true);
    dv.setUint32(12, this.recordBytes, true); dv.setBigUint64(COUNT_AT, 0n, true); dv.setUint32(24, json.length, true);
    b.set(json, 28);
    writeSync(this.fd, b, 0, b.length, 0);
    if (this.durable) fdatasyncSync(this.fd);
  }

  private readHeader(): void {
    const p = this.path, size = fstatSync(this.fd).size;
    const b = new Uint8Array(HEADER_BYTES);
    const got = readSync(this.fd, b, 0, HEADER_BYTES, 0);
    const dv = new DataView(b.buffer);
    if (got < 28 || dv.getUint32(0, true) !== MAGIC) throw new ModelError("not a hummingbird KV slot file (bad magic)", { file: p, offset: 0 });
    const ver = dv.getUint32(4, true);
    if (ver !== KV_VERSION) throw new ModelError(`version ${ver} is not supported (this build reads ${KV_VERSION})`, { file: p, field: "version", offset: 4 });
    if (dv.getUint32(8, true) !== HEADER_BYTES) throw new ModelError(`header size ${dv.getUint32(8, true)} != ${HEADER_BYTES}`, { file: p, field: "header bytes", offset: 8 });
    const jl = dv.getUint32(24, true);
    if (28 + jl > got) throw new ModelError(`shape JSON of ${jl} bytes overruns the header`, { file: p, field: "shape", offset: 24 });
    let raw: unknown;
    try { raw = JSON.parse(new TextDecoder().decode(b.subarray(28, 28 + jl))); } catch (e) {
      throw new ModelError(`shape JSON does not parse: ${(e as Error).message}`, { file: p, field: "shape", offset: 28 });
    }
    const r = Shape.safeParse(raw);
    if (!r.success) throw new ModelError(`shape JSON: ${r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`, { file: p, field: "shape", offset: 28 });
    for (const k of Object.keys(this.shape) as (keyof Shape)[]) {
      const a = JSON.stringify(r.data[k]), want = JSON.stringify(this.shape[k]);
      if (a !== want) throw new ModelError(`written for another model: ${a} in the file, ${want} in ${this.m.dir}`, { file: p, field: k });
    }
    if (dv.getUint32(12, true) !== this.recordBytes) throw new ModelError(`record size ${dv.getUint32(12, true)} != ${this.recordBytes}`, { file: p, field: "record bytes", offset: 12 });
    const count = Number(dv.getBigUint64(COUNT_AT, true));
    // only complete records count; an uncommitted tail (killed before the count was written) is cut
    const n = Math.min(count, Math.floor((size - HEADER_BYTES) / this.recordBytes));
    const tok = new Uint8Array(4), tv = new DataView(tok.buffer);
    for (let i = 0; i < n; i++) {
      readSync(this.fd, tok, 0, 4, HEADER_BYTES + i * this.recordBytes);
      this.tokens.push(tv.getUint32(0, true));
    }
    if (n !== count) this.writeCount(n);
    if (size > HEADER_BYTES + n * this.recordBytes) ftruncateSync(this.fd, HEADER_BYTES + n * this.recordBytes);
  }

  private writeCount(n: number): void {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigUint64(0, BigInt(n), true);
    writeSync(this.fd, b, 0, 8, COUNT_AT);
    if (this.durable) fdatasyncSync(this.fd);
  }

  /**
   * Make the file hold the Session's history: keep the common prefix, append the rest (data, sync,
   * then count). Returns the records written.
   */
  persist(s: Session): number {
    if (s.m !== this.m && modelShape(s.m).weights !== this.shape.weights) throw new Error(`${this.path}: persist from another model`);
    const T = s.tokens.length;
    let n = 0;
    const lim = Math.min(this.tokens.length, T);
    while (n < lim && this.tokens[n] === s.tokens[n]) n++;
    if (n < this.tokens.length) { this.writeCount(n); this.tokens.length = n; }
    if (T === n) return 0;
    const R = this.recordBytes, sh = this.shape, D = sh.hidden_size, W = sh.kv_lora_rank + sh.qk_rope_head_dim;
    const hw = sh.index_head_dim, idx = new Set(sh.indexed_layers);
    const buf = new Uint8Array((T - n) * R), dv = new DataView(buf.buffer);
    const f = new Float32Array(buf.buffer);
    for (let t = n; t < T; t++) {
      const o = (t - n) * R;
      let fo = (o + 8) / 4;
      for (let i = 0; i < sh.num_hidden_layers; i++) {
        f.set(s.kv.kv[i].subarray(t * W, (t + 1) * W), fo); fo += W;
        if (idx.has(i)) { f.set(s.kv.ik[i]!.subarray(t * hw, (t + 1) * hw), fo); fo += hw; }
      }
      if (sh.hidden_rows) { f.set(s.hidden.subarray(t * D, (t + 1) * D), fo); fo += D; }
      dv.setUint32(o, s.tokens[t], true);
      dv.setUint32(o + 4, Bun.hash.crc32(buf.subarray(o + 8, o + R)), true);
    }
    writeSync(this.fd, buf, 0, buf.length, HEADER_BYTES + n * R);
    if (this.durable) fdatasyncSync(this.fd);
    this.writeCount(T);
    for (let t = n; t < T; t++) this.tokens.push(s.tokens[t]);
    return T - n;
  }

  /**
   * A Session holding the committed records (rows straight into its KVCache; no forward). A record
   * failing its CRC ends the load there (the count is cut to match).
   */
  load(opts: ForwardOpts = {}): Session {
    const s = new Session(this.m, opts), sh = this.shape, R = this.recordBytes, D = sh.hidden_size;
    const W = sh.kv_lora_rank + sh.qk_rope_head_dim, hw = sh.index_head_dim, idx = new Set(sh.indexed_layers);
    const N = this.count;
    s.kv.reserve(N);
    const hidden = sh.hidden_rows ? new Float32Array(N * D) : null;
    const CH = Math.max(1, Math.floor((8 << 20) / R)); // records per read (~8 MiB)
    const buf = new Uint8Array(Math.min(N, CH) * R), f = new Float32Array(buf.buffer), dv = new DataView(buf.buffer);
    let ok = N;
    outer: for (let c0 = 0; c0 < N; c0 += CH) {
      const nr = Math.min(CH, N - c0);
      const got = readSync(this.fd, buf, 0, nr * R, HEADER_BYTES + c0 * R);
      for (let j = 0; j < nr; j++) {
        const t = c0 + j, o = j * R;
        if ((j + 1) * R > got || dv.getUint32(o, true) !== this.tokens[t] || Bun.hash.crc32(buf.subarray(o + 8, o + R)) !== dv.getUint32(o + 4, true)) {
          ok = t;
          break outer;
        }
        let fo = (o + 8) / 4;
        for (let i = 0; i < sh.num_hidden_layers; i++) {
          s.kv.kv[i].set(f.subarray(fo, fo + W), t * W); fo += W;
          if (idx.has(i)) { s.kv.ik[i]!.set(f.subarray(fo, fo + hw), t * hw); fo += hw; }
        }
        if (hidden) hidden.set(f.subarray(fo, fo + D), t * D);
      }
    }
    if (ok < N) { this.writeCount(ok); this.tokens.length = ok; }
    s.kv.len = ok;
    s.kv.wrote(0);
    s.adopt(this.tokens.slice(0, ok), hidden);
    return s;
  }
}
