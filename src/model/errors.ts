// ModelError: the one error type for bad model inputs (weights, index, config), plus the hostile-JSON
// helpers shared by the safetensors header, the shard index and config.json. Holds no state.
// The message names where the problem is — `file: tensor "x": field: what (at offset N)` — and the
// same parts are kept as fields so the CLI can map it to exit code 2 and tests can check them.
import * as fs from "node:fs";
import type { ZodError } from "zod";

export interface ModelErrorWhere {
  file?: string;
  tensor?: string;
  field?: string;
  offset?: number;
}

export class ModelError extends Error {
  file?: string;
  tensor?: string;
  field?: string;
  offset?: number;
  /** the bare problem, without the location prefix */
  detail: string;

  constructor(detail: string, where: ModelErrorWhere = {}, options?: { cause?: unknown }) {
    const parts: string[] = [];
    if (where.file !== undefined) parts.push(where.file);
    if (where.tensor !== undefined) parts.push(`tensor ${JSON.stringify(where.tensor)}`);
    if (where.field !== undefined && where.field !== "") parts.push(where.field);
    let msg = [...parts, detail].join(": ");
    if (where.offset !== undefined) msg += ` (at offset ${where.offset})`;
    super(msg, options);
    this.name = "ModelError";
    this.detail = detail;
    this.file = where.file;
    this.tensor = where.tensor;
    this.field = where.field;
    this.offset = where.offset;
  }
}

/** A value for messages: strings quoted, everything else short. */
export function show(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v.length > 60 ? v.slice(0, 60) + "…" : v);
  if (v === undefined) return "nothing";
  if (Array.isArray(v)) return `array[${v.length}]`;
  if (v !== null && typeof v === "object") return "object";
  return String(v);
}

/** Key path `a.b[2].c` of a zod issue path. */
export function keyPath(path: readonly PropertyKey[]): string {
  let s = "";
  for (const p of path) {
    if (typeof p === "number") s += `[${p}]`;
    else s += s === "" ? String(p) : `.${String(p)}`;
  }
  return s;
}

/** Wrap a ZodError: field = key path of the first issue (prefix + path); the message lists up to 4 issues. */
export function fromZod(err: ZodError, where: ModelErrorWhere, prefix: readonly PropertyKey[] = []): ModelError {
  const seen = new Set<string>(); // one issue per key path
  const issues = err.issues.filter((i) => { const k = keyPath(i.path); return !seen.has(k) && !!seen.add(k); });
  const first = issues[0];
  const field = first ? keyPath([...prefix, ...first.path]) : keyPath(prefix);
  let detail = first ? first.message : "invalid";
  const rest = issues.slice(1, 4).map((i) => `${keyPath([...prefix, ...i.path]) || "(root)"}: ${i.message}`);
  if (rest.length) detail += `; also ${rest.join("; ")}${issues.length > 4 ? `; +${issues.length - 4} more` : ""}`;
  return new ModelError(detail, { ...where, field: field || where.field });
}

// ---- hostile JSON ----------------------------------------------------------------------------

/**
 * First duplicate object key anywhere in (already valid) JSON text, as the key path from the root
 * (JSON.parse silently keeps the last duplicate). Null when every object's keys are unique.
 */
export function findDuplicateKey(text: string): string[] | null {
  interface Frame { obj: boolean; keys: Set<string>; expectKey: boolean; key: string }
  const stack: Frame[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const top = stack[stack.length - 1];
    if (c === 34) { // '"': jump to the closing quote (one preceded by an even run of backslashes)
      let j = i;
      for (;;) {
        j = text.indexOf('"', j + 1);
        if (j < 0) return null; // unterminated: not valid JSON, the parser reports it
        let b = 0;
        while (text.charCodeAt(j - 1 - b) === 92) b++;
        if (b % 2 === 0) break;
      }
      if (top && top.obj && top.expectKey) {
        const rawKey = text.slice(i, j + 1);
        const key = rawKey.includes("\\") ? (JSON.parse(rawKey) as string) : rawKey.slice(1, -1);
        if (top.keys.has(key)) return [...stack.slice(0, -1).filter((f) => f.obj).map((f) => f.key), key];
        top.keys.add(key);
        top.key = key;
        top.expectKey = false;
      }
      i = j;
    } else if (c === 123 || c === 91) {
      if (top) top.expectKey = false;
      stack.push({ obj: c === 123, keys: new Set(), expectKey: c === 123, key: "" });
    } else if (c === 125 || c === 93) stack.pop();
    else if (c === 44 && top?.obj) top.expectKey = true;
  }
  return null;
}

/** The text of regular file `file`, at most maxBytes: a FIFO or device is refused, not waited on (opened without
 *  blocking, judged by fstat), and a file that grows meanwhile is read to the size it had. Errors name the file. */
export function readModelFile(file: string, maxBytes: number): string {
  try {
    const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    try {
      const st = fs.fstatSync(fd);
      if (!st.isFile()) throw new ModelError("not a regular file", { file });
      if (st.size > maxBytes) throw new ModelError(`file is ${st.size} bytes, over the ${maxBytes}-byte limit`, { file });
      const b = Buffer.allocUnsafe(st.size);
      let n = 0;
      for (let r; n < b.length && (r = fs.readSync(fd, b, n, b.length - n, n)) > 0;) n += r;
      return b.toString("utf8", 0, n);
    } finally { fs.closeSync(fd); }
  } catch (e) {
    if (e instanceof ModelError) throw e;
    throw new ModelError(`cannot read: ${(e as Error).message}`, { file }, { cause: e });
  }
}

/** A model file holding one JSON object (tokenizer.json, tokenizer_config.json, chat_template.json), read by
 *  readModelFile and parsed; errors name the file. */
export function readJsonObject(file: string, maxBytes: number): Record<string, unknown> {
  const text = readModelFile(file, maxBytes);
  let v: unknown;
  try { v = JSON.parse(text); } catch (e) { throw new ModelError(`not valid JSON (${(e as Error).message})`, { file }); }
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new ModelError("not a JSON object", { file });
  return v as Record<string, unknown>;
}

/** Read and parse a small JSON file (size-capped; duplicate keys rejected). Errors name the file. */
export function readJsonFile(file: string, maxBytes: number): unknown {
  const text = readModelFile(file, maxBytes);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new ModelError(`not valid JSON (${(e as Error).message})`, { file, field: "json" });
  }
  const dup = findDuplicateKey(text);
  if (dup) throw new ModelError(`duplicate key ${JSON.stringify(dup[dup.length - 1])}`, { file, field: dup.join(".") });
  return raw;
}
