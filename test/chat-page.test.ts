// The chat page at / driven in a DOM (happy-dom) against a live server on the shared fixture: the API key typed
// into it unlocks the server, a turn's streamed reply equals the chat route's reply for the same conversation (the
// second turn carries the first), thinking is sent only once set, and Stop ends a long reply and frees the slot (the
// browser suite, chat-page.browser.test.ts, checks speed, Markdown and escaping in chromium).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Window } from "happy-dom";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

describe.skipIf(!hasTiny)("the chat page in a DOM", () => {
  const KEY = "sk-page";
  let s: Server, window: Window, lastBody: unknown = null;
  type El = { value: string; textContent: string | null; disabled: boolean; click(): void; dispatchEvent(e: unknown): boolean };
  const $ = (id: string) => window.document.getElementById(id) as unknown as El;
  const texts = (cls: string) => [...window.document.querySelectorAll(`.${cls}`)].map((e) => e.textContent ?? "");
  const until = async (what: string, ok: () => boolean) => {
    for (let i = 0; i < 400 && !ok(); i++) await Bun.sleep(25);
    if (!ok()) throw new Error(`timed out waiting for ${what}`);
  };
  beforeAll(async () => {
    s = await startTiny({ slots: 1, apiKey: KEY });
    window = new Window({ url: `${s.url}/`, settings: { enableJavaScriptEvaluation: true, suppressInsecureJavaScriptEnvironmentWarning: true } });
    // the page's relative fetches go to the server (the DOM's AbortSignal relayed to Bun's fetch)
    (window as unknown as { fetch: unknown }).fetch = (u: string, o: RequestInit & { signal?: { addEventListener(t: string, f: () => void): void } } = {}) => {
      const ctl = new AbortController();
      o.signal?.addEventListener("abort", () => ctl.abort());
      lastBody = o.body ?? null;
      return fetch(new URL(u, `${s.url}/`), { ...o, signal: ctl.signal } as RequestInit);
    };
    window.document.write(await (await fetch(`${s.url}/`)).text());
  });
  afterAll(async () => { await window.happyDOM.close(); await s.stop(); });

  const reply = async (messages: { role: string; content: string }[], max: number) =>
    ((await (await post(s.url, "/v1/chat/completions", { messages, max_tokens: max, temperature: 0 }, { authorization: `Bearer ${KEY}` })).json()) as any)
      .choices[0].message.content as string;
  const send = async (text: string) => {
    const n = texts("meta").length;
    $("input").value = text;
    $("send").click();
    await until("the reply's meta line", () => texts("meta").length > n && /tokens in|stopped/.test(texts("meta").at(-1)!));
  };

  test("the key unlocks it; each turn's reply is the chat route's for the conversation so far", async () => {
    await until("the first status", () => $("status").textContent !== "connecting…");
    expect($("status").textContent).toContain("missing or invalid API key");
    $("key").value = KEY;
    $("key").dispatchEvent(new window.Event("change"));
    await until("ready", () => $("status").textContent!.startsWith("ready"));
    $("temp").value = "0";
    $("max").value = "6";
    await send("Hello");
    const first = await reply([{ role: "user", content: "Hello" }], 6);
    expect(texts("bot").at(-1)).toBe(first);
    expect(texts("meta").at(-1)).toMatch(/^\d+ prompt \+ 6 tokens in [\d.]+ s \(prompt [\d.]+ tok\/s, decode [\d.]+ tok\/s\), length$/); // (the timings)
    await send("And then?");
    expect(texts("bot").at(-1)).toBe(await reply([{ role: "user", content: "Hello" }, { role: "assistant", content: first }, { role: "user", content: "And then?" }], 6));
    expect(texts("user")).toEqual(["Hello", "And then?"]);
    // thinking: unset, the template decides (no enable_thinking sent); set, it and the budget go into the request
    const think = window.document.getElementById("think") as unknown as { checked: boolean; indeterminate: boolean; click(): void };
    expect(think.indeterminate).toBe(true);
    expect(JSON.parse(String(lastBody)).chat_template_kwargs).toBeUndefined();
    think.click();
    $("budget").value = "2";
    await send("Think.");
    expect(JSON.parse(String(lastBody))).toMatchObject({ chat_template_kwargs: { enable_thinking: true }, thinking_token_budget: 2 });
  });

  test("Stop ends a long reply and the slot is free again", async () => {
    $("reset").click();
    $("max").value = "3000";
    $("input").value = "Tell me everything.";
    $("send").click();
    await until("some text", () => (texts("bot").at(-1) ?? "").length > 0);
    $("stop").click();
    await until("stopped", () => texts("meta").at(-1) === "stopped");
    expect($("send").disabled).toBe(false);
    await until("a free slot", () => s.engine.stats.busy === 0);
  });
});
