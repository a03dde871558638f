// The Responses API's stored responses, in memory only: each with the conversation it ended, so previous_response_id
// goes on from there and GET /v1/responses/{id} returns it. Bounded twice: at most `maxEntries` (STORE_MAX) and
// `maxBytes` (STORE_MAX_BYTES, 64 MiB; an entry's size is its JSON's length, estimated once); the oldest go first and
// an entry larger than the budget is not kept.
// State: the map id -> entry with its bytes (insertion order = age), and their sum.
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
