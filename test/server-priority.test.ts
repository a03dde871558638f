// vLLM's priority scheduling (serve --scheduling-policy priority): waiting requests are admitted lower `priority`
// first, then in arrival order (checked on the Scheduler itself, step by step: no timing involved); without the
// policy a request naming a priority is refused naming the field.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadModel } from "../src/engine/model.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { Scheduler } from "../src/server/scheduler.ts";
import type { FromWorker, GenRequest } from "../src/server/protocol.ts";
import type { Server } from "../src/server/server.ts";
import { genModel } from "./helpers/models.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

test("the queue is served lower priority first, then in arrival order (the running request is not preempted)", () => {
  const dir = genModel({ preset: "tiny", seed: 4 }), done: number[] = [];
  const s = new Scheduler(loadModel(dir), loadTokenizer(dir), { slots: 1, ctx: 256, queue: 16, chunk: 32 }, (e: FromWorker) => {
    if (e.t === "done") done.push(e.rid);
    if (e.t === "error") throw new Error(`${e.rid}: ${e.code} ${e.detail}`);
  });
  const req = (priority: number | undefined, max_tokens: number): GenRequest => ({ prompt: { kind: "ids", ids: [20, 21, 22] }, slot: "auto",
    max_tokens, temperature: 0, top_p: 1, min_p: 0, top_k: 0, stop: [], ignore_eos: true, ...(priority !== undefined ? { priority } : {}) });
  s.submit(1, req(9, 6)); // runs first (the slot was free), however low its priority
  s.step();
  for (const [rid, p] of [[2, 5], [3, undefined], [4, -1], [5, 5], [6, 0]] as const) s.submit(rid, req(p, 2));
  for (let i = 0; i < 200 && s.hasWork(); i++) s.step();
  expect(done).toEqual([1, 4, 3, 6, 2, 5]);
});

describe.skipIf(!hasTiny)("serve: priorities over HTTP", () => {
  let prio: Server, fcfs: Server;
  beforeAll(async () => { [prio, fcfs] = await Promise.all([startTiny({ slots: 1, schedulingPolicy: "priority" }), startTiny({ slots: 1 })]); });
  afterAll(async () => { await prio.stop(); await fcfs.stop(); });

  test("without --scheduling-policy priority a priority is refused naming it; 0 is the default and passes", async () => {
    const r = await post(fcfs.url, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 1, priority: 2 });
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error.param).toBe("priority");
    expect((await post(fcfs.url, "/v1/embeddings", { input: "x", priority: -3 })).status).toBe(400);
    expect((await post(fcfs.url, "/v1/completions", { prompt: "x", max_tokens: 1, priority: 0 })).status).toBe(200);
    expect((await post(prio.url, "/v1/embeddings", { input: "x", priority: -3 })).status).toBe(200);
    expect((await post(prio.url, "/v1/completions", { prompt: "x", max_tokens: 1, priority: 7 })).status).toBe(200);
  });
});
