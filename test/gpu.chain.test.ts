// The device chain against the exact CPU forward, on both backends (Vulkan; WebGPU through Dawn): greedy tokens identical and logits within 1e-4 (relative
// RMS) on the shared fixture and generated models, for the whole stack and partial chains (layers 0..N-1 on
// the device), quantized containers (src/model/convert.ts: int8/int4/int4g/int2 dense weights dequantised
// in the matmul shader, against the exact CPU forward), multi-conversation batches, KV-mirror invalidation
// (rewind, slot reuse, CPU writes between device steps) and the device-loss fallback. Each backend's suites
// skip, saying why, without its device. (The KV split and the multiplexed decode: test/gpu.split.test.ts.)
import { afterAll, describe, expect, test } from "bun:test";
import { genModel } from "./helpers/models.ts";
import { expectSelections, hasTiny, readRef, recordSelections, relRms, TINY } from "./helpers/fixture.ts";
import { loadModel, newKV } from "../src/engine/model.ts";
import { forward } from "../src/engine/forward.ts";
import { RunState } from "../src/engine/state.ts";
import type { KVCache } from "../src/engine/kv.ts";
import { argmax } from "../src/engine/session.ts";
import { DeviceChain } from "../src/device/chain.ts";
import { convert } from "../src/model/convert.ts";
import { parseFmt } from "../src/model/quant.ts";
import { Fmt } from "../src/native/hb.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testDevice } from "./helpers/device.ts";
import { APIS, type Api } from "../src/device/backend.ts";
import type { ChainOpts } from "../src/device/chainopts.ts";
import type { Wgpu } from "../src/device/webgpu/webgpu.ts";
import type { Model } from "../src/engine/model.ts";
import { chainOpener, Conv, greedy, ids, worst } from "./helpers/chain.ts";

const vulkan = testDevice();
const TOL = 1e-4;

const opener = chainOpener();

