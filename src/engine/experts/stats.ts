// Counters of the expert store and the stats object the bench and /metrics read: hit rate, misses,
// prefetch effect, bytes read, read GB/s (bytes over the I/O pool's busy time), wait time per token.
// State: the mutable Counters of one store.

export interface Counters {
  hits: number; misses: number; prefetchIssued: number; prefetchHits: number; prefetchWasted: number;
  prefetchFailures: number; prefetchWastedBytes: number; evictions: number; overflow: number; failures: number;
  bytesRead: number; waitMs: number; tokens: number;
  /** router-piloted prefetch: experts used by batches it had predicted for, and how many it predicted */
  pilotUsed: number; pilotCovered: number;
  /** pool busy seconds before the last reset */
  busyOffset: number;
}

export const newCounters = (): Counters => ({
  hits: 0, misses: 0, prefetchIssued: 0, prefetchHits: 0, prefetchWasted: 0, prefetchFailures: 0, prefetchWastedBytes: 0, evictions: 0,
  overflow: 0, failures: 0, bytesRead: 0, waitMs: 0, tokens: 0, pilotUsed: 0, pilotCovered: 0, busyOffset: 0,
});

export interface ExpertStats {
  /** expert uses served from RAM (pinned or cached) */
  hits: number;
  /** expert uses that needed a demand read */
  misses: number;
  /** expert uses served by a speculative prefetch (ready or still in flight) */
  prefetchHits: number;
  prefetchIssued: number;
  prefetchWasted: number;
  prefetchFailures: number;
  /** bytes read by prefetches nobody used */
  prefetchWastedBytes: number;
  /** share of the (recent) misses that the previous token's routing would have prefetched */
  prefetchPredictable: number;
  /** whether speculative prefetch is running now */
  prefetchActive: boolean;
  /** router-piloted prefetch (--expert-prefetch pilot): share of the experts used by piloted batches that the
   *  pilot had predicted (0 when it never ran) */
  pilotHitRate: number;
  /** hits / all uses */
  hitRate: number;
  evictions: number;
  /** one-off buffers used when every slab was held */
  overflow: number;
  /** demand reads that failed (the request failed) */
  failures: number;
  bytesRead: number;
  /** seconds the I/O pool had reads in flight (process-wide) */
  readSeconds: number;
  /** bytesRead / readSeconds / 1e9 */
  readGBs: number;
  /** time the forward blocked on reads */
  waitMs: number;
  tokens: number;
  waitMsPerToken: number;
  pinned: number;
  slotsPerLayer: number;
}

export function snapshot(c: Counters, busySeconds: number, store: { pinnedCount(): number; cfg: { slots: number } },
  pf: { predictable: number; active: boolean }): ExpertStats {
  const uses = c.hits + c.misses + c.prefetchHits;
  return {
    hits: c.hits, misses: c.misses, prefetchHits: c.prefetchHits, prefetchIssued: c.prefetchIssued,
    prefetchWasted: c.prefetchWasted, prefetchFailures: c.prefetchFailures, prefetchWastedBytes: c.prefetchWastedBytes,
    prefetchPredictable: pf.predictable, prefetchActive: pf.active,
    pilotHitRate: c.pilotUsed > 0 ? c.pilotCovered / c.pilotUsed : 0,
    hitRate: uses > 0 ? c.hits / uses : 0, evictions: c.evictions, overflow: c.overflow, failures: c.failures,
    bytesRead: c.bytesRead, readSeconds: busySeconds, readGBs: busySeconds > 0 ? c.bytesRead / busySeconds / 1e9 : 0,
    waitMs: c.waitMs, tokens: c.tokens, waitMsPerToken: c.tokens > 0 ? c.waitMs / c.tokens : 0,
    pinned: store.pinnedCount(), slotsPerLayer: store.cfg.slots,
  };
}
