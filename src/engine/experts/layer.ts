// One MoE layer's expert cache, as a Moe (model/weights.ts) the forward uses unchanged: the router,
// bias and shared expert of the loaded layer, plus `resolve` (a batch's union: pinned → cached →
// disk) and `expert(e)`. State: the layer's slots (capacity `cap`, allocated on first use), the
// expert → slot map and the active batch's (arrays by expert: a decode step's lookups touch a cache line or two,
// not a hash table's buckets), the heat per expert (usage) and the last union (speculative prefetch target).
// A Batch locks the slots it needs, submits its misses to free / evictable slots or working slabs
// (read-ahead: the rest as buffers are released), and hands experts out in compute order. `ver` stamps the
// experts whose weights stay put (moe.ts then computes a batch of them in one call and reports it to `account`).
import type { ExpertBatch, LazyMoe, Mat, Mlp, MlpPlan, Moe } from "../../model/weights.ts";
import { readMlp } from "../../model/weights.ts";
import { EMPTY, LOADING, READY, Slot, pickVictim } from "./slots.ts";
import type { ExpertLayout } from "./layout.ts";
import type { ExpertStore } from "./store.ts";

export class LayerCache implements Moe {
  readonly router: Mat;
  readonly bias: Float32Array | null;
  readonly shared: Mlp | null;
  readonly plans: readonly MlpPlan[];
  readonly slots: Slot[] = [];
  readonly map: SlotMap;
  /** the active batch's slot of each expert of its union (cleared as it ends) */
  readonly inBatch: (Slot | undefined)[];
  /** per expert: a stamp ≠ 0 while this layer's cache holds it READY and not speculative (its weights stay where
   *  they are), 0 otherwise; a new stamp each time it is loaded again (Moe.ver) */
  readonly ver: Int32Array;
  /** batches computed in one call (account) */
  fused = 0;
  readonly heat: Float64Array;
  /** per-expert views in mmap mode (made once) */
  readonly views: (Mlp | undefined)[];
  lastUnion: number[] = [];
  /** the router-piloted prediction for this layer's next batch (null: none made) */
  pilot: Int32Array | null = null;
  active: Batch | null = null;
  private readonly pilotFn = (experts: Int32Array) => this.store.pilotPrefetch(this, experts);

  constructor(readonly store: ExpertStore, readonly layer: number, readonly lazy: LazyMoe, public cap: number,
    readonly layouts: ExpertLayout[] | null /* null: synchronous reads (FP8) */, readonly slotBytes: number) {
    this.router = lazy.router; this.bias = lazy.bias; this.shared = lazy.shared; this.plans = lazy.plans;
    this.heat = new Float64Array(lazy.plans.length);
    this.map = new SlotMap(lazy.plans.length);
    this.inBatch = new Array<Slot | undefined>(lazy.plans.length).fill(undefined);
    this.ver = new Int32Array(lazy.plans.length);
    this.views = new Array(lazy.plans.length);
  }

  get E(): number { return this.plans.length; }
  /** Moe.prefetch: present while the store's mode is pilot */
  get prefetch(): ((experts: Int32Array) => void) | null { return this.store.prefetch === "pilot" ? this.pilotFn : null; }

  /** Expert e outside a batch: the cached copy when ready, else a synchronous read (not cached). */
  expert(e: number): Mlp {
    if (!Number.isInteger(e) || e < 0 || e >= this.E) return this.lazy.expert(e); // its range error
    const s = this.map.get(e);
    if (s && s.state === READY) return s.mlp!;
    return readMlp(this.lazy.store, this.plans[e]);
  }

  resolve(experts: readonly number[], rows: readonly number[]): ExpertBatch {
    if (this.active) this.active.end();
    this.active = new Batch(this, experts, rows);
    return this.active;
  }

