// What keeps a browser on another site from using the server (without an API key, the default): requests whose Host
// header names no address of this server are refused (DNS rebinding: evil.example resolving to 127.0.0.1), and POST
// bodies must carry a content type a cross-site form or no-cors fetch cannot send without a CORS preflight
// (application/json; the mux stream any non-form type, e.g. application/octet-stream). No state.
import type { MiddlewareHandler } from "hono";
import { apiError, errorResponse } from "./http-errors.ts";

const LOOPBACK = ["localhost", "127.0.0.1", "::1"];
const WILDCARD = ["0.0.0.0", "::", ""];

/** The Host names answered: `allowed` (--allowed-hosts; "*": any) if given, else any when bound to every address
 *  (0.0.0.0 / ::, as vLLM answers), else the bound address and the loopback names. */
export function hostAllowList(bound: string, allowed?: string[]): Set<string> | null {
  if (allowed?.includes("*") || (!allowed && WILDCARD.includes(bound))) return null;
  return new Set([...LOOPBACK, ...(WILDCARD.includes(bound) ? [] : [bound]), ...(allowed ?? [])].map(hostName));
}

/** a Host header's (or an address's) name: lower case, no port, no IPv6 brackets; null when it does not parse */
function hostName(h: string): string {
  if (!h.includes("[") && h.split(":").length > 2) return h.toLowerCase(); // (a bare IPv6 address)
  try { return new URL(`http://${h}`).hostname.replace(/^\[|\]$/g, "").replace(/\.$/, ""); } catch { return "\0"; }
}

/** the content types of cross-site requests a browser sends without asking first (and none at all: a no-cors
 *  fetch of bytes carries no Content-Type) */
const SIMPLE = /^(text\/plain|application\/x-www-form-urlencoded|multipart\/form-data)\b/i;
const JSON_TYPE = /^application\/([\w.+-]+\+)?json\s*(;|$)/i;

export function browserGuard(hosts: Set<string> | null, boundDesc: string): MiddlewareHandler {
  return async (c, next) => {
    const host = c.req.header("host");
    if (hosts && host !== undefined && !hosts.has(hostName(host)))
      return errorResponse(apiError(403, `Host ${JSON.stringify(host)} is not an address of this server (bound to ${boundDesc}): refused against DNS rebinding; `
        + "serve --allowed-hosts NAME[,NAME…] (or '*') to answer it", null, "host_not_allowed"));
    if (c.req.method === "POST") {
      const ct = c.req.header("content-type") ?? "";
      const mux = c.req.path === "/v1/mux";
      if (mux ? ct.trim() === "" || SIMPLE.test(ct) : !JSON_TYPE.test(ct))
        return errorResponse(apiError(415, mux
          ? `Content-Type ${JSON.stringify(ct)}: the mux stream needs a non-form content type, e.g. application/octet-stream`
          : `Content-Type ${ct ? JSON.stringify(ct) : "missing"}: this route takes a JSON body (Content-Type: application/json)`, null, "unsupported_media_type"));
    }
    await next();
  };
}
