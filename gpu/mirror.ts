// Device mirrors of conversations' KV caches: a pool of slots, each holding one conversation's rows for the
// chain's layers (c_kv ‖ k_pe [cap, kv_lora+dr] per layer; indexer keys [cap, hd] on full layers) behind a
// Watermark. Capacity grows in powers of two (device-to-device copy of the valid rows). A slot is reassigned
// to another conversation least-recently-used first (its watermark then drops to 0).
// State: the slots and their device buffers.
import type { KVCache } from "../src/engine/kv.ts";
import type { Buf, Cmd, Vk } from "./vk.ts";
import { Watermark } from "./watermark.ts";

export interface MirrorShape { layers: number[]; indexed: boolean[] /* per entry of layers */; W: number; hd: number }

export class MirrorSlot {
  readonly wm = new Watermark();
  cap = 0;
  kv: Buf[] = [];          // per entry of shape.layers
  ik: (Buf | null)[] = [];
  lastUse = 0;
  uploadedBytes = 0;

  constructor(private readonly vk: Vk, readonly shape: MirrorShape, private readonly cmd: () => Cmd) {}

  /** Room for `rows` rows (power-of-two growth, keeping the valid rows). */
  ensure(rows: number): void {
    if (rows <= this.cap) return;
    let cap = Math.max(16, this.cap);
    while (cap < rows) cap *= 2;
    const { W, hd } = this.shape, keep = this.wm.valid;
    const kv = this.shape.layers.map(() => this.vk.buffer(4 * cap * W));
    const ik = this.shape.indexed.map((x) => (x ? this.vk.buffer(4 * cap * hd) : null));
    if (keep > 0 && this.cap > 0) {
      const c = this.cmd();
      c.begin();
      this.kv.forEach((b, i) => c.copy(b, 0, kv[i], 0, 4 * keep * W));
      this.ik.forEach((b, i) => { if (b) c.copy(b, 0, ik[i]!, 0, 4 * keep * hd); });
      c.submit();
      c.wait();
    }
    this.drop();
    this.kv = kv; this.ik = ik; this.cap = cap;
  }

  /** Upload host rows [from, to) of every mirrored layer. */
  upload(kv: KVCache, from: number, to: number): void {
    if (to <= from) return;
    const { W, hd } = this.shape;
    this.shape.layers.forEach((layer, i) => {
      this.kv[i].write(4 * from * W, kv.kv[layer].subarray(from * W, to * W));
      const ik = this.ik[i], host = kv.ik[layer];
      if (ik && host) ik.write(4 * from * hd, host.subarray(from * hd, to * hd));
    });
    this.uploadedBytes += 4 * (to - from) * (W * this.kv.length + hd * this.ik.filter(Boolean).length);
    this.wm.uploaded(to);
  }

  private drop(): void {
    for (const b of this.kv) b.free();
    for (const b of this.ik) b?.free();
    this.kv = []; this.ik = [];
  }

  free(): void { this.drop(); this.cap = 0; this.wm.reset(); }
}

export class MirrorPool {
  readonly slots: MirrorSlot[] = [];
  private clock = 0;
  private syncCmd: Cmd | null = null;

  constructor(private readonly vk: Vk, readonly shape: MirrorShape, readonly maxSlots = 4) {}

  /** The slot for kv (its own, else a new one, else the LRU slot not in `busy`). */
  get(kv: KVCache, busy: Set<MirrorSlot>): MirrorSlot {
    let s = this.slots.find((x) => x.wm.holds(kv));
    if (!s) {
      if (this.slots.length < Math.max(this.maxSlots, busy.size + 1)) this.slots.push((s = new MirrorSlot(this.vk, this.shape, () => (this.syncCmd ??= this.vk.cmd()))));
      else s = this.slots.filter((x) => !busy.has(x)).sort((a, b) => a.lastUse - b.lastUse)[0];
    }
    s.lastUse = ++this.clock;
    return s;
  }

  free(): void { for (const s of this.slots) s.free(); this.slots.length = 0; }
}
