// The expert warmup (serve / chat --warmup, on by default where the cache fits the RAM budget): at start, fill each
// layer's cache slots with the experts a first request would otherwise read from disk — the hottest by the usage
// history first, then the rest in index order — with a progress line, and say in one line how many bytes were read at
// start and how many are left to read lazily, on first use. Stateless; the store keeps what was read.
import { ModelError } from "../../model/errors.ts";
import { fmtBytes, Progress, type ProgressOut } from "../../progress.ts";
import { hottest } from "./learn.ts";
import type { LayerCache } from "./layer.ts";
import { READY, type Slot } from "./slots.ts";
import type { ExpertStore } from "./store.ts";

/** Below this many bytes to read no progress line is drawn (a blink): the summary alone. */
export const WARMUP_PROGRESS_MIN = 64 * 2 ** 20;

export interface WarmupReport {
  /** experts read by the warmup, and their bytes */
  experts: number; bytes: number;
  /** bytes read since the store opened (pins at start included), and the experts' bytes still on disk only */
  startBytes: number; lazyBytes: number; lazyExperts: number;
  seconds: number;
}

const dataBytes = (L: LayerCache, e: number) => { const p = L.plans[e]; return [p.gate, p.up, p.down].reduce((a, m) => a + m.w.nbytes + (m.qs?.nbytes ?? 0), 0); };

/** The experts warmup would read into L: its free slots' worth, hottest first, then by index (none already held). */
function picks(L: LayerCache): number[] {
  const room = L.cap - L.slots.length, out: number[] = [];
  if (room <= 0) return out;
  for (const e of [...hottest(L.heat, L.E), ...Array.from({ length: L.E }, (_, e) => e)]) {
    if (out.length >= room) break;
    if (!L.map.has(e) && !out.includes(e)) out.push(e);
  }
  return out;
}

/** What is in RAM and what is left on disk (bytes, experts), over every layer. */
function residency(store: ExpertStore): { lazyBytes: number; lazyExperts: number } {
  let lazyBytes = 0, lazyExperts = 0;
  for (const L of store.layers) for (let e = 0; e < L.E; e++) {
    if (L.map.get(e)?.state === READY) continue;
    lazyBytes += dataBytes(L, e); lazyExperts++;
  }
  return { lazyBytes, lazyExperts };
}

/** Fill the caches (warm: true), or only measure (false), then log the one line. */
export function warmExperts(store: ExpertStore, o: { warm: boolean; why?: string; log: (line: string) => void; out?: ProgressOut; progressMin?: number }): WarmupReport {
  const t0 = performance.now(), wait0 = store.counters.waitMs;
  let experts = 0, bytes = 0;
  if (o.warm) {
    const plan = store.layers.map((L) => [L, picks(L)] as const);
    const total = plan.reduce((a, [L, es]) => a + es.reduce((b, e) => b + dataBytes(L, e), 0), 0);
    const bar = total >= (o.progressMin ?? WARMUP_PROGRESS_MIN) ? new Progress("experts: warmup", total, { unit: "bytes", out: o.out }) : null;
    let failed = false;
    for (const [L, es] of plan) {
      const loading: Slot[] = [];
      for (const e of es) {
        const s = L.acquire(); // (below capacity: a fresh cache slot)
        if (!s || s.working) break;
        L.assign(s, e, false);
        loading.push(s);
      }
      for (const s of loading) {
        const e = s.e;
        try {
          store.finishLoad(L, s, true);
          s.lock = false;
          s.last = ++store.tick;
          experts++; bytes += dataBytes(L, e);
        } catch (err) {
          if (!(err instanceof ModelError)) throw err;
          if (!failed) o.log(`experts: warmup could not read (${err.message}); it is read on first use`);
          failed = true;
        }
        bar?.update(bytes);
      }
    }
    bar?.end();
  }
  store.counters.waitMs = wait0; // (no request waited on these)
  const seconds = (performance.now() - t0) / 1000, { lazyBytes, lazyExperts } = residency(store), startBytes = store.counters.bytesRead;
  o.log(o.warm
    ? `experts: warmup read ${fmtBytes(bytes)} (${experts} experts) in ${seconds.toFixed(2)} s; ${fmtBytes(startBytes)} read at start, ${fmtBytes(lazyBytes)} (${lazyExperts} experts) left to read lazily on first use`
    : `experts: no warmup (${o.why ?? "--no-warmup"}): ${fmtBytes(startBytes)} read at start, ${fmtBytes(lazyBytes)} (${lazyExperts} experts) left to read lazily on first use`);
  return { experts, bytes, startBytes, lazyBytes, lazyExperts, seconds };
}
