// The expert store of one loaded model: every MoE layer's LayerCache (installed in place of the
// loaded LazyMoe, restored by close), the files it reads (files.ts: fds, O_DIRECT or mmap), the shared
// working slabs, loads through the C I/O pool, speculative prefetch of the next layer's previous routing,
// stats, and the learning cache (usage heat, pins, re-pin).
// State: all of the above plus the counters. One store per Model at a time.
import type { Model } from "../model.ts";
import { LazyMoe, readMlp } from "../../model/weights.ts";
import { ModelError } from "../../model/errors.ts";
import * as io from "./io.ts";
import { ExpertFiles } from "./files.ts";
import { layoutExpert, materialize, materializeMapped, viewable, type ExpertLayout } from "./layout.ts";
import { LayerCache } from "./layer.ts";
import { EMPTY, LOADING, READY, Slot, type Policy } from "./slots.ts";
import { newCounters, snapshot, type Counters, type ExpertStats } from "./stats.ts";
import { STAGE_BYTES, type BudgetPlan } from "./budget.ts";
import type { Learner, RepinOpts } from "./learn.ts";

export interface StoreConfig {
  slots: number;            // cache slots per layer
  workingSlabs: number;
  direct: boolean;
  mmap: boolean;
  policy: Policy;
  /** speculative prefetch: on, off, auto (on while the previous routing predicts the misses), or pilot */
  prefetch: PrefetchMode;
  maxGap?: number;
  log: (line: string) => void;
}

/** on / auto: the next layer's previous union after each batch; pilot: a layer's own router on its input, before its
 *  attention (src/engine/pilot.ts) */
export type PrefetchMode = "on" | "off" | "auto" | "pilot";
/** auto prefetch: on once this many (decayed) misses were seen and at least this share was predictable */
export const AUTO_MIN = 48, AUTO_SHARE = 0.5, PREDICT_DECAY = 0.995;

export class ExpertStore {
  readonly layers: LayerCache[] = [];          // MoE layers in forward order (MTP last)
  readonly byLayer = new Map<number, LayerCache>();
  readonly counters: Counters = newCounters();
  readonly policy: Policy;
  readonly hidden: number;
  readonly stageBytes = STAGE_BYTES;
  readonly direct: boolean;
  readonly mmap: boolean;
  prefetch: PrefetchMode;
  /** decayed counts: misses, and those the previous token's routing would have covered */
  readonly predict = { covered: 0, needed: 0 };
  tick = 0;
  /** the last stamp given (LayerCache.ver) */
  stamp = 0;
  /** a speculative read was ever issued (until then no slot is `spec`) */
  private speculated = false;
  private readonly files: ExpertFiles;
  private readonly working: Slot[] = [];
  private readonly workingBytes: number;
  private stageBuf = new Float32Array(0);
  private specFailLogged = false;
  private readonly next = new Map<LayerCache, LayerCache>();
  private readonly firstMoe: number;
  private readonly busy0: number;
  private closed = false;
  /** the budget plan (set by attachExperts) */
  plan: BudgetPlan | null = null;
  /** the learning cache (usage heat, pins), null when learning is off */
  learner: Learner | null = null;

