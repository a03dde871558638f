// `hummingbird chat` on the embedded demo model (always in the tree): greedy replies streamed for each stdin
// line (by the engine worker, one slot) equal a fresh generation over the whole conversation rendered by the
// chat template, while later turns reuse the cached prefix (--timings reports it); /reset starts over; --stop
// cuts a reply; a turn past --ctx is refused; /think switches thinking.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { demoModelDir } from "../src/model/demo.ts";
import { loadModel } from "../src/engine/model.ts";
import { generate } from "../src/engine/generate.ts";
import { loadTokenizer, type ChatMessage } from "../src/model/tokenizer.ts";

const root = join(import.meta.dir, ".."), dir = demoModelDir(), N = 12;
const m = loadModel(dir), codec = loadTokenizer(dir), stops = codec.stopIds(m.cfg.stop_ids);

/** the greedy reply to a conversation, from a fresh Session */
function reply(ms: ChatMessage[]): string {
  const r = generate(m, codec.encode(codec.chat(ms)), { maxTokens: N, temperature: 0, stopIds: stops });
  return codec.decode(r.gen_ids.filter((t) => !stops.includes(t)));
}

function chat(input: string, ...args: string[]) {
  const r = Bun.spawnSync({ cmd: ["bun", "src/cli.ts", "chat", "--temperature", "0", "--max-tokens", String(N), ...args], cwd: root,
    stdin: new TextEncoder().encode(input), stderr: "pipe" });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

test("replies equal fresh generations over the conversation; later turns reuse the cache; /reset starts over", () => {
  const u1 = "Good things", u2 = "Why?"; // two replies of several words on the demo model
  const a1 = reply([{ role: "user", content: u1 }]);
  const a2 = reply([{ role: "user", content: u1 }, { role: "assistant", content: a1.trim() }, { role: "user", content: u2 }]);
  expect(a1.length).toBeGreaterThan(8);
  expect(a2.length).toBeGreaterThan(8);
  const r = chat(`${u1}\n\n${u2}\n/reset\n${u1}\n`, "--timings");
  expect(r.code, r.err).toBe(0);
  expect(r.out).toBe(`${a1}\n${a2}\n${a1}\n`);
  expect(r.err).toContain("EMBEDDED DEMO MODEL");
  expect(r.err).toContain("(conversation cleared)");
  const turns = [...r.err.matchAll(/turn (\d+): (\d+) prompt tokens \((\d+) cached\)/g)].map((t) => t.slice(1).map(Number));
  expect(turns.map((t) => t[0])).toEqual([1, 2, 1]);
  expect(turns[0][2]).toBe(0);
  expect(turns[1][2]).toBeGreaterThan(0); // the first turn's rows, kept
  expect(turns[2][2]).toBeGreaterThan(0); // the template's head, still cached after /reset
}, 60_000);

test("/think turns thinking on and off from the next turn (the template renders it)", () => {
  const u = "Good things", tpl = join(mkdtempSync(join(tmpdir(), "hb-chat-")), "t.jinja");
  writeFileSync(tpl, "{% for m in messages %}{{ m.content }}{% endfor %}{% if enable_thinking %} (thinking){% endif %}:");
  const r = chat(`/think on\n${u}\n/reset\n/think\n${u}\n`, "--timings", "--chat-template", tpl);
  expect(r.code, r.err).toBe(0);
  expect(r.err).toContain("(thinking on)");
  expect(r.err).toContain("(thinking off)");
  const prompts = [...r.err.matchAll(/turn \d+: (\d+) prompt tokens/g)].map((t) => Number(t[1]));
  expect(prompts).toEqual([codec.encode(`${u} (thinking):`).length, codec.encode(`${u}:`).length]);
}, 60_000);

test("--stop ends a reply before the stop text", () => {
  const a1 = reply([{ role: "user", content: "Good things" }]), at = a1.indexOf("Then");
  expect(at).toBeGreaterThan(0);
  const r = chat("Good things\n", "--stop", "Then");
  expect(r.code, r.err).toBe(0);
  expect(r.out).toBe(`${a1.slice(0, at)}\n`);
}, 60_000);

test("Ctrl-C stops a reply (kept in the history), and the chat goes on", async () => {
  // greedy "Good things" runs to --max-tokens on the demo model (~1 s): interrupted after its first text
  const p = Bun.spawn({ cmd: ["bun", "src/cli.ts", "chat", "--temperature", "0", "--max-tokens", "3000", "--timings"], cwd: root,
    stdin: "pipe", stdout: "pipe", stderr: "pipe" });
  p.stdin.write("Good things\n");
  p.stdin.flush();
  const rd = p.stdout.getReader();
  let out = new TextDecoder().decode((await rd.read()).value);
  p.kill("SIGINT");
  await Bun.sleep(300);
  p.stdin.write("Why?\n");
  p.stdin.end();
  for (;;) { const { done, value } = await rd.read(); if (done) break; out += new TextDecoder().decode(value); }
  expect(await p.exited).toBe(0);
  const err = await new Response(p.stderr).text();
  const turns = [...err.matchAll(/turn (\d+): \d+ prompt tokens \((\d+) cached\), (\d+) generated \((\w+)\)/g)];
  expect(turns).toHaveLength(2);
  expect(turns[0][4]).toBe("stopped");
  expect(Number(turns[0][3])).toBeLessThan(3000);
  expect(Number(turns[1][2])).toBeGreaterThan(0); // the second turn reuses the first one's rows
  expect(out.split("\n").length).toBeGreaterThan(2);
}, 60_000);

test("a turn past --ctx is refused with a message, and /exit ends the chat", () => {
  const r = chat("Once upon a time\n/exit\nnever read\n", "--ctx", "8");
  expect(r.code).toBe(0);
  expect(r.out).toBe("");
  expect(r.err).toMatch(/the conversation \(\d+ tokens\) has reached --ctx 8; \/reset to start over/);
  const bad = chat("", "--top-p", "2");
  expect(bad.code).toBe(2);
  expect(bad.err).toContain("--top-p must be a number in [0, 1]");
}, 60_000);
