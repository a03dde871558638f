// POST /slots/{id}?action=save|restore|erase (llama-server's slot persistence, with --slot-save-path DIR): the HTTP
// side. It validates the request (a plain file name: the file stays inside DIR) and asks the engine worker, which does
// the work between two scheduler steps on an idle slot (slot-call.ts: the save, the restore, the erase). No state.
import { z } from "zod";
import type { EngineClient } from "./engine-client.ts";
import { apiError, errorResponse, type ApiError } from "./http-errors.ts";
import { notReadyError, readRequest, type RouteOptions } from "./routes-common.ts";
import type { SlotReply } from "../engine/serving/slot-call.ts";

/** a plain file name: no folders, not hidden, no "..": the file stays inside --slot-save-path */
const FILENAME = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;
const SlotFileRequest = z.object({ filename: z.string().regex(FILENAME, "a plain file name: letters, digits, '.', '_', '-'; not starting with '.' or '-'") });
const ACTIONS = ["save", "restore", "erase"] as const;

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
  return bad(apiError(v.status, v.message, v.param, v.status === 409 ? "slot_busy" : v.status === 404 ? "not_found" : v.status >= 500 ? "internal_error" : "invalid_value"));
}
