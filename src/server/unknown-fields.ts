// Unknown top-level fields of request bodies: accepted and ignored (as vLLM does by default: SDKs send extras), and
// named on stderr once per field name for the life of the server ("ignoring unknown field 'foo' in
// /v1/chat/completions"). At most MAX_NAMES names are remembered, so clients cannot grow the set; past them one line
// says that no more are named. State: the names seen.
import type { z } from "zod";

export const MAX_NAMES = 64;
const NAME_CHARS = 64;

/** The top-level keys an object schema knows (through a pipe's input), or null when it is not an object schema. */
export function knownKeys(schema: z.ZodType): ReadonlySet<string> | null {
  const s = schema as unknown as { shape?: Record<string, unknown>; _zod?: { def?: { type?: string; in?: z.ZodType } } };
  if (s.shape) return new Set(Object.keys(s.shape));
  const d = s._zod?.def;
  return d?.type === "pipe" && d.in ? knownKeys(d.in) : null;
}

export class UnknownFields {
  private readonly seen = new Set<string>();
  private readonly keys = new WeakMap<z.ZodType, ReadonlySet<string> | null>();
  private full = false;

  constructor(private readonly log: (line: string) => void) {}

  /** Name the fields of `body` (a parsed JSON body) that `schema` does not know, each the first time it is seen. */
  note(route: string, body: unknown, schema: z.ZodType): void {
    if (typeof body !== "object" || body === null || Array.isArray(body) || this.full) return;
    let known = this.keys.get(schema);
    if (known === undefined) this.keys.set(schema, known = knownKeys(schema));
    if (!known) return;
    for (const k of Object.keys(body)) {
      if (known.has(k)) continue;
      // (remembered and shown cut to NAME_CHARS printable characters: a key of megabytes is neither kept nor logged)
      const name = k.slice(0, NAME_CHARS).replace(/[^\x20-\x7e]|'/g, "?") + (k.length > NAME_CHARS ? "…" : "");
      if (this.seen.has(name)) continue;
      if (this.seen.size >= MAX_NAMES) {
        this.full = true;
        this.log(`${MAX_NAMES} unknown request fields named; more are ignored without a word`);
        return;
      }
      this.seen.add(name);
      this.log(`ignoring unknown field '${name}' in ${route}`);
    }
  }
}
