// vLLM's return_token_ids: the prompt's token ids and the output's beside the text — on /v1/completions per choice, on
// chat the prompt's beside the choices and each choice's own — whole, or streamed as the deltas of each chunk (their
// concatenation the whole), checked against the ids the logprobs name and the tokenizer's.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, sseData, startTiny } from "./server.helpers.ts";

describe.skipIf(!hasTiny)("return_token_ids", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 2 }); });
  afterAll(() => s.stop());
  const PROMPT = [30, 31, 32, 33, 34];
  const chunks = async (path: string, body: object) => sseData(await (await post(s.url, path, { ...body, stream: true })).text()).filter((d) => d !== "[DONE]").map((d) => JSON.parse(d));

  test("completions: per choice, whole and streamed; the same ids the logprobs name", async () => {
    const body = { prompt: PROMPT, max_tokens: 8, temperature: 0.8, seed: 3, n: 2, return_token_ids: true, logprobs: 0, return_tokens_as_token_ids: true };
    const j = (await (await post(s.url, "/v1/completions", body)).json()) as any;
    for (const c of j.choices) {
      expect(c.prompt_token_ids).toEqual(PROMPT);
      expect(c.token_ids).toEqual((c.logprobs.tokens as string[]).map((t) => Number(t.slice("token_id:".length))));
      expect(c.token_ids.length).toBe(8);
    }
    const got = new Map<number, number[]>(), prompts = new Map<number, number[]>();
    for (const ch of await chunks("/v1/completions", body))
      for (const c of ch.choices) {
        if (c.prompt_token_ids) { expect(prompts.has(c.index)).toBe(false); prompts.set(c.index, c.prompt_token_ids); }
        got.set(c.index, [...(got.get(c.index) ?? []), ...(c.token_ids ?? [])]);
      }
    for (const c of j.choices) { expect(got.get(c.index)).toEqual(c.token_ids); expect(prompts.get(c.index)).toEqual(PROMPT); }
    const plain = (await (await post(s.url, "/v1/completions", { prompt: PROMPT, max_tokens: 2 })).json()) as any;
    expect(plain.choices[0].token_ids).toBeUndefined();
  });

  test("chat: the prompt's ids beside the choices (the template's tokens), each choice's own, whole and streamed", async () => {
    const messages = [{ role: "user", content: "Tell me a fortune." }];
    const body = { messages, max_tokens: 10, temperature: 0, return_token_ids: true };
    const j = (await (await post(s.url, "/v1/chat/completions", body)).json()) as any;
    const templ = ((await (await post(s.url, "/tokenize", { messages, add_generation_prompt: true })).json()) as any).tokens;
    expect(j.prompt_token_ids).toEqual(templ);
    expect(j.choices[0].token_ids.length).toBe(j.usage.completion_tokens);
    const cs = await chunks("/v1/chat/completions", body);
    expect(cs[0].prompt_token_ids).toEqual(templ);
    expect(cs.flatMap((c) => c.choices.flatMap((x: any) => x.token_ids ?? []))).toEqual(j.choices[0].token_ids);
  });
});
