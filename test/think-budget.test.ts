// The thinking budget: the state machine (engine/think-budget.ts) on its own — counting inside <think>, the forced
// message and </think>, a natural </think>, a cut multi-byte character finished first — and over HTTP on the shared
// fixture: vLLM's thinking_token_budget and llama-server's reasoning_budget_tokens on /v1/completions (the tokens
// before the cut are the unbudgeted ones, the tokens after it those of a prompt that had </think> there), the
// server's --reasoning-budget and --reasoning-budget-message on the chat route (reasoning_content cut, the message
// in it), Anthropic's thinking.budget_tokens, speculative decoding (the same tokens), a JSON schema constraining the
// answer after the reasoning, and the refusals.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ThinkBudget } from "../src/engine/think-budget.ts";
import type { Server } from "../src/server/server.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

const OPEN = 8, CLOSE = 9;

describe("ThinkBudget", () => {
  const ascii = () => new Uint8Array([0x61]);
  const spec = (budget: number, forced = [CLOSE], bytes: (id: number) => Uint8Array = ascii) => ({ budget, open: OPEN, close: CLOSE, forced, bytes });

  test("idle until <think>, then `budget` free tokens, then the forced tokens one by one, then nothing", () => {
    const b = new ThinkBudget(spec(3, [20, 21, CLOSE]), false);
    for (const id of [5, 6, 7]) { expect(b.next()).toBe(-1); b.accept(id); }
    b.accept(OPEN);
    for (const id of [5, 6, 7]) { expect(b.next()).toBe(-1); b.accept(id); }
    for (const id of [20, 21, CLOSE]) { expect(b.next()).toBe(id); b.accept(id); }
    expect(b.next()).toBe(-1);
    b.accept(OPEN); // a second block is not counted (llama.cpp's: passthrough once done)
    for (let i = 0; i < 10; i++) { expect(b.next()).toBe(-1); b.accept(5); }
  });

  test("a prompt that left <think> open counts from the first token; budget 0 forces </think> at once", () => {
    const b = new ThinkBudget(spec(2), true);
    b.accept(5); b.accept(5);
    expect(b.next()).toBe(CLOSE);
    expect(new ThinkBudget(spec(0), true).next()).toBe(CLOSE);
    const idle = new ThinkBudget(spec(0), false);
    expect(idle.next()).toBe(-1);
    idle.accept(OPEN);
    expect(idle.next()).toBe(CLOSE);
  });

  test("a </think> the model writes within the budget ends it", () => {
    const b = new ThinkBudget(spec(3), true);
    b.accept(5); b.accept(CLOSE);
    for (let i = 0; i < 5; i++) { expect(b.next()).toBe(-1); b.accept(5); }
  });

  test("a multi-byte character cut by the budget is finished by the model's own tokens first", () => {
    const bytes: Record<number, number[]> = { 30: [0xe2], 31: [0x82], 32: [0xac], 33: [0xf0, 0x9f], 34: [0x98, 0x80] };
    const b = new ThinkBudget(spec(2, [CLOSE], (id) => new Uint8Array(bytes[id] ?? [0x61])), true);
    b.accept(5); b.accept(30); // '€' begun: two continuation bytes due
    expect(b.next()).toBe(-1);
    b.accept(31);
    expect(b.next()).toBe(-1);
    b.accept(32);
    expect(b.next()).toBe(CLOSE);
    const c = new ThinkBudget(spec(1, [CLOSE], (id) => new Uint8Array(bytes[id] ?? [0x61])), true);
    c.accept(33); // a 4-byte character, two of its bytes out
    expect(c.next()).toBe(-1);
    c.accept(34);
    expect(c.next()).toBe(CLOSE);
  });

  test("mask keeps only the forced id; false when another rule had banned it", () => {
    const b = new ThinkBudget(spec(0), true), l = new Float32Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    expect(b.mask(l)).toBe(true);
    expect([...l].map((v, i) => (v > -Infinity ? i : -1)).filter((i) => i >= 0)).toEqual([CLOSE]);
    expect(l[CLOSE]).toBe(10);
    const banned = new Float32Array(11).fill(0);
    banned[CLOSE] = -Infinity;
    expect(b.mask(banned)).toBe(false);
    const free = new ThinkBudget(spec(5), true), m = new Float32Array([1, 2, 3]);
    expect(free.mask(m)).toBe(true);
    expect([...m]).toEqual([1, 2, 3]);
    expect(() => new ThinkBudget(spec(1, [20]), true)).toThrow(/close/);
  });
});