  /** A slot for a new expert: a fresh one below capacity, an evicted one, or a working slab (or null). */
  acquire(): Slot | null {
    if (this.slots.length < this.cap) {
      const s = new Slot(false, this.slotBytes);
      this.slots.push(s);
      return s;
    }
    return this.acquireCacheOnly() ?? this.store.takeWorking(this);
  }

  /** An evictable cache slot (the policy's victim), emptied; null when all are locked, pinned or loading. */
  acquireCacheOnly(): Slot | null {
    const v = pickVictim(this.slots, this.store.policy, this.heat);
    if (v && v.state !== EMPTY) this.evict(v);
    return v;
  }

  evict(s: Slot): void {
    if (s.e >= 0 && this.map.get(s.e) === s) { this.map.delete(s.e); this.ver[s.e] = 0; }
    if (s.state === READY) this.store.onEvict(this, s);
    s.clear();
  }

  /** Start loading e into s (spec: a speculative prefetch, not locked). */
  assign(s: Slot, e: number, spec: boolean): void {
    s.e = e; s.state = LOADING; s.lock = !spec; s.spec = spec;
    this.ver[e] = 0;
    if (s.working) s.owner = this.layer;
    else this.map.set(e, s);
    this.store.submitLoad(this, s);
  }

  /** Forget a slot whose read failed or was dropped. */
  drop(s: Slot): void {
    if (!s.working && this.map.get(s.e) === s) { this.map.delete(s.e); this.ver[s.e] = 0; }
    if (s.working) this.store.freeWorking(s);
    else s.clear();
  }

  /** Stamp s's expert when s is its cache slot, READY and not speculative (an unchanged stamp is kept). */
  live(s: Slot): void {
    if (!s.working && !s.spec && s.state === READY && this.ver[s.e] === 0 && this.map.get(s.e) === s) this.ver[s.e] = ++this.store.stamp;
  }

  /** A batch's start, in a Batch or `account`: usage heat, speculative reads it does not need reaped, the union
   *  kept (the next prefetch's target), the pilot's prediction scored. */
  begin(union: readonly number[], rows: readonly number[]): void {
    const st = this.store;
    st.noteUsage(this, union, rows);
    st.reapSpeculative(this, union);
    this.lastUnion = union.slice();
    if (this.pilot) {
      for (const e of union) if (this.pilot.includes(e)) st.counters.pilotCovered++;
      st.counters.pilotUsed += union.length;
      this.pilot = null;
    }
  }

  /** The bookkeeping of a batch uni[0..nu) (rows cnt) whose experts were all live (ver) and computed in one call
   *  (moe.ts): what resolve, then get, release and end of each expert do for cached experts. */
  account(uni: Int32Array, cnt: Int32Array, nu: number): void {
    if (this.active) this.active.end();
    const st = this.store, union: number[] = new Array(nu), rows: number[] = new Array(nu);
    for (let u = 0; u < nu; u++) { union[u] = uni[u]; rows[u] = cnt[u]; }
    this.begin(union, rows);
    st.counters.hits += nu;
    st.notePredict(0, 0);
    for (const e of union) this.map.get(e)!.last = ++st.tick;
    st.prefetchAfter(this);
    this.fused++;
  }

  /** The slot holding e (cache or this layer's working slab), if any. */
  find(e: number): Slot | null {
    return this.map.get(e) ?? this.store.workingFor(this, e);
  }
}

/** expert → its cache slot (an array indexed by expert: e is one of the layer's) */
export class SlotMap {
  private readonly a: (Slot | undefined)[];
  constructor(E: number) { this.a = new Array<Slot | undefined>(E).fill(undefined); }
  get(e: number): Slot | undefined { return this.a[e]; }
  has(e: number): boolean { return this.a[e] !== undefined; }
  set(e: number, s: Slot): void { this.a[e] = s; }
  delete(e: number): void { this.a[e] = undefined; }
  keys(): number[] { const k: number[] = []; this.a.forEach((s, e) => { if (s) k.push(e); }); return k; }
}

