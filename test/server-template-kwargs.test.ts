// Chat template variables (shared fixture): a request's chat_template_kwargs reach the template (all of them, as vLLM
// passes them), and the server's --chat-template-kwargs give the defaults that requests override — enable_thinking
// among them, so thinking can be on by default on the chat, Anthropic and Responses routes (each turns it off its
// own way); bad flag values exit 2 naming the flag.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { resolve } from "node:path";
import type { Server } from "../src/server/server.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

const T = "{%- for m in messages -%}<|user|>{{ m.content }}{%- endfor -%}<|assistant|>{{ greeting }}{%- if enable_thinking -%}<think>{%- else -%}<think></think>{%- endif -%}";

describe.skipIf(!hasTiny)("serve: chat template variables", () => {
  let plain: Server, dflt: Server;
  beforeAll(async () => {
    plain = await startTiny({ slots: 1, chatTemplate: T });
    dflt = await startTiny({ slots: 1, chatTemplate: T, templateKwargs: { enable_thinking: true, greeting: "Ahoy" } });
  });
  afterAll(async () => { await plain.stop(); await dflt.stop(); });
  const messages = [{ role: "user", content: "Hi" }];
  const template = async (s: Server, kw?: object) =>
    ((await (await post(s.url, "/apply-template", { messages, ...(kw ? { chat_template_kwargs: kw } : {}) })).json()) as any).prompt as string;

  test("a request's variables reach the template; the server's are the defaults, overridden key by key", async () => {
    expect(await template(plain)).toBe("<|user|>Hi<|assistant|><think></think>");
    expect(await template(plain, { greeting: "Yo", enable_thinking: true })).toBe("<|user|>Hi<|assistant|>Yo<think>");
    expect(await template(dflt)).toBe("<|user|>Hi<|assistant|>Ahoy<think>");
    expect(await template(dflt, { enable_thinking: false })).toBe("<|user|>Hi<|assistant|>Ahoy<think></think>");
    expect(await template(dflt, { greeting: "Hey" })).toBe("<|user|>Hi<|assistant|>Hey<think>");
    const bad = await post(plain.url, "/v1/chat/completions", { messages, chat_template_kwargs: { enable_thinking: "yes" } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error.param).toBe("chat_template_kwargs.enable_thinking");
  });

  test("thinking on by default: chat, Anthropic and Responses reasoning, each turned off its own way", async () => {
    const chat = async (s: Server, extra: object = {}) =>
      ((await (await post(s.url, "/v1/chat/completions", { messages, max_tokens: 6, temperature: 0, ignore_eos: true, ...extra })).json()) as any).choices[0].message;
    const on = await chat(dflt);
    expect(on.reasoning_content.length).toBeGreaterThan(0);
    expect(on.reasoning).toBe(on.reasoning_content); // (vLLM's newer name beside it)
    const sse = await (await post(dflt.url, "/v1/chat/completions", { messages, max_tokens: 6, temperature: 0, ignore_eos: true, stream: true })).text();
    const deltas = sse.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)).choices[0]?.delta ?? {});
    expect(deltas.map((d) => d.reasoning ?? "").join("")).toBe(on.reasoning_content);
    expect(deltas.every((d) => d.reasoning === d.reasoning_content)).toBe(true);
    expect(on).toEqual(await chat(plain, { chat_template_kwargs: { enable_thinking: true, greeting: "Ahoy" } })); // (the same prompt)
    expect((await chat(dflt, { chat_template_kwargs: { enable_thinking: false } })).reasoning_content).toBeUndefined();
    expect((await chat(plain)).reasoning_content).toBeUndefined(); // (no default: off)
    // OpenAI's reasoning_effort: none / minimal off, others on (chat_template_kwargs win); and the template sees it
    expect((await chat(plain, { reasoning_effort: "high", chat_template_kwargs: { greeting: "Ahoy" } }))).toEqual(on);
    expect((await chat(dflt, { reasoning_effort: "none" })).reasoning_content).toBeUndefined();
    expect((await chat(plain, { reasoning_effort: "none", chat_template_kwargs: { enable_thinking: true, greeting: "Ahoy" } }))).toEqual(on);
    const anthropic = async (extra: object = {}) =>
      ((await (await post(dflt.url, "/v1/messages", { model: "m", max_tokens: 6, temperature: 0, messages, ...extra })).json()) as any).content.map((b: { type: string }) => b.type);
    expect((await anthropic())[0]).toBe("thinking");
    expect(await anthropic({ thinking: { type: "disabled" } })).not.toContain("thinking");
    const responses = async (extra: object = {}) =>
      ((await (await post(dflt.url, "/v1/responses", { model: "m", max_output_tokens: 6, temperature: 0, input: "Hi", ...extra })).json()) as any).output.map((o: { type: string }) => o.type);
    expect((await responses())[0]).toBe("reasoning");
    expect(await responses({ reasoning: { effort: "none" } })).toEqual(["message"]);
  });
});

