// ServeConfig (src/server/config.ts): a flat bag of serve's options split into its sub-objects by the same names, the
// defaults filled in where the worker needs them. Pure: no model, no server.
import { describe, expect, test } from "bun:test";
import { serveConfig } from "../src/server/config.ts";
import { chunkOf, PREFILL_CHUNK, queueOf } from "../src/engine/serving/config.ts";

describe("serveConfig", () => {
  test("each option lands in its sub-object under its own name; absent ones stay absent", () => {
    const log = () => {};
    const c = serveConfig({ dir: "/m", slots: 2, ctx: 64, threads: 3, kvDtype: "f16", schedulingPolicy: "priority", thinkBudget: 5,
      budgetMessage: "x", templateKwargs: { a: 1 }, host: "::1", port: 0, apiKey: "k", log, maxBody: 10, cacheRam: 7 });
    expect(c.engine).toEqual({ dir: "/m", threads: 3, kvDtype: "f16" });
    expect(c.scheduler).toEqual({ slots: 2, ctx: 64, schedulingPolicy: "priority", cacheRam: 7 });
    expect(c.defaults).toEqual({ thinkBudget: 5, budgetMessage: "x", templateKwargs: { a: 1 } });
    expect(c.http).toEqual({ host: "::1", port: 0, apiKey: "k", log, maxBody: 10 });
  });

  test("an unknown option is an error, not silently dropped", () => {
    expect(() => serveConfig({ dir: "/m", slots: 1, reasoningBudget: 3 } as never)).toThrow(/unknown options reasoningBudget/);
  });

  test("queue and chunk defaults", () => {
    expect([queueOf({ slots: 2 }), queueOf({ slots: 8 }), queueOf({ slots: 8, queue: 0 })]).toEqual([16, 32, 0]);
    expect([chunkOf({ slots: 1 }), chunkOf({ slots: 1, chunk: 7 })]).toEqual([PREFILL_CHUNK, 7]);
  });
});