describe.skipIf(!hasTiny)("serve: thinking budgets", () => {
  // the fixture's template always closes thinking; this one leaves <think> open when thinking is on
  const template = JSON.parse(readFileSync(join(TINY, "tokenizer_config.json"), "utf8")).chat_template.replace(
    "<|assistant|><think></think>", "<|assistant|>{%- if enable_thinking -%}<think>{%- else -%}<think></think>{%- endif -%}");
  let s: Server, d: Server, m: Server;
  beforeAll(async () => {
    s = await startTiny({ slots: 2, chatTemplate: template });
    d = await startTiny({ slots: 2, chatTemplate: template, draft: { kind: "ngram", len: 4 } });
    m = await startTiny({ slots: 2, chatTemplate: template, thinkBudget: 2, budgetMessage: " (enough)" });
  });
  afterAll(async () => { await s.stop(); await d.stop(); await m.stop(); });

  const PROMPT = [3, 15, 40, 41, 42, 15, 40, 41, OPEN];
  const ids = async (url: string, prompt: number[], extra: Record<string, unknown> = {}, max = 12) => {
    const r = await post(url, "/v1/completions", { prompt, max_tokens: max, temperature: 0, logprobs: 0, return_tokens_as_token_ids: true, ignore_eos: true, ...extra });
    const j = (await r.json()) as any;
    expect(r.status).toBe(200);
    const lp = j.choices[0].logprobs;
    return { ids: (lp.tokens as string[]).map((t) => Number(t.slice("token_id:".length))), lps: lp.token_logprobs as number[] };
  };

  test("completions: the free tokens are the unbudgeted ones, then </think> (logprob 0), then what follows a </think> there", async () => {
    const plain = await ids(s.url, PROMPT);
    expect(plain.ids.slice(0, 4)).not.toContain(CLOSE);
    for (const extra of [{ thinking_token_budget: 4 }, { reasoning_budget_tokens: 4 }, { thinking_token_budget: 4, reasoning_budget_tokens: 4 }]) {
      const cut = await ids(s.url, PROMPT, extra);
      expect(cut.ids.slice(0, 4)).toEqual(plain.ids.slice(0, 4));
      expect(cut.ids[4]).toBe(CLOSE);
      expect(cut.lps[4]).toBe(0);
      const after = await ids(s.url, [...PROMPT, ...plain.ids.slice(0, 4), CLOSE], {}, 7);
      expect(cut.ids.slice(5)).toEqual(after.ids);
    }
    // budget 0: </think> first; no budget on a prompt without an open block: nothing forced
    expect((await ids(s.url, PROMPT, { thinking_token_budget: 0 })).ids[0]).toBe(CLOSE);
    const closed = [...PROMPT, CLOSE];
    expect((await ids(s.url, closed, { thinking_token_budget: 0 })).ids).toEqual((await ids(s.url, closed)).ids);
  });

  test("speculative decoding gives the same tokens under a budget", async () => {
    for (const b of [0, 3, 6]) expect((await ids(d.url, PROMPT, { thinking_token_budget: b })).ids).toEqual((await ids(s.url, PROMPT, { thinking_token_budget: b })).ids);
  });

  const chat = async (url: string, extra: Record<string, unknown>) => {
    const r = await post(url, "/v1/chat/completions", { messages: [{ role: "user", content: "Hi there" }], max_tokens: 16, temperature: 0, ignore_eos: true,
      logprobs: true, skip_special_tokens: false, chat_template_kwargs: { enable_thinking: true }, ...extra });
    expect(r.status).toBe(200);
    return ((await r.json()) as any).choices[0];
  };

  test("chat: reasoning_content is cut at the budget; the server's default and its message; a request's own budget wins", async () => {
    const own = await chat(s.url, { thinking_token_budget: 3 });
    const toks = own.logprobs.content.map((e: { token: string }) => e.token) as string[];
    expect(own.message.reasoning_content).toBe(toks.slice(0, 3).join(""));
    expect(own.message.content).toBe(toks.slice(4).join(""));
    const dflt = await chat(m.url, {});
    expect(dflt.message.reasoning_content).toBe(toks.slice(0, 2).join("") + " (enough)");
    expect((await chat(m.url, { reasoning_budget_tokens: -1 })).message).toEqual(dflt.message); // −1: the server's
    const wider = await chat(m.url, { thinking_token_budget: 3 });
    expect(wider.message.reasoning_content).toBe(toks.slice(0, 3).join("") + " (enough)");
    // thinking off: nothing to count
    const off = await chat(m.url, { chat_template_kwargs: { enable_thinking: false } });
    expect(off.message.reasoning_content).toBeUndefined();
  });

  test("Anthropic's thinking.budget_tokens is enforced", async () => {
    const r = await post(s.url, "/v1/messages", { model: "m", max_tokens: 16, temperature: 0, messages: [{ role: "user", content: "Hi there" }],
      thinking: { type: "enabled", budget_tokens: 3 } });
    const j = (await r.json()) as any;
    expect(r.status).toBe(200);
    const own = await chat(s.url, { thinking_token_budget: 3, ignore_eos: false, skip_special_tokens: true });
    expect(j.content[0]).toEqual({ type: "thinking", thinking: own.message.reasoning_content, signature: expect.any(String) });
  });

  test("a JSON schema constrains the answer after the reasoning (a prompt ending inside <think>, or a first token opening it)", async () => {
    const schema = { type: "object", properties: { a: { type: "integer" } }, required: ["a"], additionalProperties: false };
    const rf = { response_format: { type: "json_schema", json_schema: { name: "x", schema } } };
    const on = await chat(s.url, { ...rf, thinking_token_budget: 4, ignore_eos: false, max_tokens: 40 });
    expect(on.finish_reason).toBe("stop");
    expect(on.logprobs.content.slice(0, 5).map((e: { token: string }) => e.token).at(-1)).toBe("</think>"); // 4 free tokens, then the close
    expect(on.message.reasoning_content).toBe(on.logprobs.content.slice(0, 4).map((e: { token: string }) => e.token).join(""));
    expect(Number.isInteger(JSON.parse(on.message.content).a)).toBe(true);
    const off = await chat(s.url, { ...rf, chat_template_kwargs: { enable_thinking: false }, ignore_eos: false, max_tokens: 40 });
    expect(off.message.reasoning_content).toBeUndefined();
    expect(Number.isInteger(JSON.parse(off.message.content).a)).toBe(true);
    // the fixture's own template closes the block: the first token may still open one (here pushed to, by a bias)
    const p = await startTiny({ slots: 1 });
    try {
      const j = (await (await post(p.url, "/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }], temperature: 0, max_tokens: 40, logprobs: true,
        skip_special_tokens: false, chat_template_kwargs: { enable_thinking: true }, thinking_token_budget: 3, logit_bias: { [OPEN]: 100 }, ...rf })).json()) as any;
      const toks = j.choices[0].logprobs.content.map((e: { token: string }) => e.token);
      expect(toks.slice(0, 5)).toEqual(["<think>", "<think>", "<think>", "<think>", "</think>"]);
      expect(Number.isInteger(JSON.parse(j.choices[0].message.content).a)).toBe(true);
    } finally { await p.stop(); }
  });

  test("refusals name the field", async () => {
    for (const [body, field] of [[{ thinking_token_budget: -1 }, "thinking_token_budget"], [{ reasoning_budget_tokens: -2 }, "reasoning_budget_tokens"],
      [{ thinking_token_budget: 2, reasoning_budget_tokens: 3 }, "reasoning_budget_tokens"], [{ thinking_token_budget: 1.5 }, "thinking_token_budget"]] as const) {
      const r = await post(s.url, "/v1/chat/completions", { messages: [{ role: "user", content: "x" }], ...body });
      expect(r.status).toBe(400);
      expect(((await r.json()) as any).error.param).toBe(field);
    }
    const r = await post(s.url, "/completion", { prompt: "x", thinking_token_budget: 1, reasoning_budget_tokens: 2 });
    expect(r.status).toBe(400);
  });
});
