// The expert cache's budget arithmetic (pure), the RAM detection parser, the pin choice and the
// re-pin pass plan (hysteresis, bounded swaps), and the CLI flag mapping.
import { describe, expect, test } from "bun:test";
import { reserveNaive } from "../src/engine/attention.ts";
import { GiB, MiB, HEADROOM_MIN, kvBytesPerToken, kvRows, pinShare, planBudget, runStateBytes, type BudgetInput } from "../src/engine/experts/budget.ts";
import { parseMemAvailable, detectRam } from "../src/engine/experts/memory.ts";
import { hottest, repinPlan } from "../src/engine/experts/learn.ts";
import { expertOptions } from "../src/engine/experts/flags.ts";
import { EMPTY, READY, Slot, pickVictim } from "../src/engine/experts/slots.ts";
import { RunState } from "../src/engine/state.ts";
import { KVCache } from "../src/engine/kv.ts";
import { KV_DTYPES } from "../src/native/hb.ts";
import { ikQ8 } from "../src/engine/ikq.ts";
import { loadConfig } from "../src/model/config.ts";
import { genModel } from "./helpers/models.ts";

const base: BudgetInput = {
  ram: 16 * GiB, residentBytes: 2 * GiB, expertBytes: 10 * MiB, moeLayers: 10, experts: 64,
  kvBytes: GiB, activationBytes: 512 * MiB, workingSlabs: 8,
};

describe("planBudget", () => {
  test("automatic slots: what is left after the honest reserve, per layer", () => {
    const p = planBudget(base);
    const headroom = Math.max(HEADROOM_MIN, Math.floor(0.05 * 16 * GiB));
    const reserve = 2 * GiB + GiB + 512 * MiB + 8 * 10 * MiB + headroom;
    expect(p.headroom).toBe(headroom);
    expect(p.reserve).toBe(reserve);
    expect(Math.floor((16 * GiB - reserve) / (10 * MiB * 10))).toBe(119); // 11.6 GiB / 100 MiB
    expect(p.slots).toBe(64); // capped at E
    expect(planBudget({ ...base, experts: 256 }).slots).toBe(119);
    expect(p.cacheBytes).toBe(64 * 10 * MiB * 10);
    expect(p.peak).toBe(2 * GiB + GiB + 512 * MiB + 80 * MiB + p.cacheBytes);
    expect(p.fits).toBe(true);
    expect(p.auto).toBe(true);
    expect(p.pinned).toBe(0); // no history, no pins
  });

  test("a tight budget: fewer slots, never fewer than one; a warning when even one does not fit", () => {
    const p = planBudget({ ...base, ram: 6 * GiB });
    const reserve = 2 * GiB + GiB + 512 * MiB + 80 * MiB + 512 * MiB;
    expect(p.slots).toBe(Math.floor((6 * GiB - reserve) / (100 * MiB)));
    expect(p.slots).toBe(19);
    expect(p.fits).toBe(true);
    const tiny = planBudget({ ...base, ram: 4 * GiB });
    expect(tiny.slots).toBe(1);
    expect(tiny.fits).toBe(false);
    expect(tiny.warnings[0]).toContain("no room");
  });

  test("each layer's slots at its own experts' bytes (slotRowBytes), the working slabs at the largest", () => {
    const b = { ...base, experts: 256 }; // (at 64 experts every plan here caches all of them)
    const uniform = planBudget(b), mixed = planBudget({ ...b, slotRowBytes: b.expertBytes * (b.moeLayers - 1) + 2 * b.expertBytes });
    const sized = planBudget({ ...b, slotRowBytes: b.expertBytes * b.moeLayers / 2 });
    expect(mixed.slots).toBeLessThan(uniform.slots);
    expect(sized.slots).toBeGreaterThan(uniform.slots);
    expect(uniform.slots).toBe(119);
    expect(sized.slots).toBe(238);
    expect(sized.cacheBytes).toBe(sized.slots * b.expertBytes * b.moeLayers / 2);
    expect(sized.workingBytes).toBe(uniform.workingBytes);
  });

  test("explicit --expert-cache wins (capped at E) and warns when over budget", () => {
    expect(planBudget({ ...base, slots: 7 }).slots).toBe(7);
    expect(planBudget({ ...base, slots: 1000 }).slots).toBe(64);
    const over = planBudget({ ...base, ram: 6 * GiB, slots: 40 });
    expect(over.slots).toBe(40);
    expect(over.fits).toBe(false);
    expect(over.warnings[0]).toContain("--expert-cache 40");
  });

  test("pinned share grows with the history's tokens, up to 3/4 of the slots", () => {
    expect(pinShare(0)).toBe(0);
    expect(pinShare(4096)).toBeCloseTo(0.375, 10);
    expect(pinShare(1e9)).toBeLessThan(0.75);
    expect(pinShare(1e9)).toBeGreaterThan(0.7499);
    const p = planBudget({ ...base, slots: 20, historyTokens: 4096 });
    expect(p.pinned).toBe(7); // floor(20 × 0.375)
    expect(p.pinnedBytes).toBe(7 * 10 * MiB * 10);
  });

  test("activation and KV arithmetic match what RunState and KVCache allocate", () => {
    const cfg = loadConfig(genModel({ preset: "tiny", seed: 1 }));
    for (const [S, T] of [[1, 64], [7, 100], [32, 512], [512, 512], [64, 4096]]) {
      const state = new RunState(cfg, S, T), st = state as unknown as Record<string, unknown>;
      reserveNaive(cfg, state, [{ kv: { dtype: "f32" } as KVCache, r0: 0, n: S, pos0: T - S }], "auto"); // a batch of S new rows
      let bytes = 0;
      for (const v of Object.values(st)) if (ArrayBuffer.isView(v)) bytes += v.byteLength;
      expect([S, T, runStateBytes(cfg, S, T)]).toEqual([S, T, bytes]);
    }
    expect(kvRows(1)).toBe(16);
    expect(kvRows(100)).toBe(128);
    for (const t of KV_DTYPES) { // (an f16 / q8 cache: the MLA rows smaller, the MTP layer's too)
      const kv = new KVCache(cfg, cfg.num_hidden_layers, cfg.indexer_types.map((t) => cfg.has_dsa && t === "full"), 16, t);
      kv.reserve(100);
      let kvBytes = kv.kv.reduce((a, x) => a + x.byteLength, 0) + kv.ik.reduce((a, x) => a + (x?.byteLength ?? 0), 0);
      kv.ik.forEach((x, i) => { if (x) { const q = ikQ8(kv, i, 0, 0); kvBytes += q.k8.byteLength + q.dk.byteLength; } }); // fast mode's int8 keys
      const mtpAndHidden = kvRows(100) * (kv.kv[0].byteLength / kv.cap + 4 * cfg.hidden_size);
      expect(kvRows(100) * kvBytesPerToken(cfg, t)).toBe(kvBytes + mtpAndHidden);
      expect(kvBytesPerToken(cfg, t, false)).toBe(kvBytesPerToken(cfg, t) - 4 * cfg.hidden_size); // (no MTP drafting: no hidden rows)
    }
  });
});

