// The KV split's residency of one layer of one mirrored conversation (pure logic, no device): under a row budget the
// device holds `slots` blocks of `blk` rows of c_kv ‖ k_pe; key t lives in device row slotOf[t/blk]·blk + t%blk, or
// only on the host (slotOf = −1: the CPU attends over it). Before each step `plan` picks the resident blocks: the
// newest `window` blocks, then the blocks the DSA selections read most (per-block counts fed by `count`; ties:
// already resident, then newer), and says which host rows to upload. State: block -> slot table (slotOf, mirrored
// by the device's table buffer), slot -> block, the rows each slot holds, the read counts, a dirty flag.

/** host rows [row0, row1) go to device rows [dev0, ..) */
export interface Upload { row0: number; row1: number; dev0: number }
/** rows [t0, t0 + n) of a step land in device rows [dev0, ..) */
export interface Run { t0: number; n: number; dev0: number }

export class Residency {
  slotOf = new Int32Array(0);   // [blocks] -> device slot or −1
  reads = new Float64Array(0);  // [blocks] keys read by the selections
  readonly blockAt: Int32Array; // [slots] -> block or −1
  readonly filled: Int32Array;  // [slots] rows valid from the block's start
  nblocks = 0;                  // blocks the table covers (those of the last planned step)
  dirty = true;                 // slotOf changed since the device table was written

  constructor(readonly blk: number, readonly slots: number, readonly window: number) {
    if (!(blk >= 1 && slots >= 1 && window >= 1 && window <= slots)) throw new RangeError(`residency: blk ${blk}, slots ${slots}, window ${window}`);
    this.blockAt = new Int32Array(slots).fill(-1);
    this.filled = new Int32Array(slots);
  }

  /** A new conversation: nothing resident, no counts. */
  reset(): void {
    this.slotOf.fill(-1); this.reads.fill(0); this.blockAt.fill(-1); this.filled.fill(0);
    this.nblocks = 0; this.dirty = true;
  }

  /** Host rows from `from` on changed (watermark): device rows past it are stale, their counts too. */
  invalidate(from: number): void {
    const b = this.blk;
    for (let sl = 0; sl < this.slots; sl++) {
      const blk = this.blockAt[sl];
      if (blk >= 0) this.filled[sl] = Math.min(this.filled[sl], Math.max(0, from - blk * b));
    }
    for (let k = Math.ceil(from / b); k < this.reads.length; k++) this.reads[k] = 0;
  }

  private grow(nb: number): void {
    if (nb <= this.slotOf.length) return;
    let cap = Math.max(16, this.slotOf.length);
    while (cap < nb) cap *= 2;
    const s = new Int32Array(cap).fill(-1), r = new Float64Array(cap);
    s.set(this.slotOf); r.set(this.reads);
    this.slotOf = s; this.reads = r;
  }

  /** Every block of [0, end) resident: no split for a step ending at `end`. */
  complete(end: number): boolean {
    const nb = Math.ceil(end / this.blk);
    if (nb > this.slots) return false;
    for (let k = 0; k < nb; k++) if (this.slotOf[k] < 0) return false;
    return true;
  }

  resident(t: number): boolean { return this.slotOf[(t / this.blk) | 0] >= 0; }

  /**
   * Choose the resident blocks for a step writing rows [pos0, end) and return the host rows to upload
   * (rows below pos0 that a resident slot lacks). The step's own rows come from the device afterwards
   * (`wrote`).
   */
  plan(pos0: number, end: number): Upload[] {
    const b = this.blk, nb = Math.ceil(end / b);
    this.grow(nb);
    let want: number[];
    if (nb <= this.slots) want = Array.from({ length: nb }, (_, k) => k);
    else {
      const w = this.window, old = Array.from({ length: nb - w }, (_, k) => k);
      old.sort((x, y) => this.reads[y] - this.reads[x] || Number(this.slotOf[y] >= 0) - Number(this.slotOf[x] >= 0) || y - x);
      want = [...old.slice(0, this.slots - w), ...Array.from({ length: w }, (_, k) => nb - w + k)];
    }
    const keep = new Set(want);
    for (let sl = 0; sl < this.slots; sl++) { // evict
      const k = this.blockAt[sl];
      if (k >= 0 && !keep.has(k)) { this.slotOf[k] = -1; this.blockAt[sl] = -1; this.filled[sl] = 0; this.dirty = true; }
    }
    for (let k = nb; k < this.nblocks; k++) if (this.slotOf[k] >= 0) { // past the end (a rewind): free
      const sl = this.slotOf[k];
      this.slotOf[k] = -1; this.blockAt[sl] = -1; this.filled[sl] = 0; this.dirty = true;
    }
    let free = 0;
    const ups: Upload[] = [];
    for (const k of want) {
      let sl = this.slotOf[k];
      if (sl < 0) {
        while (this.blockAt[free] >= 0) free++;
        sl = free;
        this.slotOf[k] = sl; this.blockAt[sl] = k; this.filled[sl] = 0; this.dirty = true;
      }
      const need = Math.max(0, Math.min(b, pos0 - k * b));
      if (this.filled[sl] < need) ups.push({ row0: k * b + this.filled[sl], row1: k * b + need, dev0: sl * b + this.filled[sl] });
      this.filled[sl] = need; // rows from pos0 on are the step's own
    }
    if (nb !== this.nblocks) this.dirty = true;
    this.nblocks = nb;
    return ups;
  }

  /** Device rows of the step's rows [pos0, pos0 + n) that are resident (contiguous runs per block). */
  runs(pos0: number, n: number): Run[] {
    const b = this.blk, out: Run[] = [];
    for (let t = pos0; t < pos0 + n;) {
      const k = (t / b) | 0, e = Math.min(pos0 + n, (k + 1) * b), sl = this.slotOf[k];
      if (sl >= 0) out.push({ t0: t, n: e - t, dev0: sl * b + (t - k * b) });
      t = e;
    }
    return out;
  }

  /** The step's rows [pos0, end) are now on the device in their resident blocks. */
  wrote(pos0: number, end: number): void {
    const b = this.blk;
    for (let k = (pos0 / b) | 0; k * b < end; k++) {
      const sl = this.slotOf[k];
      if (sl >= 0 && this.filled[sl] >= pos0 - k * b) this.filled[sl] = Math.min(b, end - k * b);
    }
  }

  /** Count the keys one row read: `keys` (a selection) or, when null, the dense prefix [0, nk). */
  count(keys: ArrayLike<number> | null, nk: number): void {
    const b = this.blk;
    if (keys) { for (let j = 0; j < keys.length; j++) this.reads[(keys[j] / b) | 0]++; return; }
    for (let k = 0; k * b < nk; k++) this.reads[k] += Math.min(b, nk - k * b);
  }
}