for (const api of APIS) {
const vk = testDevice(api);
const open = (m: Model, o: ChainOpts = {}) => opener(m, { ...o, api });

describe.skipIf(!vk)(`${api} chain: generated model`, () => {
  const m = vk ? loadModel(genModel({ preset: "tiny", seed: 1 })) : (null as never);
  const V = m?.cfg.vocab_size;

  test("all layers: greedy tokens identical, logits within 1e-4 (prefill + decode past index_topk)", () => {
    const ch = open(m);
    expect(ch.n).toBe(m.cfg.num_hidden_layers);
    const r = greedy(m, ch, ids(12, V, 5), 8);
    expect(r.td).toEqual(r.tc);
    expect(r.err).toBeLessThan(TOL);
    expect(ch.stats.forwards).toBe(9);
    expect(ch.stats.mirrorBytes).toBe(0); // own steps only: the watermark never asked for a re-upload
    expect(ch.stats.bytesDown).toBeGreaterThan(0);
  });

  for (const N of [1, 2, 3]) {
    test(`partial chain: layers 0..${N - 1} on the device, the rest on the CPU`, () => {
      const ch = open(m, { layers: N });
      const r = greedy(m, ch, ids(10, V, 9), 4);
      expect(r.td).toEqual(r.tc);
      expect(r.err).toBeLessThan(TOL);
    });
  }
});

describe.skipIf(!vk)(`${api} chain: quantized containers (convert.ts) against the exact CPU forward`, () => {
  const src = vk ? genModel({ preset: "tiny", seed: 1 }) : "";
  const tmp = vk ? mkdtempSync(join(tmpdir(), "hb-quant-")) : "";
  afterAll(() => { if (tmp) rmSync(tmp, { recursive: true, force: true }); });
  for (const dense of ["int4", "int4g16", "int2", "int8"]) {
    test(`dense ${dense}, experts int4g32: greedy tokens identical, logits within 1e-4`, () => {
      const dir = join(tmp, dense);
      convert(src, dir, { experts: parseFmt("int4g32")!, dense: parseFmt(dense)!, mtp: parseFmt("int8")! });
      const m = loadModel(dir), f = parseFmt(dense)!.fmt;
      expect(m.w.layers[1].attn.kv_b.fmt).toBe(f);
      expect(m.w.layers[0].mlp!.down.fmt).toBe(f);
      const ch = open(m);
      const cpu = new Conv(m, null, { exact: true }), dev = new Conv(m, ch, { exact: true }), V = m.cfg.vocab_size;
      let lc = cpu.feed(ids(11, V, 3), true), ld = dev.feed(ids(11, V, 3), true);
      let err = worst(ld, lc, V);
      lc = lc.slice(-V); ld = ld.slice(-V);
      for (let i = 0; i < 5; i++) {
        const t = argmax(lc);
        expect(argmax(ld)).toBe(t);
        lc = cpu.feed([t]); ld = dev.feed([t]);
        err = Math.max(err, relRms(ld, lc));
      }
      expect(err).toBeLessThan(TOL);
    });
  }
});

describe.skipIf(!vk)(`${api} chain: batches, KV mirror invalidation, device loss`, () => {
  const m = vk ? loadModel(genModel({ preset: "tiny", seed: 7, set: { num_hidden_layers: 3, index_topk: 5, num_attention_heads: 2,
    indexer_types: ["full", "shared", "full"], mlp_layer_types: ["dense", "sparse", "sparse"] } })) : (null as never);
  const V = m?.cfg.vocab_size;

  test("two conversations in one batch (ragged segments) equal the CPU batch", () => {
    const ch = open(m);
    const run = (dev: boolean) => {
      const st = new RunState(m.cfg), A = newKV(m), B = newKV(m), out: Float32Array[] = [];
      const f = (segs: { kv: KVCache; r0: number; n: number; pos0: number }[], toks: number[]) => {
        const n = forward(m, st, segs, toks, dev ? { logits: "all", executor: ch } : { logits: "all" });
        out.push(st.logits.slice(0, n * V));
      };
      f([{ kv: A, r0: 0, n: 7, pos0: 0 }], ids(7, V, 1));
      f([{ kv: B, r0: 0, n: 4, pos0: 0 }], ids(4, V, 2));
      f([{ kv: A, r0: 0, n: 3, pos0: 7 }, { kv: B, r0: 3, n: 2, pos0: 4 }], ids(5, V, 3));
      for (let i = 0; i < 3; i++) f([{ kv: B, r0: 0, n: 1, pos0: 6 + i }, { kv: A, r0: 1, n: 1, pos0: 10 + i }], ids(2, V, 4 + i));
      return out;
    };
    const c = run(false), d = run(true);
    c.forEach((l, i) => expect(worst(d[i], l, V)).toBeLessThan(TOL));
  });

  test("the last layer's routed experts run on the host only for rows with logits (same logits, fewer rows)", () => {
    const ch = open(m), p = ids(9, V, 101), q = ids(4, V, 102);
    const last = new Conv(m, ch), all = new Conv(m, ch), cpu = new Conv(m, null);
    const l = last.feed(p), h0 = ch.stats.hostRows;
    expect(h0).toBe(9 + 1); // layer 1 every row, layer 2 (the last) the row with logits
    expect(all.feed(p, true).subarray(8 * V)).toEqual(l); // the kept row's bits do not depend on the skip
    expect(ch.stats.hostRows - h0).toBe(9 + 9);
    expect(relRms(l, cpu.feed(p))).toBeLessThan(TOL);
    const t = ids(1, V, 103);
    expect(relRms(last.feed(t), cpu.feed(t))).toBeLessThan(TOL); // the skipped rows' KV rows are whole
    // two conversations in one batch, each with logits on its last row only: rows 6 and 10 kept, moved and back
    const run = (dev: boolean) => {
      const st = new RunState(m.cfg), A = newKV(m), B = newKV(m);
      const n = forward(m, st, [{ kv: A, r0: 0, n: 7, pos0: 0 }, { kv: B, r0: 7, n: 4, pos0: 0 }], [...ids(7, V, 104), ...q],
        dev ? { logits: "last", executor: ch } : { logits: "last" });
      return st.logits.slice(0, n * V);
    };
    const h1 = ch.stats.hostRows, d = run(true);
    expect(ch.stats.hostRows - h1).toBe(11 + 2);
    expect(worst(d, run(false), V)).toBeLessThan(TOL);
  });

  test("rewind (truncate) and continue with other tokens: the mirror re-uploads, results follow the CPU", () => {
    const ch = open(m), cpu = new Conv(m, null), dev = new Conv(m, ch);
    const a = ids(14, V, 21), b = ids(6, V, 22);
    cpu.feed(a); dev.feed(a);
    cpu.truncate(6); dev.truncate(6);
    const before = ch.stats.mirrorBytes;
    expect(worst(dev.feed(b, true), cpu.feed(b, true), V)).toBeLessThan(TOL);
    expect(ch.stats.mirrorBytes).toBeGreaterThan(before); // rows [?, 6) went up again
    for (let i = 0; i < 3; i++) { const t = ids(1, V, 30 + i); expect(relRms(dev.feed(t), cpu.feed(t))).toBeLessThan(TOL); }
  });

  test("a CPU forward rewriting rows the mirror holds is seen (no stale mirror rows)", () => {
    const ch = open(m), cpu = new Conv(m, null), dev = new Conv(m, ch);
    const a = ids(6, V, 41), b = ids(3, V, 42), c = ids(4, V, 43);
    cpu.feed(a); dev.feed(a); // the mirror holds rows [0, 6)
    cpu.truncate(3); cpu.feed(b);
    dev.truncate(3); // rows [3, 6) rewritten by the CPU forward (len is 6 again)
    forward(m, dev.st, [{ kv: dev.kv, r0: 0, n: 3, pos0: 3 }], b, { logits: "none" });
    dev.pos = 6;
    expect(worst(dev.feed(c, true), cpu.feed(c, true), V)).toBeLessThan(TOL);
  });

  test("one mirror slot shared by two alternating conversations (slot reuse lowers the watermark)", () => {
    const ch = open(m, { slots: 1 }), c1 = new Conv(m, null), c2 = new Conv(m, null), d1 = new Conv(m, ch), d2 = new Conv(m, ch);
    const p1 = ids(8, V, 51), p2 = ids(5, V, 52);
    c1.feed(p1); d1.feed(p1); c2.feed(p2); d2.feed(p2);
    for (let i = 0; i < 3; i++) {
      const t1 = ids(1, V, 60 + i), t2 = ids(1, V, 70 + i);
      expect(relRms(d1.feed(t1), c1.feed(t1))).toBeLessThan(TOL);
      expect(relRms(d2.feed(t2), c2.feed(t2))).toBeLessThan(TOL);
    }
  });

  test("device loss in the first forward (fault at submit 2): the forward re-runs on the CPU, bit-exact", () => {
    const ch = open(m, { fault: 2 }), cpu = new Conv(m, null), dev = new Conv(m, ch);
    const p = ids(9, V, 81);
    expect(dev.feed(p, true)).toEqual(cpu.feed(p, true));
    expect(ch.lost).toBe(true);
    expect(ch.stats.fallbacks).toBe(1);
    const t = ids(1, V, 82);
    expect(dev.feed(t)).toEqual(cpu.feed(t)); // later forwards stay on the CPU
  });

  if (api === "webgpu") test("the Dawn host killed mid-decode: the forward re-runs on the CPU and follows it", () => {
    const ch = open(m), cpu = new Conv(m, null), dev = new Conv(m, ch), p = ids(8, V, 95);
    expect(worst(dev.feed(p, true), cpu.feed(p, true), V)).toBeLessThan(TOL);
    process.kill((ch as unknown as { vk: Wgpu }).vk.hostPid, "SIGKILL");
    for (const t of [ids(1, V, 96), ids(1, V, 97)]) expect(relRms(dev.feed(t), cpu.feed(t))).toBeLessThan(TOL);
    expect(ch.lost).toBe(true);
    expect(ch.lostReason).toMatch(/Dawn host exited/);
    expect(ch.stats.fallbacks).toBe(1);
  });

  test("HB_VK_FAULT=n fakes a loss mid-decode; generation continues on the CPU with the same tokens", () => {
    const saved = process.env.HB_VK_FAULT;
    process.env.HB_VK_FAULT = "9";
    let ch: DeviceChain;
    try { ch = open(m); } finally { if (saved === undefined) delete process.env.HB_VK_FAULT; else process.env.HB_VK_FAULT = saved; }
    const r = greedy(m, ch, ids(8, V, 91), 6);
    expect(ch.lost).toBe(true);
    expect(ch.stats.fallbacks).toBe(1);
    expect(r.td).toEqual(r.tc);
    expect(r.err).toBeLessThan(TOL);
  });
});

describe.skipIf(!vk || !hasTiny)(`${api} chain: glm-tiny fixture`, () => {
  const m = vk && hasTiny ? loadModel(TINY) : (null as never);
  for (const name of ["short", "long"] as const) {
    test(`${name}: greedy continuation equals the reference and the CPU`, () => {
      const ref = readRef(name), ch = open(m);
      const r = greedy(m, ch, ref.prompt_ids, ref.gen_ids.length);
      expect(r.td).toEqual(ref.gen_ids);
      expect(r.tc).toEqual(ref.gen_ids);
      expect(r.err).toBeLessThan(TOL);
    });
  }

  test("long: the device's DSA selections of full layers equal the reference (onSelect hook)", () => {
    const ref = readRef("long"), ch = open(m), rec = recordSelections();
    const conv = new Conv(m, ch, { onSelect: rec.onSelect });
    conv.feed(ref.full_ids, true);
    expectSelections(ref, rec.got);
  });
});
}

