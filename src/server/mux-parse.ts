// Incremental parser of mux client frames (shared/spec/mux.md): bytes in, frame events out; no I/O, no engine. Fatal
// (BAD_FRAME, no resync): an unknown command, a SUBMIT short of 7 fields or with an unreadable `<bytes>` /
// `grammar=<bytes>`, a missing `\n` after a block, an over-long header, a stream ending inside a frame. Any other bad
// field is a `reject` (ERROR <id> BAD_REQUEST <field>) once its payload is drained. parseIdList reads `ids=1` in one
// linear pass. State: the header bytes being collected, the SUBMIT being read (or drained), its blocks, `dead`.

export const MAX_PAYLOAD = 16 * 1024 * 1024;
export const MAX_HEADER = 4096;

export interface SubmitFrame {
  kind: "submit";
  id: string;               // canonical decimal u64 > 0
  slot: number | "auto";
  max_tokens: number;
  temperature: number;
  top_p: number;
  ids: boolean;             // payload is comma-separated token ids
  chat: boolean;            // payload is a JSON messages array
  logprobs?: number;        // 0..20
  seed?: number;
  min_p?: number;
  payload: Uint8Array;
  grammar?: Uint8Array;     // the GBNF block of grammar=<bytes>
}
export type MuxEvent =
  | SubmitFrame
  | { kind: "stop" | "cancel"; id: string }
  | { kind: "reject"; id: string; field: string; detail: string } // id "0" when it had no valid id
  | { kind: "bad_frame"; detail: string }
  | { kind: "busy"; detail: string };  // (not the parser's: the server's body budget, mux-http.ts)

const U64_MAX = (1n << 64n) - 1n;
const RE_ID = /^[1-9][0-9]{0,19}$/;
const RE_UINT = /^[0-9]{1,16}$/;
const RE_NUM = /^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,3})?$/;
const KEYS = new Set(["ids", "chat", "logprobs", "seed", "min_p", "grammar"]);

export function parseId(s: string): string | null {
  return RE_ID.test(s) && BigInt(s) <= U64_MAX ? s : null;
}
function uint(s: string): number | null {
  return RE_UINT.test(s) && Number.isSafeInteger(Number(s)) ? Number(s) : null;
}
function num(s: string): number | null {
  return RE_NUM.test(s) && Number.isFinite(Number(s)) ? Number(s) : null;
}

class Reject extends Error {
  constructor(readonly field: string, readonly detail: string) { super(detail); }
}

/** A parsed SUBMIT header: the byte blocks that follow it and the event it becomes once read. */
interface Pending {
  blocks: number[];                    // payload bytes, then grammar bytes when present
  make: (blocks: Uint8Array[]) => MuxEvent;
  keep: boolean;                       // store the blocks (false: drain them)
}

export class MuxParser {
  private hdr = new Uint8Array(MAX_HEADER + 1);
  private hdrLen = 0;
  private pending: Pending | null = null;
  private block = 0;                   // index into pending.blocks
  private got = 0;                     // bytes of the current block read so far
  private buf: Uint8Array | null = null;
  private wantNl = false;              // the `\n` after the current block is next
  private read: Uint8Array[] = [];     // blocks of the pending SUBMIT read so far (kept ones)
  dead = false;

  /** Bytes kept of the SUBMIT being read (its blocks so far). */
  get held(): number {
    return this.read.reduce((n, b) => n + b.length, 0) + (this.buf ? this.got : 0);
  }

