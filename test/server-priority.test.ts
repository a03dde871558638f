// vLLM's priority scheduling (serve --scheduling-policy priority): waiting requests are admitted lower `priority`
// first, then in arrival order, and a strictly more urgent one preempts the least urgent running request, which later
// goes on with the tokens it would have produced anyway (checked on the Scheduler itself, step by step: no timing
// involved); without the policy a request naming a priority is refused naming the field.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadModel } from "../src/engine/model.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { Scheduler } from "../src/engine/serving/scheduler.ts";
import type { FromWorker, GenRequest } from "../src/engine/serving/protocol.ts";
import type { Server } from "../src/server/server.ts";
import { genModel } from "./helpers/models.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

test("the queue is served lower priority first, then in arrival order (without preemption: the running request stays)", () => {
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

describe("preemption (the priority policy)", () => {
  const dir = genModel({ preset: "tiny", seed: 4 }), m = loadModel(dir), codec = loadTokenizer(dir);
  const req = (priority: number, max_tokens: number, prompt = [20, 21, 22], extra: Partial<GenRequest> = {}): GenRequest => ({
    prompt: { kind: "ids", ids: prompt }, slot: "auto", max_tokens, temperature: 0, top_p: 1, min_p: 0, top_k: 0, stop: [], ignore_eos: true, priority, ...extra });
  /** a scheduler whose events are recorded: tokens per request, the order requests end in */
  const sched = (slots: number, preempt: boolean, chunk = 32, cacheRam = 0) => {
    const toks = new Map<number, number[]>(), done: number[] = [], accepts: number[] = [];
    const s = new Scheduler(m, codec, { slots, ctx: 512, queue: 16, chunk, schedulingPolicy: preempt ? "priority" : "fcfs", cacheRam }, (e: FromWorker) => {
      if (e.t === "tok") toks.set(e.rid, [...(toks.get(e.rid) ?? []), e.id]);
      if (e.t === "accept") accepts.push(e.rid);
      if (e.t === "done") done.push(e.rid);
      if (e.t === "error") throw new Error(`${e.rid}: ${e.code} ${e.detail}`);
    });
    const run = () => { for (let i = 0; i < 2000 && s.hasWork(); i++) s.step(); };
    return { s, toks, done, accepts, run };
  };
  const alone = (r: GenRequest) => { const a = sched(1, false); a.s.submit(1, r); a.run(); return a.toks.get(1)!; };
  const long = Array.from({ length: 90 }, (_, i) => 30 + ((i * 37) % 400));

  test("a decoding request preempted by a more urgent one resumes with the same tokens (greedy and seeded sampling)", () => {
    for (const extra of [{}, { temperature: 0.9, seed: 7, penalties: { presence: 0.5, frequency: 0.3 } }]) {
      const low = req(9, 24, [20, 21, 22], extra), high = req(1, 5, [40, 41], extra);
      const a = sched(1, true);
      a.s.submit(1, low);
      for (let i = 0; i < 6; i++) a.s.step(); // 1 is decoding
      expect(a.toks.get(1)!.length).toBeGreaterThan(2);
      a.s.submit(2, high);
      a.s.step();
      expect(a.s.stats().preemptions).toBe(1);
      expect(a.s.stats().slots[0].rid).toBe(2);
      a.run();
      expect(a.done).toEqual([2, 1]);
      expect(a.accepts).toEqual([1, 2]); // (readmitted without a second accept)
      expect(a.toks.get(1)).toEqual(alone(low));
      expect(a.toks.get(2)).toEqual(alone(high));
    }
  });

  test("with --cache-ram the preempted conversation is parked and its rows come back on readmission", () => {
    const low = req(9, 30, long), a = sched(1, true, 128, 64 << 20);
    a.s.submit(1, low);
    for (let i = 0; i < 8; i++) a.s.step(); // prefilled, decoding
    a.s.submit(2, req(1, 3, [40, 41, 42]));
    a.run();
    expect(a.done).toEqual([2, 1]);
    expect(a.s.stats().promptCache!.hits).toBe(1);
    expect(a.toks.get(1)).toEqual(alone(low));
  });

  test("one preempted in its prefill starts it again; equal priorities never swap; the least urgent, latest admitted goes", () => {
    const a = sched(2, true, 16);
    a.s.submit(1, req(5, 4, long));
    a.s.submit(2, req(5, 30));
    a.s.step(); // both admitted: 1 prefills its first chunk, 2 waits for the budget
    a.s.submit(3, req(5, 3)); // equal: waits
    a.s.step();
    expect(a.s.stats().preemptions).toBe(0);
    a.s.submit(4, req(0, 3)); // more urgent than both: 2 (admitted last among equals) goes
    a.s.step();
    expect(a.s.stats().preemptions).toBe(1);
    expect(a.s.stats().slots.map((x) => x.rid).sort()).toEqual([1, 4]);
    a.run();
    expect(a.done[0]).toBe(4);
    for (const [rid, r] of [[1, req(5, 4, long)], [2, req(5, 30)], [3, req(5, 3)], [4, req(0, 3)]] as const) expect(a.toks.get(rid)).toEqual(alone(r));
    const b = sched(1, true, 16); // a prompt in the middle of its prefill
    b.s.submit(1, req(3, 4, long));
    b.s.step(); b.s.step();
    b.s.submit(2, req(-2, 2));
    b.s.step();
    expect(b.s.stats().preemptions).toBe(1);
    b.run();
    expect(b.done).toEqual([2, 1]);
    expect(b.toks.get(1)).toEqual(alone(req(3, 4, long)));
  });

  test("random arrivals, priorities, cancels and stops over 3 slots: each request ends once; greedy ones that finish give their tokens alone", () => {
    let seed = 11;
    const rnd = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n);
    const a = sched(3, true, 24), ended = new Map<number, number>(), reqs = new Map<number, GenRequest>();
    const s0 = a.s; // count every end (done or error) per request
    const emit = (s0 as any).emit as (e: FromWorker) => void;
    (s0 as any).emit = (e: FromWorker) => {
      if (e.t === "done" || (e.t === "error" && e.code === "CANCELLED")) ended.set(e.rid, (ended.get(e.rid) ?? 0) + 1);
      if (e.t === "error" && e.code === "CANCELLED") return;
      emit(e);
    };
    let rid = 0, cancelled = 0, stopped = new Set<number>();
    for (let t = 0; t < 400; t++) {
      if (rnd(3) === 0 && rid < 40) {
        const prompt = Array.from({ length: 2 + rnd(60) }, () => 16 + rnd(400)), r = req(rnd(5), 1 + rnd(20), prompt);
        reqs.set(++rid, r);
        a.s.submit(rid, r);
      }
      if (rnd(25) === 0 && rid > 0) { a.s.cancel(1 + rnd(rid)); cancelled++; }
      if (rnd(30) === 0 && rid > 0) { const x = 1 + rnd(rid); a.s.stop(x); stopped.add(x); }
      a.s.step();
    }
    a.run();
    expect(a.s.hasWork()).toBe(false);
    expect(a.s.stats().preemptions).toBeGreaterThan(0);
    for (let r = 1; r <= rid; r++) expect([r, ended.get(r)]).toEqual([r, 1]);
    let checked = 0;
    for (const r of a.done) {
      if (stopped.has(r)) continue;
      expect([r, a.toks.get(r) ?? []]).toEqual([r, alone(reqs.get(r)!)]);
      checked++;
    }
    expect(checked).toBeGreaterThan(10);
    expect(cancelled).toBeGreaterThan(0);
  });

  test("without the policy nothing is preempted", () => {
    const a = sched(1, false);
    a.s.submit(1, req(9, 10));
    a.s.step(); a.s.step();
    a.s.submit(2, req(0, 2));
    a.run();
    expect([a.done, a.s.stats().preemptions]).toEqual([[1, 2], 0]);
  });
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

  test("a more urgent request preempts a streaming one, which then ends with the text it would have had; /metrics counts it", async () => {
    const body = (priority: number, max_tokens: number) => ({ prompt: "Once upon a time", max_tokens, temperature: 0, ignore_eos: true, priority });
    const want = ((await (await post(prio.url, "/v1/completions", body(5, 1500))).json()) as any).choices[0].text;
    const r = await post(prio.url, "/v1/completions", { ...body(5, 1500), stream: true }), rd = r.body!.getReader();
    const first = await rd.read(); // (streaming: it holds the only slot)
    const ends: string[] = [];
    const urgent = post(prio.url, "/v1/completions", body(-1, 3)).then(async (x) => { ends.push("urgent"); return x.status; });
    let text = "", buf = new TextDecoder().decode(first.value);
    for (let c = await rd.read(); !c.done; c = await rd.read()) buf += new TextDecoder().decode(c.value);
    ends.push("preempted");
    for (const d of buf.split("\n").filter((l) => l.startsWith("data: {"))) text += JSON.parse(d.slice(6)).choices[0].text;
    expect(await urgent).toBe(200);
    expect(ends).toEqual(["urgent", "preempted"]);
    expect(text).toBe(want);
    let m = ""; // (the worker's stats arrive just after the answers)
    for (let i = 0; i < 100 && !/^hummingbird_preemptions_total 1/m.test(m); i++) m = await (await fetch(`${prio.url}/metrics`)).text(), await Bun.sleep(10);
    expect(/^hummingbird_preemptions_total (\d+)/m.exec(m)?.[1]).toBe("1");
    expect(/^vllm:num_preemptions_total\{model_name="glm-tiny"\} (\d+)/m.exec(m)?.[1]).toBe("1");
  });
});
