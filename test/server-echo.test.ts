// /v1/completions with `echo` on the embedded demo model: the prompt comes back first, and with logprobs each
// prompt token's logprob (the first null), read the way lm-evaluation-harness's local-completions reads them
// (token-id prompt, max_tokens 1, logprobs 1, echo): the log-likelihood of a continuation and its greediness
// equal the engine's own score mode, whatever the prefill chunking and whatever the slot had cached before;
// max_tokens 0 (only with echo) returns the prompt alone; streaming sends the prompt as the first chunk; vLLM's
// prompt_logprobs on completions (per choice) and on chat (beside the choices).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startServer, type Server } from "../src/server/server.ts";
import { demoModelDir } from "../src/model/demo.ts";
import { loadModel } from "../src/engine/model.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { score } from "../src/engine/score.ts";
import { post, sseData } from "./server.helpers.ts";

const dir = demoModelDir();
let s: Server;
beforeAll(async () => { s = startServer({ dir, slots: 2, port: 0, chunk: 16, attn: "absorbed" }); await s.engine.ready; });
afterAll(async () => { await s.stop(); });

async function completion(body: Record<string, unknown>): Promise<any> {
  const r = await post(s.url, "/v1/completions", body);
  const j = await r.json();
  if (r.status !== 200) throw new Error(`${r.status}: ${JSON.stringify(j)}`);
  return j;
}

