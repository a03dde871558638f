// KV persistence of one slot (`<state dir>/slot-N.kv`, format in kvfile-format.ts): a conversation's cache on
// disk, so a restart resumes it without re-prefilling. MTP state is NOT stored: the hidden rows let
// Session.mtpSync re-derive the MTP cache in one batched MTP-layer forward at the first draft after a load.
// Crash safety: records are appended and synced before `count` is rewritten (see persist). Slot files of the
// server (slot-call.ts) are whole files instead: `writeWhole` / `restore`.
// State: the open file, its committed record count and tokens.
import { closeSync, existsSync, fdatasyncSync, fstatSync, fsyncSync, ftruncateSync, openSync, readSync, renameSync, writeSync } from "node:fs";
import { join } from "node:path";
import type { ForwardOpts } from "./forward.ts";
import { checkHeader, encodeHeader, HEADER, modelShape, RECORD, RecordLayout, type Shape } from "./kvfile-format.ts";
import { newKV, type Model } from "./model.ts";
import { ModelError } from "../model/errors.ts";
import type { KvDtype } from "../native/hb.ts";
import { Session } from "./session.ts";

export { KV_VERSION, modelShape } from "./kvfile-format.ts";

export const slotPath = (dir: string, slot: number) => join(dir, `slot-${slot}.kv`);

export interface KvFileOpts {
  /** fdatasync after data and after the count (default true) */ durable?: boolean;
  /** the cache dtype the records hold (the sessions' KVCache.dtype; default f32) */ dtype?: KvDtype;
}

const bad = (file: string, detail: string, field?: string) => new ModelError(detail, { file, ...(field ? { field } : {}) });

export class KvFile {
  /** tokens of the committed records */
  readonly tokens: number[] = [];
  readonly recordBytes: number;
  private readonly shape: Shape;
  private readonly rec: RecordLayout;
  private readonly durable: boolean;
  /** restore's bound on the records (the context), read-only and strict; null: a `generate --state` file, repaired */
  private readonly maxCount: number | null = null;

