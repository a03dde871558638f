// vLLM's priority scheduling (serve --scheduling-policy priority): waiting requests are admitted lower `priority`
// first, then in arrival order; without the policy a request naming a priority is refused naming the field.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

describe.skipIf(!hasTiny)("serve --scheduling-policy priority", () => {
  let prio: Server, fcfs: Server;
  beforeAll(async () => { [prio, fcfs] = await Promise.all([startTiny({ slots: 1, schedulingPolicy: "priority" }), startTiny({ slots: 1 })]); });
  afterAll(async () => { await prio.stop(); await fcfs.stop(); });

  test("the queue is served lower priority first, then in arrival order (the running request is not preempted)", async () => {
    const ac = new AbortController();
    const hog = await fetch(`${prio.url}/v1/completions`, { method: "POST", signal: ac.signal,
      body: JSON.stringify({ prompt: [20, 21], max_tokens: 3000, temperature: 0, ignore_eos: true, stream: true }) });
    const rd = hog.body!.getReader();
    await rd.read(); // (it runs in the only slot)
    const done: string[] = [];
    const ask = async (name: string, priority?: number) => {
      const r = await post(prio.url, "/v1/completions", { prompt: [30, 31, 32], max_tokens: 2, temperature: 0, ...(priority !== undefined ? { priority } : {}) });
      expect(r.status).toBe(200);
      await r.json();
      done.push(name);
    };
    const all: Promise<void>[] = [];
    for (const [name, p] of [["a", 5], ["b", undefined], ["c", -1], ["d", 5], ["e", 0]] as const) {
      all.push(ask(name, p));
      for (let i = 0; i < 400; i++) { // (each queued before the next is sent: arrival order is known)
        const q = ((await (await fetch(`${prio.url}/slots`)).json()) as any).queue;
        if (q === all.length) break;
        await Bun.sleep(5);
      }
    }
    ac.abort();
    await Promise.all(all);
    expect(done).toEqual(["c", "b", "e", "a", "d"]);
  });

  test("without the policy a priority is refused naming it; 0 is the default and passes", async () => {
    const r = await post(fcfs.url, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 1, priority: 2 });
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error.param).toBe("priority");
    expect((await post(fcfs.url, "/v1/embeddings", { input: "x", priority: -3 })).status).toBe(400);
    expect((await post(fcfs.url, "/v1/completions", { prompt: "x", max_tokens: 1, priority: 0 })).status).toBe(200);
    expect((await post(prio.url, "/v1/embeddings", { input: "x", priority: -3 })).status).toBe(200);
  });
});
