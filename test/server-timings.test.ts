// llama-server's `timings` (shared fixture): on /completion, and beside usage on the OpenAI routes (non-streaming at
// the top level, streaming on a choice's last chunk) when the request has one choice: the prompt's new tokens over
// the prefill's time, the generated tokens over theirs, counts matching usage (prefix reuse counted as cache_n).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, sseData, startTiny } from "./server.helpers.ts";

interface Timings { cache_n: number; prompt_n: number; prompt_ms: number; prompt_per_token_ms: number; prompt_per_second: number;
  predicted_n: number; predicted_ms: number; predicted_per_token_ms: number; predicted_per_second: number }

/** the figures agree with each other and with the token counts */
function consistent(t: Timings, prompt: number, cached: number, emitted: number) {
  expect(t).toMatchObject({ cache_n: cached, prompt_n: prompt - cached, predicted_n: emitted });
  expect(t.prompt_ms).toBeGreaterThan(0);
  expect(t.prompt_per_second).toBeCloseTo((t.prompt_n * 1000) / t.prompt_ms, 6);
  expect(t.prompt_per_token_ms).toBeCloseTo(t.prompt_ms / t.prompt_n, 6);
  expect(t.predicted_ms).toBeGreaterThan(0);
  expect(t.predicted_per_token_ms).toBeCloseTo(t.predicted_ms / (emitted - 1), 6);
  expect(t.predicted_per_second).toBeCloseTo(((emitted - 1) * 1000) / t.predicted_ms, 3);
}

describe.skipIf(!hasTiny)("serve: timings", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 1 }); });
  afterAll(() => s.stop());

  test("/completion, then the same prompt again: its prefix counted as cached", async () => {
    const body = { prompt: "Once upon a time there was", n_predict: 8, temperature: 0, ignore_eos: true };
    const a = (await (await post(s.url, "/completion", body)).json()) as any;
    consistent(a.timings, a.tokens_evaluated, a.tokens_cached, 8);
    expect(a.tokens_cached).toBe(0);
    const b = (await (await post(s.url, "/completion", body)).json()) as any;
    expect(b.tokens_cached).toBe(b.tokens_evaluated - 1); // (the last prompt token is always fed)
    consistent(b.timings, b.tokens_evaluated, b.tokens_cached, 8);
  });

  test("chat and completions: beside usage; streamed on the finishing chunk; none with several choices", async () => {
    const chat = { messages: [{ role: "user", content: "Hi" }], max_tokens: 6, temperature: 0, ignore_eos: true };
    const j = (await (await post(s.url, "/v1/chat/completions", chat)).json()) as any;
    consistent(j.timings, j.usage.prompt_tokens, j.usage.prompt_tokens_details.cached_tokens, j.usage.completion_tokens);
    const c = (await (await post(s.url, "/v1/completions", { prompt: "abc", max_tokens: 5, temperature: 0, ignore_eos: true })).json()) as any;
    consistent(c.timings, c.usage.prompt_tokens, c.usage.prompt_tokens_details.cached_tokens, 5);
    const chunks = sseData(await (await post(s.url, "/v1/chat/completions", { ...chat, stream: true, stream_options: { include_usage: true } })).text())
      .filter((d) => d !== "[DONE]").map((d) => JSON.parse(d));
    const timed = chunks.filter((k) => k.timings);
    expect(timed.length).toBe(1);
    expect(timed[0].choices[0].finish_reason).toBe("length");
    const usage = chunks[chunks.length - 1].usage;
    consistent(timed[0].timings, usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens, 6);
    const two = (await (await post(s.url, "/v1/chat/completions", { ...chat, n: 2 })).json()) as any;
    expect(two.choices.length).toBe(2);
    expect(two.timings).toBeUndefined();
  });
});