describe.skipIf(!vulkan)("src/device/bench.ts", () => {
  test("benchDevice: device and CPU rates, matching greedy tokens (exact), crossings, frame shares, KV split", async () => {
    const { benchDevice, formatDeviceBench } = await import("../src/device/bench.ts");
    const r = benchDevice(genModel({ preset: "tiny", seed: 1 }), { promptTokens: 12, gen: 6, reps: 1, exact: true, chain: { kvBudgetRows: 8, kvBlock: 4 } });
    expect(r.device_decode_tok_s).toBeGreaterThan(0);
    expect(r.cpu_decode_tok_s!).toBeGreaterThan(0);
    expect(r.tokens_match).toBe(true);
    expect(r.bytes_down_per_token).toBeGreaterThan(0);
    expect(r.split_frames).toBeGreaterThan(0);
    const s = r.decode_shares, sum = s.a1 + s.host + s.a2 + s.split + s.record + s.other;
    expect(sum).toBeGreaterThan(0.99);
    expect(sum).toBeLessThan(1.01);
    expect(r.hbm_roofline).toBeGreaterThan(0);
    expect(formatDeviceBench(r)).toContain("greedy tokens match");
  });
});

describe.skipIf(!vulkan)("--device policy", () => {
  test("cpu gives no executor; vulkan opens the chain (lavapipe included); auto skips CPU devices; bad names fail", async () => {
    const { openDevice, parseDeviceMode } = await import("../src/device/device.ts");
    const m = loadModel(genModel({ preset: "tiny", seed: 1 }));
    expect(openDevice(m, "cpu").chain).toBeNull();
    const v = openDevice(m, "vulkan", { layers: 2 });
    expect(v.chain?.n).toBe(2);
    expect(v.chain!.summary()).toContain("0 forwards");
    v.chain!.close();
    const a = openDevice(m, "auto");
    if (vulkan!.isCpu) expect(a.chain).toBeNull(); else a.chain?.close();
    expect(() => openDevice(m, "vulkan", { device: "no-such-gpu" })).toThrow(/no device matches/);
    if (testDevice("webgpu")) {
      const w = openDevice(m, "webgpu", { layers: 2 });
      expect([w.chain?.api, w.chain?.n]).toEqual(["webgpu", 2]);
      expect(w.chain!.summary()).toMatch(/^webgpu .*0 forwards/);
      w.chain!.close();
      // auto without Vulkan (the shim made unloadable) asks Dawn, which offers lavapipe: a CPU device, so the CPU
      const r = Bun.spawnSync({ cmd: [process.execPath, "src/cli.ts", "generate", "--model", genModel({ preset: "tiny", seed: 1 }),
        "--ids", "1,2,3", "--max-tokens", "2"], env: { ...process.env, HB_VK_LIB: "/nonexistent" }, stderr: "pipe", stdout: "pipe" });
      expect(r.exitCode).toBe(0);
      expect(r.stderr.toString()).toMatch(/device: cpu \(Vulkan shim unavailable.*; WebGPU's adapter .* is a CPU device/);
    }
    expect(() => parseDeviceMode("tpu")).toThrow(/--device/);
  });
});
