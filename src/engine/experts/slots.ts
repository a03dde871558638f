// A slot of the expert cache (a slab that holds one expert's bytes, or in mmap mode a residency
// token) and the eviction policies. A slot is EMPTY, LOADING (a job of the I/O pool fills it) or
// READY (its Mats are valid). `lock`: the current batch still needs it; `pinned`: never evicted;
// `spec`: filled by a speculative prefetch and not used yet. Working slabs are shared by the layers
// (streaming buffers for misses that do not fit the layer's cache, and prefetch targets).
import type { Mlp } from "../../model/weights.ts";

export const EMPTY = 0, LOADING = 1, READY = 2;
export type Policy = "lru" | "lfru";

export class Slot {
  e = -1;
  state = EMPTY;
  /** I/O job handle while LOADING (-1: a synchronous read on first get) */
  job = 0;
  pinned = false;
  lock = false;
  spec = false;
  /** LRU clock of the last use */
  last = 0;
  mlp: Mlp | null = null;
  /** the slab (aligned view), allocated on first load; null in mmap mode */
  buf: Uint8Array | null = null;
  /** the layer a working slab currently serves (its MoE layer index), -1 when free */
  owner = -1;
  constructor(readonly working: boolean, readonly bytes: number) {}

  /** Back to EMPTY (the caller removes it from its layer's map). */
  clear(): void {
    this.e = -1; this.state = EMPTY; this.job = 0; this.pinned = false; this.lock = false;
    this.spec = false; this.mlp = null; this.owner = -1;
  }
}

/**
 * The slot to evict for a new expert, or null: never a locked, pinned or loading slot; an empty one
 * first. LRU: the least recently used. LFRU: among the older half (by last use), the one with the
 * least heat (frequency), so a hot expert survives a burst of one-off ones.
 */
export function pickVictim(slots: readonly Slot[], policy: Policy, heat: Float64Array): Slot | null {
  const free: Slot[] = [];
  for (const s of slots) {
    if (s.lock || s.pinned || s.state === LOADING) continue;
    if (s.state === EMPTY) return s;
    free.push(s);
  }
  if (free.length === 0) return null;
  free.sort((a, b) => a.last - b.last);
  if (policy === "lru") return free[0];
  const old = free.slice(0, Math.ceil(free.length / 2));
  let best = old[0];
  for (const s of old) if (heat[s.e] < heat[best.e]) best = s;
  return best;
}
