// The shape of one forward batch: contiguous runs of rows (segments), each appending tokens to one
// conversation's KV state at its own positions. A ragged decode batch is many 1-row segments.
import type { KVCache } from "./kv.ts";

export interface Segment {
  kv: KVCache;   // the conversation's cache for the layers this forward runs
  r0: number;    // first batch row of the segment
  n: number;     // rows (new tokens)
  pos0: number;  // absolute position of the first row (== rows already in the cache it keeps)
  allLogits?: boolean; // logits "last": every row of this segment gets logits, not only its last (draft verification)
  noLogits?: boolean;  // logits "last": none for this segment (a prompt chunk before its last, an embedding's prompt)
}

/** DSA debug hook: the key set chosen for the query at `pos` of a full layer. */
export type SelectHook = (layer: number, pos: number, keys: Int32Array) => void;
