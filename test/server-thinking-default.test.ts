// Thinking on by default, as vLLM and llama-server serve GLM: a request that names no enable_thinking leaves the
// template's own default (GLM's: think unless enable_thinking is defined and false), so the chat, Anthropic and
// Responses routes give reasoning; enable_thinking false (or the server's --chat-template-kwargs) turns it off; a
// template that closes <think></think> by itself (the fixture's) is not thinking.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

// GLM's rule (enable_thinking undefined: think), opening the block in the prompt so the tiny model's reply is reasoning
const GLM = "{%- for m in messages -%}<|user|>{{ m.content }}{%- endfor -%}<|assistant|>"
  + "{%- if enable_thinking is defined and not enable_thinking -%}<think></think>{%- else -%}<think>{%- endif -%}";

describe.skipIf(!hasTiny)("serve: thinking as the template decides", () => {
  let s: Server, off: Server, fixture: Server;
  beforeAll(async () => {
    s = await startTiny({ slots: 1, chatTemplate: GLM });
    off = await startTiny({ slots: 1, chatTemplate: GLM, templateKwargs: { enable_thinking: false } });
    fixture = await startTiny({ slots: 1 });
  });
  afterAll(async () => { await s.stop(); await off.stop(); await fixture.stop(); });
  const messages = [{ role: "user", content: "Hi" }];
  const chat = async (t: Server, extra: object = {}) =>
    ((await (await post(t.url, "/v1/chat/completions", { messages, max_tokens: 6, temperature: 0, ignore_eos: true, ...extra })).json()) as any).choices[0].message;
  const prompt = async (t: Server, extra: object = {}) => ((await (await post(t.url, "/apply-template", { messages, ...extra })).json()) as any).prompt as string;

  test("asked nothing, the template thinks: the prompt, chat reasoning_content, a thinking block, a reasoning item", async () => {
    expect(await prompt(s)).toBe("<|user|>Hi<|assistant|><think>");
    const m = await chat(s);
    expect(m.reasoning_content.length).toBeGreaterThan(0);
    expect(m.content).toBe("");
    const a = (await (await post(s.url, "/v1/messages", { messages, max_tokens: 6, temperature: 0 })).json()) as any;
    expect(a.content[0].type).toBe("thinking");
    const r = (await (await post(s.url, "/v1/responses", { input: "Hi", max_output_tokens: 6, temperature: 0 })).json()) as any;
    expect(r.output[0].type).toBe("reasoning");
  });

  test("enable_thinking false, or the server's default false, turns it off; a template that closes it does not think", async () => {
    expect(await prompt(s, { chat_template_kwargs: { enable_thinking: false } })).toBe("<|user|>Hi<|assistant|><think></think>");
    const no = await chat(s, { chat_template_kwargs: { enable_thinking: false } });
    expect(no.reasoning_content).toBeUndefined();
    expect(no.content.length).toBeGreaterThan(0);
    expect(await prompt(off)).toBe("<|user|>Hi<|assistant|><think></think>");
    expect((await chat(off)).reasoning_content).toBeUndefined();
    expect((await chat(off, { chat_template_kwargs: { enable_thinking: true } })).reasoning_content.length).toBeGreaterThan(0);
    expect(await prompt(fixture)).toEndWith("<|assistant|><think></think>");
    expect((await chat(fixture)).reasoning_content).toBeUndefined();
  });
});