class Batch implements ExpertBatch {
  readonly order: number[];
  private readonly slotOf: (Slot | undefined)[]; // L.inBatch: this batch's while it is active
  private readonly pending: number[] = [];
  private ended = false;

  constructor(private readonly L: LayerCache, private readonly union: readonly number[], rows: readonly number[]) {
    const st = L.store;
    this.slotOf = L.inBatch;
    const prev = L.lastUnion;
    L.begin(union, rows);
    const hits: number[] = [], late: number[] = [], miss: number[] = [];
    let hitRows = 0;
    for (let i = 0; i < union.length; i++) {
      const e = union[i], s = L.find(e);
      if (!s) { miss.push(e); st.counters.misses++; continue; }
      s.lock = true;
      this.slotOf[e] = s;
      if (s.spec) { st.counters.prefetchHits++; late.push(e); }
      else if (s.state === READY) { st.counters.hits++; hits.push(e); hitRows += rows[i]; }
      else { st.counters.misses++; late.push(e); }
    }
    if (late.length + miss.length > 0) {
      let covered = 0;
      for (const e of late) if (prev.includes(e)) covered++;
      for (const e of miss) if (prev.includes(e)) covered++;
      st.notePredict(covered, late.length + miss.length);
    } else st.notePredict(0, 0);
    // resident first while their staged outputs stay small; otherwise ascending (no staging)
    this.order = late.length + miss.length === 0 ? hits : hitRows * st.hidden * 4 <= st.stageBytes ? hits.concat(late, miss) : union.slice();
    if (miss.length > 0) for (const e of this.order) if (miss.includes(e)) this.pending.push(e);
    this.pump();
  }

  /** Give pending misses buffers (in compute order) while any are free: the read-ahead window. */
  private pump(): void {
    while (this.pending.length > 0) {
      const s = this.L.acquire();
      if (!s) return;
      const e = this.pending.shift()!;
      this.L.assign(s, e, false);
      this.slotOf[e] = s;
    }
  }

  get(e: number): Mlp {
    if (this.ended) throw new Error(`expert ${e} of layer ${this.L.layer}: its batch has ended`);
    let s = this.slotOf[e];
    if (!s) {
      this.pump();
      s = this.slotOf[e];
      if (!s) { // every buffer is held: an overflow slab for this one expert
        const i = this.pending.indexOf(e);
        if (i < 0) throw new Error(`expert ${e} is not part of this batch of layer ${this.L.layer}`);
        this.pending.splice(i, 1);
        s = this.L.store.overflowSlab(this.L);
        this.L.assign(s, e, false);
        this.slotOf[e] = s;
      }
    }
    if (s.state === LOADING) this.L.store.finishLoad(this.L, s, true);
    s.spec = false;
    this.L.live(s);
    return s.mlp!;
  }

  ready(e: number): boolean {
    const s = this.ended ? undefined : this.slotOf[e];
    return !!s && s.state === READY;
  }

  release(e: number): void {
    const s = this.ended ? undefined : this.slotOf[e];
    if (!s) return;
    s.lock = false;
    s.last = ++this.L.store.tick;
    if (s.working) { this.slotOf[e] = undefined; this.L.store.freeWorking(s); }
    this.pump();
  }

  stage(floats: number): Float32Array {
    return this.L.store.stage(floats);
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    const st = this.L.store;
    let clean = true;
    for (const e of this.union) {
      const s = this.slotOf[e];
      if (!s) continue;
      this.slotOf[e] = undefined;
      if (s.state === LOADING && !s.spec) { clean = false; st.settle(this.L, s); }
      s.lock = false;
      if (s.working && s.owner === this.L.layer && !s.spec) st.freeWorking(s);
    }
    this.pending.length = 0;
    if (this.L.active === this) this.L.active = null;
    if (clean) st.prefetchAfter(this.L);
  }
}

export { READY, LOADING };