  constructor(readonly m: Model, readonly cfg: StoreConfig) {
    this.policy = cfg.policy;
    this.prefetch = cfg.prefetch;
    this.hidden = m.cfg.hidden_size;
    io.startPool();
    const lazies: [number, LazyMoe][] = [];
    m.w.layers.forEach((l, i) => { if (l.moe) lazies.push([i, asLazy(l.moe, i)]); });
    if (m.w.mtp?.layer.moe) lazies.push([m.cfg.num_hidden_layers, asLazy(m.w.mtp.layer.moe, m.cfg.num_hidden_layers)]);
    const files = new Set<string>();
    for (const [, lazy] of lazies) for (const p of lazy.plans) for (const t of [p.gate, p.up, p.down]) { files.add(t.w.file); if (t.qs) files.add(t.qs.file); }
    this.files = new ExpertFiles([...files], cfg, cfg.log);
    this.direct = this.files.direct;
    this.mmap = cfg.mmap;
    let maxSlot = 0;
    for (const [i, lazy] of lazies) {
      const ok = lazy.plans.every(viewable);
      const layouts = ok ? lazy.plans.map((p) => layoutExpert(p, this.direct, cfg.maxGap)) : null;
      const slotBytes = layouts ? Math.max(...layouts.map((l) => l.bytes))
        : Math.max(...lazy.plans.map((p) => 4 * (p.gate.O * p.gate.I + p.up.O * p.up.I + p.down.O * p.down.I)));
      maxSlot = Math.max(maxSlot, slotBytes);
      if (!ok) cfg.log(`experts: layer ${i} has FP8 experts: they are read synchronously (no streaming views)`);
      const L = new LayerCache(this, i, lazy, Math.min(cfg.slots, lazy.plans.length), layouts, slotBytes);
      this.layers.push(L);
      this.byLayer.set(i, L);
    }
    this.workingBytes = maxSlot;
    const main = this.layers.filter((L) => L.layer < m.cfg.num_hidden_layers);
    main.forEach((L, k) => this.next.set(L, main[(k + 1) % main.length]));
    this.firstMoe = main.length ? main[0].layer : -1;
    for (let k = 0; k < cfg.workingSlabs; k++) this.working.push(new Slot(true, this.workingBytes));
    this.busy0 = io.poolCounters().busySeconds;
    for (const L of this.layers) {
      if (L.layer < m.cfg.num_hidden_layers) m.w.layers[L.layer].moe = L;
      else m.w.mtp!.layer.moe = L;
    }
  }

  // ---- slabs ---------------------------------------------------------------------------------

  takeWorking(L: LayerCache): Slot | null {
    const s = this.working.find((w) => w.owner < 0 && w.state === EMPTY);
    if (!s) return null;
    s.owner = L.layer;
    return s;
  }
  workingFor(L: LayerCache, e: number): Slot | null {
    return this.working.find((w) => w.owner === L.layer && w.e === e && w.state !== EMPTY) ?? null;
  }
  freeWorking(s: Slot): void {
    if (s.state === LOADING) this.settle(null, s);
    s.clear();
  }
  /** A one-off working slab when every buffer is held (counted; the batch drops it after use). */
  overflowSlab(L: LayerCache): Slot {
    this.counters.overflow++;
    const s = new Slot(true, L.slotBytes);
    s.owner = L.layer;
    return s;
  }

  stage(floats: number): Float32Array {
    if (this.stageBuf.length < floats) this.stageBuf = new Float32Array(Math.max(floats, this.stageBuf.length * 2));
    return this.stageBuf;
  }

  // ---- loads ---------------------------------------------------------------------------------

  submitLoad(L: LayerCache, s: Slot): void {
    const e = s.e;
    s.job = 0;
    if (!L.layouts) { s.job = -1; return; }
    const lay = L.layouts[e];
    if (lay.spans.length === 0) { s.job = -2; return; }
    try {
      if (this.mmap) {
        s.job = io.submit(lay.spans.map((p) => ({ fd: this.files.fd(p.file), off: p.off, len: p.len, need: p.need, bufOff: this.files.mapped(p.file, p.off) })), null, io.Kind.touch);
      } else {
        s.buf ??= this.files.buffer(s.bytes);
        s.job = io.submit(lay.spans.map((p) => ({ fd: this.files.fd(p.file), off: p.off, len: p.len, need: p.need, bufOff: p.pos })), s.buf, io.Kind.read);
      }
    } catch (err) {
      s.job = -3; // submit refused: reported by finishLoad
      this.submitError = (err as Error).message;
    }
  }
  private submitError = "";

