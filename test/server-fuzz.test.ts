// Fuzz of the serving layer on glm-tiny (seeded, bounded): 2000 HTTP bodies (random bytes, random JSON, truncated
// and mutated valid requests; the OpenAI routes (Responses and embeddings too), /v1/messages and llama-server's /completion) get a
// 2xx or a 4xx in the route's error shape (all have error.type and error.message), never a
// 5xx; 2000+ mux frames (valid, mutated, garbage) get only well-formed server frames. The server still
// answers /health afterwards and its slots drain.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { FrameReader, startTiny } from "./server.helpers.ts";

if (!hasTiny) console.warn("[skip] server fuzz suite: the glm-tiny fixture is absent");

let seed = 0x5eed;
const rnd = (n: number) => { seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x297a2d39) >>> 0; return seed % n; };
const pick = <T,>(a: readonly T[]): T => a[rnd(a.length)];

const ATOMS = [0, 1, -1, 2, 0.5, 1.5, 3, 1e9, -1e9, 1e308, 2 ** 53 + 1, "", "x", "user", "system", "text", "json_schema", true, false, null, [], {}];
function randJson(depth = 0): unknown {
  const k = rnd(depth > 2 ? 3 : 6);
  if (k < 3) return pick(ATOMS);
  if (k === 3) return "s".repeat(rnd(20)) + String.fromCharCode(rnd(0x3000));
  if (k === 4) return Array.from({ length: rnd(4) }, () => randJson(depth + 1));
  return Object.fromEntries(Array.from({ length: rnd(4) }, () => [pick(KEYS), randJson(depth + 1)]));
}
const KEYS = ["messages", "prompt", "role", "content", "max_tokens", "max_completion_tokens", "temperature", "top_p", "min_p", "top_k",
  "seed", "stop", "stream", "stream_options", "n", "logprobs", "top_logprobs", "response_format", "tools", "echo", "slot", "model",
  "chat_template_kwargs", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias", "tool_choice", "tool_calls", "junk",
  "system", "stop_sequences", "thinking", "input", "instructions", "max_output_tokens", "reasoning", "n_predict", "id_slot",
  "ignore_eos", "stop_token_ids", "min_tokens", "allowed_token_ids", "include_stop_str_in_output", "skip_special_tokens",
  "truncate_prompt_tokens", "return_tokens_as_token_ids", "add_generation_prompt", "continue_final_message", "mirostat", "typical_p", "prompt_logprobs", "xtc_probability", "xtc_threshold", "dry_multiplier", "dry_sequence_breakers", "mirostat_tau", "repeat_last_n", "top_n_sigma", "dynatemp_range", "bad_words", "guided_regex",
  "encoding_format", "dimensions", "normalize"];

function mutate(base: Record<string, unknown>): Record<string, unknown> {
  const b: Record<string, unknown> = structuredClone(base);
  for (let m = 1 + rnd(3); m > 0; m--) {
    const r = rnd(4);
    if (r === 0) delete b[pick(Object.keys(b))];
    else if (r === 1 && Array.isArray(b.messages)) b.messages = [{ role: pick(["user", "tool", "x", 1]), content: randJson(1) }];
    else b[pick(KEYS)] = randJson(1);
  }
  return b;
}

function httpCase(): { path: string; body: string | Uint8Array } {
  const path = pick(["/v1/chat/completions", "/v1/completions", "/v1/messages", "/completion", "/v1/responses", "/v1/embeddings", "/embedding"]);
  const chat = { messages: [{ role: "user", content: "hi" }], max_tokens: 2, temperature: 0 };
  const comp = { prompt: "hi", max_tokens: 2, n_predict: 2, temperature: 0 };
  const resp = { input: "hi", max_output_tokens: 2, temperature: 0 };
  const base = path === "/v1/embeddings" ? { input: ["hi", "there"], encoding_format: "float" } : path === "/embedding" ? { content: ["hi", "there"], embd_normalize: 2 } : path === "/v1/responses" ? resp : path.endsWith("completion") || path === "/v1/completions" ? comp : chat; // (/v1/messages takes the chat shape: Anthropic's is close)
  switch (rnd(5)) {
    case 0: return { path, body: Uint8Array.from({ length: rnd(200) }, () => rnd(256)) };
    case 1: return { path, body: JSON.stringify(randJson()) };
    case 2: { const s = JSON.stringify(mutate(base)); return { path, body: s.slice(0, rnd(s.length + 1)) }; }
    default: return { path, body: JSON.stringify(mutate(base)) };
  }
}

