// SSE as a plain HTTP client sees it: `curl -N` against a live server streams `data:` chunks and
// ends with `data: [DONE]`.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startServer, type Server } from "../src/server/server.ts";
import { genModel } from "./helpers/models.ts";

let s: Server;
beforeAll(async () => {
  s = startServer({ dir: genModel({ preset: "tiny", seed: 12 }), slots: 2, port: 0 });
  await s.engine.ready;
}, 60_000);
afterAll(() => s.stop());

test("curl -N: SSE chunks, then data: [DONE]", async () => {
  const body = JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 6, temperature: 0, stream: true });
  // async spawn: the server runs in this process and must keep serving while curl waits
  const p = Bun.spawn({ cmd: ["curl", "-sN", "--max-time", "30", "-H", "content-type: application/json", "-d", body, `${s.url}/v1/chat/completions`], stdout: "pipe" });
  const out = await new Response(p.stdout).text();
  expect(await p.exited).toBe(0);
  const events = out.split("\n\n").filter((e) => e.trim() !== "");
  expect(events.at(-1)).toBe("data: [DONE]");
  const chunks = events.slice(0, -1).map((e) => { expect(e.startsWith("data: ")).toBe(true); return JSON.parse(e.slice(6)); });
  expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
  expect(chunks.at(-1).choices[0].finish_reason).toBe("length");
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
  expect(text.length).toBeGreaterThan(0);
});
