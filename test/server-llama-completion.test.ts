// POST /completion (llama-server's own endpoint) on the shared fixture: the same greedy text as /v1/completions
// with llama-server's response fields, streamed as data lines whose contents add up (the last with stop: true, no
// [DONE]); stop words, [id, false] bans, id_slot, and refusals naming the field.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "../src/server/server.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { loadModel } from "../src/engine/model.ts";
import { Session } from "../src/engine/session.ts";
import { Sampler, type SamplingParams } from "../src/engine/sampler.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { post, startTiny } from "./server.helpers.ts";

describe.skipIf(!hasTiny)("serve: POST /completion (llama-server's)", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 2 }); });
  afterAll(() => s.stop());
  const prompt = "Once upon a time";
  const lines = async (r: Response) => (await r.text()).split("\n\n").filter(Boolean).map((l) => {
    expect(l.startsWith("data: ")).toBe(true);
    return JSON.parse(l.slice(6));
  });

  test("the /v1/completions text, llama-server's fields; streamed: the contents add up, the last stops", async () => {
    const v1 = (await (await post(s.url, "/v1/completions", { prompt, max_tokens: 8, temperature: 0 })).json()) as any;
    const r = (await (await post(s.url, "/completion", { prompt, n_predict: 8, temperature: 0 })).json()) as any;
    expect(r).toMatchObject({ content: v1.choices[0].text, stop: true, tokens_predicted: 8, tokens_evaluated: v1.usage.prompt_tokens,
      stop_type: "limit", stopping_word: "", model: "glm-tiny" });
    expect(r.id_slot).toBeGreaterThanOrEqual(0);
    const res = await post(s.url, "/completion", { prompt, n_predict: 8, temperature: 0, stream: true });
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const ev = await lines(res);
    expect(ev.at(-1)).toMatchObject({ stop: true, tokens_predicted: 8, stop_type: "limit" });
    expect(ev.slice(0, -1).every((e) => e.stop === false && e.tokens.length === 1)).toBe(true);
    expect(ev.map((e) => e.content).join("")).toBe(r.content);
  });

  test("a prompt of token ids and texts mixed (llama-server's [12, 34, \"text\", 56]) is those ids with each text tokenized; several prompts", async () => {
    const codec = loadTokenizer(TINY), ids = [...codec.encode("Once"), 300, 301, ...codec.encode(" upon a"), 302];
    const mixed = [...codec.encode("Once"), 300, 301, " upon a", 302];
    const a = (await (await post(s.url, "/completion", { prompt: mixed, n_predict: 6, temperature: 0 })).json()) as any;
    const b = (await (await post(s.url, "/completion", { prompt: ids, n_predict: 6, temperature: 0 })).json()) as any;
    expect(a.tokens_evaluated).toBe(ids.length);
    expect(a.content).toBe(b.content);
    // several prompts (texts alone, or arrays): an array of results, each with its index; streamed lines too
    const one = async (p: unknown) => ((await (await post(s.url, "/completion", { prompt: p, n_predict: 4, temperature: 0 })).json()) as any).content;
    const several = (await (await post(s.url, "/completion", { prompt: ["Once upon", mixed], n_predict: 4, temperature: 0 })).json()) as any[];
    expect(several.map((x) => [x.index, x.content])).toEqual([[0, await one("Once upon")], [1, await one(mixed)]]);
    const st = await lines(await post(s.url, "/completion", { prompt: ["Once upon", "a time"], n_predict: 4, temperature: 0, stream: true }));
    for (const i of [0, 1]) expect(st.filter((e) => e.index === i).map((e) => e.content).join("")).toBe(await one(["Once upon", "a time"][i]));
    expect(st.filter((e) => e.stop).length).toBe(2);
    const big = await post(s.url, "/completion", { prompt: ["a", 1 << 30], n_predict: 1 });
    expect([big.status, ((await big.json()) as any).error.message]).toEqual([400, expect.stringContaining("outside")]);
  });

  test("stop words, [id, false] bans, id_slot", async () => {
    const ev = await lines(await post(s.url, "/completion", { prompt, n_predict: 8, temperature: 0, stream: true }));
    const text = ev.map((e) => e.content).join(""), firstId = ev[0].tokens[0];
    const word = text.slice(3, 6);
    const stopped = (await (await post(s.url, "/completion", { prompt, n_predict: 8, temperature: 0, stop: [word] })).json()) as any;
    expect(stopped).toMatchObject({ stop_type: "word", stopping_word: word, content: text.slice(0, text.indexOf(word)) });
    const banned = await lines(await post(s.url, "/completion", { prompt, n_predict: 2, temperature: 0, stream: true, logit_bias: [[firstId, false]] }));
    expect(banned[0].tokens[0]).not.toBe(firstId);
    const pinned = (await (await post(s.url, "/completion", { prompt: [5, 6, 7], n_predict: 2, temperature: 0, id_slot: 1 })).json()) as any;
    expect(pinned).toMatchObject({ id_slot: 1, tokens_evaluated: 3, tokens_predicted: 2 });
  });

  test("n_probs: each token's logprob and its best alternatives, as /v1/completions reports them", async () => {
    const v1 = (await (await post(s.url, "/v1/completions", { prompt, max_tokens: 4, temperature: 0, logprobs: 3 })).json()) as any;
    const r = (await (await post(s.url, "/completion", { prompt, n_predict: 4, temperature: 0, n_probs: 3 })).json()) as any;
    const lp = v1.choices[0].logprobs;
    expect(r.completion_probabilities.map((p: any) => p.token)).toEqual(lp.tokens);
    expect(r.completion_probabilities.map((p: any) => p.logprob)).toEqual(lp.token_logprobs);
    r.completion_probabilities.forEach((p: any, i: number) => {
      expect(p.top_logprobs).toHaveLength(3);
      expect(Object.fromEntries(p.top_logprobs.map((t: any) => [t.token, t.logprob]))).toEqual(lp.top_logprobs[i]);
    });
    const ev = await lines(await post(s.url, "/completion", { prompt, n_predict: 4, temperature: 0, n_probs: 3, stream: true }));
    expect(ev.slice(0, -1).map((e) => e.completion_probabilities[0].logprob)).toEqual(lp.token_logprobs);
  });

  test("typical_p, XTC and mirostat sample as llama-server's do: seeded, and visibly on the tokens they leave", async () => {
    const run = async (o: object, route = "/completion") =>
      (await (await post(s.url, route, { prompt, n_predict: 10, max_tokens: 10, temperature: 1, top_k: 2, n_probs: 2, seed: 7, ...o })).json()) as any;
    const ids = (r: any) => r.completion_probabilities.map((p: any) => p.id);
    const tops = (r: any, k: number) => r.completion_probabilities.map((p: any) => p.top_logprobs[k].id);
    // of the top two, XTC at threshold 0 removes all but the less probable: every token is the runner-up
    const x = await run({ xtc_probability: 1, xtc_threshold: 0 });
    expect(ids(x)).toEqual(tops(x, 1));
    // of two tokens the more probable is the more typical: a tiny typical_p keeps it alone (greedy)
    const t = await run({ typical_p: 0.01 });
    expect(ids(t)).toEqual(tops(t, 0));
    // the same seed and settings, the same tokens; XTC at probability 0.5 is neither of the above
    const half = await run({ xtc_probability: 0.5, xtc_threshold: 0 });
    expect(ids(await run({ xtc_probability: 0.5, xtc_threshold: 0 }))).toEqual(ids(half));
    expect(new Set(ids(half).map((id: number, i: number) => id === tops(half, 0)[i])).size).toBe(2);
    // the OpenAI routes take the same fields
    const v1 = await run({ xtc_probability: 1, xtc_threshold: 0, logprobs: 2 }, "/v1/completions");
    expect(v1.choices[0].text).toBe(x.content);
    // mirostat (in place of top-k and the rest): seeded, and the same on both routes
    const m = { mirostat: 2, mirostat_tau: 3, mirostat_eta: 0.2 };
    const mc = await run(m);
    expect(ids(await run(m))).toEqual(ids(mc));
    expect((await run({ ...m, logprobs: 2 }, "/v1/completions")).choices[0].text).toBe(mc.content);
    expect(ids(await run({ ...m, mirostat: 1 }))).not.toEqual(ids(mc));
  });

  test("DRY: the token that would extend a repeat is penalised; a breaker ends the run; on the OpenAI routes too", async () => {
    const ids = [400, 401, 402, 400, 401, 402, 400, 401]; // " su use by" three times, cut before the last " by"
    const text = async (o: object) => ((await (await post(s.url, "/completion", { prompt: ids, n_predict: 1, temperature: 0, logit_bias: [[402, 50]], ...o })).json()) as any).content;
    expect(await text({})).toBe(" by"); // the bias makes it the greedy token
    expect(await text({ dry_multiplier: 100 })).not.toBe(" by"); // " su use by su use" stood before it: 100 · 1.75^(5 − 2)
    expect(await text({ dry_multiplier: 100, dry_sequence_breakers: [" use"] })).toBe(" by"); // the context ends on a breaker
    expect(await text({ dry_multiplier: 100, dry_penalty_last_n: 2 })).toBe(" by"); // too short a window for a run of 2
    const v1 = async (o: object) =>
      ((await (await post(s.url, "/v1/completions", { prompt: ids, max_tokens: 1, temperature: 0, logit_bias: { 402: 50 }, ...o })).json()) as any).choices[0].text;
    expect(await v1({ dry_multiplier: 100 })).toBe(await text({ dry_multiplier: 100 }));
    expect(await v1({})).toBe(" by");
  });

  test("llama-server's sampler chain (top-n-sigma, dynamic temperature): seeded draws equal an in-process Sampler, temperature last", async () => {
    const m = loadModel(TINY), codec = loadTokenizer(TINY), ids = codec.encode(prompt), N = 16;
    const ref = (o: SamplingParams) => {
      const sess = new Session(m, { exact: false, attn: "absorbed" }), sm = new Sampler(o), out: number[] = [];
      let l = sess.feed(ids);
      for (let k = 0; k < N; k++) {
        const id = sm.sample(l.slice());
        if (m.cfg.stop_ids.includes(id)) break;
        out.push(id);
        l = sess.feed([id]);
      }
      return codec.decode(out);
    };
    const o = { temperature: 1.5, top_k: 40, top_p: 0.6, min_p: 0.05, seed: 21 };
    const got = ((await (await post(s.url, "/completion", { prompt, n_predict: N, ...o })).json()) as any).content;
    expect(got).toBe(ref({ ...o, temperature_last: true }));
    expect(got).not.toBe(ref(o)); // the OpenAI routes' order (temperature first) draws otherwise here
    // top-n-sigma and the dynamic temperature the same way (each changes these draws)
    const o2 = { temperature: 1.2, top_k: 0, top_p: 1, min_p: 0, top_n_sigma: 1.5, dynatemp_range: 0.6, dynatemp_exponent: 1.5, seed: 5 };
    const got2 = ((await (await post(s.url, "/completion", { prompt, n_predict: N, ...o2 })).json()) as any).content;
    expect(got2).toBe(ref({ ...o2, temperature_last: true }));
    expect(got2).not.toBe(ref({ ...o2, top_n_sigma: 0, temperature_last: true }));
    expect(got2).not.toBe(ref({ ...o2, dynatemp_range: 0, temperature_last: true }));
  });

  test("refusals name the field", async () => {
    for (const [body, param] of [[{ prompt, n_probs: 30 }, "n_probs"], [{ n_predict: 3 }, "prompt"], [{ prompt, n_predict: -2 }, "n_predict"],
      [{ prompt, logit_bias: [[1, "x"]] }, "logit_bias"], [{ prompt, mirostat: 3 }, "mirostat"], [{ prompt, mirostat_tau: -1 }, "mirostat_tau"], [{ prompt, typical_p: 0 }, "typical_p"],
      [{ prompt, dry_multiplier: -1 }, "dry_multiplier"], [{ prompt, dry_base: 0.5 }, "dry_base"], [{ prompt, xtc_probability: 1.5 }, "xtc_probability"],
      [{ prompt, xtc_threshold: -1 }, "xtc_threshold"]] as const) {
      const r = await post(s.url, "/completion", body);
      expect(r.status).toBe(400);
      expect(((await r.json()) as any).error.param).toStartWith(param);
    }
    // the OpenAI routes refuse the same values — and take every sampler at its default (off), as clients that send
    // every setting do
    const on = await post(s.url, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 2, mirostat: 3 });
    expect(on.status).toBe(400);
    expect(((await on.json()) as any).error.message).toContain("mirostat");
    const off = { mirostat: 0, typical_p: 1, dry_multiplier: 0, xtc_probability: 0 };
    expect((await post(s.url, "/completion", { prompt, n_predict: 2, ...off })).status).toBe(200);
    expect((await post(s.url, "/v1/completions", { prompt, max_tokens: 2, ...off })).status).toBe(200);
  });
});
