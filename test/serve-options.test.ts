// `serve` flags a llama-server / vLLM user reaches for: --alias (the model id reported and accepted), --threads,
// --chat-template FILE (replacing the model's template) and --cors (browser origins; none by default) — one
// `bun src/cli.ts serve` child process with all four on the shared fixture — plus their bad values (exit 2 naming
// the flag or the file), --chat-template on generate, and readChatTemplate / loadTokenizer's override; the chat
// page at / (open without the key, its script parses, its SSE reader rebuilds the server's reply; --no-ui).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { loadTokenizer, readChatTemplate } from "../src/model/tokenizer.ts";
import { ModelError } from "../src/model/errors.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { spawnServe, startTiny } from "./server.helpers.ts";
import type { Subprocess } from "bun";

const REPO = resolve(import.meta.dir, "..");
const root = mkdtempSync(join(tmpdir(), "hb-serve-opts-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const TEMPLATE = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";
const templateFile = join(root, "chat.jinja");
writeFileSync(templateFile, TEMPLATE);
const badTemplate = join(root, "bad.jinja");
writeFileSync(badTemplate, "{% for m in messages %}{{ m.content }");

async function cli(...args: string[]) {
  const p = Bun.spawn(["bun", "src/cli.ts", ...args], { cwd: REPO, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

describe("chat template override", () => {
  test("readChatTemplate: a missing file and a syntax error are ModelErrors naming the file", () => {
    expect(() => readChatTemplate(join(root, "none.jinja"))).toThrow(ModelError);
    expect(() => readChatTemplate(join(root, "none.jinja"))).toThrow("none.jinja");
    expect(() => readChatTemplate(badTemplate)).toThrow(/bad\.jinja.*not a valid Jinja chat template|not a valid Jinja chat template.*bad\.jinja/);
    expect(readChatTemplate(templateFile)).toBe(TEMPLATE);
  });

  test.skipIf(!hasTiny)("loadTokenizer renders the given template instead of the model's", () => {
    const msgs = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }];
    const own = loadTokenizer(TINY).chat(msgs), other = loadTokenizer(TINY, TEMPLATE).chat(msgs);
    expect(other).toBe("[system] Be brief.\n[user] Hi\n[assistant]");
    expect(own).not.toBe(other);
  });

  test("a server reachable from other hosts without --api-key says so loudly", async () => {
    const p = Bun.spawn(["bun", "src/cli.ts", "serve", "--model", TINY, "--host", "0.0.0.0", "--port", "0", "--slots", "1", "--quiet"],
      { cwd: REPO, stdout: "pipe", stderr: "pipe" });
    let err = "";
    const reader = (p.stderr as ReadableStream<Uint8Array>).getReader(), dec = new TextDecoder();
    try {
      while (!err.includes("listening on")) { const { value, done } = await reader.read(); if (done) break; err += dec.decode(value); }
      for (let i = 0; i < 20 && !err.includes("WARNING"); i++) { const { value, done } = await reader.read(); if (done) break; err += dec.decode(value); }
    } finally { p.kill(); }
    expect(err).toContain("WARNING: listening on 0.0.0.0 without --api-key");
  }, 60_000);

  test("API keys from --api-key-file (one a line) or HB_API_KEY; bad files exit 2 naming the flag", async () => {
    const keys = join(root, "keys.txt"), empty = join(root, "empty.txt"), comma = join(root, "comma.txt");
    writeFileSync(keys, "sk-one\n\n  sk-two  \n");
    writeFileSync(empty, "\n \n");
    writeFileSync(comma, "a,b\n");
    const status = async (url: string, key?: string) => (await fetch(`${url}/v1/models`, key ? { headers: { authorization: `Bearer ${key}` } } : {})).status;
    const a = await spawnServe(["--quiet", "--api-key-file", keys], { HB_API_KEY: "sk-env" }); // (the file wins over the environment)
    try {
      expect(a.log()).toContain("API key required");
      expect([await status(a.url), await status(a.url, "sk-one"), await status(a.url, "sk-two"), await status(a.url, "sk-env")]).toEqual([401, 200, 200, 401]);
    } finally { a.p.kill(); }
    const b = await spawnServe(["--quiet"], { HB_API_KEY: "sk-env" });
    try { expect([await status(b.url), await status(b.url, "sk-env")]).toEqual([401, 200]); } finally { b.p.kill(); }
    const runs = await Promise.all([cli("serve", "--api-key-file", empty), cli("serve", "--api-key-file", comma),
      cli("serve", "--api-key-file", keys, "--api-key", "k"), cli("serve", "--api-key-file", join(root, "none.txt")), cli("serve", "--api-key", "a,,b")]);
    for (const r of runs) expect(r.code).toBe(2);
    expect(runs[0].err).toContain(`--api-key-file ${empty} holds no key`);
    expect(runs[1].err).toContain(`--api-key-file ${comma}: key 1 holds a comma`);
    expect(runs[2].err).toContain("give --api-key or --api-key-file, not both");
    expect(runs[3].err).toContain("ENOENT");
    expect(runs[4].err).toContain("--api-key must not be empty");
  }, 60_000);

  test("a port already taken: exit 1 saying where it could not listen", async () => {
    const taken = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") });
    try {
      const r = await cli("serve", "--port", String(taken.port), "--quiet");
      expect(r.code).toBe(1);
      expect(r.err).toContain(`cannot listen on 127.0.0.1:${taken.port}`);
      expect(r.err).not.toContain("internal error");
    } finally { taken.stop(true); }
  }, 60_000);

  test("bad values exit 2 naming the flag or the file", async () => {
    // [command line, what stderr says] (a RegExp, or strings it contains)
    const cases: [string[], ...(string | RegExp)[]][] = [
      [["serve", "--cors", "http://ui.example/app"], '--cors: "http://ui.example/app" is not an origin'],
      [["serve", "--cors", ","], "--cors needs at least one origin"],
      [["serve", "--threads", "0"], "--threads must be in [1, 256]"],
      [["serve", "--alias", " "], "--alias must not be empty"],
      [["serve", "--chat-template", badTemplate], "bad.jinja", "not a valid Jinja chat template"],
      [["chat", "--threads", "x"], "--threads must be a non-negative integer"],
      [["serve", "--alias", "a", "--served-model-name", "b"], "give --alias or --served-model-name, not both"],
      [["generate", "--model", TINY, "--prompt", "hi", "--max-tokens", "1", "--chat-template", templateFile], ...(hasTiny ? ["--chat-template needs --chat"] : [])],
      [["serve", "--model", TINY, "--reasoning-budget=-2"], "--reasoning-budget must be -1 or a non-negative integer"],
      [["chat", "--model", TINY, "--reasoning-budget-message", "ok"], "--reasoning-budget-message needs --reasoning-budget"],
      [["serve", "--model", TINY, "--ctx", "64", "--max-model-len", "64"], "give --ctx or --max-model-len, not both"],
      [["serve", "--model", TINY, "--parallel", "0"], "--slots must be in [1, 256]"], // (--parallel is --slots)
      [["serve", "--model", TINY, "--pooling", "max"], '--pooling must be one of last|mean|cls|none, got "max"'],
      [["serve", TINY, "--model", TINY], `give the model directory once: ${TINY} or --model ${TINY}`],
      [["serve", TINY, TINY], "one model directory, not 2"],
      [["serve", "-m", TINY, "-c", "3", "--parallel", "2"], "--ctx-size is shared by the 2 slots: it must give each at least 2 tokens"],
      [["serve", "-m", TINY, "--ctx", "64", "-c", "64"], "give --ctx (or --max-model-len) or --ctx-size, not both"],
      [["serve", "-m", TINY, "--tool-call-parser", "hermes"], "--tool-call-parser hermes: this server parses GLM's format only"],
      [["serve", "-m", TINY, "--cache-ram", "-1"], "--cache-ram"],
      [["serve", "-m", TINY, "-b", "64", "--prefill-chunk", "64"], "give --prefill-chunk or --batch-size, not both"],
      [["serve", "-m", TINY, "--cache-ram", String(2 ** 40)], /--cache-ram \d+ MiB is more than this machine's \d+ MiB of memory/],
    ];
    const runs = await Promise.all(cases.map(([args]) => cli(...args)));
    runs.forEach((r, i) => {
      expect(r.code).toBe(2);
      for (const want of cases[i].slice(1) as (string | RegExp)[]) typeof want === "string" ? expect(r.err).toContain(want) : expect(r.err).toMatch(want);
    });
  }, 60_000);

  test.skipIf(!hasTiny)("generate --chat --chat-template prompts through the given template", async () => {
    const r = await cli("generate", "--model", TINY, "--prompt", "Hi", "--chat", "--chat-template", templateFile, "--max-tokens", "1", "--json", "--threads", "1");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).prompt_ids).toEqual(loadTokenizer(TINY).encode("[user] Hi\n[assistant]"));
  }, 60_000);
});

describe.skipIf(!hasTiny)("serve --alias --threads --chat-template --cors --api-key --parallel --max-model-len", () => {
  const UI = "http://ui.example:3000", KEY = "sk-opts";
  let proc: Subprocess, url = "", log = () => "";
  beforeAll(async () => {
    ({ p: proc, url, log } = await spawnServe(["--model", TINY, "--parallel", "1", "--max-model-len", "512", "--alias", "tiny-chat",
      "--threads", "1", "--chat-template", templateFile, "--cors", `${UI},http://other.example`, "--api-key", KEY]));
  }, 60_000);
  afterAll(() => { proc?.kill(); });
  const auth = { authorization: `Bearer ${KEY}` };

  test("the alias is the model id; the pool has the threads asked for", async () => {
    expect(log()).toMatch(/model tiny-chat ready on .*1 threads\)/);
    const list = (await (await fetch(`${url}/v1/models`, { headers: auth })).json()) as any;
    expect(list.data.map((m: any) => m.id)).toEqual(["tiny-chat"]);
    expect(list.data[0].meta.threads).toBe(1);
    expect(list.data[0].max_model_len).toBe(list.data[0].meta.ctx);
    expect(((await (await fetch(`${url}/version`, { headers: auth })).json()) as any).version).toMatch(/^\d+\.\d+\.\d+$/);
    expect((await fetch(`${url}/v1/models/tiny-chat`, { headers: auth })).status).toBe(200);
    expect((await fetch(`${url}/v1/models/glm-tiny`, { headers: auth })).status).toBe(404);
    const r = (await (await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ model: "tiny-chat", messages: [{ role: "user", content: "Hi" }], max_tokens: 2, temperature: 0 }) })).json()) as any;
    expect(r.model).toBe("tiny-chat");
    const prompt = loadTokenizer(TINY).encode("[user] Hi\n[assistant]").length;
    expect(r.usage.prompt_tokens).toBe(prompt);
    // one line per finished request on stderr
    for (let i = 0; i < 100 && !log().includes(" generated in "); i++) await Bun.sleep(20);
    expect(log()).toMatch(new RegExp(`request \\d+: ${prompt} prompt tokens \\(0 cached\\) \\+ 2 generated in [\\d.]+ s, decode [\\d.]+ tok/s, length`));
  });

  test("/props: llama-server's fields (context, slots, chat template, alias; --parallel and --max-model-len as --slots and --ctx)", async () => {
    expect((await fetch(`${url}/props`)).status).toBe(401);
    const p = (await (await fetch(`${url}/props`, { headers: auth })).json()) as any;
    expect(p).toMatchObject({ model_alias: "tiny-chat", model_path: TINY, total_slots: 1, chat_template: TEMPLATE });
    expect(p.default_generation_settings.n_ctx).toBe(512);
  });

  test("llama-server's and vLLM's forms: serve DIR (positional), -m, -c N as the total of all slots, -t, -a", async () => {
    const compat = ["--jinja", "--metrics", "--cont-batching", "--no-webui", "--enable-auto-tool-choice", "--tool-call-parser", "glm47",
      "--reasoning-parser", "glm45", "--trust-remote-code"]; // (their launch lines' flags for what is always on here)
    for (const args of [[TINY, "-c", "1024"], ["-m", TINY, "--ctx-size", "1024", ...compat]]) {
      const { p, url: u, log } = await spawnServe([...args, "--parallel", "2", "-t", "1", "-a", "short", "--quiet", "--disable-log-stats"]);
      try {
        const props = (await (await fetch(`${u}/props`)).json()) as any;
        expect(props).toMatchObject({ model_alias: "short", model_path: TINY, total_slots: 2 });
        expect(props.default_generation_settings.n_ctx).toBe(512); // (1024 shared by 2 slots)
        expect(log()).toMatch(/ready on .*1 threads\)/);
        expect((await fetch(`${u}/`)).status).toBe(args.includes("--no-webui") ? 404 : 200);
      } finally { p.kill(); }
    }
  }, 60_000);

  test("messages go through the given template", async () => {
    const j = (await (await fetch(`${url}/tokenize`, { method: "POST", headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Hello there" }] }) })).json()) as any;
    expect(j.tokens).toEqual(loadTokenizer(TINY).encode("[user] Hello there\n[assistant]"));
  });

  test("CORS: preflights of listed origins answered without the key; others get no headers", async () => {
    const pre = await fetch(`${url}/v1/chat/completions`, { method: "OPTIONS", headers: {
      origin: UI, "access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type" } });
    expect(pre.status).toBe(204);
    expect(pre.headers.get("access-control-allow-origin")).toBe(UI);
    expect(pre.headers.get("access-control-allow-headers")!.toLowerCase()).toContain("authorization");
    expect(pre.headers.get("access-control-allow-methods")).toContain("POST");
    const ok = await fetch(`${url}/v1/models`, { headers: { ...auth, origin: "http://other.example" } });
    expect(ok.headers.get("access-control-allow-origin")).toBe("http://other.example");
    const denied = await fetch(`${url}/v1/models`, { headers: { origin: UI } }); // no key: 401 the browser can read
    expect(denied.status).toBe(401);
    expect(denied.headers.get("access-control-allow-origin")).toBe(UI);
    for (const origin of ["http://evil.example", "http://ui.example"]) { // an unlisted origin; the right host, wrong port
      const r = await fetch(`${url}/v1/models`, { headers: { ...auth, origin } });
      expect(r.status).toBe(200);
      expect(r.headers.get("access-control-allow-origin")).toBeNull();
    }
  });
});

describe.skipIf(!hasTiny)("the chat page at /", () => {
  test("served without the key; its script parses; its SSE reader rebuilds the streamed reply; --no-ui: 404", async () => {
    const KEY = "sk-ui", s = await startTiny({ slots: 1, apiKey: KEY }), off = await startTiny({ slots: 1, ui: false });
    try {
      const page = await fetch(`${s.url}/`);
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type")).toContain("text/html");
      const html = await page.text();
      expect(html).toContain('fetch("/v1/chat/completions"');
      const script = /<script>([\s\S]*)<\/script>/.exec(html)![1];
      expect(() => new Function(script)).not.toThrow(); // syntax only: it needs a DOM to run
      expect((await fetch(`${s.url}/v1/models`)).status).toBe(401);
      const readSse = new Function(`${/async function readSse[\s\S]*?\n}\n/.exec(script)![0]}; return readSse;`)();
      const body = { messages: [{ role: "user", content: "Hi" }], max_tokens: 8, temperature: 0 };
      const auth = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
      const whole = (await (await fetch(`${s.url}/v1/chat/completions`, { method: "POST", headers: auth, body: JSON.stringify(body) })).json()) as any;
      const r = await fetch(`${s.url}/v1/chat/completions`, { method: "POST", headers: auth, body: JSON.stringify({ ...body, stream: true }) });
      let text = "", chunks = 0;
      await readSse(r.body, (c: any) => { chunks++; text += c.choices?.[0]?.delta?.content ?? ""; });
      expect(chunks).toBeGreaterThan(1);
      expect(text).toBe(whole.choices[0].message.content);
      expect((await fetch(`${off.url}/`)).status).toBe(404);
    } finally { await s.stop(); await off.stop(); }
  }, 60_000);
});
