// The chat page at / in a real browser (Debian's chromium, headless, driven by puppeteer-core) against a live server on
// the shared fixture: a long fast stream (3000 tokens, ignore_eos) leaves the page responsive (95% of animation frames within 100 ms,
// none and no evaluate round trip near a second) and shown as fast as a plain client reads it, ending with the reply drawn; Stop
// aborts at once and the slot is free right after, the server having made far fewer than the tokens asked; Markdown
// draws code blocks as <pre><code>, and model text holding <script> / <img onerror> / javascript: links is shown as
// text. Skipped, saying so, without chromium (.ci/run installs it).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, sseData, startTiny } from "./server.helpers.ts";

// (the functions given to page.evaluate run in chromium; this project's tsc has no DOM lib, and adding it to one file
// changes the types of every other)
declare const document: any, window: any, requestAnimationFrame: (f: (t: number) => void) => number; // eslint-disable-line @typescript-eslint/no-explicit-any
type HTMLInputElement = { value: string }; type HTMLTextAreaElement = HTMLInputElement; type HTMLButtonElement = { disabled: boolean };

const CHROMIUM = "/usr/bin/chromium";
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) console.warn(`[skip] ${CHROMIUM} is absent: the browser suite of the chat page is skipped (apt-get install chromium)`);

describe.skipIf(!hasTiny || !hasChromium)("the chat page in chromium", () => {
  let s: Server, browser: Browser, page: Page;
  const LONG = { max_tokens: 3000, ignore_eos: true };
  beforeAll(async () => {
    s = await startTiny({ slots: 1, threads: 1 }); // (a core left to the browser on a 2-core machine)
    browser = await puppeteer.launch({ executablePath: CHROMIUM, args: ["--headless=new", "--no-sandbox"] });
    page = await browser.newPage();
    await page.goto(`${s.url}/`);
    await page.waitForFunction(() => document.getElementById("status")!.textContent!.startsWith("ready"), { timeout: 10000 });
    await page.evaluate(() => { (document.getElementById("temp") as HTMLInputElement).value = "0"; });
  }, 20000);
  afterAll(async () => { await browser?.close(); await s?.stop(); });

  /** the page's next chat request gets these fields too (what a user cannot set on the page: ignore_eos, a grammar) */
  const withFields = (extra: object) => page.evaluate((x) => {
    const w = window as unknown as { realFetch?: typeof fetch };
    const f = (w.realFetch ??= window.fetch);
    window.fetch = (u: unknown, o?: RequestInit) => f(u, String(u).includes("chat/completions") ? { ...o, body: JSON.stringify({ ...JSON.parse(String(o!.body)), ...x }) } : o);
  }, extra);
  const send = (text: string, max: number) => page.evaluate((t, m) => {
    (document.getElementById("max") as HTMLInputElement).value = String(m);
    (document.getElementById("input") as HTMLTextAreaElement).value = t;
    document.getElementById("send")!.click();
  }, text, max);
  const lastMeta = () => page.evaluate(() => [...document.querySelectorAll(".meta")].at(-1)!.textContent!);
  const generated = async () => Number(/^llamacpp:tokens_predicted_total (\d+)/m.exec(await (await fetch(`${s.url}/metrics`)).text())![1]);

  test("a long fast stream: frames keep coming, round trips are quick, the text keeps up and ends as the reply", async () => {
    const body = { messages: [{ role: "user", content: "Go." }], temperature: 0, stream: true, ...LONG };
    let t0 = performance.now();
    const want = sseData(await (await post(s.url, "/v1/chat/completions", body)).text()).filter((d) => d !== "[DONE]")
      .map((d) => JSON.parse(d).choices[0]?.delta?.content ?? "").join("");
    const plainMs = performance.now() - t0; // (a plain client reading the same stream)
    await page.evaluate(() => { // (the page's animation frames: the gaps between them)
      const w = window as unknown as { gaps: number[] };
      w.gaps = [];
      let last = performance.now();
      const tick = (t: number) => { w.gaps.push(t - last); last = t; requestAnimationFrame(tick); };
      requestAnimationFrame(tick);
    });
    await withFields({ ignore_eos: true });
    t0 = performance.now();
    await send("Go.", 3000);
    let rtt = 0;
    while (!/tokens in/.test(await lastMeta())) {
      const t = performance.now();
      await page.evaluate(() => 1);
      rtt = Math.max(rtt, performance.now() - t);
      await Bun.sleep(20);
    }
    const pageMs = performance.now() - t0;
    const gaps = (await page.evaluate(() => (window as unknown as { gaps: number[] }).gaps)).sort((a, b) => a - b);
    const p95 = gaps[Math.floor(gaps.length * 0.95)], gap = gaps.at(-1)!;
    console.log(`3000 tokens: plain client ${plainMs.toFixed(0)} ms, page ${pageMs.toFixed(0)} ms; frame gaps: 95% under ${p95.toFixed(0)} ms, `
      + `longest ${gap.toFixed(0)} ms; longest round trip ${rtt.toFixed(0)} ms`);
    // (a draw of the whole 3000-token reply takes under 10 ms; the longest gaps, 180-420 ms, come from a loaded 2-core
    // machine, so the bounds leave room for it: the old page, drawing each token, froze for seconds; one CI run on a
    // busy machine saw a p95 of 150 ms)
    expect(p95).toBeLessThan(250);
    expect(gap).toBeLessThan(500);
    expect(rtt).toBeLessThan(300);
    expect(pageMs).toBeLessThan(plainMs * 1.5 + 1000);
    expect(await lastMeta()).toMatch(/ 3000 tokens in .*, length$/);
    const shown = await page.evaluate((w) => {
      const b = [...document.querySelectorAll(".bot")].at(-1)!, d = document.createElement("div");
      d.innerHTML = (window as unknown as { md(s: string): string }).md(w); // (the page's renderer, serialized as the page's is)
      return [b.innerHTML, d.innerHTML];
    }, want);
    expect(want.length).toBeGreaterThan(3000);
    expect(shown[0]).toBe(shown[1]);
  }, 30000);

  test("Stop mid-stream aborts at once; the slot is free right after and the server stopped making tokens", async () => {
    await page.evaluate(() => document.getElementById("reset")!.click());
    await withFields({ ignore_eos: true });
    const before = await generated();
    await send("Tell me everything.", 3000);
    await page.waitForFunction(() => ([...document.querySelectorAll(".bot")].at(-1)?.textContent ?? "").length > 2000, { timeout: 10000 }); // (mid-stream)
    const t0 = performance.now();
    await page.evaluate(() => document.getElementById("stop")!.click());
    await page.waitForFunction(() => [...document.querySelectorAll(".meta")].at(-1)!.textContent === "stopped", { timeout: 5000 });
    const stopMs = performance.now() - t0;
    let busy = 1;
    while (performance.now() - t0 < 2000 && (busy = ((await (await fetch(`${s.url}/slots`)).json()) as { busy: number }).busy) > 0) await Bun.sleep(10);
    const freeMs = performance.now() - t0, made = (await generated()) - before;
    console.log(`Stop: shown stopped in ${stopMs.toFixed(0)} ms, slot free in ${freeMs.toFixed(0)} ms, ${made} of 3000 tokens made`);
    expect(stopMs).toBeLessThan(300);
    expect(busy).toBe(0);
    expect(freeMs).toBeLessThan(1000);
    expect(made).toBeLessThan(3000);
    expect(await page.evaluate(() => (document.getElementById("send") as HTMLButtonElement).disabled)).toBe(false);
  }, 20000);

  test("Markdown: a code block as <pre><code>; <script>, <img onerror> and javascript: links are shown as text", async () => {
    await page.evaluate(() => document.getElementById("reset")!.click());
    const reply = "Here:\n```js\nlet a = 1 < 2;\n```\n**bold** and `x<y>` <script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">\n"
      + "- [bad](javascript:window.pwned=3)\n- [ok](https://example.com/a?b=1&c=2)";
    await withFields({ grammar: `root ::= ${JSON.stringify(reply)}` });
    await send("Show me.", 400);
    await page.waitForFunction(() => /tokens in/.test([...document.querySelectorAll(".meta")].at(-1)!.textContent!), { timeout: 10000 });
    await Bun.sleep(100); // (an onerror would have run by now)
    const got = await page.evaluate(() => {
      const b = [...document.querySelectorAll(".bot")].at(-1)!;
      return { code: b.querySelector("pre > code.language-js")?.textContent, strong: b.querySelector("strong")?.textContent, inline: b.querySelector("p code")?.textContent,
        tags: [...b.querySelectorAll("*")].map((e) => e.tagName.toLowerCase()), links: [...b.querySelectorAll("a")].map((a) => a.getAttribute("href")),
        text: b.textContent, pwned: (window as unknown as { pwned?: number }).pwned };
    });
    expect(got.code).toBe("let a = 1 < 2;");
    expect(got.strong).toBe("bold");
    expect(got.inline).toBe("x<y>");
    expect(got.tags.filter((t) => t === "script" || t === "img")).toEqual([]);
    expect(got.links).toEqual(["https://example.com/a?b=1&c=2"]);
    expect(got.text).toContain('<script>window.pwned=1</script><img src=x onerror="window.pwned=2">');
    expect(got.text).toContain("[bad](javascript:window.pwned=3)");
    expect(got.pwned).toBeUndefined();
  }, 20000);
});
