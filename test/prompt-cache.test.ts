// The host-memory prompt cache (engine/prompt-cache.ts, serve --cache-ram): parked histories restored into another
// session continue bit for bit as if computed there (every KV dtype); least-recently-used eviction within the budget;
// an entry that is a prefix of a newer one goes, one covered by an entry is not parked again. Then a server with one
// slot: a conversation pushed out by another prompt comes back from the cache (cached tokens, the same tokens as a
// server without the cache, which prefills it again), in the metrics.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { genModel } from "./helpers/models.ts";
import { loadModel, newKV } from "../src/engine/model.ts";
import { Session } from "../src/engine/session.ts";
import { PromptCache } from "../src/engine/prompt-cache.ts";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

const m = loadModel(genModel({ preset: "tiny", seed: 9 })), V = m.cfg.vocab_size;
const seq = (n: number, seed: number) => Array.from({ length: n }, (_, i) => ((i * 7919 + seed * 104729) % (V - 16)) + 16);

describe("PromptCache", () => {
  for (const dtype of ["f32", "f16", "q8"] as const) test(`${dtype}: a parked history restored elsewhere continues as computed there`, () => {
    const sess = () => new Session(m, { attn: "absorbed" }, { kv: newKV(m, 64, dtype) });
    const a = sess(), b = sess(), c = sess(), want = sess(), pa = seq(30, 1), pb = seq(12, 2);
    a.feed(pa);
    const cache = new PromptCache(1 << 24);
    cache.park(a);
    a.truncate(0); a.feed(pb); // (the parked copy does not follow its source)
    const prompt = [...pa.slice(0, 25), ...seq(6, 3)], hit = cache.best(prompt, prompt.length - 1)!;
    expect(hit.n).toBe(25);
    b.feed(seq(5, 4));
    cache.restore(b, hit.rows, hit.n);
    expect(b.tokens).toEqual(prompt.slice(0, 25));
    const got = b.feed(prompt.slice(25), true).slice();
    want.feed(prompt.slice(0, 25));
    expect(Array.from(got)).toEqual(Array.from(want.feed(prompt.slice(25), true)));
    expect(cache.hits).toBe(1);
    expect(cache.best(seq(8, 5))).toBeNull();
    c.feed(pa);
    expect(() => cache.restore(c, c.rows(), 3)).toThrow(/not an entry/);
  });

  test("the budget: least recently used out first; a history larger than the budget is not kept; prefixes folded", () => {
    const s = (ids: number[]) => { const x = new Session(m); x.feed(ids); return x; };
    const p1 = seq(20, 1), p2 = seq(20, 2), p3 = seq(20, 3);
    const one = new PromptCache(1 << 30);
    one.park(s(p1));
    const per = one.bytes;
    expect(per).toBeGreaterThan(0);
    const cache = new PromptCache(2 * per + 1);
    cache.park(s(p1)); cache.park(s(p2));
    cache.restore(new Session(m), cache.best(p1)!.rows, 5); // (p1 used since: p2 is the oldest)
    cache.park(s(p3));
    expect([cache.size, cache.evicted, cache.bytes]).toEqual([2, 1, 2 * per]);
    expect(cache.best(p2)).toBeNull();
    expect(cache.best(p1)!.n).toBe(20);
    const tiny = new PromptCache(per - 1);
    tiny.park(s(p1));
    expect(tiny.size).toBe(0);
    const fold = new PromptCache(1 << 30);
    fold.park(s(p1.slice(0, 10)));
    fold.park(s(p1)); // (extends the first: it goes)
    fold.park(s(p1.slice(0, 15))); // (covered: not parked)
    expect([fold.size, fold.bytes]).toEqual([1, per]);
  });
});

