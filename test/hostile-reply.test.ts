// Replies the server builds in memory: one collected whole (not streamed) is bounded by its estimated JSON bytes
// (gen-stream.ts MAX_REPLY_BYTES, lowered here): past it the request ends with a 400 naming `stream`, on chat,
// completions and llama-server's /completion, while the same request streamed is served in full; a streamed choice
// keeps nothing for a whole reply (streamChoices marks its views); a prompt's logprobs (echo, prompt_logprobs) past
// MAX_PROMPT_LOGPROB_ENTRIES are refused before the prefill, naming the field, and so is an /embedding input whose
// token vectors (pooling none) would pass the response's bound.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { collectChoices, EventQueue, streamChoices, type ChoiceView, type Running } from "../src/server/gen-stream.ts";
import { MAX_PROMPT_LOGPROB_ENTRIES } from "../src/engine/serving/scheduler.ts";
import type { ReqEvent } from "../src/engine/serving/protocol.ts";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

describe.skipIf(!hasTiny)("a reply collected whole", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 2, maxReplyBytes: 20000 }); });
  afterAll(async () => { await s.stop(); });
  const chat = { messages: [{ role: "user", content: "Once upon" }], temperature: 0, ignore_eos: true, logprobs: true, top_logprobs: 20 };

  test("past its bound (top_logprobs 20, 100 tokens: ~110 KB of JSON) a 400 naming stream; small ones and streams served", async () => {
    for (const [path, body] of [["/v1/chat/completions", { ...chat, max_tokens: 100 }],
      ["/v1/completions", { prompt: "Once upon", temperature: 0, ignore_eos: true, logprobs: 20, max_tokens: 100 }],
      ["/completion", { prompt: "Once upon", temperature: 0, ignore_eos: true, n_probs: 20, n_predict: 100 }]] as const) {
      const r = await post(s.url, path, body);
      expect(r.status).toBe(400); // before: 200, whatever its size
      const e = ((await r.json()) as any).error;
      expect(e).toMatchObject({ param: "stream", code: "reply_too_large" });
      expect(e.message).toContain("20000 bytes");
    }
    const small = await post(s.url, "/v1/chat/completions", { ...chat, max_tokens: 2 });
    expect(small.status).toBe(200);
    expect(((await small.json()) as any).choices[0].logprobs.content).toHaveLength(2);
    const streamed = await post(s.url, "/v1/chat/completions", { ...chat, max_tokens: 100, stream: true });
    expect(streamed.status).toBe(200);
    const text = await streamed.text();
    expect(text.match(/"top_logprobs":\[\{/g)?.length).toBe(100);
    expect(text).toContain("data: [DONE]");
  });
});

describe.skipIf(!hasTiny)("a prompt's logprobs", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 1, ctx: 65536, longCtx: true }); });
  afterAll(async () => { await s.stop(); });

  test("past MAX_PROMPT_LOGPROB_ENTRIES (a 7k-token prompt, 20 alternatives) a 400 naming the field, before any prefill", async () => {
    const prompt = "hello world ".repeat(900);
    const n = ((await (await post(s.url, "/tokenize", { content: prompt })).json()) as { tokens: number[] }).tokens.length;
    expect(n * 21).toBeGreaterThan(MAX_PROMPT_LOGPROB_ENTRIES);
    for (const [extra, field] of [[{ prompt_logprobs: 20 }, "prompt_logprobs"], [{ echo: true, logprobs: 20 }, "logprobs"]] as const) {
      const t0 = performance.now(), r = await post(s.url, "/v1/completions", { prompt, max_tokens: 1, ...extra });
      expect(r.status).toBe(400); // before: 200 (28k tokens: after 5.8 s, a 38 MiB body, the server's RSS +593 MiB)
      const e = ((await r.json()) as any).error;
      expect(e.param).toBe(field);
      expect(e.message).toContain(`${n * 21} entries`);
      expect(performance.now() - t0).toBeLessThan(5000);
    }
    const ok = await post(s.url, "/v1/completions", { prompt: "hello world ".repeat(20), max_tokens: 1, prompt_logprobs: 20 });
    expect(ok.status).toBe(200);
  }, 30000);
});

describe.skipIf(!hasTiny)("token vectors (pooling none)", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 1, ctx: 65536, longCtx: true, pooling: "none", maxRowValues: 30 * 64 }); });
  afterAll(async () => { await s.stop(); });

  test("an input whose rows pass the response's bound is refused when queued, before its prefill", async () => {
    const t0 = performance.now(), r = await post(s.url, "/embedding", { content: "hello world ".repeat(7000) }); // (~56k tokens)
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error.message).toMatch(/^content: past 1920 values/);
    expect(performance.now() - t0).toBeLessThan(1500); // before: refused after its prefill, 6.0 s here
    expect((await post(s.url, "/embedding", { content: "hello" })).status).toBe(200);
  }, 20000);
});

test("streamChoices marks its views streaming (they keep nothing for a whole reply); collectChoices does not", async () => {
  const done: ReqEvent = { t: "done", rid: 1, reason: "length", text: "", bytes: new Uint8Array(0), emitted: 0, prompt_tokens: 1, cached_tokens: 0,
    decode_tok_s: 0, prompt_ms: 0, predicted_ms: 0 };
  const run = () => ({ r: { q: new EventQueue(), h: {} as Running["h"], abandon() {}, hold() {} }, first: done });
  const view = (): ChoiceView => ({ onTok: () => [], onDone: () => [], final: () => ({}) });
  const [a, b] = [view(), view()];
  await streamChoices([run()], [a], () => {}, () => {});
  await collectChoices([run()], [b], () => {});
  expect(a.streaming).toBe(true);
  expect(b.streaming).toBeUndefined();
});