describe.skipIf(!hasTiny)("serve: an assistant turn's reasoning sent back", () => {
  // a template that shows each assistant turn's reasoning, as GLM's do for the turns of the current tool chain
  const R = "{%- for m in messages -%}<|{{ m.role }}|>{%- if m.reasoning_content -%}<think>{{ m.reasoning_content }}</think>{%- endif -%}{{ m.content }}{%- endfor -%}<|assistant|>";
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 1, chatTemplate: R }); });
  afterAll(async () => { await s.stop(); });

  test("reasoning_content or reasoning (vLLM's) on the chat route, thinking blocks on Anthropic's, reasoning items on the Responses API's, reach the template", async () => {
    const turns = (a: object) => [{ role: "user", content: "Weather?" }, { role: "assistant", content: "Let me look.", ...a }, { role: "user", content: "And?" }];
    const want = "<|user|>Weather?<|assistant|><think>check the map</think>Let me look.<|user|>And?<|assistant|>";
    for (const a of [{ reasoning_content: "check the map" }, { reasoning: "check the map" }])
      expect(((await (await post(s.url, "/apply-template", { messages: turns(a) })).json()) as any).prompt).toBe(want);
    const ids = ((await (await post(s.url, "/tokenize", { messages: turns({ reasoning: "check the map" }) })).json()) as any).tokens as number[];
    const m = (await (await post(s.url, "/v1/messages", { model: "m", max_tokens: 1, temperature: 0, messages: [{ role: "user", content: "Weather?" },
      { role: "assistant", content: [{ type: "thinking", thinking: "check the map", signature: "" }, { type: "text", text: "Let me look." }] },
      { role: "user", content: "And?" }] })).json()) as any;
    expect(m.usage.input_tokens).toBe(ids.length);
    // the Responses API: a reasoning item's text (its content, else its summary) is the next assistant turn's
    for (const rs of [{ content: [{ type: "reasoning_text", text: "check the map" }] }, { summary: [{ type: "summary_text", text: "check the map" }] }]) {
      const r = (await (await post(s.url, "/v1/responses", { model: "m", max_output_tokens: 1, temperature: 0, input: [{ role: "user", content: "Weather?" },
        { type: "reasoning", id: "rs_1", ...rs }, { role: "assistant", content: "Let me look." }, { role: "user", content: "And?" }] })).json()) as any;
      expect(r.usage.input_tokens).toBe(ids.length);
    }
  });
});

describe("serve --chat-template-kwargs", () => {
  const cli = async (...args: string[]) => {
    const p = Bun.spawn(["bun", "src/cli.ts", "serve", "--model", TINY, "--port", "0", ...args], { cwd: resolve(import.meta.dir, ".."), stdout: "pipe", stderr: "pipe" });
    const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
    return { code, err };
  };
  test("bad values exit 2 naming the flag", async () => {
    const runs = await Promise.all([cli("--chat-template-kwargs", "x"), cli("--chat-template-kwargs", "[1]"), cli("--chat-template-kwargs", '{"enable_thinking": 1}'),
      cli("--chat-template-kwargs", "{}", "--default-chat-template-kwargs", "{}")]);
    expect(runs.map((r) => r.code)).toEqual([2, 2, 2, 2]);
    expect(runs[0].err).toContain("--chat-template-kwargs: not JSON");
    expect(runs[1].err).toContain("must be a JSON object");
    expect(runs[2].err).toContain("enable_thinking must be true or false");
    expect(runs[3].err).toContain("not both");
  }, 60_000);
});
