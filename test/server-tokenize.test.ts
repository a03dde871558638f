// POST /tokenize and /detokenize (llama-server's and vLLM's field names) and /apply-template on the embedded demo model: the ids
// are the tokenizer's and the ones a completion of the same prompt counts, pieces decode each id, messages go
// through the chat template, the round trip gives the text back; bad bodies are 400s naming the field (500
// random ones too), and while the model loads both answer 503.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startServer, type Server } from "../src/server/server.ts";
import { demoModelDir } from "../src/model/demo.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { post } from "./server.helpers.ts";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const dir = demoModelDir(), codec = loadTokenizer(dir);
let s: Server;
beforeAll(async () => { s = startServer({ dir, slots: 1, port: 0 }); await s.engine.ready; });
afterAll(async () => { await s.stop(); });

const json = async (path: string, body: unknown) => { const r = await post(s.url, path, body); return { status: r.status, j: await r.json() as any }; };

describe("tokenize / detokenize", () => {
  test("ids are the tokenizer's and a completion's; pieces; messages through the template; the round trip", async () => {
    const text = "Hello world, this is Hummingbird.\nA second line: ünïcödé ✓";
    const a = await json("/tokenize", { content: text });
    expect(a.status).toBe(200);
    expect(a.j.tokens).toEqual(codec.encode(text));
    expect(a.j.count).toBe(a.j.tokens.length);
    expect(a.j.max_model_len).toBe(s.engine.info!.ctx);
    expect((await json("/tokenize", { prompt: text })).j.tokens).toEqual(a.j.tokens);
    const c = await json("/v1/completions", { prompt: text, max_tokens: 1 });
    expect(c.j.usage.prompt_tokens).toBe(a.j.count);
    const p = await json("/tokenize", { content: text, with_pieces: true });
    expect(p.j.tokens.map((t: any) => t.id)).toEqual(a.j.tokens);
    expect(p.j.tokens.map((t: any) => t.piece)).toEqual(a.j.tokens.map((id: number) => codec.decode([id])));
    const msgs = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi there" }];
    const m = await json("/tokenize", { messages: msgs });
    expect(m.j.tokens).toEqual(codec.encode(codec.chat(msgs)));
    expect((await json("/tokenize", { messages: msgs, add_generation_prompt: false })).j.tokens).toEqual(codec.encode(codec.chat(msgs, { addGenerationPrompt: false })));
    // vLLM's: the chat's template variables and continue_final_message as a chat request renders them; token_strs
    const think = await json("/tokenize", { messages: msgs, chat_template_kwargs: { enable_thinking: true } });
    expect(think.j.tokens).toEqual(codec.encode(codec.chat(msgs, { enableThinking: true })));
    const cont = [...msgs, { role: "assistant", content: "Sure, here" }];
    const tc = await json("/tokenize", { messages: cont, continue_final_message: true, add_generation_prompt: false });
    const rendered = codec.chat(cont, { addGenerationPrompt: false });
    expect(tc.j.tokens).toEqual(codec.encode(rendered.slice(0, rendered.lastIndexOf("Sure, here") + "Sure, here".length)));
    const cc = await json("/v1/chat/completions", { messages: cont, continue_final_message: true, add_generation_prompt: false, max_tokens: 1 });
    expect(cc.j.usage.prompt_tokens).toBe(tc.j.count);
    const strs = await json("/tokenize", { content: text, return_token_strs: true });
    const tj = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")), spelled = new Map<number, string>();
    for (const [t, id] of Object.entries(tj.model.vocab as Record<string, number>)) spelled.set(id, t);
    for (const t of tj.added_tokens ?? []) spelled.set(t.id, t.content);
    expect(strs.j.token_strs).toEqual(a.j.tokens.map((id: number) => spelled.get(id)));
    expect(strs.j.token_strs.length).toBe(a.j.count);
    const d = await json("/detokenize", { tokens: a.j.tokens });
    expect(d.status).toBe(200);
    expect(d.j.content).toBe(text);
    expect(d.j.prompt).toBe(text);
  });

  test("apply-template renders a chat as the chat route would, without inference", async () => {
    const msgs = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi there" }];
    const a = await json("/apply-template", { messages: msgs });
    expect(a.status).toBe(200);
    expect(a.j.prompt).toBe(codec.chat(msgs, { addGenerationPrompt: true, enableThinking: false }));
    expect((await json("/tokenize", { content: a.j.prompt })).j.tokens).toEqual((await json("/tokenize", { messages: msgs })).j.tokens);
    const c = await json("/v1/chat/completions", { messages: msgs, max_tokens: 1 });
    expect(c.j.usage.prompt_tokens).toBe((await json("/tokenize", { content: a.j.prompt })).j.count);
    const noGen = await json("/apply-template", { messages: msgs, add_generation_prompt: false });
    expect(noGen.j.prompt).toBe(codec.chat(msgs, { addGenerationPrompt: false }));
    const think = await json("/apply-template", { messages: msgs, chat_template_kwargs: { enable_thinking: true } });
    expect(think.j.prompt).toBe(codec.chat(msgs, { addGenerationPrompt: true, enableThinking: true }));
    const bad = await json("/apply-template", { messages: [{ role: "user", content: 5 }] });
    expect(bad.status).toBe(400);
    expect(bad.j.error.param).toStartWith("messages");
    expect((await json("/apply-template", {})).j.error.param).toBe("messages");
  });

  test("bad bodies: 400 naming the field; random ones never a 5xx, and the server keeps answering", async () => {
    expect((await json("/tokenize", { content: "a", prompt: "b" })).j.error.param).toBe("content");
    expect((await json("/tokenize", {})).status).toBe(400);
    expect((await json("/tokenize", { content: 5 })).j.error.param).toBe("content");
    const big = await json("/detokenize", { tokens: [1, 2, 1 << 20] });
    expect(big.status).toBe(400);
    expect(big.j.error.param).toBe("tokens");
    expect(big.j.error.message).toContain("tokens.2");
    expect((await json("/detokenize", { tokens: [-1] })).j.error.param).toBe("tokens.0");
    let seed = 7;
    const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
    const vals = [null, true, 0, -1, 1e9, "x", "", [], [1, 2], [-3], ["a"], {}, { role: "user" }, [{ role: "user", content: "hi" }], "\u0000\uffff"];
    for (let i = 0; i < 500; i++) {
      const b: Record<string, unknown> = {};
      for (const k of ["content", "prompt", "messages", "tokens", "with_pieces", "add_generation_prompt", "model"]) if (rnd() < 0.3) b[k] = vals[Math.floor(rnd() * vals.length)];
      const r = await post(s.url, ["/tokenize", "/detokenize", "/apply-template"][Math.floor(rnd() * 3)], rnd() < 0.05 ? "{not json" : b);
      expect(r.status === 200 || r.status === 400).toBe(true);
      await r.arrayBuffer();
    }
    expect((await fetch(`${s.url}/health`)).status).toBe(200);
  }, 30000);

  test("503 while the model loads", async () => {
    const l = startServer({ dir, slots: 1, port: 0, loadDelayMs: 1500 });
    try {
      for (const [path, body] of [["/tokenize", { content: "x" }], ["/detokenize", { tokens: [1] }], ["/apply-template", { messages: [{ role: "user", content: "x" }] }]] as const) {
        const r = await post(l.url, path, body);
        expect(r.status).toBe(503);
        await r.arrayBuffer();
      }
    } finally { await l.stop(); }
  });
});