  private constructor(readonly path: string, private fd: number, readonly m: Model, o: KvFileOpts, maxCount: number | null = null) {
    this.maxCount = maxCount;
    this.shape = modelShape(m, o.dtype);
    this.rec = new RecordLayout(this.shape);
    this.recordBytes = this.rec.bytes;
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

  /** A slot file to restore, opened read-only by the caller (`fd`, owned from here on; `label` names it in errors):
   *  refused unless its header matches m, it claims at most `maxCount` records, exactly as many as its size holds,
   *  and its tokens are inside the vocabulary (all checked before any record is read). Strict: nothing is
   *  repaired, and a CRC mismatch or a NaN/Inf row refuses the file. */
  static restore(fd: number, label: string, m: Model, maxCount: number, o: KvFileOpts = {}): KvFile {
    try {
      const f = new KvFile(label, fd, m, o, maxCount);
      f.readHeader();
      return f;
    } catch (e) {
      closeSync(fd);
      throw e;
    }
  }

  /** Write s's whole history as a slot file into the empty file `fd` (header with the final count, then the
   *  records, fdatasync'd); the caller closes it and renames it into place. Returns the records written. */
  static writeWhole(fd: number, label: string, m: Model, s: Session, o: KvFileOpts = {}): number {
    const f = new KvFile(label, fd, m, o), T = s.tokens.length;
    const head = encodeHeader(label, f.shape, f.recordBytes);
    new DataView(head.buffer).setBigUint64(HEADER.count, BigInt(T), true);
    writeSync(fd, head, 0, head.length, 0);
    const body = f.encode(s, 0);
    writeSync(fd, body, 0, body.length, HEADER.bytes);
    fsyncSync(fd);
    return T;
  }

  close(): void {
    if (this.fd >= 0) closeSync(this.fd);
    this.fd = -1;
  }

  private writeHeader(): void {
    const b = encodeHeader(this.path, this.shape, this.recordBytes);
    writeSync(this.fd, b, 0, b.length, 0);
    if (this.durable) fdatasyncSync(this.fd);
  }

  private readHeader(): void {
    const size = fstatSync(this.fd).size;
    const b = new Uint8Array(HEADER.bytes);
    const got = readSync(this.fd, b, 0, HEADER.bytes, 0);
    const count = checkHeader(b, got, this.path, this.shape, this.recordBytes, this.m.dir);
    if (this.maxCount !== null) return this.readStrict(count, size);
    // only complete records count; an uncommitted tail (killed before the count was written) is cut
    const n = Math.min(count, Math.floor((size - HEADER.bytes) / this.recordBytes));
    const tok = new Uint8Array(4), tv = new DataView(tok.buffer);
    for (let i = 0; i < n; i++) {
      readSync(this.fd, tok, 0, 4, HEADER.bytes + i * this.recordBytes + RECORD.token);
      this.tokens.push(tv.getUint32(0, true));
    }
    if (n !== count) this.writeCount(n);
    if (size > HEADER.bytes + n * this.recordBytes) ftruncateSync(this.fd, HEADER.bytes + n * this.recordBytes);
  }

  /** restore's header checks, all before the records are read (a sparse file of any size is refused at once) */
  private readStrict(count: number, size: number): void {
    const R = this.recordBytes, V = this.m.cfg.vocab_size;
    if (count > this.maxCount!) throw bad(this.path, `claims ${count} records, more than the context of ${this.maxCount}`, "count");
    if (HEADER.bytes + count * R !== size) throw bad(this.path, `claims ${count} records of ${R} bytes (${HEADER.bytes + count * R} bytes with the header), the file holds ${size}`, "count");
    const b = new Uint8Array(4), dv = new DataView(b.buffer);
    for (let i = 0; i < count; i++) { // (at most the context's reads of 4 bytes)
      readSync(this.fd, b, 0, 4, HEADER.bytes + i * R + RECORD.token);
      const t = dv.getUint32(0, true);
      if (t >= V) throw bad(this.path, `record ${i}: token ${t} is outside the vocabulary of ${V}`, "token");
      this.tokens.push(t);
    }
  }

  private writeCount(n: number): void {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigUint64(0, BigInt(n), true);
    writeSync(this.fd, b, 0, 8, HEADER.count);
    if (this.durable) fdatasyncSync(this.fd);
  }

  /** The records of s's positions [n, T) */
  private encode(s: Session, n: number): Uint8Array {
    const T = s.tokens.length, R = this.recordBytes, hidden = this.shape.hidden_rows ? s.hidden : null;
    if (s.kv.dtype !== this.shape.kv_dtype) throw new Error(`${this.path}: holds ${this.shape.kv_dtype} rows, the session's cache is ${s.kv.dtype}`);
    const buf = new Uint8Array((T - n) * R), dv = new DataView(buf.buffer);
    for (let t = n; t < T; t++) {
      const o = (t - n) * R;
      let fo = o + RECORD.payload;
      this.rec.rows(s.kv.kv, s.kv.ik, hidden, t, (b) => { buf.set(b, fo); fo += b.length; });
      dv.setUint32(o + RECORD.token, s.tokens[t], true);
      dv.setUint32(o + RECORD.crc, Bun.hash.crc32(buf.subarray(o + RECORD.payload, o + R)), true);
    }
    return buf;
  }

  /**
   * Make the file hold the Session's history: keep the common prefix, append the rest (data, sync,
   * then count). Returns the records written.
   * Crash safety: records are appended, fdatasync'd, and only then is `count` rewritten (8 aligned bytes in the
   * first page) and synced. kill -9 at any moment leaves a file whose count names only complete records; bytes
   * past it are ignored (and cut when the file is reopened). Shrinking (truncate/prefix change) writes the smaller
   * count first. Records within the count are checked by CRC; a bad one ends the load there.
   */
  persist(s: Session): number {
    if (s.m !== this.m && modelShape(s.m).weights !== this.shape.weights) throw new Error(`${this.path}: persist from another model`);
    const T = s.tokens.length;
    let n = 0;
    const lim = Math.min(this.tokens.length, T);
    while (n < lim && this.tokens[n] === s.tokens[n]) n++;
    if (n < this.tokens.length) { this.writeCount(n); this.tokens.length = n; }
    if (T === n) return 0;
    const buf = this.encode(s, n);
    writeSync(this.fd, buf, 0, buf.length, HEADER.bytes + n * this.recordBytes);
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
    const s = new Session(this.m, opts, { kv: newKV(this.m, 64, this.shape.kv_dtype) });
    this.loadInto(s);
    return s;
  }

  /** `load` into an existing Session (emptied first; a server's slot keeps its buffers); returns the rows loaded. */
  loadInto(s: Session): number {
    if (s.m !== this.m && modelShape(s.m).weights !== this.shape.weights) throw new Error(`${this.path}: load into another model`);
    const R = this.recordBytes, N = this.count;
    s.truncate(0);
    s.kv.truncate(0);
    s.kv.reserve(N);
    const hidden = this.shape.hidden_rows ? new Float32Array(N * this.shape.hidden_size) : null;
    const CH = Math.max(1, Math.floor((8 << 20) / R)); // records per read (~8 MiB)
    if (s.kv.dtype !== this.shape.kv_dtype) throw new Error(`${this.path}: holds ${this.shape.kv_dtype} rows, the session's cache is ${s.kv.dtype}`);
    const buf = new Uint8Array(Math.min(N, CH) * R), dv = new DataView(buf.buffer);
    let ok = N;
    outer: for (let c0 = 0; c0 < N; c0 += CH) {
      const nr = Math.min(CH, N - c0);
      const got = readSync(this.fd, buf, 0, nr * R, HEADER.bytes + c0 * R);
      for (let j = 0; j < nr; j++) {
        const t = c0 + j, o = j * R;
        if ((j + 1) * R > got || dv.getUint32(o + RECORD.token, true) !== this.tokens[t]
          || Bun.hash.crc32(buf.subarray(o + RECORD.payload, o + R)) !== dv.getUint32(o + RECORD.crc, true)) {
          ok = t;
          break outer;
        }
        let fo = o + RECORD.payload;
        this.rec.rows(s.kv.kv, s.kv.ik, hidden, t, (b) => { b.set(buf.subarray(fo, fo + b.length)); fo += b.length; });
      }
    }
    if (this.maxCount !== null) { // restore: a damaged or non-finite file is refused, the slot left empty
      const where = ok < N ? `record ${ok} fails its CRC` : this.rec.nonFinite(s.kv.kv, s.kv.ik, hidden, N);
      if (where) { s.kv.truncate(0); throw bad(this.path, `${where}: refused`, "records"); }
    }
    if (ok < N) { this.writeCount(ok); this.tokens.length = ok; }
    s.kv.len = ok;
    s.kv.wrote(0);
    s.adopt(this.tokens.slice(0, ok), hidden);
    return ok;
  }
}
