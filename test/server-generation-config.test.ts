// The model's generation_config.json as the served sampling defaults (vLLM's --generation-config auto), on the shared
// fixture copied beside such a file: requests that name no temperature / top_p / top_k / min_p / repetition_penalty
// get the file's (the same tokens as asking for them), requests that name them keep theirs, and
// generationConfig "vllm" serves the API's own defaults. The server's own flags (--temp, --top-k, ... or
// --override-generation-config) go over the file, on llama-server's /completion too; bad values exit 2 naming the flag.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Server } from "../src/server/server.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";
import { resolve } from "node:path";

describe.skipIf(!hasTiny)("serve: generation_config.json sampling defaults", () => {
  let dir: string, plain: Server, auto: Server, vllm: Server, flags: Server;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "hb-genconf-"));
    for (const f of readdirSync(TINY)) if (f !== "ref") symlinkSync(join(TINY, f), join(dir, f));
    writeFileSync(join(dir, "generation_config.json"), JSON.stringify({ temperature: 0.5, top_k: 3, repetition_penalty: 1.3 }));
    plain = await startTiny({ slots: 1 });
    auto = await startTiny({ slots: 1, dir });
    vllm = await startTiny({ slots: 1, dir, generationConfig: "vllm" });
    flags = await startTiny({ slots: 1, dir, sampling: { temperature: 0.7, top_k: 5 } });
  });
  afterAll(async () => { for (const x of [plain, auto, vllm, flags]) await x.stop(); rmSync(dir, { recursive: true, force: true }); });
  const text = async (s: Server, extra: object) =>
    ((await (await post(s.url, "/v1/completions", { prompt: "Once upon a time", max_tokens: 24, seed: 7, ignore_eos: true, ...extra })).json()) as any).choices[0].text as string;
  const FILE = { temperature: 0.5, top_k: 3, repetition_penalty: 1.3 };

  test("unnamed parameters come from the file; named ones stay; vllm: the API's defaults", async () => {
    const asFile = await text(plain, FILE);
    expect(await text(auto, {})).toBe(asFile);
    expect(asFile).not.toBe(await text(plain, {})); // (the defaults matter here)
    expect(await text(auto, { temperature: 1, top_k: 0, repetition_penalty: 1 })).toBe(await text(plain, {}));
    expect(await text(vllm, {})).toBe(await text(plain, {}));
    // the chat, Anthropic and Responses routes too (the latter reports what it used)
    const chat = async (s: Server, extra: object) => ((await (await post(s.url, "/v1/chat/completions",
      { messages: [{ role: "user", content: "Hi" }], max_tokens: 12, seed: 3, ignore_eos: true, ...extra })).json()) as any).choices[0].message.content;
    expect(await chat(auto, {})).toBe(await chat(plain, FILE));
    const r = (await (await post(auto.url, "/v1/responses", { model: "m", input: "Hi", max_output_tokens: 4 })).json()) as any;
    expect(r.temperature).toBe(0.5);
    // llama-server's /props reports them
    const props = async (x: Server) => ((await (await fetch(`${x.url}/props`)).json()) as any).default_generation_settings.params;
    expect(await props(auto)).toEqual({ temperature: 0.5, top_p: 1, min_p: 0, top_k: 3, repeat_penalty: 1.3 });
    expect(await props(vllm)).toEqual({ temperature: 1, top_p: 1, min_p: 0, top_k: 0, repeat_penalty: 1 });
  });

  test("the server's sampling flags go over the file (what they do not name stays the file's); /completion takes them too", async () => {
    const both = { temperature: 0.7, top_k: 5, repetition_penalty: 1.3 };
    expect(await text(flags, {})).toBe(await text(plain, both));
    expect(await text(flags, {})).not.toBe(await text(auto, {}));
    expect(await text(flags, { temperature: 0.5, top_k: 3 })).toBe(await text(auto, {}));
    const props = ((await (await fetch(`${flags.url}/props`)).json()) as any).default_generation_settings.params;
    expect(props).toEqual({ temperature: 0.7, top_p: 1, min_p: 0, top_k: 5, repeat_penalty: 1.3 });
    const llama = async (s: Server, extra: object) => ((await (await post(s.url, "/completion", { prompt: "Once upon a time", n_predict: 16, seed: 9, ignore_eos: true, ...extra })).json()) as any).content;
    expect(await llama(flags, {})).toBe(await llama(plain, { temperature: 0.7, top_k: 5 })); // (the file is vLLM's: not /completion's)
    expect(await llama(flags, {})).not.toBe(await llama(plain, {}));
  });

  test("--temp / --top-k / ... and --override-generation-config on the command line; bad values exit 2 naming the flag", async () => {
    const cli = async (...a: string[]) => {
      const p = Bun.spawn(["bun", "src/cli.ts", "serve", "--model", TINY, "--port", "0", ...a], { cwd: resolve(import.meta.dir, ".."), stdout: "pipe", stderr: "pipe" });
      const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
      return { err, code };
    };
    const runs = await Promise.all([cli("--temp", "x"), cli("--top-p", "0"), cli("--override-generation-config", "{bad"),
      cli("--override-generation-config", '{"temprature": 1}'), cli("--override-generation-config", '{"top_k": 2}', "--top-k", "3"), cli("--top-k", "1.5")]);
    for (const r of runs) expect(r.code).toBe(2);
    expect(runs[0].err).toContain('--temp: a number is needed (got "x")');
    expect(runs[1].err).toContain("--top-p:");
    expect(runs[2].err).toContain("--override-generation-config: not JSON");
    expect(runs[3].err).toContain("--override-generation-config: temprature");
    expect(runs[4].err).toContain("--top-k: top_k is already set");
    expect(runs[5].err).toContain("--top-k:");
  }, 60_000);
});
