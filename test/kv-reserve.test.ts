// KV caches are sized before they fill, so no forward step copies every layer into a larger cache mid-stream:
// the server's slots (and their MTP layer's caches) hold the whole context from the start (past the step scratch's 8192-row preallocation too),
// and `generate` reserves the rows of its prompt, its max_tokens and its drafts before the first forward.
import { expect, test } from "bun:test";
import { generate } from "../src/engine/generate.ts";
import { loadModel } from "../src/engine/model.ts";
import { Session } from "../src/engine/session.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { Scheduler } from "../src/engine/serving/scheduler.ts";
import { genModel } from "./helpers/models.ts";

const dir = genModel({ preset: "tiny", seed: 11 });

test("server slots hold the whole context from the start, also past 8192 rows", () => {
  const m = loadModel(dir);
  expect(m.w.mtp).not.toBeNull();
  for (const ctx of [100, 16384]) {
    const s = new Scheduler(m, loadTokenizer(dir), { slots: 2, ctx, queue: 4, chunk: 32 }, () => {});
    for (const slot of s.slots) {
      expect(slot.sess.kv.cap).toBe(ctx === 100 ? 128 : 16384);
      expect(slot.sess.mtpKV!.cap).toBe(ctx === 100 ? 128 : 16384); // the MTP layer's cache (drafting) too
    }
  }
});

test("generate reserves every row it may write before its first forward: the cache never grows mid-stream", () => {
  const m = loadModel(dir), s = new Session(m);
  const events: [number, number][] = []; // (cap before, cap after) of each reserve
  const reserve = s.kv.reserve.bind(s.kv);
  s.kv.reserve = (n: number) => { const before = s.kv.cap; reserve(n); events.push([before, s.kv.cap]); };
  const prompt = Array.from({ length: 10 }, (_, i) => 3 + i), maxTokens = 100;
  const r = generate(m, prompt, { maxTokens, temperature: 0, stopIds: [], session: s });
  expect(r.gen_ids.length).toBe(maxTokens);
  expect(s.kv.cap).toBeGreaterThanOrEqual(prompt.length + maxTokens);
  expect(events.length).toBeGreaterThan(maxTokens); // the forward steps reserve too
  expect(events.slice(1).every(([a, b]) => a === b)).toBe(true); // only the first one grew the cache
  expect(events[0][1]).toBeGreaterThan(events[0][0]);
  expect(s.mtpKV!.cap).toBeGreaterThanOrEqual(prompt.length + maxTokens); // the MTP layer's cache, for drafts
});