const enc = new TextEncoder();
function muxFrame(): string {
  const id = pick(["1", "2", "3", "0", "x", "18446744073709551616", String(1 + rnd(1000))]);
  const payload = pick(["hi", "", "1,2,3", "[]", '[{"role":"user","content":"a"}]', "a\nb", "é", "{"]);
  const fields = [id, pick(["auto", "0", "1", "9", "-1"]), String(enc.encode(payload).length), pick(["1", "2", "0", "x", "999"]),
    pick(["0", "0.5", "2", "3", "-0"]), pick(["1", "0.9", "0", "2"])];
  const keys = Array.from({ length: rnd(3) }, () => pick(["ids=1", "chat=1", "logprobs=2", "logprobs=30", "seed=5", "min_p=0.1", "x=1", "grammar=0"]));
  switch (rnd(8)) {
    case 0: return `STOP ${id}\n`;
    case 1: return `CANCEL ${id}\n`;
    case 2: return pick(["\n", "HELLO\n", "SUBMIT 1 auto\n", "SUBMIT 1 auto 3 1 0 1\nab", "STOP\n"]);
    case 3: { const f = [...fields]; f[rnd(f.length)] = String(randJson()); return `SUBMIT ${f.join(" ")}\n${payload}\n`; }
    default: return `SUBMIT ${[...fields, ...keys].join(" ")}\n${payload}\n`;
  }
}

async function pool<T>(items: T[], width: number, f: (x: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(Array.from({ length: width }, async () => { while (i < items.length) await f(items[i++]); }));
}

describe.skipIf(!hasTiny)("serve: fuzz", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 4, ctx: 64, maxBody: 64 * 1024 }); });
  afterAll(() => s.stop());

  test("2000 HTTP bodies: 2xx or an OpenAI-shaped 4xx, never 5xx", async () => {
    const cases = Array.from({ length: 2000 }, httpCase);
    const statuses = new Map<number, number>();
    await pool(cases, 8, async (c) => {
      const res = await fetch(s.url + c.path, { method: "POST", headers: { "content-type": "application/json" }, body: c.body });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      const text = await res.text();
      if (res.status >= 500) throw new Error(`5xx for ${JSON.stringify(String(c.body)).slice(0, 300)}: ${text}`);
      if (res.status >= 400) {
        const j = JSON.parse(text);
        expect(typeof j.error.message).toBe("string");
        expect(typeof j.error.type).toBe("string");
      }
    });
    expect([...statuses.keys()].every((k) => k < 500)).toBe(true);
    expect(statuses.get(400)!).toBeGreaterThan(1000);
    expect((await fetch(`${s.url}/health`)).status).toBe(200);
  }, 60000);

  test("2000+ mux frames over 400 streams: only well-formed server frames, READY first", async () => {
    let sent = 0;
    const streams = Array.from({ length: 400 }, () => {
      const n = 5 + rnd(4); // 5-8 frames per stream: 2000+ for any seed
      sent += n;
      return Array.from({ length: n }, muxFrame).join("");
    });
    expect(sent).toBeGreaterThanOrEqual(2000);
    await pool(streams, 4, async (body) => {
      const res = await fetch(`${s.url}/v1/mux`, { method: "POST", headers: { "content-type": "application/octet-stream" }, body });
      const r = new FrameReader();
      r.push(new Uint8Array(await res.arrayBuffer()));
      expect(r.rest).toBe(0);
      expect(r.frames[0].words[0]).toBe("READY");
      for (const f of r.frames.slice(1)) expect(["ACCEPT", "DATA", "DONE", "ERROR"]).toContain(f.words[0]);
      const internal = r.frames.find((f) => f.words[0] === "ERROR" && f.words[2] === "INTERNAL");
      if (internal) throw new Error(`INTERNAL for ${JSON.stringify(body)}: ${internal.head}`);
    });
    expect((await fetch(`${s.url}/health`)).status).toBe(200);
    for (let i = 0; i < 200; i++) {
      const j = await (await fetch(`${s.url}/slots`)).json() as any;
      if (j.busy === 0 && j.queue === 0) return;
      await Bun.sleep(25);
    }
    throw new Error("slots did not drain after the fuzz");
  }, 60000);
});
