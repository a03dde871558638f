// The Responses API's stored responses, in memory: the most recent STORE_MAX of them, each with the conversation it
// ended (the turns its input rendered as — after those of the response it continued — then its output as an
// assistant turn; instructions are not carried over, as in OpenAI's API), so a request naming it as
// previous_response_id goes on from there, and GET /v1/responses/{id} returns it. Nothing reaches the disk.
// State: the map of id -> entry (insertion order = age; the oldest goes first).
import type { ChatRequest } from "./schemas.ts";

export type Turn = ChatRequest["messages"][number];
export interface Stored { turns: Turn[]; response: object }

export const STORE_MAX = 256;

export class ResponseStore {
  private readonly m = new Map<string, Stored>();

  get(id: string): Stored | undefined {
    return this.m.get(id);
  }

  put(id: string, s: Stored): void {
    this.m.set(id, s);
    while (this.m.size > STORE_MAX) this.m.delete(this.m.keys().next().value!);
  }

  delete(id: string): boolean {
    return this.m.delete(id);
  }
}
