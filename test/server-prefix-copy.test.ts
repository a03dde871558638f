// Prompt prefixes shared across slots (shared fixture): a request whose prompt starts with what another slot holds —
// idle, or busy decoding, or mid-prefill — gets those rows copied instead of prefilled (cached_tokens counts them), and
// its output is the same as on a fresh server; n choices of one prompt prefill it once.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

describe.skipIf(!hasTiny)("serve: prompt prefixes copied between slots", () => {
  let s: Server, fresh: Server;
  const lines: string[] = [];
  beforeAll(async () => {
    s = await startTiny({ slots: 3, chunk: 16, log: (l) => lines.push(l) });
    fresh = await startTiny({ slots: 1 });
  });
  afterAll(async () => { await s.stop(); await fresh.stop(); });
  const P = Array.from({ length: 40 }, (_, i) => `line ${i} of the shared system prompt;`).join(" ");
  const complete = (srv: Server, prompt: string, extra: object = {}) =>
    post(srv.url, "/v1/completions", { prompt, max_tokens: 8, temperature: 0, ignore_eos: true, ...extra }).then((r) => r.json() as Promise<any>);
  const tokens = async (text: string) => ((await (await post(s.url, "/tokenize", { content: text })).json()) as any).count as number;

  test("from a busy slot: the prefix is copied, the output is a fresh server's", async () => {
    const n = await tokens(P);
    expect(n).toBeGreaterThan(100);
    const ac = new AbortController(); // a long generation that is still decoding when the second request comes and goes
    let aDone = false;
    const a = fetch(`${s.url}/v1/completions`, { method: "POST", signal: ac.signal, headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt: P, max_tokens: 3000, temperature: 0, ignore_eos: true }) }).then((r) => r.text()).catch(() => "").finally(() => { aDone = true; });
    for (let i = 0; i < 400; i++) {
      const { slots } = (await (await fetch(`${s.url}/slots`)).json()) as { slots: { state: string }[] };
      if (slots.some((x) => x.state === "decode")) break;
      await Bun.sleep(5);
    }
    const b = await complete(s, P + " And then");
    expect(aDone).toBe(false);
    ac.abort();
    await a;
    expect(b.usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(n - 2); // (the tokenization may merge at the seam)
    expect(b.choices[0].text).toBe((await complete(fresh, P + " And then")).choices[0].text);
  });

  test("n choices of one prompt: the first prefills it, the others copy it (sampled: each its seed + i, as alone)", async () => {
    lines.length = 0;
    const q = P.replace("shared", "other");
    const r = await complete(s, q, { n: 3, temperature: 1, seed: 5 });
    const logged = lines.filter((l) => /request \d+:/.test(l)).map((l) => Number(/\((\d+) cached\)/.exec(l)![1]));
    expect(logged.length).toBe(3);
    expect(logged.filter((c) => c > 100).length).toBe(2); // one paid the prefill, the others waited for its rows
    for (let i = 0; i < 3; i++) expect(r.choices[i].text).toBe((await complete(fresh, q, { temperature: 1, seed: 5 + i })).choices[0].text);
  });

  test("with MTP drafting (its rows re-derived from the copied pairs): the same tokens", async () => {
    const m = await startTiny({ slots: 3, chunk: 16, draft: { kind: "mtp", len: 3 } });
    try {
      const q = P.replace("shared", "third");
      const r = await complete(m, q, { n: 3, max_tokens: 24 });
      const want = (await complete(fresh, q, { max_tokens: 24 })).choices[0].text;
      expect(r.choices.map((c: { text: string }) => c.text)).toEqual([want, want, want]);
      expect((await complete(m, q + " More", { max_tokens: 24 })).choices[0].text).toBe((await complete(fresh, q + " More", { max_tokens: 24 })).choices[0].text);
    } finally { await m.stop(); }
  });
});
