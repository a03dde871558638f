// No silent clamps: a context past the model's max_position_embeddings is refused at start naming the flag (vLLM's
// refusal; HB_ALLOW_LONG_MAX_MODEL_LEN=1 runs past it with a warning); a max_tokens that does not fit beside the prompt
// is vLLM's 400 naming the field (an absent one still means "up to the context"); unknown request fields are accepted
// and named once each, the names remembered bounded.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { resolve } from "node:path";
import { startServer, type Server } from "../src/server/server.ts";
import { MAX_NAMES, UnknownFields } from "../src/server/unknown-fields.ts";
import { ChatRequest } from "../src/server/schemas.ts";
import { genModel } from "./helpers/models.ts";
import { post, spawnServe } from "./server.helpers.ts";

const REPO = resolve(import.meta.dir, "..");
const model = () => genModel({ preset: "tiny", seed: 61 }); // (max_position_embeddings 4096)

async function cli(args: string[], env: Record<string, string> = {}) {
  const p = Bun.spawn(["bun", "src/cli.ts", ...args], { cwd: REPO, stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
  return { err, code };
}

describe("a context past max_position_embeddings", () => {
  test("serve --max-model-len / --ctx / --ctx-size and chat --ctx: refused (exit 2) naming the flag and both numbers", async () => {
    const dir = model(), why = (flag: string) => `hummingbird: ${flag} is above the model's limit of 4096 tokens (max_position_embeddings in ${dir}/config.json); `
      + "set HB_ALLOW_LONG_MAX_MODEL_LEN=1 to run past it anyway (the output may degrade)\n";
    const rs = await Promise.all([["serve", "--model", dir, "--max-model-len", "5000"], ["serve", "--model", dir, "--ctx", "4097"],
      ["serve", "--model", dir, "--ctx-size", "20000", "--slots", "2"], ["chat", "--model", dir, "--ctx", "8192"]].map((a) => cli(a)));
    expect(rs.map((r) => r.code)).toEqual([2, 2, 2, 2]);
    expect(rs[0].err).toStartWith(why("--max-model-len 5000"));
    expect(rs[1].err).toStartWith(why("--ctx 4097"));
    expect(rs[2].err).toStartWith(why("--ctx-size 20000 (10000 a slot)"));
    expect(rs[3].err).toStartWith(why("--ctx 8192"));
  }, 60_000);

  test("HB_ALLOW_LONG_MAX_MODEL_LEN=1: a warning at start, and the context as asked", async () => {
    const s = await spawnServe(["--model", model(), "--max-model-len", "5000", "--slots", "1", "--threads", "1"], { HB_ALLOW_LONG_MAX_MODEL_LEN: "1" });
    try {
      expect(s.log()).toContain("WARNING: --max-model-len 5000 is above the model's limit of 4096 tokens");
      expect(s.log()).toMatch(/ready on \S+ \(ctx 5000,/);
    } finally { s.p.kill(); await s.p.exited; }
  }, 60_000);
});

describe("max_tokens past the context, unknown fields (a server with ctx 64)", () => {
  let s: Server;
  const warned: string[] = [];
  beforeAll(async () => {
    s = startServer({ dir: model(), slots: 1, ctx: 64, port: 0, host: "127.0.0.1", acceptAnyModel: true, threads: 1, warn: (l) => warned.push(l) });
    await s.engine.ready;
  });
  afterAll(() => s.stop());
  const ids = Array.from({ length: 10 }, (_, i) => 20 + i);
  const chat = { messages: [{ role: "user", content: "Once upon a time" }], temperature: 0, ignore_eos: true };

  test("vLLM's 400: the field named, context_length_exceeded; stream too", async () => {
    const r = await post(s.url, "/v1/completions", { prompt: ids, max_tokens: 100 });
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error).toEqual({ type: "invalid_request_error", param: "max_tokens", code: "context_length_exceeded",
      message: "This model's maximum context length is 64 tokens. However, you requested 110 tokens (10 in the prompt, 100 in the completion). "
        + "Please reduce the length of the prompt or completion (max_tokens)." });
    for (const [field, stream] of [["max_tokens", false], ["max_completion_tokens", true]] as const) {
      const c = await post(s.url, "/v1/chat/completions", { ...chat, [field]: 64, stream });
      expect(c.status).toBe(400);
      const e = ((await c.json()) as any).error;
      expect([e.param, e.code]).toEqual([field, "context_length_exceeded"]);
      expect(e.message).toMatch(/^This model's maximum context length is 64 tokens\. However, you requested (\d+) tokens \(\d+ in the messages, 64 in the completion\)/);
    }
  });

  test("what fits is answered: max_tokens to the last token of the context, and none named (up to the context)", async () => {
    const fit = (await (await post(s.url, "/v1/completions", { prompt: ids, max_tokens: 54, temperature: 0, ignore_eos: true })).json()) as any;
    expect(fit.usage.completion_tokens).toBe(54);
    const none = (await (await post(s.url, "/v1/chat/completions", chat)).json()) as any;
    expect(none.usage.prompt_tokens + none.usage.completion_tokens).toBe(64);
    expect(none.choices[0].finish_reason).toBe("length");
    // /v1/completions' own default (OpenAI's 16) is cut to what is left, as before
    const dflt = (await (await post(s.url, "/v1/completions", { prompt: Array.from({ length: 60 }, (_, i) => 20 + i), temperature: 0, ignore_eos: true })).json()) as any;
    expect(dflt.usage.completion_tokens).toBe(4);
  });

  test("unknown fields: answered, each named once per server", async () => {
    warned.length = 0;
    for (let i = 0; i < 2; i++) {
      expect((await post(s.url, "/v1/chat/completions", { ...chat, max_tokens: 1, foo: 1, "bar\nbaz": 2 })).status).toBe(200);
      expect((await post(s.url, "/v1/completions", { prompt: ids, max_tokens: 1, foo: 1, qux: true })).status).toBe(200);
    }
    expect(warned).toEqual(["ignoring unknown field 'foo' in /v1/chat/completions", "ignoring unknown field 'bar?baz' in /v1/chat/completions",
      "ignoring unknown field 'qux' in /v1/completions"]);
  });
});

test("the names remembered are bounded: MAX_NAMES lines, one more saying so, then silence", () => {
  const lines: string[] = [], u = new UnknownFields((l) => lines.push(l));
  const body = Object.fromEntries(Array.from({ length: MAX_NAMES + 10 }, (_, i) => [`f${i}`, 1]));
  u.note("/v1/chat/completions", { ...body, messages: [], model: "x" }, ChatRequest);
  u.note("/v1/chat/completions", { g: 1, ["x".repeat(1000)]: 1 }, ChatRequest);
  expect(lines).toHaveLength(MAX_NAMES + 1);
  expect(lines[0]).toBe("ignoring unknown field 'f0' in /v1/chat/completions");
  expect(lines[MAX_NAMES]).toBe(`${MAX_NAMES} unknown request fields named; more are ignored without a word`);
  const long: string[] = [], v = new UnknownFields((l) => long.push(l));
  v.note("/v1/completions", { ["x".repeat(100_000)]: 1 }, ChatRequest);
  expect(long).toEqual([`ignoring unknown field '${"x".repeat(64)}…' in /v1/completions`]);
});
