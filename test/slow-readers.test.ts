// Clients that stop reading their stream (src/server/out-flow.ts, the Scheduler's holds). On the Scheduler, step by
// step: a held request is not decoded while the others go on, yields its slot to a waiting request once held for
// the grace, waits while held, and when let go ends with the tokens it would have had anyway. Through a server: a
// stalled SSE or mux client's request is held (fewer tokens generated than asked), another client is served meanwhile
// on the one slot, and the stalled connection is reset after --timeout; a slow reader gets the same text as a fast one.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect, type Socket } from "node:net";
import { loadModel } from "../src/engine/model.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { Scheduler } from "../src/engine/serving/scheduler.ts";
import type { FromWorker, GenRequest } from "../src/engine/serving/protocol.ts";
import { startServer, type Server } from "../src/server/server.ts";
import { genModel } from "./helpers/models.ts";

const dir = genModel({ preset: "tiny", seed: 4 });

describe("holds on the Scheduler", () => {
  const m = loadModel(dir), codec = loadTokenizer(dir);
  const req = (max_tokens: number, prompt = [20, 21, 22]): GenRequest => ({ prompt: { kind: "ids", ids: prompt }, slot: "auto", max_tokens,
    temperature: 0, top_p: 1, min_p: 0, top_k: 0, stop: [], ignore_eos: true });
  const sched = (slots: number, holdGraceMs: number) => {
    const toks = new Map<number, number[]>(), done: number[] = [];
    const s = new Scheduler(m, codec, { slots, ctx: 512, queue: 16, chunk: 32, holdGraceMs }, (e: FromWorker) => {
      if (e.t === "tok") toks.set(e.rid, [...(toks.get(e.rid) ?? []), e.id]);
      if (e.t === "done") done.push(e.rid);
      if (e.t === "error") throw new Error(`${e.rid}: ${e.code} ${e.detail}`);
    });
    const run = () => { for (let i = 0; i < 2000 && s.hasWork(); i++) s.step(); };
    const n = (rid: number) => toks.get(rid)?.length ?? 0;
    return { s, toks, done, run, n };
  };
  const alone = (r: GenRequest) => { const a = sched(1, 0); a.s.submit(1, r); a.run(); return a.toks.get(1)!; };

  test("a held request is not decoded, the others are; with only held ones left there is no work; let go, it ends the same", () => {
    const a = sched(2, 60_000), r1 = req(20), r2 = req(12, [40, 41]);
    a.s.submit(1, r1); a.s.submit(2, r2);
    for (let i = 0; i < 4; i++) a.s.step();
    const before = a.n(1);
    expect(before).toBeGreaterThan(0);
    a.s.hold(1, true);
    a.run(); // request 2 to its end
    expect(a.done).toEqual([2]);
    expect(a.n(1)).toBe(before);
    expect(a.s.hasWork()).toBe(false); // (the worker's loop then waits for a message, not spinning)
    a.s.hold(1, false);
    a.run();
    expect(a.done).toEqual([2, 1]);
    expect(a.toks.get(1)).toEqual(alone(r1));
    expect(a.toks.get(2)).toEqual(alone(r2));
  });

  test("held for the grace, it yields its slot to a waiting request, waits while held, then resumes with the same tokens", () => {
    const a = sched(1, 0), r1 = req(24), r2 = req(5, [40, 41]);
    a.s.submit(1, r1);
    for (let i = 0; i < 5; i++) a.s.step();
    a.s.hold(1, true);
    a.s.submit(2, r2);
    a.run();
    expect(a.s.stats().preemptions).toBe(1);
    expect(a.done).toEqual([2]); // 1 waits in the queue, held
    expect(a.s.stats().queue).toBe(1);
    a.s.hold(1, false);
    a.run();
    expect(a.done).toEqual([2, 1]);
    expect(a.toks.get(1)).toEqual(alone(r1));
  });

  test("within the grace it keeps its slot: a step runs nothing and says so", () => {
    const a = sched(1, 60_000);
    a.s.submit(1, req(24));
    for (let i = 0; i < 5; i++) a.s.step();
    a.s.hold(1, true);
    a.s.submit(2, req(5, [40, 41]));
    expect(a.s.hasWork()).toBe(true); // the waiting request
    expect(a.s.step()).toBe(false);
    expect(a.s.stats().preemptions).toBe(0);
    expect(a.s.stats().slots[0].rid).toBe(1);
  });
});

