// The KV watermark of one device mirror slot (pure logic, no device): rows [0, valid) of the mirror equal the
// host KVCache rows (the host copy is canonical). Every host write lowers it (the rules: on Watermark); our own
// step is recognised by the version it bumps and a fingerprint row.
// State: owner (weak), valid, the version seen, and the last step's end + fingerprint.
import type { KVCache } from "../engine/kv.ts";


export interface Fingerprint { layer: number; row: number; data: Float32Array }

/** Lowering rules: a different conversation (another KVCache) in the slot -> 0; a host write we did not make
 *  (truncate, a CPU forward, a restore: KVCache.version moved) -> the lowest row written since
 *  (KVCache.lowestSince(version) when the cache offers it, else 0); a step at pos0 -> at most pos0 (and never above
 *  kv.len). Our own step bumps the version once more (forward's `kv.wrote(pos0)` after the layers); it is recognised
 *  by version == seen + 1, len == the end we wrote, and a fingerprint row that still holds what we wrote. */
export class Watermark {
  valid = 0;
  private owner: WeakRef<KVCache> | null = null;
  private seen = -1;
  private stepEnd = -1;
  private probe: Fingerprint | null = null;

  /** The slot now holds nothing valid (device lost, buffers dropped). */
  reset(): void { this.valid = 0; this.owner = null; this.seen = -1; this.stepEnd = -1; this.probe = null; }

  holds(kv: KVCache): boolean { return this.owner?.deref() === kv; }

  /** Before a step that writes rows [pos0, ..) of kv: the first host row to upload (rows [from, pos0)). */
  sync(kv: KVCache, pos0: number): number {
    if (!this.holds(kv)) {
      this.reset();
      this.owner = new WeakRef(kv);
    } else if (kv.version !== this.seen) {
      if (!this.ourBump(kv)) this.valid = Math.min(this.valid, lowest(kv, this.seen));
    }
    this.valid = Math.max(0, Math.min(this.valid, pos0, kv.len));
    this.seen = kv.version;
    this.stepEnd = -1;
    this.probe = null;
    return this.valid;
  }

  /** Rows [valid, to) were uploaded. */
  uploaded(to: number): void { this.valid = Math.max(this.valid, to); }

  /** The step wrote rows [.., end) into both the host cache and the mirror; fp = one row it wrote (host copy). */
  wrote(kv: KVCache, end: number, fp: Fingerprint | null): void {
    this.valid = end;
    this.stepEnd = end;
    this.seen = kv.version;
    this.probe = fp ? { ...fp, data: fp.data.slice() } : null;
  }

  private ourBump(kv: KVCache): boolean {
    if (this.stepEnd < 0 || kv.version !== this.seen + 1 || kv.len !== this.stepEnd) return false;
    const p = this.probe;
    if (!p) return true;
    const W = p.data.length, host = kv.f32(p.layer);
    if (!host || (p.row + 1) * W > host.length) return false;
    for (let i = 0; i < W; i++) if (!Object.is(host[p.row * W + i], p.data[i])) return false;
    return true;
  }
}

/** KVCache.lowestSince: the lowest row any host write touched after version `since`. */
function lowest(kv: KVCache, since: number): number {
  const v = kv.lowestSince(since);
  return Number.isNaN(v) || v < 0 ? 0 : v; // Infinity: nothing written since
}
