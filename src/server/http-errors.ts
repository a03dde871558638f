// OpenAI-shaped error responses ({"error": {message, type, param, code}}), the map from worker error
// codes to HTTP statuses, and reading a JSON body under a size limit (413) without ever throwing
// (malformed JSON → 400). No state.
import type { ErrorCode } from "../engine/serving/protocol.ts";
import { jsonBoundsError } from "./json-bounds.ts";
import { bodyDone, bodyHold, bodyRead } from "./conn-bounds.ts";
import { noteBody } from "./affinity.ts";

export interface ApiError { status: number; message: string; type: string; param: string | null; code: string | null }

const TYPES: Record<number, string> = {
  400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 409: "conflict_error",
  413: "invalid_request_error", 415: "invalid_request_error", 429: "rate_limit_error", 500: "server_error", 503: "unavailable_error",
};

export function apiError(status: number, message: string, param: string | null = null, code: string | null = null): ApiError {
  return { status, message, type: TYPES[status] ?? "invalid_request_error", param, code };
}

export function errorJson(e: ApiError) {
  return { error: { message: e.message, type: e.type, param: e.param, code: e.code } };
}

export function errorBody(e: ApiError): string {
  return JSON.stringify(errorJson(e));
}

export function errorResponse(e: ApiError): Response {
  return new Response(errorBody(e), { status: e.status, headers: { "content-type": "application/json" } });
}

/** A worker error as an API error; `promptField` is the request field that holds the prompt. */
export function fromWorker(code: ErrorCode, detail: string, promptField: string): ApiError {
  switch (code) {
    case "BAD_REQUEST": {
      // details that start with a request field name it ("slot 3 is outside ...", "grammar line 1, ...")
      const first = detail.split(" ")[0];
      if (first === "slot") return apiError(400, detail, "slot", "invalid_value");
      if (first === "reply") return apiError(400, detail, "stream", "reply_too_large"); // (gen-stream.ts: MAX_REPLY_BYTES)
      if (first === "grammar" || /^(response_format|guided_|structured_outputs|json_schema$|prompt_logprobs$|logprobs$)/.test(first)) return apiError(400, `${first}: ${detail.slice(first.length + 1)}`, first, "invalid_value");
      return apiError(400, detail, promptField, "invalid_value");
    }
    case "EMPTY_PROMPT": return apiError(400, `${promptField}: the prompt is empty (no tokens)`, promptField, "empty_prompt");
    case "CONTEXT_EXCEEDED": {
      const [n, limit, bytes, most] = detail.split(" "); // bytes, most: refused by its length (prepare.ts), n is a lower bound
      const has = bytes ? `at least ${n} tokens (${bytes} bytes, at most ${most} a token)` : `${n} tokens`;
      return apiError(400, `${promptField}: the prompt has ${has}; the context limit per slot is ${limit}`, promptField, "context_length_exceeded");
    }
    case "MAX_TOKENS_EXCEEDED": { // vLLM's words
      const [p, limit, m, field] = detail.split(" "), what = promptField === "messages" ? "messages" : "prompt";
      return apiError(400, `This model's maximum context length is ${limit} tokens. However, you requested ${Number(p) + Number(m)} tokens `
        + `(${p} in the ${what}, ${m} in the completion). Please reduce the length of the ${what} or completion (${field}).`, field, "context_length_exceeded");
    }
    case "SLOT_BUSY": return apiError(409, detail, "slot", "slot_busy");
    case "OVERLOADED": return apiError(429, `server overloaded: ${detail}`, null, "overloaded");
    case "CANCELLED": return apiError(400, "request cancelled", null, "cancelled");
    default: return apiError(500, `internal error: ${detail}`, null, "internal_error");
  }
}

/** Read and parse a JSON body of at most `limit` bytes, its bytes held against the server's budget while it is read
 *  (conn-bounds.ts: beyond it, 503). */
export async function readJson(req: Request, limit: number): Promise<{ ok: true; value: unknown } | { ok: false; error: ApiError }> {
  try { return await readJsonHeld(req, limit); } finally { bodyDone(req); }
}

async function readJsonHeld(req: Request, limit: number): Promise<{ ok: true; value: unknown } | { ok: false; error: ApiError }> {
  const len = req.headers.get("content-length");
  if (len !== null && Number(len) > limit) return { ok: false, error: tooLarge(limit) };
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    if (req.body) {
      const r = req.body.getReader();
      for (;;) {
        const { value, done } = await r.read();
        if (done) break;
        size += value.length;
        if (size > limit) { r.cancel().catch(() => {}); return { ok: false, error: tooLarge(limit) }; }
        const busy = bodyHold(req, size);
        if (busy) { r.cancel().catch(() => {}); return { ok: false, error: busy }; }
        chunks.push(value);
      }
    }
  } catch {
    return { ok: false, error: apiError(400, "could not read the request body") };
  }
  bodyRead(req); // (the wait from here on is the server's: no idle timeout)
  const bytes = new Uint8Array(size);
  let o = 0;
  for (const c of chunks) { bytes.set(c, o); o += c.length; }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return { ok: false, error: apiError(400, "the request body is not valid UTF-8", null, "invalid_json") };
  }
  if (text.trim() === "") return { ok: false, error: apiError(400, "the request body is empty; expected a JSON object", null, "invalid_json") };
  try {
    const shape = jsonBoundsError(text); // (nesting that would overflow a recursion later; values JSON.parse would take long over)
    if (shape) return { ok: false, error: shape };
    const value: unknown = JSON.parse(text);
    noteBody(req, value); // (the session key mirrored into X-Session-Id: affinity.ts)
    return { ok: true, value };
  } catch (e) {
    return { ok: false, error: apiError(400, `malformed JSON body: ${(e as Error).message}`, null, "invalid_json") };
  }
}

function tooLarge(limit: number): ApiError {
  return apiError(413, `request body larger than ${limit} bytes`, null, "body_too_large");
}