  /** Feed bytes; returns the complete frames they finish, in order. */
  push(chunk: Uint8Array): MuxEvent[] {
    const out: MuxEvent[] = [];
    let i = 0;
    while (i < chunk.length && !this.dead) {
      const p = this.pending;
      if (!p) {
        const nl = chunk.indexOf(10, i);
        const end = nl < 0 ? chunk.length : nl;
        if (this.hdrLen + end - i > MAX_HEADER) { this.fail(out, `header line longer than ${MAX_HEADER} bytes`); break; }
        this.hdr.set(chunk.subarray(i, end), this.hdrLen);
        this.hdrLen += end - i;
        i = end;
        if (nl < 0) break;
        i++;
        const line = new TextDecoder("latin1").decode(this.hdr.subarray(0, this.hdrLen));
        this.hdrLen = 0;
        this.header(line, out);
      } else if (this.wantNl) {
        if (chunk[i] !== 10) { this.fail(out, `expected "\\n" after a ${p.blocks[this.block]}-byte block`); break; }
        i++;
        this.wantNl = false;
        this.read.push(this.buf ?? new Uint8Array(0));
        this.block++;
        this.startBlock(out);
      } else {
        const need = p.blocks[this.block] - this.got, take = Math.min(need, chunk.length - i);
        if (this.buf) this.buf.set(chunk.subarray(i, i + take), this.got);
        this.got += take;
        i += take;
        if (this.got === p.blocks[this.block]) this.wantNl = true;
      }
    }
    return out;
  }

  /** The input ended: a frame left incomplete is a BAD_FRAME. */
  end(): MuxEvent[] {
    if (this.dead || (!this.pending && this.hdrLen === 0)) return [];
    const out: MuxEvent[] = [];
    this.fail(out, "stream ended inside a frame");
    return out;
  }

  private fail(out: MuxEvent[], detail: string): void {
    out.push({ kind: "bad_frame", detail });
    this.dead = true;
    this.pending = null;
    this.buf = null;
    this.read = [];
  }

  /** Set up reading block `this.block` of the pending SUBMIT, or emit it when all are read. */
  private startBlock(out: MuxEvent[]): void {
    const p = this.pending!;
    if (this.block === p.blocks.length) {
      out.push(p.make(this.read));
      this.pending = null;
      this.buf = null;
      this.read = [];
      return;
    }
    this.got = 0;
    this.buf = p.keep ? new Uint8Array(p.blocks[this.block]) : null;
    if (p.blocks[this.block] === 0) this.wantNl = true;
  }

  private header(line: string, out: MuxEvent[]): void {
    const f = line.split(" ").filter((s) => s !== "");
    const cmd = f[0] ?? "";
    if (cmd === "STOP" || cmd === "CANCEL") {
      if (f.length !== 2) return this.fail(out, `${cmd} takes exactly one id`);
      const id = parseId(f[1]);
      out.push(id ? { kind: cmd === "STOP" ? "stop" : "cancel", id } : { kind: "reject", id: "0", field: "id", detail: "must be a decimal u64 > 0" });
      return;
    }
    if (cmd !== "SUBMIT") return this.fail(out, cmd === "" ? "empty header line" : `unknown command ${JSON.stringify(cmd.slice(0, 32))}`);
    if (f.length < 7) return this.fail(out, "SUBMIT needs <id> <slot> <bytes> <max_tokens> <temperature> <top_p>");
    const bytes = uint(f[3]);
    if (bytes === null) return this.fail(out, "bytes is not a decimal byte count");
    if (bytes > MAX_PAYLOAD) return this.fail(out, `bytes ${bytes} > ${MAX_PAYLOAD}`);
    const blocks = [bytes];
    // The grammar block is part of the framing: find it before judging any other field.
    for (const kv of f.slice(7)) {
      if (!kv.startsWith("grammar=")) continue;
      const g = uint(kv.slice(8));
      if (g === null || g > MAX_PAYLOAD) return this.fail(out, "grammar=<bytes> is not a byte count ≤ 16 MiB");
      if (blocks.length === 1) blocks.push(g);
    }
    let ev: MuxEvent;
    try {
      ev = submitFields(f);
    } catch (e) {
      if (!(e instanceof Reject)) throw e;
      const id = parseId(f[1]) ?? "0";
      ev = { kind: "reject", id, field: e.field, detail: e.detail };
    }
    const keep = ev.kind === "submit";
    const make = (b: Uint8Array[]): MuxEvent => (ev.kind !== "submit" ? ev : b.length > 1 ? { ...ev, payload: b[0], grammar: b[1] } : { ...ev, payload: b[0] });
    this.pending = { blocks, keep, make };
    this.block = 0;
    this.read = [];
    this.startBlock(out);
  }
}

