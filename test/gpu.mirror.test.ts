// The mirror pool's hard cap (ChainOpts.slots, src/device/mirror.ts): pure pool logic with a stand-in device (the LRU
// slot not in the batch gives way, a batch with more conversations grows the pool for itself only and trim()
// shrinks it back), then on the chain: 3 conversations alternating over 2 slots decode the CPU's tokens with
// at most 2 mirrors, whole and split; a 3-conversation batch over 2 slots. Chain parts skip without Vulkan.
import { describe, expect, test } from "bun:test";
import { genModel } from "./helpers/models.ts";
import { loadModel, newKV, type Model } from "../src/engine/model.ts";
import { forward } from "../src/engine/forward.ts";
import { RunState } from "../src/engine/state.ts";
import { argmax } from "../src/engine/session.ts";
import { KVCache } from "../src/engine/kv.ts";
import type { Config } from "../src/model/config.ts";
import type { DeviceChain } from "../src/device/chain.ts";
import { MirrorPool, type MirrorSlot } from "../src/device/mirror.ts";
import type { Vk } from "../src/device/vulkan/vk.ts";
import { testDevice } from "./helpers/device.ts";
import { chainOpener, Conv, ids } from "./helpers/chain.ts";

const cfg = { kv_lora_rank: 3, qk_rope_head_dim: 1, index_head_dim: 2 } as Config;
const kvs = (n: number) => Array.from({ length: n }, () => new KVCache(cfg, 1, [false], 8));
/** A pool over a stand-in device: get() allocates nothing, so no device is needed. */
const pool = (max: number) => new MirrorPool({} as Vk, { layers: [0], indexed: [false], W: 4, hd: 2, split: null }, max);
/** What a forward does with the pool: one slot per conversation of the batch, each marked as holding it. */
function batch(p: MirrorPool, convs: KVCache[]): MirrorSlot[] {
  p.trim();
  const busy = new Set<MirrorSlot>();
  const got = convs.map((kv) => { const s = p.get(kv, busy); busy.add(s); s.wm.sync(kv, 0); return s; });
  return got;
}

describe("mirror pool: slots is a hard cap", () => {
  test("alternating 3 conversations over 2 slots: never more than 2, the one read longest ago gives way", () => {
    const p = pool(2), [a, b, c] = kvs(3);
    const [sa] = batch(p, [a]), [sb] = batch(p, [b]);
    expect(p.slots.length).toBe(2);
    const [sc] = batch(p, [c]); // a was read longest ago
    expect(sc).toBe(sa);
    expect(sc.wm.holds(c)).toBe(true);
    expect(sa.wm.holds(a)).toBe(false);
    expect(batch(p, [b])[0]).toBe(sb); // b still has its mirror
    expect(batch(p, [a])[0]).toBe(sc); // now c was read longest ago
    expect(p.slots.length).toBe(2);
  });

  test("a slot of the current batch never gives way; a wider batch grows for itself, trim() shrinks back", () => {
    const p = pool(2), [a, b, c] = kvs(3);
    batch(p, [a]); batch(p, [b]);
    const got = batch(p, [a, b, c]);
    expect(new Set(got).size).toBe(3);
    expect(p.slots.length).toBe(3);
    p.trim();
    expect(p.slots.length).toBe(2);
    expect(p.slots.every((s) => got.includes(s))).toBe(true);
    expect(p.slots.some((s) => s.wm.holds(c))).toBe(true); // the most recently read stay
  });

  test("slots below 1 is refused, naming the option", () => {
    expect(() => pool(0)).toThrow(/slots/);
    expect(() => pool(1.5)).toThrow(/slots/);
  });
});

const vk = testDevice();
const open = chainOpener();

/** Each conversation alone on the CPU: prompt then `steps` greedy tokens. */
function alone(m: Model, prompts: number[][], steps: number): number[][] {
  return prompts.map((p) => {
    const conv = new Conv(m, null), toks: number[] = [];
    let l = conv.feed(p);
    for (let i = 0; i < steps; i++) { toks.push(argmax(l)); l = conv.feed([toks[i]]); }
    return toks;
  });
}

describe.skipIf(!vk)("vulkan chain: 3 conversations over 2 mirror slots", () => {
  const m = vk ? loadModel(genModel({ preset: "tiny", seed: 5 })) : (null as never);
  const V = m?.cfg.vocab_size;
  const prompts = vk ? [ids(6, V, 201), ids(9, V, 202), ids(4, V, 203)] : [];
  const want = vk ? alone(m, prompts, 6) : [];

  for (const [name, o] of [["whole mirrors", {}], ["KV split", { kvBudgetRows: 8, kvBlock: 4 }]] as const)
    test(`${name}: alternating decode equals the CPU, never more than 2 mirrors`, () => {
      const ch: DeviceChain = open(m, { ...o, slots: 2 });
      const convs = prompts.map(() => new Conv(m, ch)), toks: number[][] = prompts.map(() => []);
      const last = convs.map((c, j) => { const l = c.feed(prompts[j]); expect(ch.mirrorSlots).toBeLessThanOrEqual(2); return l; });
      for (let i = 0; i < 6; i++)
        convs.forEach((c, j) => {
          toks[j].push(argmax(last[j]));
          last[j] = c.feed([toks[j][i]]);
          expect(ch.mirrorSlots).toBeLessThanOrEqual(2);
        });
      expect(toks).toEqual(want);
      expect(ch.mirrorSlots).toBe(2);
      expect(ch.stats.mirrorBytes).toBeGreaterThan(0); // slots gave way: evicted conversations re-uploaded
    });

  test("one batch of 3 conversations over 2 slots: grows for the batch, back to 2 after, tokens equal the CPU", () => {
    const ch = open(m, { slots: 2 }), st = new RunState(m.cfg), kv = prompts.map(() => newKV(m));
    const pos = prompts.map((p) => p.length), toks: number[][] = prompts.map(() => []);
    let last = prompts.map((p, j) => {
      forward(m, st, [{ kv: kv[j], r0: 0, n: p.length, pos0: 0 }], p, { logits: "last", executor: ch });
      return st.logits.slice(0, V);
    });
    for (let i = 0; i < 6; i++) {
      const t = last.map((l) => argmax(l));
      t.forEach((x, j) => toks[j].push(x));
      const segs = kv.map((k, j) => ({ kv: k, r0: j, n: 1, pos0: pos[j] + i }));
      forward(m, st, segs, t, { logits: "last", executor: ch });
      last = prompts.map((_, j) => st.logits.slice(j * V, (j + 1) * V));
      expect(ch.mirrorSlots).toBe(2);
    }
    expect(toks).toEqual(want);
  });
});
