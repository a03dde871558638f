// `n` choices: n generations (seed + i when a seed is given), index-ordered choices, usage with the prompt
// counted once; streamed chunks carry each choice's index; choice i equals the same request alone with
// seed + i (both routes). A batch of prompts on /v1/completions: each prompt's n choices in turn, each equal
// to that prompt alone, usage counting each prompt once; its limits answered with a 400 naming the field.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, sseData, startTiny } from "./server.helpers.ts";

describe.skipIf(!hasTiny)("serve: n choices", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 4 }); });
  afterAll(() => s.stop());
  const json = async (path: string, body: object) => (await post(s.url, path, body)).json() as Promise<any>;

  test("chat: n = 3 gives choices 0..2, each equal to the request alone with seed + i; usage sums completions", async () => {
    const body = { messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 8, temperature: 1, seed: 5 };
    const r = await json("/v1/chat/completions", { ...body, n: 3 });
    expect(r.choices.map((c: any) => c.index)).toEqual([0, 1, 2]);
    const alone = await Promise.all([0, 1, 2].map((i) => json("/v1/chat/completions", { ...body, seed: 5 + i })));
    for (let i = 0; i < 3; i++) expect(r.choices[i].message.content).toBe(alone[i].choices[0].message.content);
    expect(new Set(r.choices.map((c: any) => c.message.content)).size).toBeGreaterThan(1); // different seeds, different text
    expect(r.usage.prompt_tokens).toBe(alone[0].usage.prompt_tokens);
    expect(r.usage.completion_tokens).toBe(alone.reduce((a: number, x: any) => a + x.usage.completion_tokens, 0));
  });

  test("completions: a batch of prompts gives each its n choices in turn, each equal to that prompt alone", async () => {
    const prompts = ["Once upon a time", "The weather today"], body = { max_tokens: 6, temperature: 1, seed: 3, n: 2 };
    const r = await json("/v1/completions", { ...body, prompt: prompts });
    expect(r.choices.map((c: any) => c.index)).toEqual([0, 1, 2, 3]);
    const alone = await Promise.all(prompts.flatMap((p) => [0, 1].map((i) => json("/v1/completions", { ...body, n: 1, prompt: p, seed: 3 + i }))));
    for (let k = 0; k < 4; k++) expect(r.choices[k].text).toBe(alone[k].choices[0].text);
    expect(r.usage.prompt_tokens).toBe(alone[0].usage.prompt_tokens + alone[2].usage.prompt_tokens);
    expect(r.usage.completion_tokens).toBe(alone.reduce((a: number, x: any) => a + x.usage.completion_tokens, 0));
    // token-id lists, and echo with prompt logprobs (lm-evaluation-harness sends its batches so)
    const ids = [[5, 6, 7, 8], [9, 10, 11]];
    const e = await json("/v1/completions", { prompt: ids, max_tokens: 0, echo: true, logprobs: 1, temperature: 0 });
    const eAlone = await Promise.all(ids.map((p) => json("/v1/completions", { prompt: p, max_tokens: 0, echo: true, logprobs: 1, temperature: 0 })));
    expect(e.choices.map((c: any) => c.logprobs.token_logprobs)).toEqual(eAlone.map((x: any) => x.choices[0].logprobs.token_logprobs));
    expect(e.usage.prompt_tokens).toBe(7);
    // streamed: every choice's chunks under its index
    const res = await post(s.url, "/v1/completions", { ...body, prompt: prompts, stream: true });
    const seen = new Set<number>();
    for (const d of sseData(await res.text()).slice(0, -1)) for (const ch of JSON.parse(d).choices) seen.add(ch.index);
    expect([...seen].sort()).toEqual([0, 1, 2, 3]);
    // a batch past the slots and the queue (4 + 16 here) is queued, not refused with a 429
    const big = await post(s.url, "/v1/completions", { prompt: Array.from({ length: 30 }, (_, i) => `Item ${i}`), max_tokens: 2, temperature: 0 });
    expect(big.status).toBe(200);
    expect(((await big.json()) as any).choices).toHaveLength(30);
  });

  test("completions: batch limits and a pinned slot are refused with a 400 naming the field", async () => {
    const bad = async (body: object, param: string) => {
      const res = await post(s.url, "/v1/completions", { max_tokens: 2, ...body });
      expect(res.status).toBe(400);
      expect(((await res.json()) as any).error.param).toBe(param);
    };
    await bad({ prompt: Array.from({ length: 65 }, () => "a") }, "prompt");
    await bad({ prompt: Array.from({ length: 40 }, () => "a"), n: 4 }, "n");
    await bad({ prompt: ["a", "b"], slot: 0 }, "prompt");
    await bad({ prompt: [] }, "prompt");
  });

  test("completions streamed: chunks of both choices, each choice's text equal to the non-streamed one", async () => {
    const body = { prompt: "Once upon a time", max_tokens: 6, temperature: 0.9, seed: 11, n: 2 };
    const whole = await json("/v1/completions", body);
    const res = await post(s.url, "/v1/completions", { ...body, stream: true, stream_options: { include_usage: true } });
    const data = sseData(await res.text());
    expect(data.at(-1)).toBe("[DONE]");
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    const text = ["", ""], finished = [0, 0];
    for (const c of chunks) for (const ch of c.choices) { text[ch.index] += ch.text; if (ch.finish_reason) finished[ch.index]++; }
    expect(finished).toEqual([1, 1]);
    expect(text).toEqual(whole.choices.map((c: any) => c.text));
    expect(chunks.at(-1).usage.completion_tokens).toBe(whole.usage.completion_tokens);
    expect(chunks.slice(0, -1).every((c: any) => c.usage === null)).toBe(true);
  });

  test("continuous_usage_stats (vLLM's): every chunk carries the usage so far, ending at the final usage", async () => {
    for (const [path, body] of [["/v1/completions", { prompt: "Once upon a time", n: 2 }], ["/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }] }]] as const) {
      const whole = await json(path, { ...body, max_tokens: 6, temperature: 0 });
      const res = await post(s.url, path, { ...body, max_tokens: 6, temperature: 0, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } });
      const chunks = sseData(await res.text()).slice(0, -1).map((d) => JSON.parse(d));
      const used = chunks.filter((c: any) => c.usage).map((c: any) => c.usage);
      expect(used.length).toBeGreaterThan(2);
      for (let i = 1; i < used.length; i++) expect(used[i].completion_tokens).toBeGreaterThanOrEqual(used[i - 1].completion_tokens);
      const counts = (u: any) => [u.prompt_tokens, u.completion_tokens, u.total_tokens]; // (cached_tokens: the second run reuses the first's prefix)
      expect(counts(used.at(-1))).toEqual(counts(whole.usage));
      expect(used.at(-2).completion_tokens).toBe(whole.usage.completion_tokens); // the last token's chunk already counts it
      for (const u of used) expect(u.total_tokens).toBe(u.prompt_tokens + u.completion_tokens);
    }
  });
});
