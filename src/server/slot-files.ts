// POST /slots/{id}?action=save|restore|erase (llama-server's slot persistence, with --slot-save-path DIR): a
// slot's KV cache written to DIR/<filename> in the KV-file format of `generate --state` (kvfile.ts), read back
// into any idle slot (a later request with that prefix then prefills only the rest), or emptied. The HTTP side
// validates and asks the engine worker, which does the work between two scheduler steps on an idle slot. No state.
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { KvFile } from "../engine/kvfile.ts";
import type { Model } from "../engine/model.ts";
import type { Session } from "../engine/session.ts";
import type { EngineClient } from "./engine-client.ts";
import { apiError, errorResponse, type ApiError } from "./http-errors.ts";
import type { Call } from "./protocol.ts";
import { notReadyError, readRequest, type RouteOptions } from "./routes-common.ts";

/** a plain file name: no folders, not hidden, no "..": the file stays inside --slot-save-path */
const FILENAME = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;
const SlotFileRequest = z.object({ filename: z.string().regex(FILENAME, "a plain file name: letters, digits, '.', '_', '-'; not starting with '.' or '-'") });
const ACTIONS = ["save", "restore", "erase"] as const;

type SlotReply = { status: 200; body: unknown } | { status: number; message: string; param: string | null };

/** Worker side: the action on slot `c.id` (its session and whether a request holds it), as an HTTP status and body. */
export function slotCall(c: Extract<Call, { op: "slot" }>, m: Model, slots: readonly { sess: Session; busy: boolean }[], dir: string | undefined): SlotReply {
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
  const path = join(dir, c.filename!);
  if (c.action === "save") {
    rmSync(path, { force: true }); // a save replaces the file
    const f = KvFile.open(path, m, { dtype: s.sess.kv.dtype });
    try {
      const n = f.persist(s.sess);
      return { status: 200, body: { id_slot: c.id, filename: c.filename, n_saved: n, n_written: n * f.recordBytes, timings: { save_ms: ms() } } };
    } finally { f.close(); }
  }
  if (!existsSync(path)) return err(404, `no slot file ${c.filename} in the slot save path`, "filename");
  let f: KvFile;
  try { f = KvFile.open(path, m, { dtype: s.sess.kv.dtype }); } catch (e) { return err(400, `${c.filename}: ${(e as Error).message}`, "filename"); }
  try {
    const n = f.loadInto(s.sess);
    return { status: 200, body: { id_slot: c.id, filename: c.filename, n_restored: n, n_read: n * f.recordBytes, timings: { restore_ms: ms() } } };
  } finally { f.close(); }
}

/** HTTP side of POST /slots/{id}?action=... */
export async function slotAction(req: Request, id: string, action: string | undefined, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const bad = (e: ApiError) => errorResponse(e);
  if (!/^\d{1,6}$/.test(id)) return bad(apiError(400, `slot id ${JSON.stringify(id)} is not a non-negative integer`, "id_slot", "invalid_value"));
  if (!ACTIONS.includes(action as (typeof ACTIONS)[number])) return bad(apiError(400, `action must be one of ${ACTIONS.join(", ")}`, "action", "invalid_value"));
  let filename: string | null = null;
  if (action !== "erase") {
    const r = await readRequest(req, o, SlotFileRequest, engine);
    if (!r.ok) return bad(r.error);
    filename = r.data.filename;
  }
  if (engine.state !== "ready") return bad(notReadyError(engine));
  const r = await engine.call({ op: "slot", action: action as (typeof ACTIONS)[number], id: Number(id), filename });
  if (!r.ok) return bad(apiError(500, r.detail, null, "internal_error"));
  const v = r.value as SlotReply;
  if ("body" in v) return Response.json(v.body);
  return bad(apiError(v.status, v.message, v.param, v.status === 409 ? "slot_busy" : v.status === 404 ? "not_found" : "invalid_value"));
}
