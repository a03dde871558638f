// The device chain's options (ChainOpts), the KV split geometry they imply (budget rows or bytes, block,
// window), the chain's counters (ChainStats) and their one-line summary. Stateless.
import type { Api } from "./backend.ts";
import type { SplitGeom } from "./mirror.ts";

export interface ChainOpts {
  api?: Api;                // vulkan (default) or webgpu (Dawn's adapter)
  layers?: number;          // run layers [0, layers) on the device (default: all)
  device?: string | number; // Vulkan device index or name substring (default: HB_VK_DEVICE, else the best)
  slots?: number;           // conversations mirrored at once, a hard cap between forwards (default 4; LRU gives way;
                            // a batch with more conversations grows the mirrors for itself only)
  fault?: number;           // fake a device loss at the n-th submit (default: HB_VK_FAULT)
  /** KV split: c_kv ‖ k_pe rows per layer per conversation the device keeps (default: HB_VK_KV_ROWS, else all) */
  kvBudgetRows?: number;
  /** the same budget in bytes per layer per conversation (rows = bytes / (4·(kv_lora+dr))); the smaller wins */
  kvBudgetBytes?: number;
  kvBlock?: number;         // rows per KV block (default 16, at most the budget)
  kvWindow?: number;        // newest rows always resident (default: half the budget, whole blocks)
}

/** The split geometry for a chain's options (null: no budget, whole mirrors). */
export function splitGeom(o: ChainOpts, W: number): SplitGeom | null {
  const env = Number(process.env.HB_VK_KV_ROWS ?? 0);
  const cands = [o.kvBudgetRows ?? (env > 0 ? env : undefined), o.kvBudgetBytes === undefined ? undefined : Math.floor(o.kvBudgetBytes / (4 * W))]
    .filter((x): x is number => x !== undefined);
  if (cands.length === 0) return null;
  const rows = Math.min(...cands);
  if (!Number.isInteger(rows) || rows < 1) throw new RangeError(`KV budget of ${rows} rows per layer: need at least 1`);
  const blk = Math.max(1, Math.min(rows, Math.floor(o.kvBlock ?? 16)));
  const slots = Math.floor(rows / blk);
  const window = Math.max(1, Math.min(slots, Math.ceil((o.kvWindow ?? Math.floor(rows / 2)) / blk)));
  return { blk, slots, window };
}

export interface ChainStats {
  forwards: number; tokens: number; fallbacks: number;
  bytesUp: number; bytesDown: number; mirrorBytes: number; // activations up / down, KV rows uploaded to mirrors
  waitMs: number; hostMs: number; recordMs: number;         // blocked on A1 frames / routed experts / recording
  hostRows: number;         // rows the routed experts ran for (the last layer: only those that get logits)
  a2Ms: number;             // blocked on the A2 frame (shared expert) after the host step: the part it did not hide
  splitLayers: number;      // layer frames run split (CPU + device attention)
  splitKeys: number;        // keys attended on the CPU (per row, all heads once)
  splitMs: number;          // the CPU's partial attention
  perLayer: { waitMs: number; hostMs: number }[];
}

/** Fresh counters for a chain of n layers. */
export function newStats(n: number): ChainStats {
  return { forwards: 0, tokens: 0, fallbacks: 0, bytesUp: 0, bytesDown: 0, mirrorBytes: 0, waitMs: 0, hostMs: 0, recordMs: 0, hostRows: 0,
    a2Ms: 0, splitLayers: 0, splitKeys: 0, splitMs: 0, perLayer: Array.from({ length: n }, () => ({ waitMs: 0, hostMs: 0 })) };
}

/** One line: crossings per token, time blocked on the device vs in the routed experts (per layer), the split. */
export function statsLine(s: ChainStats, device: string, lost: boolean, split: SplitGeom | null): string {
  const t = Math.max(1, s.tokens), kb = (b: number) => (b / 1024).toFixed(1), f = Math.max(1, s.forwards);
  const per = s.perLayer.map((l, i) => `L${i} ${(l.waitMs / f).toFixed(2)}/${(l.hostMs / f).toFixed(2)}`).join(" ");
  return `${device}${lost ? " (lost: on the CPU)" : ""}: ${s.forwards} forwards, ${s.tokens} tokens; ` +
    `per token ${kb(s.bytesUp / t)} KiB up, ${kb(s.bytesDown / t)} KiB down, KV mirror ${kb(s.mirrorBytes)} KiB total; ` +
    `device wait ${s.waitMs.toFixed(1)} ms (A2 ${s.a2Ms.toFixed(1)} ms), routed experts ${s.hostMs.toFixed(1)} ms over ${s.hostRows} rows, recording ${s.recordMs.toFixed(1)} ms; ` +
    (split ? `KV split (${split.slots}×${split.blk} rows/layer): ${s.splitLayers} split frames, ${s.splitKeys} CPU keys, ${s.splitMs.toFixed(1)} ms; ` : "") +
    `per layer ms/forward (device wait/host): ${per}${s.fallbacks ? `; ${s.fallbacks} CPU fallbacks` : ""}`;
}
