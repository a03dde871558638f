// Shared harness of the Vulkan chain suites (test/gpu.chain.test.ts, test/gpu.split.test.ts): a conversation
// driven by the CPU forward or a chain, seeded token ids, the worst per-position logits error, greedy decode on
// both paths and a chain opener that closes every chain it opened after the file's tests. State: each Conv's KV cache, RunState
// and position; each opener's list of open chains.
import { afterAll } from "bun:test";
import { newKV, type Model } from "../../src/engine/model.ts";
import { forward, type ForwardOpts } from "../../src/engine/forward.ts";
import { RunState } from "../../src/engine/state.ts";
import type { KVCache } from "../../src/engine/kv.ts";
import { argmax } from "../../src/engine/session.ts";
import { type ChainOpts, DeviceChain } from "../../src/device/chain.ts";
import { relRms } from "./fixture.ts";

/** A conversation driven either by the CPU forward or by a chain (opts go to every forward call). */
export class Conv {
  kv: KVCache;
  st: RunState;
  pos = 0;
  constructor(readonly m: Model, readonly chain: DeviceChain | null, readonly opts: ForwardOpts = {}) {
    this.kv = newKV(m);
    this.st = new RunState(m.cfg);
  }
  /** Feeds ids at the current position; logits of the last row, or of every row with all. */
  feed(ids: number[], all = false): Float32Array {
    const segs = [{ kv: this.kv, r0: 0, n: ids.length, pos0: this.pos }];
    const o: ForwardOpts = { ...this.opts, logits: all ? "all" : "last", ...(this.chain ? { executor: this.chain } : {}) };
    const rows = forward(this.m, this.st, segs, ids, o);
    this.pos += ids.length;
    return this.st.logits.slice(0, rows * this.m.cfg.vocab_size);
  }
  truncate(n: number): void { this.kv.truncate(n); this.pos = n; }
}

/** n deterministic token ids in [16, V) from seed. */
export function ids(n: number, V: number, seed: number): number[] {
  let s = seed;
  return Array.from({ length: n }, () => ((s = (s * 1103515245 + 12345) >>> 0) % (V - 16)) + 16);
}

/** The worst relative RMS error over positions of logits a against b (both [positions, V]). */
export function worst(a: Float32Array, b: Float32Array, V: number): number {
  let w = 0;
  for (let p = 0; p < b.length / V; p++) w = Math.max(w, relRms(a.subarray(p * V, (p + 1) * V), b.subarray(p * V, (p + 1) * V)));
  return w;
}

/** Prefill + greedy decode on the CPU and on chain (opts on both). The device follows the CPU's tokens (errors
 * stay comparable), or with ownTokens its own; returns both token lists and the worst logits error (with
 * ownTokens: while the tokens agree). */
export function greedy(m: Model, chain: DeviceChain, prompt: number[], steps: number, opts: ForwardOpts = {}, ownTokens = false) {
  const cpu = new Conv(m, null, opts), dev = new Conv(m, chain, opts), V = m.cfg.vocab_size;
  let lc = cpu.feed(prompt, true), ld = dev.feed(prompt, true);
  let err = worst(ld, lc, V);
  const tc: number[] = [], td: number[] = [];
  lc = lc.slice(-V); ld = ld.slice(-V);
  for (let i = 0; i < steps; i++) {
    tc.push(argmax(lc)); td.push(argmax(ld));
    lc = cpu.feed([tc[i]]); ld = dev.feed([ownTokens ? td[i] : tc[i]]);
    if (!ownTokens || td[i] === tc[i]) err = Math.max(err, relRms(ld, lc));
  }
  return { err, tc, td };
}

/** An opener of chains that closes them all after the calling file's tests. Call at file scope. */
export function chainOpener(): (m: Model, o?: ChainOpts) => DeviceChain {
  const chains: DeviceChain[] = [];
  afterAll(() => { for (const c of chains) c.close(); });
  return (m, o = {}) => { const c = DeviceChain.open(m, o); chains.push(c); return c; };
}
