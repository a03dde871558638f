// The engine worker's side of POST /slots/{id} (the HTTP side: src/server/slot-files.ts): a slot's KV cache saved to
// DIR/<filename> in the KV-file format of `generate --state` (kvfile.ts), read back into any idle slot, or emptied.
// A save never loses the last good file: a fresh temporary file in DIR (O_CREAT | O_EXCL | O_NOFOLLOW: never through a
// planted link), fsync'd, renamed over the name (a link there is replaced, not followed), DIR fsync'd; a restore opens
// with O_NOFOLLOW, read-only, and KvFile.restore checks the count against the slot's context and the file's size before
// reading. Errors name the file as the client did, never the server's path. No state.
import { closeSync, constants as C, fstatSync, fsyncSync, lstatSync, openSync, renameSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { KvFile } from "../kvfile.ts";
import { modelShape, RecordLayout } from "../kvfile-format.ts";
import type { Model } from "../model.ts";
import type { Session } from "../session.ts";
import { ModelError } from "../../model/errors.ts";
import type { Call } from "./protocol.ts";

/** A slot call's outcome, as the HTTP side answers it: 200 and the body, or the error's status, message and field. */
export type SlotReply = { status: 200; body: unknown } | { status: number; message: string; param: string | null };

/** Worker side: the action on slot `c.id` (its session and whether a request holds it), as an HTTP status and body. */
export function slotCall(c: Extract<Call, { op: "slot" }>, m: Model, slots: readonly { sess: Session; busy: boolean }[], dir: string | undefined, ctx: number): SlotReply {
  const err = (status: number, message: string, param: string | null = null): SlotReply => ({ status, message, param });
  if (!dir) return err(400, "slot files are off: start the server with --slot-save-path DIR");
  const s = slots[c.id];
  if (!s) return err(400, `slot ${c.id} is outside [0, ${slots.length})`, "id_slot");
  if (s.busy) return err(409, `slot ${c.id} is busy with a request`, "id_slot");
  const t0 = performance.now(), ms = () => Math.round((performance.now() - t0) * 1000) / 1000;
  if (c.action === "erase") {
    const n = s.sess.tokens.length;
    s.sess.truncate(0);
    s.sess.kv.truncate(0);
    return { status: 200, body: { id_slot: c.id, n_erased: n } };
  }
  const name = c.filename!, path = join(dir, name), dtype = s.sess.kv.dtype;
  const kind = (() => { try { const st = lstatSync(path); return st.isFile() ? "file" : st.isSymbolicLink() ? "link" : "other"; } catch { return "none"; } })();
  if (c.action === "save") {
    if (kind === "other") return err(400, `${name} in the slot save path is a directory or another non-file; choose another name`, "filename");
    let n: number;
    try { n = saveWhole(dir, name, (fd) => KvFile.writeWhole(fd, name, m, s.sess, { dtype })); } catch (e) { return err(500, (e as Error).message); }
    return { status: 200, body: { id_slot: c.id, filename: name, n_saved: n, n_written: n * new RecordLayout(modelShape(m, dtype)).bytes, timings: { save_ms: ms() } } };
  }
  if (kind === "none") return err(404, `no slot file ${name} in the slot save path`, "filename");
  if (kind !== "file") return err(400, `${name} is not a regular file (a link or a directory): refused`, "filename");
  let f: KvFile;
  try {
    const fd = openSync(path, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
    if (!fstatSync(fd).isFile()) { closeSync(fd); return err(400, `${name} is not a regular file: refused`, "filename"); }
    f = KvFile.restore(fd, name, m, ctx, { dtype });
  } catch (e) { return err(400, refusal(name, e), "filename"); }
  try {
    const n = f.loadInto(s.sess);
    return { status: 200, body: { id_slot: c.id, filename: name, n_restored: n, n_read: n * f.recordBytes, timings: { restore_ms: ms() } } };
  } catch (e) { return err(400, refusal(name, e), "filename"); } finally { f.close(); }
}

/** An error's message for the client: ModelErrors name the file as the client did; system errors lose their paths. */
function refusal(name: string, e: unknown): string {
  if (e instanceof ModelError) return e.message;
  const code = (e as NodeJS.ErrnoException).code;
  return `${name}: ${code === "ELOOP" ? "is a symbolic link: refused" : code ?? "cannot be read"}`;
}

/** Write DIR/name whole through `write(fd)` on a fresh temporary file (O_EXCL | O_NOFOLLOW), fsync'd, renamed over
 *  the name, DIR fsync'd: the old file stays whole until the new one is. Returns write's result. */
function saveWhole(dir: string, name: string, write: (fd: number) => number): number {
  const tmp = join(dir, `.${name}.${process.pid}.${Math.random().toString(36).slice(2, 10)}.tmp`); // (no client name starts with '.')
  const fd = openSync(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
  let done = false;
  try {
    const n = write(fd);
    closeSync(fd);
    done = true;
    renameSync(tmp, join(dir, name));
    const d = openSync(dir, "r");
    try { fsyncSync(d); } finally { closeSync(d); }
    return n;
  } catch (e) {
    if (!done) closeSync(fd);
    try { unlinkSync(tmp); } catch { /* renamed, or never made */ }
    throw new Error(`${name}: the save failed (${(e as NodeJS.ErrnoException).code ?? (e as Error).message.split(":")[0]}); the previous file, if any, is kept`);
  }
}