describe("RAM detection", () => {
  test("MemAvailable from /proc/meminfo text; --ram-gb wins", () => {
    expect(parseMemAvailable("MemTotal:  100 kB\nMemFree: 5 kB\nMemAvailable:    2048 kB\n")).toBe(2048 * 1024);
    expect(parseMemAvailable("MemTotal: 100 kB\n")).toBeNull();
    expect(detectRam(1.5)).toEqual({ bytes: 1.5 * GiB, source: "--ram-gb" });
    expect(detectRam().bytes).toBeGreaterThan(0);
  });
});

describe("pins and eviction", () => {
  test("hottest: by heat, ties to the lower id, zero heat never", () => {
    expect(hottest([0, 5, 3, 5, 0, 1], 3)).toEqual([1, 3, 2]);
    expect(hottest([0, 0, 2], 5)).toEqual([2]);
  });

  test("repin: towards the hottest, with hysteresis and at most maxSwaps loads", () => {
    const heat = [10, 9, 8, 1, 0, 0, 0, 0];
    expect(repinPlan(heat, new Set(), 3)).toEqual({ pin: [0, 1, 2], unpin: [] });
    // 5 is hotter than pinned 3 but within the hysteresis: stays
    expect(repinPlan([10, 9, 0, 1, 0, 1.2, 0, 0], new Set([0, 1, 3]), 3)).toEqual({ pin: [], unpin: [] });
    // clearly hotter: swapped
    expect(repinPlan([10, 9, 0, 1, 0, 2, 0, 0], new Set([0, 1, 3]), 3)).toEqual({ pin: [5], unpin: [3] });
    // a whole new hot set: bounded swaps per pass
    const shifted = [0, 0, 0, 1, 20, 20, 20, 20];
    const r = repinPlan(shifted, new Set([0, 1, 2, 3]), 4, { maxSwaps: 2 });
    expect(r.pin).toEqual([4, 5]);
    expect(r.unpin.sort()).toEqual([0, 1, 2]); // cold ones (heat 0) are unpinned for free
    // the target shrinks: the coldest go
    expect(repinPlan([5, 4, 3, 2], new Set([0, 1, 2, 3]), 2)).toEqual({ pin: [], unpin: [3, 2] });
  });

  test("victims: never locked, pinned or loading; empty first; LRU vs LFRU", () => {
    const mk = (e: number, last: number, o: Partial<Slot> = {}) => Object.assign(new Slot(false, 1), { e, last, state: READY }, o);
    const heat = new Float64Array([0, 9, 1, 5, 0, 0]);
    const slots = [mk(1, 1), mk(2, 2), mk(3, 3), mk(4, 0, { lock: true }), mk(5, 0, { pinned: true })];
    expect(pickVictim(slots, "lru", heat)!.e).toBe(1);
    expect(pickVictim(slots, "lfru", heat)!.e).toBe(2); // older half {1, 2}: 2 is colder
    expect(pickVictim([...slots, mk(-1, 9, { state: EMPTY })], "lru", heat)!.state).toBe(EMPTY);
    expect(pickVictim([mk(1, 1, { lock: true }), mk(2, 1, { state: 1 })], "lru", heat)).toBeNull();
  });
});

describe("flags", () => {
  test("--expert-cache, --ram-gb, --direct, --mmap, policy and prefetch map to options; bad values are usage errors", () => {
    expect(expertOptions({ "expert-cache": "8", "ram-gb": "1.5", direct: true, "expert-policy": "lfru", "expert-prefetch": "on" }, "h"))
      .toEqual({ slots: 8, ramGb: 1.5, direct: true, policy: "lfru", prefetch: "on" });
    expect(expertOptions({}, "h")).toEqual({});
    expect(() => expertOptions({ "expert-cache": "-1" }, "h")).toThrow(/non-negative integer/);
    expect(() => expertOptions({ "ram-gb": "0" }, "h")).toThrow(/positive/);
    expect(() => expertOptions({ direct: true, mmap: true }, "h")).toThrow(/exclude/);
    expect(() => expertOptions({ "expert-policy": "fifo" }, "h")).toThrow(/lru\|lfru/);
  });
});
