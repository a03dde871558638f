// The KV-mirror watermark (src/device/watermark.ts), pure logic: every host write path lowers it, our own step
// (followed by forward's version bump) does not. Needs no device.
import { describe, expect, test } from "bun:test";
import { KVCache } from "../src/engine/kv.ts";
import type { Config } from "../src/model/config.ts";
import { Watermark } from "../src/device/watermark.ts";

const cfg = { kv_lora_rank: 3, qk_rope_head_dim: 1, index_head_dim: 2 } as Config;
const W = 4;

/** What a forward does to the cache: rows [pos0, pos0+n) written, then len and version. */
function hostStep(kv: KVCache, pos0: number, n: number, fill: number): void {
  kv.reserve(pos0 + n);
  kv.kv[0].fill(fill, pos0 * W, (pos0 + n) * W);
  kv.len = pos0 + n;
  kv.wrote(pos0); // as forward() does
}
/** A chain step: the watermark syncs, the rows are written on both sides, forward bumps the version. */
function chainStep(wm: Watermark, kv: KVCache, pos0: number, n: number, fill: number): number {
  const from = wm.sync(kv, pos0);
  wm.uploaded(pos0);
  kv.reserve(pos0 + n);
  kv.kv[0].fill(fill, pos0 * W, (pos0 + n) * W);
  const end = pos0 + n;
  wm.wrote(kv, end, { layer: 0, row: end - 1, data: kv.f32(0).subarray((end - 1) * W, end * W) });
  kv.len = end;
  kv.wrote(pos0); // what forward() does after the layers
  return from;
}
const fresh = () => new KVCache(cfg, 1, [false], 8);

describe("KV mirror watermark", () => {
  test("a new conversation starts at 0; consecutive own steps upload nothing", () => {
    const wm = new Watermark(), kv = fresh();
    expect(chainStep(wm, kv, 0, 5, 1)).toBe(0);
    expect(chainStep(wm, kv, 5, 1, 2)).toBe(5);
    expect(chainStep(wm, kv, 6, 1, 3)).toBe(6);
    expect(wm.valid).toBe(7);
  });

  test("host capacity growth (reserve) does not lower it", () => {
    const wm = new Watermark(), kv = fresh();
    chainStep(wm, kv, 0, 5, 1);
    kv.reserve(1000);
    expect(wm.sync(kv, 5)).toBe(5);
  });

  test("truncate lowers it (to the truncation point or below)", () => {
    const wm = new Watermark(), kv = fresh();
    chainStep(wm, kv, 0, 9, 1);
    kv.truncate(4);
    expect(wm.sync(kv, 4)).toBeLessThanOrEqual(4);
  });

  test("a CPU forward on the same cache (not ours) lowers it", () => {
    const wm = new Watermark(), kv = fresh();
    chainStep(wm, kv, 0, 6, 1);
    kv.truncate(3);
    hostStep(kv, 3, 3, 9); // rows [3, 6) rewritten, len back at 6
    expect(wm.sync(kv, 6)).toBeLessThanOrEqual(3);
  });

  test("a foreign write that looks like our bump (one version, same len) is caught by the fingerprint", () => {
    const wm = new Watermark(), kv = fresh();
    chainStep(wm, kv, 0, 6, 1);
    wm.sync(kv, 6);
    // our forward failed after the chain (no bump); a CPU forward then rewrote [3, 6) with one bump
    const end = 6;
    wm.wrote(kv, end, { layer: 0, row: end - 1, data: kv.f32(0).subarray((end - 1) * W, end * W) });
    hostStep(kv, 3, 3, 7);
    expect(wm.sync(kv, 6)).toBeLessThanOrEqual(3);
  });

  test("a step after a failed forward (no bump) keeps only rows below kv.len", () => {
    const wm = new Watermark(), kv = fresh();
    chainStep(wm, kv, 0, 4, 1);
    wm.sync(kv, 4);
    wm.wrote(kv, 7, null); // the failing forward never set len (still 4) nor bumped
    expect(wm.sync(kv, 7)).toBe(4);
  });

  test("a different conversation in the slot resets it to 0", () => {
    const wm = new Watermark(), a = fresh(), b = fresh();
    chainStep(wm, a, 0, 5, 1);
    hostStep(b, 0, 5, 1);
    expect(wm.sync(b, 5)).toBe(0);
    expect(wm.holds(b)).toBe(true);
  });

  test("a step below the watermark lowers it to its first position", () => {
    const wm = new Watermark(), kv = fresh();
    chainStep(wm, kv, 0, 8, 1);
    kv.len = 8; // a caller re-feeding from position 5 without truncate (the forward rewrites rows 5..)
    expect(wm.sync(kv, 5)).toBe(5);
  });

  test("KVCache's write log lowers it exactly on a foreign write", () => {
    const wm = new Watermark(), kv = fresh();
    chainStep(wm, kv, 0, 9, 1);
    chainStep(wm, kv, 9, 1, 2);
    kv.truncate(5); // the log holds our own step (from 9) and the truncation (from 5)
    expect(wm.sync(kv, 7)).toBe(5);
  });

  test("reset (device lost) drops everything", () => {
    const wm = new Watermark(), kv = fresh();
    chainStep(wm, kv, 0, 5, 1);
    wm.reset();
    expect(wm.holds(kv)).toBe(false);
    expect(wm.sync(kv, 5)).toBe(0);
  });
});