describe("slow readers through the server (--timeout 1, one slot)", () => {
  let s: Server;
  beforeAll(async () => {
    s = startServer({ dir, slots: 1, port: 0, host: "127.0.0.1", acceptAnyModel: true, timeout: 1, ctx: 4096 });
    await s.engine.ready;
  });
  afterAll(async () => { await s.stop(); });

  const MAX = 3000; // × ~3 KB of SSE a token with 20 logprobs (their bytes too): more than the connection's buffers take
  const chat = JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: MAX, logprobs: true, top_logprobs: 20, ignore_eos: true, stream: true });
  /** a raw client that sends `head + payload` and then reads nothing; resolves with the socket */
  const stalled = (path: string, payload: string | Uint8Array, type = "application/json"): Socket => {
    const sock = connect(s.port, "127.0.0.1");
    sock.on("error", () => {});
    sock.once("connect", () => {
      sock.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: ${type}\r\ncontent-length: ${Buffer.byteLength(payload)}\r\n\r\n`);
      sock.write(payload);
      sock.pause();
    });
    return sock;
  };
  /** resumes reading a paused socket; resolves with what it read and whether it was reset, once it closes */
  const drain = (sock: Socket) => new Promise<{ bytes: number; reset: boolean }>((res) => {
    let bytes = 0, reset = false;
    sock.on("data", (d) => { bytes += d.length; });
    sock.on("error", () => { reset = true; });
    sock.once("close", () => res({ bytes, reset }));
    sock.resume();
  });
  const waitFor = async (cond: () => boolean, ms: number) => { const t0 = performance.now(); while (!cond() && performance.now() - t0 < ms) await Bun.sleep(20); return cond(); };

  test("a stalled SSE client is held, another is served on the slot meanwhile, and the stalled one is reset", async () => {
    const t = s.engine.totals, gen0 = t.generated_tokens, failed0 = t.failed;
    const dropped = async () => Number(/^hummingbird_stalled_clients_dropped_total (\d+)$/m.exec(await (await fetch(`${s.url}/metrics`)).text())?.[1]);
    const dropped0 = await dropped();
    const sock = stalled("/v1/chat/completions", chat);
    expect(await waitFor(() => s.engine.stats.held === 1, 8000)).toBe(true); // (/metrics: hummingbird_requests_held)
    const t0 = performance.now();
    const r = await fetch(`${s.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt: [30, 31], max_tokens: 4, ignore_eos: true }) });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(4);
    const waited = performance.now() - t0;
    // the stalled request is cancelled once its client has taken nothing for the timeout, never having had all its tokens
    expect(await waitFor(() => t.failed > failed0, 8000)).toBe(true);
    expect(t.generated_tokens - gen0 - 4).toBeLessThan(MAX);
    const got = await drain(sock);
    expect(got.reset).toBe(true);
    expect(await dropped()).toBe(dropped0 + 1);
    console.log(`the other client waited ${waited.toFixed(0)} ms; the stalled one got ${got.bytes} bytes before the reset`);
  }, 20_000);

  test("a stalled mux client's ids are held and its stream reset", async () => {
    const t = s.engine.totals, gen0 = t.generated_tokens, failed0 = t.failed, ids = "20,21,22", g = "root ::= [a-z]{9000}";
    // 16 ids (the slot and the queue) of 4,000 tokens with 20 logprobs each, a grammar keeping their end ids out: more
    // than the connection's buffers take (mux-parse.ts' SUBMIT)
    const frames = Array.from({ length: 16 }, (_, i) => `SUBMIT ${i + 1} auto ${ids.length} 4000 0 1 ids=1 logprobs=20 grammar=${g.length}\n${ids}\n${g}\n`).join("");
    const sock = stalled("/v1/mux", frames, "application/octet-stream");
    expect(await waitFor(() => t.failed > failed0, 20_000)).toBe(true);
    expect(t.generated_tokens - gen0).toBeLessThan(16 * 4000);
    expect((await drain(sock)).reset).toBe(true);
  }, 30_000);

  test("a slow reader gets the whole stream, the same text as a fast one", async () => {
    const fast = await fetch(`${s.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: [20, 21, 22], max_tokens: 1500, logprobs: 20, ignore_eos: true, temperature: 0 }) });
    const want = ((await fast.json()) as { choices: { text: string }[] }).choices[0].text;
    const r = await fetch(`${s.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: [20, 21, 22], max_tokens: 1500, logprobs: 20, ignore_eos: true, temperature: 0, stream: true }) });
    const reader = r.body!.getReader(), dec = new TextDecoder();
    let sse = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      sse += dec.decode(value, { stream: true });
      await Bun.sleep(5); // slower than the model, steadier than the timeout
    }
    const text = sse.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)).choices[0]?.text ?? "").join("");
    expect(sse.trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(text).toBe(want);
  }, 30_000);
});