  /**
   * Complete the load of s (waiting for its job). demand: a batch needs it now — a failure drops the
   * slot and throws a ModelError naming the expert (a failed speculative read is logged once and read
   * again). Not demand (settling): a failure just drops the slot; returns whether s is READY.
   */
  finishLoad(L: LayerCache, s: Slot, demand: boolean): boolean {
    const e = s.e, plan = L.plans[e], job = s.job;
    s.job = 0;
    if (job === -1) { // FP8 experts: dequantized through readMat, synchronously
      if (!demand) { L.drop(s); return false; }
      try {
        s.mlp = readMlp(L.lazy.store, plan);
      } catch (err) {
        L.drop(s);
        this.counters.failures++;
        throw err;
      }
      this.counters.bytesRead += bytesOf(L, e);
      s.state = READY;
      L.live(s);
      return true;
    }
    const t0 = performance.now();
    const r = job > 0 ? io.wait(job) : job === -3 ? -5 : 0;
    if (demand) this.counters.waitMs += performance.now() - t0;
    if (r < 0) {
      const why = job === -3 ? this.submitError : io.ioErrorText(r);
      if (s.spec) {
        this.logSpecFailure(L, e, why);
        if (demand) { // read it again, on demand this time
          s.spec = false;
          this.submitLoad(L, s);
          return this.finishLoad(L, s, true);
        }
      }
      const lay = L.layouts![e];
      L.drop(s);
      if (!demand) return false;
      this.counters.failures++;
      throw new ModelError(`expert ${e} of layer ${L.layer}: read failed: ${why}`,
        { file: lay.spans[0]?.file, tensor: plan.gate.name, offset: lay.spans[0]?.off });
    }
    this.counters.bytesRead += r;
    s.mlp = this.mmap
      ? (L.views[e] ??= materializeMapped(plan, this.files.mapAddrs, io.mappedBytes))
      : materialize(plan, L.layouts![e], s.buf!);
    s.state = READY;
    L.live(s);
    return true;
  }

  /** A read nobody consumes now: working slabs are cancelled and freed, cache slots keep what arrived. */
  settle(L: LayerCache | null, s: Slot): void {
    if (s.state !== LOADING) return;
    const owner = L ?? this.byLayer.get(s.owner) ?? null;
    if (s.working || !owner) {
      if (s.job > 0) {
        io.cancel(s.job);
        const r = io.wait(s.job);
        if (r > 0 && s.spec) this.counters.prefetchWastedBytes += r;
        if (r < 0 && r !== -io.ECANCELED && s.spec && owner) this.logSpecFailure(owner, s.e, io.ioErrorText(r));
      }
      s.clear();
      return;
    }
    this.finishLoad(owner, s, false);
  }

  private logSpecFailure(L: LayerCache, e: number, why: string): void {
    this.counters.prefetchFailures++;
    if (this.specFailLogged) return;
    this.specFailLogged = true;
    this.cfg.log(`experts: a speculative prefetch failed (expert ${e} of layer ${L.layer}: ${why}); ignored`);
  }

  onEvict(L: LayerCache, s: Slot): void {
    this.counters.evictions++;
    if (this.mmap && L.layouts) for (const p of L.layouts[s.e].spans) io.madvise(this.files.mapped(p.file, p.off), p.len, io.Advice.dontneed);
  }

  // ---- usage and prefetch --------------------------------------------------------------------

  noteUsage(L: LayerCache, union: readonly number[], rows: readonly number[]): void {
    let n = 0;
    for (let i = 0; i < union.length; i++) { L.heat[union[i]] += rows[i]; n += rows[i]; }
    if (L.layer === this.firstMoe) this.counters.tokens += n / this.m.cfg.num_experts_per_tok;
  }

  /** Speculative reads of L that this batch does not need: working slabs are cancelled, cache slots kept. */
  reapSpeculative(L: LayerCache, need: readonly number[]): void {
    if (!this.speculated) return; // no slot can be speculative: skip the scan of every slot
    for (const slots of [L.slots, this.working])
      for (let i = 0; i < slots.length; i++) {
        const s = slots[i];
        if (!s.spec || need.includes(s.e) || (s.working ? s.owner !== L.layer : false)) continue;
        this.counters.prefetchWasted++;
        if (s.working) { this.settle(L, s); s.clear(); }
        else { this.settle(L, s); s.spec = false; L.live(s); }
      }
  }

  /** A batch's misses (needed) and how many of them were in the layer's previous union (covered). */
  notePredict(covered: number, needed: number): void {
    this.predict.covered = this.predict.covered * PREDICT_DECAY + covered;
    this.predict.needed = this.predict.needed * PREDICT_DECAY + needed;
  }

  /** Whether speculative prefetch runs now (auto: where the previous routing predicts the misses). */
  prefetchActive(): boolean {
    if (this.prefetch !== "auto") return this.prefetch === "on";
    const p = this.predict;
    return p.needed >= AUTO_MIN && p.covered >= AUTO_SHARE * p.needed;
  }

