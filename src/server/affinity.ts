// Conversation affinity for balancers in front of several replicas: a request's session key (its X-Session-Id
// header, else its JSON body's `prompt_cache_key`, else its `user`) is mirrored into the response's X-Session-Id
// header, so a balancer that hashes on the header, or learns stickiness from responses, sends a conversation's later
// turns to the replica whose slots hold its KV rows. State: the JSON bodies parsed for requests (a WeakMap on the
// Request, filled by readJson; each entry goes with its request).

const bodies = new WeakMap<Request, unknown>();

/** readJson's note of a request's parsed body (the routes read it; the mirror looks into it afterwards) */
export function noteBody(req: Request, value: unknown): void {
  bodies.set(req, value);
}

/** a value fit to be a header (and a hash key): 1-255 printable ASCII characters */
const usable = (s: unknown): s is string => typeof s === "string" && s.length > 0 && s.length <= 255 && /^[\x21-\x7e]+$/.test(s);

/** The request's session key, or null: the X-Session-Id header when usable, else the body's prompt_cache_key
 *  (OpenAI's routing hint for its own prompt cache), else its user. */
export function sessionKey(req: Request): string | null {
  const h = req.headers.get("x-session-id");
  if (usable(h)) return h;
  const b = bodies.get(req);
  if (typeof b !== "object" || b === null) return null;
  const { prompt_cache_key: k, user: u } = b as { prompt_cache_key?: unknown; user?: unknown };
  return usable(k) ? k : usable(u) ? u : null;
}
