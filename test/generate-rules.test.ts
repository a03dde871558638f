// `hummingbird generate` runs every token through the server's per-token pipeline (src/engine/serving/pipeline.ts), so
// the same greedy request gives the same text, length and finish reason from `generate` as from serve's
// /v1/completions: min_tokens holding off an end id the model always picks (generate had no min_tokens before: it
// stopped at once) and a stop string, stop strings through the server's detokenizer, repetition / presence penalties
// with logit_bias, with and without drafting; a generated tiny model.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Server } from "../src/server/server.ts";
import { genModel } from "./helpers/models.ts";
import { post, startTiny } from "./server.helpers.ts";

const REPO = join(import.meta.dir, "..");
const dir = genModel({ preset: "tiny", seed: 1 });
const PROMPT = [5, 6, 7, 8, 9];
const eos = [JSON.parse(readFileSync(join(dir, "config.json"), "utf8")).eos_token_id].flat()[0] as number;

/** serve's answer to a greedy /v1/completions over PROMPT */
let s: Server;
async function served(extra: Record<string, unknown>): Promise<{ text: string; n: number; reason: string }> {
  const r = await post(s.url, "/v1/completions", { prompt: PROMPT, max_tokens: 12, temperature: 0, ...extra });
  const j = (await r.json()) as any;
  expect(r.status).toBe(200);
  return { text: j.choices[0].text, n: j.usage.completion_tokens, reason: j.choices[0].finish_reason };
}

/** generate's text and its --json answer for the same request */
async function generated(args: string[]): Promise<{ text: string; ids: number[]; reason: string }> {
  const run = async (json: boolean) => {
    const p = Bun.spawn(["bun", "src/cli.ts", "generate", "--model", dir, "--ids", PROMPT.join(","), "--max-tokens", "12", "--threads", "1",
      ...args, ...(json ? ["--json"] : [])], { cwd: REPO, stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    expect({ code, err: code ? err : "" }).toEqual({ code: 0, err: "" });
    return out;
  };
  const [text, json] = await Promise.all([run(false), run(true)]);
  const j = JSON.parse(json);
  return { text: text.replace(/\n$/, ""), ids: j.gen_ids, reason: j.finish_reason };
}

describe("generate: every rule the server has", () => {
  beforeAll(async () => { s = await startTiny({ dir, slots: 1 }); });
  afterAll(() => s.stop());

  test("min_tokens holds off an end id the model always picks (as serve's), with and without drafts", async () => {
    const want = await served({ logit_bias: { [eos]: 100 }, min_tokens: 5 });
    expect(want).toMatchObject({ n: 5, reason: "stop" });
    expect(want.text.length).toBeGreaterThan(0);
    for (const draft of ["off", "ngram"]) {
      const got = await generated(["--logit-bias", `${eos}:100`, "--min-tokens", "5", "--draft", draft]);
      expect(got.ids).toHaveLength(6); // the 5 tokens, then the end id that stopped it (as generate always reported)
      expect(got.ids[5]).toBe(eos);
      expect({ text: got.text, reason: got.reason }).toEqual({ text: want.text, reason: "stop" });
    }
    // without it, the end id comes first: nothing is generated
    expect((await generated(["--logit-bias", `${eos}:100`, "--draft", "off"])).ids).toEqual([eos]);
  }, 120_000);

  test("stop strings: cut as serve cuts them, and looked for only after min_tokens", async () => {
    const plain = await served({});
    expect(plain.n).toBe(12);
    const word = plain.text.slice(2, 4);
    const cut = await served({ stop: [word] });
    expect(cut.reason).toBe("stop");
    expect(cut.text.length).toBeLessThan(plain.text.length);
    const got = await generated(["--stop", word, "--draft", "off"]);
    expect({ text: got.text, reason: got.reason }).toEqual({ text: cut.text, reason: "stop" });
    const held = await served({ stop: [word], min_tokens: 12 });
    expect(held.text).toBe(plain.text);
    const gotHeld = await generated(["--stop", word, "--min-tokens", "12", "--draft", "off"]);
    expect({ text: gotHeld.text, n: gotHeld.ids.length, reason: gotHeld.reason }).toEqual({ text: plain.text, n: 12, reason: "length" });
  }, 120_000);

  test("penalties and logit_bias: the same tokens as serve's", async () => {
    const want = await served({ repetition_penalty: 1.5, presence_penalty: 1, logit_bias: { 11: 3 } });
    const got = await generated(["--repetition-penalty", "1.5", "--presence-penalty", "1", "--logit-bias", "11:3", "--draft", "ngram"]);
    expect({ text: got.text, n: got.ids.length, reason: got.reason }).toEqual({ text: want.text, n: want.n, reason: want.reason });
  }, 120_000);

  test("a grammar: the vocabulary it needs is built on first use; the same text as serve's", async () => {
    const gbnf = 'root ::= ("yes" | "no") " " [a-z]+';
    const want = await served({ grammar: gbnf });
    expect(want.text).toMatch(/^(yes|no) [a-z]+$/);
    const file = join(dir, "yn.gbnf");
    await Bun.write(file, gbnf);
    const got = await generated(["--grammar", file, "--draft", "off"]);
    expect({ text: got.text, reason: got.reason }).toEqual({ text: want.text, reason: want.reason });
  }, 120_000);
});
