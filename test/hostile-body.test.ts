// Hostile JSON bodies: validation costs what the body holds, not more. 8 MiB of `{}` as messages took the HTTP
// thread ~4.7 s (JSON.parse 0.5 s, then zod made two issues for each of 2.7M items); 4M token ids of -1, 5.2 s of
// zod; 600k logit_bias keys, 1 s. Now the text is counted before JSON.parse (values, containers, keys), lists are
// counted before their items are parsed and stop at the first bad one, and ids too long for the context are refused
// before they are copied to the engine. Every answer names the field, and /health keeps answering meanwhile.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "../src/server/server.ts";
import { MAX_BODY_CONTAINERS, MAX_BODY_VALUES, MAX_OBJECT_KEYS } from "../src/server/json-bounds.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { pollHealth, startTiny } from "./server.helpers.ts";

describe.skipIf(!hasTiny)("hostile JSON bodies", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 1 }); });
  afterAll(async () => { await s.stop(); });
  const send = (path: string, body: string) => fetch(`${s.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body });
  const msgs = '"messages":[{"role":"user","content":"hi"}],"max_tokens":1';

  test("each is a 400 naming what is wrong, in well under a second, while /health answers", async () => {
    const bodies: [string, string, RegExp][] = [ // (made before the clock starts: this test shares the server's thread)
      ["/v1/chat/completions", `{"messages":[${"{},".repeat(2_700_000)}{}],"max_tokens":1}`, new RegExp(`more than ${MAX_BODY_CONTAINERS} objects and arrays`)],
      ["/v1/completions", `{"prompt":[${"0,".repeat(4_000_000)}0]}`, new RegExp(`more than ${MAX_BODY_VALUES} values`)],
      ["/v1/completions", `{"prompt":[${"-1,".repeat(1_000_000)}-1]}`, /^prompt\.0: Too small: expected number to be >=0/],
      ["/v1/chat/completions", `{"messages":[${"{},".repeat(60_000)}{}],"max_tokens":1}`, /^messages\.0\.role: /],
      ["/v1/chat/completions", `{"messages":[${'{"role":"user","content":""},'.repeat(70_000)}{}]}`, /^messages: Too big: expected array to have <=65536 items/],
      ["/v1/chat/completions", `{${msgs},"logit_bias":{${Array.from({ length: 600_000 }, (_, i) => `"${i}":1`).join(",")}}}`, new RegExp(`more than ${MAX_OBJECT_KEYS} keys in one object`)],
      ["/v1/chat/completions", `{${msgs},"logit_bias":{${Array.from({ length: 60_000 }, (_, i) => `"${i}":1`).join(",")}}}`, /^logit_bias: at most 1024 entries/],
      ["/v1/chat/completions", `{${msgs},"stop":[${'"abc",'.repeat(1_000_000)}"abc"]}`, /^stop: Too big: expected array to have <=16 items/],
      ["/v1/completions", `{"prompt":[${"7,".repeat(1_000_000)}7]}`, /^prompt: the prompt has 1000001 tokens; the context limit per slot is \d+/],
      ["/v1/embeddings", `{"input":[${"7,".repeat(1_000_000)}7]}`, /^input: the prompt has 1000001 tokens/],
    ];
    const health = pollHealth(s.url);
    const slowest = { ms: 0, path: "" };
    for (const [path, body, message] of bodies) {
      const t = performance.now(), r = await send(path, body), e = ((await r.json()) as any).error;
      const ms = performance.now() - t;
      if (ms > slowest.ms) Object.assign(slowest, { ms, path: `${path} ${message}` });
      expect([path, r.status, e.message]).toEqual([path, 400, expect.stringMatching(message)]);
    }
    const worst = await health.stop();
    expect(slowest.ms).toBeLessThan(1500); // (before: 4.7 s for the first, 5.2 s for the third)
    expect(worst).toBeLessThan(1500);
  });

  test("the same shapes within the bounds are served", async () => {
    const ids = await send("/v1/completions", `{"prompt":[${"7,".repeat(999)}7],"max_tokens":1}`);
    expect(ids.status).toBe(200);
    const cut = await send("/v1/completions", `{"prompt":[${"7,".repeat(100_000)}7],"max_tokens":1,"truncate_prompt_tokens":8}`);
    expect(((await cut.json()) as any).usage.prompt_tokens).toBe(8);
    const chat = await send("/v1/chat/completions", `{"messages":[${'{"role":"user","content":"a"},'.repeat(500)}{"role":"user","content":"b"}],"max_tokens":1,"logit_bias":{"5":1}}`);
    expect(chat.status).toBe(200);
  });
});
