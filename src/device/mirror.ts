// Device mirrors of conversations' KV caches: a pool of slots, each holding one conversation's rows for the
// chain's layers (c_kv ‖ k_pe rows of width kv_lora+dr per layer; indexer keys [cap, hd] on full layers) behind
// a Watermark. Two modes per pool: whole (every row) or split (a per-layer row budget; see MirrorPool).
// At most `maxSlots` slots (ChainOpts.slots) outlive a batch: a slot is reassigned to another conversation
// least-recently-used first (its watermark then drops to 0).
// State: the slots and their device buffers (and, split, their residencies).
import type { KVCache } from "../engine/kv.ts";
import type { Buf, Cmd, Gpu } from "./backend.ts";
import { Watermark } from "./watermark.ts";
import { Residency, type Run } from "./residency.ts";

/** KV split geometry per layer: `slots` device blocks of `blk` rows, the newest `window` blocks always resident. */
export interface SplitGeom { blk: number; slots: number; window: number }
export interface MirrorShape { layers: number[]; indexed: boolean[] /* per entry of layers */; W: number; hd: number; split: SplitGeom | null }

export class MirrorSlot {
  readonly wm = new Watermark();
  cap = 0;
  kv: Buf[] = [];          // per entry of shape.layers: [cap, W] (whole) or [slots·blk, W] (split)
  ik: (Buf | null)[] = [];
  tab: Buf[] = [];         // split: per entry, int32 [tabCap] block -> slot
  res: Residency[] = [];   // split: per entry
  private tabCap = 0;
  lastUse = 0;
  uploadedBytes = 0;

  constructor(private readonly vk: Gpu, readonly shape: MirrorShape, private readonly cmd: () => Cmd) {
    const g = shape.split;
    if (g) this.res = shape.layers.map(() => new Residency(g.blk, g.slots, g.window));
  }

  get split(): boolean { return this.shape.split !== null; }

  /** Room for `rows` rows (power-of-two growth, keeping the valid rows; split: indexer keys and tables). */
  ensure(rows: number): void {
    const { W, hd, split } = this.shape;
    if (split && this.kv.length === 0) this.kv = this.shape.layers.map(() => this.vk.buffer(4 * split.slots * split.blk * W));
    if (split && Math.ceil(rows / split.blk) > this.tabCap) {
      let c = Math.max(16, this.tabCap);
      while (c < Math.ceil(rows / split.blk)) c *= 2;
      for (const b of this.tab) b.free();
      this.tab = this.shape.layers.map(() => this.vk.buffer(4 * c));
      this.tabCap = c;
      for (const r of this.res) r.dirty = true;
    }
    if (rows <= this.cap) return;
    let cap = Math.max(16, this.cap);
    while (cap < rows) cap *= 2;
    const keep = this.wm.valid;
    const kv = split ? this.kv : this.shape.layers.map(() => this.vk.buffer(4 * cap * W));
    const ik = this.shape.indexed.map((x) => (x ? this.vk.buffer(4 * cap * hd) : null));
    if (keep > 0 && this.cap > 0) {
      const c = this.cmd();
      c.begin();
      if (!split) this.kv.forEach((b, i) => c.copy(b, 0, kv[i], 0, 4 * keep * W));
      this.ik.forEach((b, i) => { if (b) c.copy(b, 0, ik[i]!, 0, 4 * keep * hd); });
      c.submit();
      c.wait();
    }
    if (!split) for (const b of this.kv) b.free();
    for (const b of this.ik) b?.free();
    this.kv = kv; this.ik = ik; this.cap = cap;
  }

  /** Upload host rows [from, to) of every mirrored layer (split: the indexer keys only; see `prepare`). */
  upload(kv: KVCache, from: number, to: number): void {
    if (to <= from) return;
    const { W, hd } = this.shape;
    this.shape.layers.forEach((layer, i) => {
      if (!this.split) this.kv[i].write(4 * from * W, kv.f32(layer).subarray(from * W, to * W));
      const ik = this.ik[i], host = kv.ik[layer];
      if (ik && host) ik.write(4 * from * hd, host.subarray(from * hd, to * hd));
    });
    this.uploadedBytes += 4 * (to - from) * ((this.split ? 0 : W * this.kv.length) + hd * this.ik.filter(Boolean).length);
    this.wm.uploaded(to);
  }