/** Validate the fields of a SUBMIT header (framing already known good). Throws Reject naming the field. */
function submitFields(f: string[]): SubmitFrame {
  const id = parseId(f[1]);
  if (!id) throw new Reject("id", "must be a decimal u64 > 0");
  let slot: number | "auto" = "auto";
  if (f[2] !== "auto") {
    const s = uint(f[2]);
    if (s === null) throw new Reject("slot", "must be a decimal index or auto");
    slot = s;
  }
  const max_tokens = uint(f[4]);
  if (max_tokens === null || max_tokens < 1) throw new Reject("max_tokens", "must be an integer ≥ 1");
  const temperature = num(f[5]);
  if (temperature === null || temperature > 2) throw new Reject("temperature", "must be in [0, 2]");
  const top_p = num(f[6]);
  if (top_p === null || top_p <= 0 || top_p > 1) throw new Reject("top_p", "must be in (0, 1]");
  const fr: SubmitFrame = { kind: "submit", id, slot, max_tokens, temperature, top_p, ids: false, chat: false, payload: new Uint8Array(0) };
  const seen = new Set<string>();
  for (const kv of f.slice(7)) {
    const eq = kv.indexOf("=");
    const key = eq < 0 ? kv : kv.slice(0, eq), v = eq < 0 ? "" : kv.slice(eq + 1);
    const field = key.slice(0, 32);
    if (!KEYS.has(key)) throw new Reject(field, "is an unknown key");
    if (seen.has(key)) throw new Reject(field, "is given twice");
    seen.add(key);
    if (key === "ids" || key === "chat") {
      if (v !== "0" && v !== "1") throw new Reject(key, "must be 0 or 1");
      fr[key] = v === "1";
    } else if (key === "logprobs") {
      const k = uint(v);
      if (k === null || k > 20) throw new Reject(key, "must be an integer in [0, 20]");
      fr.logprobs = k;
    } else if (key === "seed") {
      const s = uint(v);
      if (s === null) throw new Reject(key, "must be a non-negative integer");
      fr.seed = s;
    } else if (key === "min_p") {
      const x = num(v);
      if (x === null || x > 1) throw new Reject(key, "must be in [0, 1]");
      fr.min_p = x;
    }
    // grammar=<bytes>: its size was read with the framing; the block is attached once read
  }
  if (fr.ids && fr.chat) throw new Reject("chat", "excludes ids=1");
  return fr;
}

const isSpace = (c: number): boolean => c === 32 || (c >= 9 && c <= 13); // ASCII whitespace

function byteName(b: Uint8Array, i: number): string {
  if (i >= b.length) return "the end";
  const c = b[i];
  return c >= 33 && c <= 126 ? JSON.stringify(String.fromCharCode(c)) : `0x${c.toString(16).padStart(2, "0")}`;
}

/**
 * The token ids of an `ids=1` payload: decimal ids separated by commas, ASCII whitespace around each. One pass over
 * the bytes (any size up to the frame limit); a bad payload gives a reason naming the offset of its first bad byte.
 * Ids are not range-checked here (the worker refuses ids outside the vocabulary).
 */
export function parseIdList(b: Uint8Array): number[] | string {
  const ids: number[] = [];
  let i = 0;
  for (;;) {
    while (i < b.length && isSpace(b[i])) i++;
    const start = i;
    let v = 0;
    while (i < b.length && b[i] >= 48 && b[i] <= 57) v = v * 10 + (b[i++] - 48);
    if (i === start) return `ids=1 expects comma-separated token ids: byte ${i} is ${byteName(b, i)}, not a digit`;
    ids.push(v);
    while (i < b.length && isSpace(b[i])) i++;
    if (i === b.length) return ids;
    if (b[i] !== 44) return `ids=1 expects comma-separated token ids: byte ${i} is ${byteName(b, i)}, not ","`;
    i++;
  }
}
