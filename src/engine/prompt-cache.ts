// Host-memory prompt cache (llama-server's --cache-ram): a conversation's KV state is parked here when its slot is
// given to another prompt, and a later prompt that starts with it gets its rows back instead of prefilling them (a
// chat returning after other users took its slot). Entries are copies of a history's rows [0, n) (Session.rows: MLA
// rows in the cache's dtype, indexer keys, recorded residual rows), evicted least recently used first within a byte
// budget; an entry that is a prefix of another is dropped. State: the entries, their bytes, hits and evictions.
import { lcp, type PrefixRows, type Session } from "./session.ts";

interface Entry { rows: PrefixRows; bytes: number; used: number }

const sizeOf = (r: PrefixRows) =>
  r.kv.reduce((a, x) => a + x.byteLength, 0) + r.ik.reduce((a, x) => a + (x?.byteLength ?? 0), 0) + r.hidden.byteLength + 8 * r.tokens.length;

export class PromptCache {
  private entries: Entry[] = [];
  private clock = 0;
  bytes = 0;
  hits = 0;
  evicted = 0;

  /** budget: bytes the entries may hold together (a history larger than that is not kept) */
  constructor(readonly budget: number) {
    if (!(budget >= 0)) throw new RangeError(`PromptCache: a budget of ${budget} bytes`);
  }

  get size(): number { return this.entries.length; }

  /** Keep a copy of sess's history (unless an entry already holds it, or it cannot fit); entries it extends go. */
  park(sess: Session): void {
    const t = sess.tokens;
    if (t.length === 0 || this.entries.some((e) => e.rows.tokens.length >= t.length && lcp(e.rows.tokens, t) === t.length)) return;
    const view = sess.rows(), bytes = sizeOf(view);
    if (bytes > this.budget) return;
    this.drop((e) => lcp(e.rows.tokens, t) === e.rows.tokens.length); // (prefixes of this one)
    while (this.bytes + bytes > this.budget) this.evictOldest();
    const rows: PrefixRows = { ...view, kv: view.kv.map((x) => x.slice()), ik: view.ik.map((x) => x?.slice() ?? null), hidden: view.hidden.slice() };
    this.entries.push({ rows, bytes, used: ++this.clock });
    this.bytes += bytes;
  }

  /** The entry sharing the longest prefix with `ids`, at most `limit` tokens of it (0 when none shares any). */
  best(ids: number[], limit = ids.length): { rows: PrefixRows; n: number } | null {
    let best: Entry | null = null, bn = 0;
    for (const e of this.entries) {
      const n = Math.min(lcp(e.rows.tokens, ids), limit);
      if (n > bn) { best = e; bn = n; }
    }
    return best ? { rows: best.rows, n: bn } : null;
  }

  /** Restore positions [0, n) of an entry `best` returned into sess (a copy; the entry stays). */
  restore(sess: Session, rows: PrefixRows, n: number): void {
    const e = this.entries.find((x) => x.rows === rows);
    if (!e) throw new Error("PromptCache.restore: not an entry of this cache");
    sess.install(rows, n);
    e.used = ++this.clock;
    this.hits++;
  }

  private evictOldest(): void {
    let k = 0;
    for (let i = 1; i < this.entries.length; i++) if (this.entries[i].used < this.entries[k].used) k = i;
    this.bytes -= this.entries[k].bytes;
    this.entries.splice(k, 1);
    this.evicted++;
  }

  private drop(pred: (e: Entry) => boolean): void {
    for (const e of this.entries.filter(pred)) this.bytes -= e.bytes;
    this.entries = this.entries.filter((e) => !pred(e));
  }
}