  /**
   * Split: before a step writing rows [pos0, end) whose host rows changed from `from` on, choose each
   * layer's resident blocks (entries [lo, hi) of shape.layers), upload the host rows they lack and the
   * changed block tables.
   */
  prepare(kv: KVCache, pos0: number, end: number, from: number, lo: number, hi: number): void {
    const W = this.shape.W, blk = this.shape.split!.blk;
    for (let i = lo; i < hi; i++) {
      const r = this.res[i], host = kv.f32(this.shape.layers[i]);
      r.invalidate(from);
      for (const u of r.plan(pos0, end)) {
        this.kv[i].write(4 * u.dev0 * W, host.subarray(u.row0 * W, u.row1 * W));
        this.uploadedBytes += 4 * (u.row1 - u.row0) * W;
      }
      if (r.dirty) {
        this.tab[i].write(0, r.slotOf.subarray(0, Math.max(1, Math.ceil(end / blk))));
        r.dirty = false;
      }
    }
  }

  /** Device rows for the step's rows [pos0, pos0 + n) of layer entry i (whole: one run). */
  runs(i: number, pos0: number, n: number): Run[] {
    return this.split ? this.res[i].runs(pos0, n) : [{ t0: pos0, n, dev0: pos0 }];
  }

  /** Split and some key of [0, end) lives only on the host at layer entry i. */
  partial(i: number, end: number): boolean { return this.split && !this.res[i].complete(end); }

  private drop(): void {
    for (const b of [...this.kv, ...this.tab]) b.free();
    for (const b of this.ik) b?.free();
    this.kv = []; this.ik = []; this.tab = []; this.tabCap = 0;
    for (const r of this.res) r.reset();
  }

  free(): void { this.drop(); this.cap = 0; this.wm.reset(); }
}

/** Modes: whole (no budget): every row, capacity grown in powers of two (device-to-device copy of the valid rows);
 *  split (a per-layer row budget): c_kv ‖ k_pe in `slots` blocks of `blk` rows per layer, which blocks chosen per
 *  step by residency.ts, addressed through a per-layer block table on the device (int32 [blocks] -> slot or −1);
 *  the rest stays on the host and the CPU attends over it. Indexer keys stay whole. A batch with more
 *  conversations than `maxSlots` grows the pool for itself only (trimmed back after it). */
export class MirrorPool {
  readonly slots: MirrorSlot[] = [];
  private clock = 0;
  private syncCmd: Cmd | null = null;

  /**
   * maxSlots: a hard cap between batches. A conversation without a mirror takes a new slot while fewer than
   * maxSlots exist, else the slot read longest ago that the current batch does not use gives way (its
   * watermark drops to 0, its device buffers are reused). A single batch with more conversations than
   * maxSlots grows the pool for that batch only; `trim()` after the batch frees the extra slots.
   */
  constructor(private readonly vk: Gpu, readonly shape: MirrorShape, readonly maxSlots = 4) {
    if (!Number.isInteger(maxSlots) || maxSlots < 1) throw new RangeError(`ChainOpts.slots: need an integer ≥ 1, got ${maxSlots}`);
  }

  /** The slot for kv (its own, else a new one under the cap, else the LRU slot not in `busy`, else a new one). */
  get(kv: KVCache, busy: Set<MirrorSlot>): MirrorSlot {
    let s = this.slots.find((x) => x.wm.holds(kv));
    if (!s) {
      const idle = this.slots.filter((x) => !busy.has(x));
      if (this.slots.length < this.maxSlots || idle.length === 0)
        this.slots.push((s = new MirrorSlot(this.vk, this.shape, () => (this.syncCmd ??= this.vk.cmd()))));
      else s = idle.reduce((a, b) => (b.lastUse < a.lastUse ? b : a));
    }
    s.lastUse = ++this.clock;
    return s;
  }

  /** Back to at most maxSlots slots (after a batch that outgrew them): the slots read longest ago are freed. */
  trim(): void {
    if (this.slots.length <= this.maxSlots) return;
    this.slots.sort((a, b) => b.lastUse - a.lastUse);
    for (const s of this.slots.splice(this.maxSlots)) s.free();
  }

  /** Device bytes of the KV mirrors now allocated. */
  get bytes(): number {
    let t = 0;
    for (const s of this.slots) for (const b of [...s.kv, ...s.tab, ...s.ik]) if (b) t += b.bytes;
    return t;
  }

  free(): void { for (const s of this.slots) s.free(); this.slots.length = 0; }
}
