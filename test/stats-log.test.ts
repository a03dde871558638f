// vLLM's periodic stats lines (server/stats-log.ts): the figures of one interval from the engine client's totals and
// the worker's stats, and on a live server (glm-tiny fixture) lines while a request runs and none once it is idle.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { EngineClient } from "../src/server/engine-client.ts";
import type { Server } from "../src/server/server.ts";
import { startStatsLog, statsLine } from "../src/server/stats-log.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

describe("statsLine", () => {
  test("throughputs over the interval, running / waiting, KV use over every slot's context, prefix hits of the interval", () => {
    const engine = {
      totals: { prompt_tokens: 1300, cached_tokens: 350, generated_tokens: 900 },
      stats: { busy: 2, queue: 1, slots: [{ tokens: 100 }, { tokens: 300 }, { tokens: 0 }, { tokens: 0 }], experts: { hitRate: 0.875 } },
      info: { ctx: 1000 },
    } as unknown as EngineClient;
    expect(statsLine(engine, { prompt: 300, cached: 100, gen: 400, t: 1000 }, 3000)).toBe(
      "Avg prompt throughput: 500.0 tokens/s, Avg generation throughput: 250.0 tokens/s, Running: 2 reqs, Waiting: 1 reqs, "
      + "KV cache usage: 10.0%, Prefix cache hit rate: 25.0%, Expert cache hit rate: 87.5%");
  });
});

describe.skipIf(!hasTiny)("stats lines on a live server", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 2 }); });
  afterAll(async () => { await s.stop(); });

  test("lines while a request generates; none while idle", async () => {
    const lines: string[] = [], stop = startStatsLog(s.engine, (l) => lines.push(l), 30);
    try {
      await Bun.sleep(120);
      expect(lines).toEqual([]); // idle: nothing to say
      const r = await post(s.url, "/v1/completions", { prompt: "Once upon a time", max_tokens: 400, temperature: 0, ignore_eos: true });
      expect(r.status).toBe(200);
      await Bun.sleep(80); // (the interval in which it ended)
      const n = lines.length;
      expect(n).toBeGreaterThan(0);
      const gen = lines.map((l) => Number(/Avg generation throughput: ([\d.]+) tokens\/s/.exec(l)![1]));
      expect(Math.max(...gen)).toBeGreaterThan(0);
      // (running / waiting come from the worker's stats, posted every 250 ms: the unit test above checks them)
      for (const l of lines) expect(l).toMatch(/^Avg prompt throughput: [\d.]+ tokens\/s, Avg generation throughput: [\d.]+ tokens\/s, Running: \d+ reqs, Waiting: \d+ reqs, KV cache usage: \d+\.\d%, Prefix cache hit rate: \d+\.\d%/);
      await Bun.sleep(150);
      expect(lines.length).toBe(n); // idle again
    } finally { stop(); }
  });
});
