// vLLM's end-of-output controls on the OpenAI routes (shared fixture): ignore_eos (the model's end ids do not
// end the output), stop_token_ids (more ids that do, not emitted), min_tokens (end and stop ids banned and stop
// strings not looked for until that many tokens are out); logit_bias makes the model pick the id in question at
// every step, so each rule decides alone how long the output is. Also vLLM's include_stop_str_in_output,
// allowed_token_ids, bad_words, truncate_prompt_tokens and skip_special_tokens. Ids outside the vocabulary, and stop strings
// past 4096 characters, are refused naming the field.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Server } from "../src/server/server.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";

describe.skipIf(!hasTiny)("serve: ignore_eos, stop_token_ids, min_tokens", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 2 }); });
  afterAll(() => s.stop());
  const eos = hasTiny ? [JSON.parse(readFileSync(join(TINY, "config.json"), "utf8")).eos_token_id].flat()[0] as number : 0;
  const run = async (extra: Record<string, unknown>, path = "/v1/completions") => {
    const body = path === "/v1/completions" ? { prompt: "Once upon a time", max_tokens: 12, temperature: 0, ...extra }
      : { messages: [{ role: "user", content: "Hi" }], max_tokens: 12, temperature: 0, ...extra };
    const r = await post(s.url, path, body);
    const j = (await r.json()) as any;
    return { status: r.status, j, n: j.usage?.completion_tokens as number, reason: j.choices?.[0]?.finish_reason as string };
  };

  test("an end id the model always picks: stops at once; ignore_eos runs to max_tokens; min_tokens holds it off", async () => {
    const bias = { logit_bias: { [eos]: 100 } };
    expect(await run(bias)).toMatchObject({ n: 0, reason: "stop" });
    expect(await run({ ...bias, ignore_eos: true })).toMatchObject({ n: 12, reason: "length" });
    expect(await run({ ...bias, min_tokens: 5 })).toMatchObject({ n: 5, reason: "stop" });
    expect(await run({ ...bias, min_tokens: 50 })).toMatchObject({ n: 12, reason: "length" });
    // stop_token_ids brings the end id back after ignore_eos; on the chat route too
    expect(await run({ ...bias, ignore_eos: true, stop_token_ids: [eos] })).toMatchObject({ n: 0, reason: "stop" });
    expect(await run({ ...bias, ignore_eos: true }, "/v1/chat/completions")).toMatchObject({ n: 12, reason: "length" });
  });

  test("stop_token_ids: a plain id that ends the output (not emitted), after min_tokens if asked", async () => {
    const plain = await run({});
    expect(plain).toMatchObject({ n: 12, reason: "length" });
    const id = 77, bias = { logit_bias: { [id]: 100 } };
    const forced = await run(bias);
    expect(forced).toMatchObject({ n: 12, reason: "length" });
    expect(await run({ ...bias, stop_token_ids: [id] })).toMatchObject({ n: 0, reason: "stop" });
    const held = await run({ ...bias, stop_token_ids: [id], min_tokens: 3 });
    expect(held).toMatchObject({ n: 3, reason: "stop" });
    // with the stop id banned, each of the 3 tokens is the plain greedy one (the bias only raised the banned id)
    expect(held.j.choices[0].text.length).toBeGreaterThan(0);
    expect(plain.j.choices[0].text.startsWith(held.j.choices[0].text)).toBe(true);
  });

  test("min_tokens: stop strings are looked for only after that many tokens (as vLLM)", async () => {
    const plain = await run({});
    const text = plain.j.choices[0].text as string, word = text.slice(2, 4);
    const stopped = await run({ stop: [word] });
    expect(stopped).toMatchObject({ reason: "stop" });
    expect(stopped.j.choices[0].text).toBe(text.slice(0, text.indexOf(word)));
    const held = await run({ stop: [word], min_tokens: 12 }); // the stop string falls inside the first 12 tokens
    expect(held.j.choices[0].text).toBe(text);
    expect(held.n).toBe(12);
  });

  test("stop strings of more than 4096 characters are refused naming the field, on every route that takes them", async () => {
    const long = "x".repeat(4097);
    for (const [path, body] of [["/v1/completions", { prompt: "Hi", stop: long }], ["/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }], stop: ["a", long] }],
      ["/completion", { prompt: "Hi", stop: [long] }], ["/v1/messages", { model: "x", max_tokens: 4, messages: [{ role: "user", content: "Hi" }], stop_sequences: [long] }]] as const) {
      const r = await post(s.url, path, body), text = await r.text();
      expect([path, r.status]).toEqual([path, 400]);
      expect(text).toContain("stop strings are at most 4096 characters");
    }
    expect((await run({ stop: "x".repeat(4096) })).status).toBe(200);
  });

  test("include_stop_str_in_output: the matched stop string ends the text, streamed too", async () => {
    const text = (await run({})).j.choices[0].text as string, word = text.slice(2, 4), cut = text.slice(0, text.indexOf(word));
    const kept = await run({ stop: [word], include_stop_str_in_output: true });
    expect(kept).toMatchObject({ reason: "stop" });
    expect(kept.j.choices[0].text).toBe(cut + word);
    const r = await post(s.url, "/v1/completions", { prompt: "Once upon a time", max_tokens: 12, temperature: 0, stop: [word], include_stop_str_in_output: true, stream: true });
    const deltas = (await r.text()).split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)).choices[0]?.text ?? "");
    expect(deltas.join("")).toBe(cut + word);
  });

  test("allowed_token_ids: only those ids are sampled, greedy or not", async () => {
    const ids = [40, 41, 42, 43];
    const r = await run({ allowed_token_ids: ids, logprobs: 1, ignore_eos: true, temperature: 0.9, seed: 3 });
    expect(r).toMatchObject({ status: 200, n: 12 });
    const toks = await post(s.url, "/tokenize", { content: r.j.choices[0].text });
    for (const t of ((await toks.json()) as any).tokens as number[]) expect(ids).toContain(t);
    // every allowed id banned by another rule (min_tokens holds the end id off): the output ends there, no error
    expect(await run({ allowed_token_ids: [eos], min_tokens: 3 })).toMatchObject({ status: 200, n: 0, reason: "stop" });
    const one = await run({ allowed_token_ids: [41] });
    const t1 = ((await (await post(s.url, "/tokenize", { content: one.j.choices[0].text })).json()) as any).tokens as number[];
    expect(t1.length).toBeGreaterThan(0);
    expect(new Set(t1)).toEqual(new Set([41]));
  });

  test("bad_words: the last token of a word's tokens is banned where the output ends with the rest", async () => {
    const ids = async (extra: object) => ((await run({ logit_bias: { 400: 100, 401: 100 }, logprobs: 0, return_tokens_as_token_ids: true, ...extra }))
      .j.choices[0].logprobs.tokens as string[]).map((t) => Number(t.slice("token_id:".length)));
    const pairs = (t: number[]) => t.slice(1).filter((x, i) => t[i] === 400 && x === 401).length; // " su" then " use"
    const plain = await ids({}), banned = await ids({ bad_words: ["su use"] }); // (its spaced form is 400, 401)
    expect(pairs(plain)).toBeGreaterThan(0);
    expect(pairs(banned)).toBe(0);
    expect(banned).toContain(401); // " use" alone stays allowed
    expect(banned.length).toBe(12);
  });

  test("truncate_prompt_tokens: only the prompt's last N tokens are read", async () => {
    const ids = Array.from({ length: 40 }, (_, i) => 20 + i);
    const cut = await run({ prompt: ids, truncate_prompt_tokens: 8 });
    expect(cut.j.usage.prompt_tokens).toBe(8);
    expect(cut.j.choices[0].text).toBe((await run({ prompt: ids.slice(-8) })).j.choices[0].text);
    expect((await run({ prompt: ids, truncate_prompt_tokens: 100 })).j.usage.prompt_tokens).toBe(40);
  });

  test("skip_special_tokens: false keeps special tokens in the text", async () => {
    const bias = { logit_bias: { [eos]: 100 }, ignore_eos: true, max_tokens: 3 }, piece = loadTokenizer(TINY).decode([eos], false);
    expect(piece.length).toBeGreaterThan(0);
    expect((await run(bias)).j.choices[0].text).toBe("");
    expect((await run({ ...bias, skip_special_tokens: false })).j.choices[0].text).toBe(piece.repeat(3));
    expect((await run({ ...bias, skip_special_tokens: false }, "/v1/chat/completions")).j.choices[0].message.content).toBe(piece.repeat(3));
  });

  test("chat: add_generation_prompt false, continue_final_message (the last assistant message continued as written)", async () => {
    const codec = loadTokenizer(TINY), user = [{ role: "user", content: "Hi" }];
    const msgs = [...user, { role: "assistant", content: "Once upon" }];
    const same = async (extra: Record<string, unknown>, prompt: string) => {
      const chat = await run({ ...extra, max_tokens: 6 }, "/v1/chat/completions"), plain = await run({ prompt, max_tokens: 6 });
      expect(chat.status).toBe(200);
      expect(chat.j.usage.prompt_tokens).toBe(plain.j.usage.prompt_tokens);
      expect(chat.j.choices[0].message.content).toBe(plain.j.choices[0].text);
    };
    const rendered = codec.chat(msgs, { addGenerationPrompt: false });
    await same({ messages: msgs, continue_final_message: true }, rendered.slice(0, rendered.lastIndexOf("Once upon") + "Once upon".length));
    await same({ messages: user, add_generation_prompt: false }, codec.chat(user, { addGenerationPrompt: false }));
    expect((await run({ messages: user, continue_final_message: true }, "/v1/chat/completions")).j.error.param).toBe("continue_final_message");
    expect((await run({ messages: msgs, continue_final_message: true, add_generation_prompt: true }, "/v1/chat/completions")).j.error.param).toBe("add_generation_prompt");
  });

  test("return_tokens_as_token_ids: logprobs name tokens token_id:ID, with the same logprobs", async () => {
    const plain = await run({ logprobs: 2 }), ids = await run({ logprobs: 2, return_tokens_as_token_ids: true });
    const a = plain.j.choices[0].logprobs, b = ids.j.choices[0].logprobs;
    expect(b.token_logprobs).toEqual(a.token_logprobs);
    for (const t of b.tokens) expect(t).toMatch(/^token_id:\d+$/);
    for (const top of b.top_logprobs) for (const k of Object.keys(top)) expect(k).toMatch(/^token_id:\d+$/);
    const codec = loadTokenizer(TINY); // the ids name the same tokens the plain run spelled out
    expect(b.tokens.map((t: string) => codec.decode([Number(t.slice(9))]))).toEqual(a.tokens);
    const chat = await run({ logprobs: true, top_logprobs: 1, return_tokens_as_token_ids: true }, "/v1/chat/completions");
    for (const e of chat.j.choices[0].logprobs.content) expect(e.token).toMatch(/^token_id:\d+$/);
  });

  test("bad values name the field", async () => {
    const V = JSON.parse(readFileSync(join(TINY, "config.json"), "utf8")).vocab_size as number;
    const a = await run({ stop_token_ids: [3, V] });
    expect(a.status).toBe(400);
    expect(a.j.error.param).toBe("stop_token_ids.1");
    const b = await run({ min_tokens: -1 });
    expect(b.status).toBe(400);
    expect(b.j.error.param).toBe("min_tokens");
    const c = await run({ ignore_eos: "yes" });
    expect(c.status).toBe(400);
    expect(c.j.error.param).toBe("ignore_eos");
    const d = await run({ allowed_token_ids: [1, V + 5] });
    expect(d.status).toBe(400);
    expect(d.j.error.param).toBe("allowed_token_ids.1");
    expect((await run({ allowed_token_ids: [] })).j.error.param).toBe("allowed_token_ids");
    expect((await run({ truncate_prompt_tokens: 0 })).j.error.param).toBe("truncate_prompt_tokens");
  });
});
