// f16 and q8 KV caches end to end (shared fixture): a server with --kv-cache-dtype f16 / q8 generates what an
// in-process Session with such a cache generates (tokens and logprobs; greedy, the absorbed form), prefix reuse across
// slots and MTP drafting included, and so does generate; the options they cannot go with are refused naming the flag.
// (Slot files of such caches: test/kvfile.test.ts.)
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join, resolve } from "node:path";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { loadModel, newKV } from "../src/engine/model.ts";
import { Session, argmax } from "../src/engine/session.ts";
import type { Server } from "../src/server/server.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import type { KvDtype } from "../src/native/hb.ts";
import { logprobsOf } from "../src/engine/serving/prepare.ts";
import { post, startTiny } from "./server.helpers.ts";

for (const dtype of ["f16", "q8"] as const) describe.skipIf(!hasTiny)(`serve --kv-cache-dtype ${dtype}`, () => {
  let s: Server;
  const dir = mkdtempSync(join(tmpdir(), "hb-kv-dtype-"));
  beforeAll(async () => { s = await startTiny({ slots: 2, kvDtype: dtype, slotSavePath: dir }); });
  afterAll(async () => { await s.stop(); rmSync(dir, { recursive: true, force: true }); });
  const PROMPT = Array.from({ length: 60 }, (_, i) => (i * 37) % 480 + 16);
  const served = async (prompt: number[], n: number) => {
    const j = (await (await post(s.url, "/v1/completions", { prompt, max_tokens: n, temperature: 0, ignore_eos: true, logprobs: 0, return_tokens_as_token_ids: true })).json()) as any;
    return { ids: (j.choices[0].logprobs.tokens as string[]).map((t) => Number(t.slice("token_id:".length))), lps: j.choices[0].logprobs.token_logprobs as number[] };
  };
  const local = (prompt: number[], n: number, t: KvDtype) => {
    const m = loadModel(TINY), sess = new Session(m, { attn: "absorbed" }, { kv: newKV(m, 256, t) }), ids: number[] = [], lps: number[] = [];
    let l = sess.feed(prompt);
    for (let i = 0; i < n; i++) { ids.push(argmax(l)); lps.push(logprobsOf(l, ids[i], 0, String).lp); l = sess.feed([ids[i]]); }
    return { ids, lps };
  };

  test(`tokens and logprobs equal an in-process Session's over an ${dtype} cache (also when the prompt's prefix is copied from a slot)`, async () => {
    const want = local(PROMPT, 16, dtype);
    expect(await served(PROMPT, 16)).toEqual(want);
    expect(local(PROMPT, 16, "f32").lps).not.toEqual(want.lps); // (an f32 cache gives other bits)
    const longer = [...PROMPT, 77, 78];
    expect(await served(longer, 8)).toEqual(local(longer, 8, dtype));
  });

  test(`MTP drafting over ${dtype} caches (the MTP layer's too) gives the plain server's tokens`, async () => {
    const d = await startTiny({ slots: 1, kvDtype: dtype, draft: { kind: "mtp", len: 3 } });
    try {
      const j = (await (await post(d.url, "/v1/completions", { prompt: PROMPT, max_tokens: 16, temperature: 0, ignore_eos: true })).json()) as any;
      const plain = (await (await post(s.url, "/v1/completions", { prompt: PROMPT, max_tokens: 16, temperature: 0, ignore_eos: true })).json()) as any;
      expect(j.choices[0].text).toBe(plain.choices[0].text);
    } finally { await d.stop(); }
  });

  test(`generate --kv-cache-dtype ${dtype}: the same tokens as an in-process Session over such a cache`, async () => {
    const p = Bun.spawn(["bun", "src/cli.ts", "generate", "--model", TINY, "--ids", PROMPT.join(","), "--max-tokens", "12", "--json",
      "--kv-cache-dtype", dtype, "--draft", "off"], { cwd: resolve(import.meta.dir, ".."), stdout: "pipe", stderr: "pipe" });
    const [out, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
    expect(code).toBe(0);
    expect(JSON.parse(out).gen_ids).toEqual(local(PROMPT, 12, dtype).ids);
  }, 60_000);

  test("slot files hold the cache as it is: saved, restored into another slot, the same continuation", async () => {
    const body = { prompt: PROMPT, max_tokens: 6, temperature: 0, ignore_eos: true };
    const first = (await (await post(s.url, "/v1/completions", { ...body, slot: 0 })).json()) as any;
    const saved = (await (await post(s.url, "/slots/0?action=save", { filename: "kv.bin" })).json()) as any;
    expect(saved.n_saved).toBeGreaterThan(PROMPT.length);
    await post(s.url, "/slots/0?action=erase", {});
    const restored = (await (await post(s.url, "/slots/1?action=restore", { filename: "kv.bin" })).json()) as any;
    expect(restored.n_restored).toBe(saved.n_saved);
    const again = (await (await post(s.url, "/v1/completions", { ...body, slot: 1 })).json()) as any;
    expect(again.usage.prompt_tokens_details.cached_tokens).toBe(PROMPT.length - 1);
    expect(again.choices[0].text).toBe(first.choices[0].text);
  });

  test("bad combinations exit 2 naming the flag", async () => {
    const cli = async (...args: string[]) => {
      const p = Bun.spawn(["bun", "src/cli.ts", "serve", "--model", TINY, "--port", "0", ...args], { cwd: resolve(import.meta.dir, ".."), stdout: "pipe", stderr: "pipe" });
      const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
      return { code, err };
    };
    const runs = await Promise.all([cli("--kv-cache-dtype", "f8"), cli("--kv-cache-dtype", dtype, "--exact")]);
    expect(runs.map((r) => r.code)).toEqual([2, 2]);
    expect(runs[0].err).toContain("--kv-cache-dtype");
    expect(runs[1].err).toContain("not with --exact");
  }, 60_000);
});
