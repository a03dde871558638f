// The learning cache: which experts to pin (the hottest by usage heat, a share of the slots that grows
// with confidence in the history), pinning them into RAM at start, the live re-pin between requests
// (decayed heat, hysteresis, bounded swaps per pass) and saving the heat. State: the usage file path
// and the history's token count; the heat itself lives in each LayerCache.
import { ModelError } from "../../model/errors.ts";
import { pinShare } from "./budget.ts";
import type { LayerCache } from "./layer.ts";
import { READY, type Slot } from "./slots.ts";
import type { ExpertStore } from "./store.ts";
import { loadUsage, saveUsage, type SaveHooks, type Usage } from "./usage.ts";

/** History heat is multiplied by this when loaded (each run ages the older ones). */
export const LOAD_DECAY = 0.9;

/** The P hottest experts with heat > 0 (ties: lower id). */
export function hottest(heat: ArrayLike<number>, P: number): number[] {
  const ids = Array.from({ length: heat.length }, (_, e) => e).filter((e) => heat[e] > 0);
  ids.sort((a, b) => heat[b] - heat[a] || a - b);
  return ids.slice(0, Math.max(0, P));
}

export interface RepinOpts { decay?: number; hysteresis?: number; maxSwaps?: number }

/**
 * One re-pin pass over one layer (pure): towards the P hottest, with at most maxSwaps changes that
 * load an expert; a newcomer displaces a pinned one only if hotter by the hysteresis factor.
 */
export function repinPlan(heat: ArrayLike<number>, pinned: ReadonlySet<number>, P: number, o: RepinOpts = {}): { pin: number[]; unpin: number[] } {
  const h = o.hysteresis ?? 0.25, maxSwaps = o.maxSwaps ?? 4;
  const want = hottest(heat, P), wantSet = new Set(want);
  const unpin: number[] = [], pin: number[] = [], stay = new Set(pinned);
  let count = pinned.size;
  // cold or over the target (P shrank): unpin the coldest, free of I/O
  for (const e of [...pinned].sort((a, b) => heat[a] - heat[b] || b - a)) {
    if (heat[e] > 0 && count <= P) break;
    unpin.push(e); stay.delete(e); count--;
  }
  for (const c of want) {
    if (pin.length >= maxSwaps) break;
    if (stay.has(c)) continue;
    if (count < P) { pin.push(c); stay.add(c); count++; continue; }
    let weakest = -1;
    for (const e of stay) if (!wantSet.has(e) && (weakest < 0 || heat[e] < heat[weakest])) weakest = e;
    if (weakest < 0 || !(heat[c] > heat[weakest] * (1 + h))) continue;
    stay.delete(weakest); unpin.push(weakest);
    pin.push(c); stay.add(c);
  }
  return { pin, unpin };
}

export class Learner {
  constructor(readonly store: ExpertStore, readonly path: string | null, readonly fingerprint: string, public historyTokens: number) {}

  static open(store: ExpertStore, path: string | null, fingerprint: string, warn: (s: string) => void): Learner {
    const u = path ? loadUsage(path, fingerprint, warn) : null;
    if (u) for (const L of store.layers) {
      const h = u.layers[String(L.layer)];
      if (h && h.length === L.E) h.forEach((v, e) => { L.heat[e] = v * LOAD_DECAY; });
    }
    return new Learner(store, path, fingerprint, u ? u.tokens * LOAD_DECAY : 0);
  }

  tokens(): number { return this.historyTokens + this.store.counters.tokens; }

  /** Pin the P hottest of every layer (P from the plan), loading them in parallel. */
  pinAtStart(P: number): number {
    let n = 0;
    for (const L of this.store.layers) n += this.pin(L, hottest(L.heat, Math.min(P, L.cap)));
    return n;
  }

  /** A re-pin pass (between requests: no batch may be active). Returns the pins and unpins done. */
  repin(o: RepinOpts = {}): { pinned: number; unpinned: number } {
    const decay = o.decay ?? 0.9;
    let pinned = 0, unpinned = 0;
    for (const L of this.store.layers) {
      if (L.active) throw new Error(`repin: layer ${L.layer} has a batch in flight`);
      for (let e = 0; e < L.E; e++) L.heat[e] *= decay;
      const P = Math.min(L.cap, Math.floor(L.cap * pinShare(this.tokens())));
      const cur = new Set(L.slots.filter((s) => s.pinned).map((s) => s.e));
      const plan = repinPlan(L.heat, cur, P, o);
      for (const e of plan.unpin) { const s = L.map.get(e); if (s) { s.pinned = false; unpinned++; } }
      pinned += this.pin(L, plan.pin);
    }
    this.historyTokens *= decay;
    this.store.counters.tokens *= decay;
    return { pinned, unpinned };
  }

  /** Pin experts of L: cached ones in place, the others loaded into free or evicted slots. */
  private pin(L: LayerCache, experts: number[]): number {
    const loading: Slot[] = [];
    let n = 0;
    for (const e of experts) {
      const s = L.map.get(e);
      if (s && s.state === READY) { s.pinned = true; n++; continue; }
      if (s) continue; // loading: a later pass pins it
      const slot = L.slots.length < L.cap ? L.acquire() : L.acquireCacheOnly();
      if (!slot) break;
      L.assign(slot, e, false);
      slot.pinned = true;
      loading.push(slot);
    }
    for (const s of loading) {
      try {
        this.store.finishLoad(L, s, true);
        s.lock = false;
        n++;
      } catch (err) {
        if (!(err instanceof ModelError)) throw err;
        this.store.cfg.log(`experts: could not pin (${err.message}); continuing without it`);
      }
    }
    return n;
  }

  save(hooks?: SaveHooks): void {
    if (!this.path) return;
    const layers: Usage["layers"] = {};
    for (const L of this.store.layers) layers[String(L.layer)] = Array.from(L.heat);
    saveUsage(this.path, { version: 1, fingerprint: this.fingerprint, tokens: this.tokens(), layers }, hooks);
  }
}
