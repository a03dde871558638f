// Expert streaming (src/engine/experts/): with the cache at 1, 2 and all slots per layer, buffered,
// O_DIRECT and mmap reads, f32 / bf16 and every quantized expert format, teacher-forced logits are
// bit-identical to the loader's and greedy tokens equal; non-contiguous and sharded layouts too.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { convert } from "../src/model/convert.ts";
import { parseFmt } from "../src/model/quant.ts";
import { openModel, writeSafetensors, readBytes } from "../src/model/safetensors.ts";
import { loadModel, type Model } from "../src/engine/model.ts";
import { generate } from "../src/engine/generate.ts";
import { Session } from "../src/engine/session.ts";
import { attachExperts, type ExpertOptions } from "../src/engine/experts/index.ts";
import { layoutExpert } from "../src/engine/experts/layout.ts";
import { LazyMoe } from "../src/model/weights.ts";
import { genModel } from "./helpers/models.ts";

const root = mkdtempSync(join(tmpdir(), "hb-experts-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const q = (s: string) => parseFmt(s)!;
const prompt = [14, 51, 88, 125, 162, 199, 236, 273, 310, 347, 384, 421, 3, 77, 190, 260, 301, 402, 9, 45];
const quiet: ExpertOptions = { learn: false, quiet: true };

function converted(name: string, experts: string, seed: number, shardBytes?: number): string {
  const out = join(root, name);
  convert(genModel({ preset: "tiny", seed }), out, { experts: q(experts), dense: q("int8"), mtp: q("int8"), shardBytes });
  return out;
}

interface Ref { logits: Float32Array; tokens: number[]; mtpTokens: number[] }
/** Greedy tokens (plain and MTP-drafted), then — on the warm cache, so batches run resident-first —
 *  the logits of a 12-row prefill and of 8 single-token steps, all kept. */
function run(m: Model): Ref {
  const tokens = generate(m, prompt.slice(0, 6), { maxTokens: 10, temperature: 0, stopIds: [] }).gen_ids;
  const mtpTokens = m.w.mtp ? generate(m, prompt.slice(0, 5), { maxTokens: 8, temperature: 0, stopIds: [], draft: "mtp" }).gen_ids : [];
  const s = new Session(m), V = m.cfg.vocab_size;
  const logits = new Float32Array(prompt.length * V);
  logits.set(s.feed(prompt.slice(0, 12), true));
  for (let p = 12; p < prompt.length; p++) logits.set(s.feed([prompt[p]]), p * V);
  return { logits, tokens, mtpTokens };
}

function expectSame(a: Ref, b: Ref, what: string) {
  expect([what, a.tokens]).toEqual([what, b.tokens]);
  expect([what, a.mtpTokens]).toEqual([what, b.mtpTokens]);
  let diff = 0;
  for (let i = 0; i < a.logits.length; i++) if (!Object.is(a.logits[i], b.logits[i])) diff++;
  expect([what, diff]).toEqual([what, 0]);
}

const models = [
  { name: "f32", dir: () => genModel({ preset: "tiny", seed: 41 }) },
  { name: "bf16", dir: () => genModel({ preset: "tiny", seed: 42, dtype: "bf16" }) },
  { name: "int8", dir: () => converted("int8", "int8", 43) },
  { name: "int4", dir: () => converted("int4", "int4", 44) },
  { name: "int2", dir: () => converted("int2", "int2", 45) },
  { name: "int4g8 (sharded)", dir: () => converted("int4g8", "int4g8", 46, 48 * 1024) },
];
const modes: [string, ExpertOptions][] = [["buffered", {}], ["direct", { direct: true }], ["mmap", { mmap: true }]];

describe("expert streaming equals the loader", () => {
  for (const md of models) {
    test(`${md.name}: cache 1, 2, half, all × buffered, direct, mmap`, () => {
      const m = loadModel(md.dir());
      const ref = run(m);
      const E = m.cfg.n_routed_experts;
      for (const [mode, o] of modes) {
        for (const slots of [1, 2, E / 2, E]) {
          const store = attachExperts(m, { ...quiet, ...o, slots });
          const got = run(m);
          const st = store.stats(), fused = store.layers.reduce((n, L) => n + L.fused, 0);
          store.close();
          expectSame(got, ref, `${mode} slots=${slots}`);
          expect(st.failures).toBe(0);
          if (slots === 1) expect(st.misses).toBeGreaterThan(0);
          if (slots === E / 2) expect([mode, st.evictions > 0]).toEqual([mode, true]);
          if (slots === E) expect([mode, fused > 0]).toEqual([mode, true]); // batches of cached experts in one call (moeLayer)
          expect(st.hits + st.misses + st.prefetchHits).toBeGreaterThan(0);
        }
      }
      expect(m.w.layers[1].moe).toBeInstanceOf(LazyMoe); // close restored the loader's Moe
      m.store.close();
    });
  }

  test("speculative prefetch and LFRU keep the result; prefetches are used", () => {
    const m = loadModel(converted("pf", "int4g8", 47));
    const ref = run(m);
    for (const o of [{ prefetch: true, slots: 1 }, { prefetch: true, slots: 3, policy: "lfru" as const }, { prefetch: true, slots: 2, mmap: true }]) {
      const store = attachExperts(m, { ...quiet, ...o });
      const got = run(m);
      const st = store.stats();
      store.close();
      expectSame(got, ref, JSON.stringify(o));
      expect(st.prefetchIssued).toBeGreaterThan(0);
      expect(st.prefetchHits + st.prefetchWasted).toBeGreaterThan(0);
    }
    m.store.close();
  });

  test("router-piloted prefetch keeps the result; its predictions are counted and used", () => {
    const m = loadModel(converted("pilot", "int4g8", 49));
    const ref = run(m);
    for (const o of [{ slots: 1 }, { slots: 3, policy: "lfru" as const }, { slots: 2, mmap: true }, { slots: 2, direct: true }]) {
      const store = attachExperts(m, { ...quiet, ...o, prefetch: "pilot" });
      expect(m.w.layers[1].moe!.prefetch).toBeFunction();
      const got = run(m);
      const st = store.stats();
      store.prefetch = "off";
      expect(m.w.layers[1].moe!.prefetch).toBeNull(); // the forward asks only while the mode is pilot
      store.close();
      expectSame(got, ref, JSON.stringify(o));
      expect(st.failures).toBe(0);
      expect(st.prefetchIssued).toBeGreaterThan(0);
      expect(st.prefetchHits).toBeGreaterThan(0);
      expect(st.pilotHitRate).toBeGreaterThan(0);
      expect(st.pilotHitRate).toBeLessThanOrEqual(1);
    }
    m.store.close();
  });

  test("non-contiguous experts: several reads per expert, same result", () => {
    const src = converted("contig", "int4g8", 48);
    const st = openModel(src);
    const names = st.names();
    // reverse the order of every tensor: an expert's six tensors are now far apart and out of order
    const shuffled = join(root, "shuffled");
    convert(genModel({ preset: "tiny", seed: 48 }), shuffled, { experts: q("int4g8"), dense: q("int8"), mtp: q("int8") });
    const meta = { ...st.metadata };
    writeSafetensors(join(shuffled, "model.safetensors"),
      names.map((n, i) => ({ n, i })).sort((a, b) => (a.i % 7) - (b.i % 7) || b.i - a.i)
        .map(({ n }) => { const t = st.get(n); return { name: n, dtype: t.dtype, shape: t.shape, data: readBytes(t) }; }), meta);
    st.close();
    const m = loadModel(shuffled);
    const plan = (m.w.layers[1].moe as LazyMoe).plans[3];
    expect(layoutExpert(plan, false, 0).spans.length).toBeGreaterThan(1);
    const contiguous = loadModel(src);
    expect(layoutExpert((contiguous.w.layers[1].moe as LazyMoe).plans[3], false).spans.length).toBe(1);
    expect(layoutExpert((contiguous.w.layers[1].moe as LazyMoe).plans[3], true).spans.length).toBe(1);
    const ref = run(contiguous);
    for (const o of [{ slots: 1 }, { slots: 2, direct: true }, { slots: 16, mmap: true }]) {
      const store = attachExperts(m, { ...quiet, ...o });
      expectSame(run(m), ref, JSON.stringify(o));
      store.close();
    }
    m.store.close();
    contiguous.store.close();
  });

  test("a large union streams through the working slabs (prefill with 1 slot and 2 slabs)", () => {
    const m = loadModel(converted("union", "int8", 49));
    const ref = run(m);
    const store = attachExperts(m, { ...quiet, slots: 1, workingSlabs: 2 });
    expectSame(run(m), ref, "1 slot, 2 slabs");
    const st = store.stats();
    expect(st.misses).toBeGreaterThan(20);
    expect(st.evictions).toBeGreaterThan(0);
    store.close();
    m.store.close();
  });
});

describe("speculative prefetch, auto mode", () => {
  test("turns on only while the previous routing predicts the misses", () => {
    const m = loadModel(converted("auto", "int4g8", 50));
    const store = attachExperts(m, { ...quiet, slots: 1 });
    expect(store.prefetch).toBe("auto");
    const L = store.layers[0];
    const step = (u: number[]) => { const b = L.resolve(u, u.map(() => 1)); for (const e of b.order) { b.get(e); b.release(e); } b.end(); };
    // a new union each time: the previous one never covers a miss
    for (let t = 0; t < 20; t++) step([t % 16, (t + 5) % 16, (t + 10) % 16].sort((a, b) => a - b));
    expect(store.stats().prefetchPredictable).toBe(0);
    expect(store.stats().prefetchActive).toBe(false);
    // the same union over and over (1 slot: 3 misses each time, all in the previous union)
    for (let t = 0; t < 30; t++) step([2, 7, 11]);
    const st = store.stats();
    expect(st.prefetchPredictable).toBeGreaterThan(0.5);
    expect(st.prefetchActive).toBe(true);
    store.close();
    m.store.close();
  });
});

describe("one call per layer (moeLayer)", () => {
  test("runs only experts the cache holds where their rows were packed: evicted and read again, they are repacked", () => {
    const dir = converted("stale", "int8", 53);
    for (const [mode, o] of modes) for (const exact of [false, true]) {
      const m = loadModel(dir), V = m.cfg.vocab_size;
      let evictAt = -1;
      const feed = (): Float32Array => { // a prefill of 4, then one token at a time; evictAt: let every expert go first
        const s = new Session(m, { exact }), out = new Float32Array(prompt.length * V);
        out.set(s.feed(prompt.slice(0, 4), true));
        for (let p = 4; p < prompt.length; p++) {
          if (p === evictAt) for (const L of store!.layers) for (const sl of L.slots) if (sl.state === 2 /* READY */) L.evict(sl);
          out.set(s.feed([prompt[p]]), p * V);
        }
        return out;
      };
      let store: ReturnType<typeof attachExperts> | null = null;
      const ref = feed();
      store = attachExperts(m, { ...quiet, ...o, slots: m.cfg.n_routed_experts });
      const fused = () => store!.layers.reduce((n, L) => n + L.fused, 0);
      const warm = feed(), f0 = fused();
      evictAt = 8;
      const again = feed(), st = store.stats();
      store.close();
      m.store.close();
      for (const [what, got] of [["warm", warm], ["evicted at 8", again]] as const) {
        let diff = 0;
        for (let i = 0; i < ref.length; i++) if (!Object.is(ref[i], got[i])) diff++;
        expect([mode, exact, what, diff]).toEqual([mode, exact, what, 0]);
      }
      expect([mode, exact, f0 > 0, fused() > f0, st.evictions > 0]).toEqual([mode, exact, true, true, true]);
    }
  });
});

describe("a batch's lifetime", () => {
  test("a new batch ends the layer's previous one, whose experts then unlock; an ended batch hands nothing out", () => {
    const m = loadModel(converted("ended", "int8", 52));
    const store = attachExperts(m, { ...quiet, slots: 4 });
    const L = store.layers[0];
    const a = L.resolve([1, 3], [1, 1]);
    a.get(1);
    const held = L.map.get(1)!;
    expect(held.lock).toBe(true);
    const b = L.resolve([3, 5], [1, 1]); // ends a: expert 1 unlocked, 3 now b's
    expect(held.lock).toBe(false);
    expect(() => a.get(3)).toThrow(/batch has ended/);
    expect(a.ready!(3)).toBe(false);
    a.release(3); // a no-op: 3 stays locked for b
    expect(L.map.get(3)!.lock).toBe(true);
    for (const e of b.order) { b.get(e); b.release(e); }
    b.end();
    expect(L.inBatch.every((s) => s === undefined)).toBe(true);
    store.close();
    m.store.close();
  });
});

describe("router-piloted prefetch in serve", () => {
  test("--expert-prefetch pilot: same tokens as off; /metrics reports the pilot's hit rate", async () => {
    const { spawnServe } = await import("./server.helpers.ts");
    const dir = converted("pilot-serve", "int4g8", 50);
    const complete = async (url: string) => {
      const r = await fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ prompt: prompt.slice(0, 8), max_tokens: 12, temperature: 0, ignore_eos: true }) });
      expect(r.status).toBe(200);
      return ((await r.json()) as { choices: { text: string }[] }).choices[0].text;
    };
    const texts: string[] = [];
    for (const mode of ["pilot", "off"]) {
      const s = await spawnServe(["--model", dir, "--slots", "1", "--expert-cache", "1", "--expert-prefetch", mode, "--no-warmup"]);
      try {
        texts.push(await complete(s.url));
        // the engine's worker posts its counters after the step that ends the request, so they may reach /metrics a
        // moment after the response: read until they show the request (or a deadline)
        let metrics = "", rate = 0;
        for (const t0 = Date.now(); Date.now() - t0 < 5000;) {
          metrics = await (await fetch(`${s.url}/metrics`)).text();
          rate = Number(/^hummingbird_expert_pilot_hit_rate (\S+)$/m.exec(metrics)?.[1]);
          if (mode !== "pilot" || rate > 0) break;
          await Bun.sleep(20);
        }
        if (mode === "pilot") { expect(rate).toBeGreaterThan(0); expect(rate).toBeLessThanOrEqual(1); }
        else expect(rate).toBe(0);
        expect(Number(/^hummingbird_expert_prefetch_used_total (\S+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(0);
      } finally { s.p.kill(); await s.p.exited; }
    }
    expect(texts[0]).toBe(texts[1]);
  }, 60_000);
});
