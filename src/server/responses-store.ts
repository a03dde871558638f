// The Responses API's stored responses, in memory: the most recent of them, each with the conversation it
// ended (the turns its input rendered as — after those of the response it continued — then its output as an
// assistant turn; instructions are not carried over, as in OpenAI's API), so a request naming it as
// previous_response_id goes on from there, and GET /v1/responses/{id} returns it. Nothing reaches the disk.
// Bounded twice: at most `maxEntries` (STORE_MAX) responses and at most `maxBytes` (STORE_MAX_BYTES, 64 MiB) of
// them, each entry's size estimated once when stored as the length of its JSON (echoed tools, turns and all); the
// oldest go first, and an entry larger than the whole budget is not kept.
// State: the map of id -> entry with its estimated bytes (insertion order = age), and their sum.
import type { ChatRequest } from "./schemas.ts";

export type Turn = ChatRequest["messages"][number];
export interface Stored { turns: Turn[]; response: object }

export const STORE_MAX = 256;
export const STORE_MAX_BYTES = 64 << 20;

export interface ResponseStoreOptions {
  /** most responses kept (default STORE_MAX) */ maxEntries?: number;
  /** most bytes kept, as the sum of the entries' JSON lengths (default STORE_MAX_BYTES) */ maxBytes?: number;
}

export class ResponseStore {
  private readonly m = new Map<string, { s: Stored; bytes: number }>();
  private total = 0;
  readonly maxEntries: number;
  readonly maxBytes: number;

  constructor(o: ResponseStoreOptions = {}) {
    this.maxEntries = o.maxEntries ?? STORE_MAX;
    this.maxBytes = o.maxBytes ?? STORE_MAX_BYTES;
  }

  /** the estimated bytes held (the sum of the entries' JSON lengths) */
  get bytes(): number { return this.total; }
  get size(): number { return this.m.size; }

  get(id: string): Stored | undefined {
    return this.m.get(id)?.s;
  }

  /** Keep `s` under `id` (dropping the oldest past either cap); false when it alone exceeds maxBytes and is not kept. */
  put(id: string, s: Stored): boolean {
    this.delete(id);
    const bytes = JSON.stringify(s).length;
    if (bytes > this.maxBytes) return false;
    this.m.set(id, { s, bytes });
    this.total += bytes;
    while (this.m.size > this.maxEntries || this.total > this.maxBytes) this.delete(this.m.keys().next().value!);
    return true;
  }

  delete(id: string): boolean {
    const e = this.m.get(id);
    if (!e) return false;
    this.total -= e.bytes;
    return this.m.delete(id);
  }
}