  /** After layer L's batch: prefetch the next MoE layer's previous union into free buffers. */
  prefetchAfter(L: LayerCache): void {
    if (!this.prefetchActive()) return;
    const N = this.next.get(L);
    if (N) this.speculate(N, N.lastUnion);
  }

  /** Router-piloted prefetch: N's predicted experts (ascending) into free buffers; N's next batch counts how many
   *  of them it used (reapSpeculative drops the rest). */
  pilotPrefetch(N: LayerCache, experts: Int32Array): void {
    N.pilot = experts.slice();
    this.speculate(N, experts);
  }

  /** Start reading experts of N not held yet into free cache slots, else free working slabs (nothing evicted). */
  private speculate(N: LayerCache, experts: Iterable<number>): void {
    for (const e of experts) {
      if (N.find(e)) continue;
      const s = N.slots.length < N.cap ? N.acquire() : this.takeWorking(N);
      if (!s) break;
      N.assign(s, e, true);
      this.speculated = true;
      this.counters.prefetchIssued++;
    }
  }

  // ---- stats, lifecycle ----------------------------------------------------------------------

  stats(): ExpertStats {
    const p = this.predict;
    return snapshot(this.counters, io.poolCounters().busySeconds - this.busy0 - this.counters.busyOffset, this,
      { predictable: p.needed > 0 ? p.covered / p.needed : 0, active: this.prefetchActive() });
  }
  resetStats(): void {
    const busy = io.poolCounters().busySeconds - this.busy0;
    Object.assign(this.counters, newCounters(), { busyOffset: busy });
  }

  /** Settle every read, restore the LazyMoe layers, close fds and mappings. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.save();
    for (const L of this.layers) {
      L.active?.end();
      for (const s of L.slots) this.settle(L, s);
    }
    for (const s of this.working) this.freeWorking(s);
    for (const L of this.layers) {
      if (L.layer < this.m.cfg.num_hidden_layers) this.m.w.layers[L.layer].moe = L.lazy;
      else this.m.w.mtp!.layer.moe = L.lazy;
    }
    this.files.close();
  }

  /** bytes of the largest expert's tensors (independent of the read mode) */
  maxDataBytes(): number {
    return Math.max(0, ...this.layers.map((L) => Math.max(...L.plans.map((p) =>
      [p.gate, p.up, p.down].reduce((a, m) => a + m.w.nbytes + (m.qs?.nbytes ?? 0), 0)))));
  }

  maxSlotBytes(): number {
    return Math.max(0, ...this.layers.map((L) => L.slotBytes));
  }

  /** Cache slots per layer (before use; pins count in them). */
  setSlots(n: number): void {
    this.cfg.slots = n;
    for (const L of this.layers) L.cap = Math.max(1, Math.min(n, L.E));
  }

  /** Between requests: decay heat and move pins towards the hottest experts (bounded swaps). */
  repin(o?: RepinOpts): { pinned: number; unpinned: number } {
    return this.learner ? this.learner.repin(o) : { pinned: 0, unpinned: 0 };
  }

  /** Persist the usage heat (atomic write). Errors are logged, not thrown. */
  save(): void {
    try {
      this.learner?.save();
    } catch (e) {
      this.cfg.log(`experts: could not save the usage file ${this.learner?.path}: ${(e as Error).message}`);
    }
  }

  pinnedCount(): number {
    return this.layers.reduce((a, L) => a + L.slots.filter((s) => s.pinned).length, 0);
  }
}

function asLazy(moe: unknown, layer: number): LazyMoe {
  if (moe instanceof LazyMoe) return moe;
  if (moe instanceof LayerCache) throw new Error(`layer ${layer}: an expert store is already attached (close it first)`);
  throw new Error(`layer ${layer}: expert streaming needs the loader's LazyMoe`);
}

const bytesOf = (L: LayerCache, e: number) => { const p = L.plans[e]; return [p.gate, p.up, p.down].reduce((a, m) => a + m.w.nbytes + (m.qs?.nbytes ?? 0), 0); };

export type { ExpertLayout };
export { EMPTY, LOADING, READY };