describe("completions echo (demo model)", () => {
  test("lm-eval local-completions requests: log-likelihoods and greediness equal the engine's score mode", async () => {
    const codec = loadTokenizer(dir), m = loadModel(dir);
    const pairs = [["The quick brown fox", " jumps over the lazy dog."], ["You will be", " married within a year."],
      ["It is, it is,", " it is."], [`${"A long context. ".repeat(6)}Then`, " the end"]];
    const reqs = pairs.map(([c, x]) => { const ctx = codec.encode(c), cont = codec.encode(x); return { ctxlen: ctx.length, contlen: cont.length, ids: [...ctx, ...cont] }; });
    const want = score(m, reqs, { forward: { exact: false, attn: "absorbed" } });
    for (let round = 0; round < 2; round++) // the second time the slots hold these prompts: no reuse with prompt logprobs
      for (const [k, r] of reqs.entries()) {
        const j = await completion({ prompt: [r.ids], max_tokens: 1, logprobs: 1, echo: true, temperature: 0, seed: 1234 });
        const c = j.choices[0], lp = c.logprobs;
        expect(lp.token_logprobs.length).toBe(r.ids.length + 1);
        expect(lp.token_logprobs[0]).toBeNull();
        expect(lp.top_logprobs[0]).toBeNull();
        const got = lp.token_logprobs.slice(r.ctxlen, -1) as number[], tops = lp.top_logprobs.slice(r.ctxlen, -1) as Record<string, number>[];
        expect(got.length).toBe(r.contlen);
        expect(Math.abs(got.reduce((a, b) => a + b, 0) - want[k].logprob)).toBeLessThan(1e-9); // the same logits bits: chunking and batch do not change them
        expect(got.every((t, i) => t === Math.max(...Object.values(tops[i])))).toBe(want[k].greedy);
        expect(c.text.startsWith(codec.decode(r.ids))).toBe(true);
        expect(j.usage.prompt_tokens_details.cached_tokens).toBe(0);
        expect(j.usage.completion_tokens).toBe(1);
      }
  }, 60000);

  test("max_tokens 0 returns the prompt alone (only with echo); echo without logprobs keeps prefix reuse", async () => {
    const j = await completion({ prompt: "Hello there, friend", max_tokens: 0, echo: true, logprobs: 0 });
    expect(j.choices[0].text).toBe("Hello there, friend");
    expect(j.choices[0].finish_reason).toBe("length");
    expect(j.usage.completion_tokens).toBe(0);
    expect(j.choices[0].logprobs.token_logprobs.slice(1).every((x: unknown) => typeof x === "number" && x < 0)).toBe(true);
    const bad = await post(s.url, "/v1/completions", { prompt: "Hello", max_tokens: 0 });
    expect(bad.status).toBe(400);
    expect((await bad.json() as any).error.param).toBe("max_tokens");
    const plain = await completion({ prompt: "Hello there, friend", max_tokens: 8, temperature: 0 });
    const again = await completion({ prompt: "Hello there, friend", max_tokens: 8, temperature: 0, echo: true });
    expect(again.choices[0].text).toBe("Hello there, friend" + plain.choices[0].text);
    expect(again.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
  }, 60000);

  test("vLLM prompt_logprobs: each prompt token's logprob (as echo's), its rank and k alternatives; no echo text", async () => {
    const prompt = "The quick brown fox jumps", k = 2;
    const echo = (await completion({ prompt, max_tokens: 2, temperature: 0, echo: true, logprobs: 5 })).choices[0];
    const j = await completion({ prompt, max_tokens: 2, temperature: 0, prompt_logprobs: k });
    const c = j.choices[0], plp = c.prompt_logprobs as (Record<string, { logprob: number; rank: number; decoded_token: string }> | null)[];
    expect(c.text).toBe(echo.text.slice(prompt.length)); // the completion alone
    expect(plp.length).toBe(echo.logprobs.token_logprobs.length - 2); // one per prompt token
    expect(plp[0]).toBeNull();
    const ids = (await (await post(s.url, "/tokenize", { content: prompt })).json() as any).tokens as number[];
    for (let i = 1; i < plp.length; i++) {
      const e = plp[i]!, own = e[ids[i]];
      expect(own.logprob).toBe(echo.logprobs.token_logprobs[i]);
      expect(own.decoded_token).toBe(echo.logprobs.tokens[i]);
      const above = Object.values(echo.logprobs.top_logprobs[i] as Record<string, number>).filter((v) => v > own.logprob).length;
      if (above < 5) expect(own.rank).toBe(above + 1); else expect(own.rank).toBeGreaterThan(5);
      expect(Object.keys(e).length).toBeLessThanOrEqual(k + 1);
      // the alternatives, by rank: the k most likely (echo's top values), less this token when it is among them
      const others = Object.entries(e).filter(([id]) => Number(id) !== ids[i]).map(([, v]) => v).sort((a, b) => a.rank - b.rank);
      const topk = (Object.values(echo.logprobs.top_logprobs[i]) as number[]).sort((a, b) => b - a).slice(0, k);
      if (own.rank <= k) topk.splice(topk.indexOf(own.logprob), 1);
      expect(others.map((v) => v.logprob)).toEqual(topk);
      expect(others.every((v) => v.rank >= 1 && v.rank <= k)).toBe(true);
    }
    const res = await post(s.url, "/v1/completions", { prompt, max_tokens: 2, temperature: 0, prompt_logprobs: k, stream: true });
    const chunks = sseData(await res.text()).filter((d) => d !== "[DONE]").map((d) => JSON.parse(d).choices[0]);
    expect(chunks[0].prompt_logprobs).toEqual(plp);
    expect(chunks.map((x) => x.text).join("")).toBe(c.text);
    const bad = await post(s.url, "/v1/completions", { prompt, prompt_logprobs: 21 });
    expect(bad.status).toBe(400);
    expect((await bad.json() as any).error.param).toBe("prompt_logprobs");
  }, 60000);

  test("chat: vLLM's prompt_logprobs beside the choices, equal to /v1/completions' on the rendered prompt's ids", async () => {
    const messages = [{ role: "user", content: "Tell me a fortune." }];
    const r = await post(s.url, "/v1/chat/completions", { messages, max_tokens: 3, temperature: 0, prompt_logprobs: 2, n: 2 });
    const j = await r.json() as any;
    expect(r.status).toBe(200);
    const ids = ((await (await post(s.url, "/tokenize", { messages })).json()) as any).tokens as number[];
    expect(j.prompt_logprobs).toHaveLength(ids.length);
    expect(j.usage.prompt_tokens).toBe(ids.length);
    const c = await completion({ prompt: ids, max_tokens: 1, prompt_logprobs: 2 });
    expect(j.prompt_logprobs).toEqual(c.choices[0].prompt_logprobs);
    expect(j.choices).toHaveLength(2);
    const streamed = await post(s.url, "/v1/chat/completions", { messages, max_tokens: 3, prompt_logprobs: 2, stream: true });
    expect(streamed.status).toBe(400);
    expect((await streamed.json() as any).error.param).toBe("prompt_logprobs");
  }, 60000);

  test("streaming: the prompt is the first chunk; the chunks add up to the non-streamed choice", async () => {
    const body = { prompt: "Once upon a time", max_tokens: 6, temperature: 0, echo: true, logprobs: 1 };
    const whole = (await completion(body)).choices[0];
    const res = await post(s.url, "/v1/completions", { ...body, stream: true });
    const chunks = sseData(await res.text()).filter((d) => d !== "[DONE]").map((d) => JSON.parse(d).choices[0]);
    expect(chunks[0].text).toBe("Once upon a time");
    expect(chunks[0].logprobs.token_logprobs[0]).toBeNull();
    expect(chunks.map((c) => c.text).join("")).toBe(whole.text);
    expect(chunks.flatMap((c) => c.logprobs?.token_logprobs ?? [])).toEqual(whole.logprobs.token_logprobs);
  }, 60000);
});