describe.skipIf(!hasTiny)("serve --cache-ram", () => {
  let cached: Server, plain: Server;
  beforeAll(async () => { [cached, plain] = await Promise.all([startTiny({ slots: 1, cacheRam: 64 << 20 }), startTiny({ slots: 1 })]); });
  afterAll(async () => { await cached.stop(); await plain.stop(); });
  const PA = Array.from({ length: 80 }, (_, i) => (i * 31) % 480 + 16), PB = Array.from({ length: 40 }, (_, i) => (i * 17) % 480 + 20);
  const run = async (s: Server, prompt: number[]) => {
    const j = (await (await post(s.url, "/v1/completions", { prompt, max_tokens: 6, temperature: 0, ignore_eos: true, logprobs: 0, return_tokens_as_token_ids: true })).json()) as any;
    return { ids: j.choices[0].logprobs.tokens as string[], cached: j.usage.prompt_tokens_details.cached_tokens as number };
  };

  test("a conversation pushed out of the only slot comes back from the cache: its rows restored, the same tokens", async () => {
    for (const s of [cached, plain]) { await run(s, PA); await run(s, PB); } // (PB takes the slot: PA is parked)
    const back = [...PA, 7, 8, 9];
    const [c, p] = [await run(cached, back), await run(plain, back)];
    expect(c.cached).toBe(PA.length);
    expect(p.cached).toBe(0);
    expect(c.ids).toEqual(p.ids);
    let metrics = "";
    for (let i = 0; i < 50 && !/^hummingbird_prompt_cache_hits_total 1$/m.test(metrics); i++) { // (the stats come just after the answer)
      if (i) await Bun.sleep(20);
      metrics = await (await fetch(`${cached.url}/metrics`)).text();
    }
    expect(metrics).toMatch(/^hummingbird_prompt_cache_hits_total 1$/m);
    expect(metrics).toMatch(/^hummingbird_prompt_cache_entries [12]$/m);
    expect(await (await fetch(`${plain.url}/metrics`)).text()).not.toContain("prompt_cache");
  });

  test("six conversations taking turns on two slots: the same tokens as without the cache, far fewer prefilled", async () => {
    const [c2, p2] = await Promise.all([startTiny({ slots: 2, cacheRam: 64 << 20 }), startTiny({ slots: 2 })]);
    try {
      const convs = Array.from({ length: 6 }, (_, k) => Array.from({ length: 30 + 7 * k }, (_, i) => ((i + 1) * (k + 3) * 37) % 480 + 16));
      let cachedOn = 0, cachedOff = 0;
      for (let turn = 0; turn < 3; turn++)
        for (const [k, conv] of convs.entries()) {
          const [a, b] = await Promise.all([run(c2, conv), run(p2, conv)]);
          expect(a.ids).toEqual(b.ids);
          cachedOn += a.cached; cachedOff += b.cached;
          conv.push(...a.ids.map((t) => Number(t.slice("token_id:".length))), 40 + k, 41 + turn); // (the reply and the next user turn)
        }
      expect(cachedOn).toBeGreaterThan(cachedOff + 500);
    } finally { await c2.stop(); await p2.stop(); }
  });

  test("an embedding's input is not a conversation: its slot's rows are not parked", async () => {
    const read = async () => Number(/^hummingbird_prompt_cache_entries (\d+)$/m.exec(await (await fetch(`${cached.url}/metrics`)).text())![1]);
    const entries = async () => { // (the worker's stats arrive just after a request's end: read until they hold still)
      for (let a = await read(); ; ) { await Bun.sleep(60); const b = await read(); if (a === b) return b; a = b; }
    };
    const before = await entries();
    const PE = Array.from({ length: 60 }, (_, i) => (i * 13) % 480 + 30);
    expect((await post(cached.url, "/v1/embeddings", { input: PE })).status).toBe(200); // (takes the slot: its conversation parked)
    const mid = await entries();
    await run(cached, PB.slice(0, 30)); // (takes the slot from the embedding: nothing parked)
    expect(await entries()).toBe(mid);
    expect(mid).toBeGreaterThanOrEqual(before);
  });
});
