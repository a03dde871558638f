// The expert cache's RAM plan reserves the tokenizer's two helpers (src/engine/serving/tokenizer-link.ts helpersBytes),
// which start after it: measured in a child process (RSS before and after both helpers are up and have encoded a
// prompt, the most over the next 0.5 s), what they take stays within the reserve, for a small vocabulary and a
// 65,536-token one.
import { expect, test } from "bun:test";
import { statSync } from "node:fs";
import { helpersBytes } from "../src/engine/serving/tokenizer-link.ts";
import { genModel } from "./helpers/models.ts";

const script = `
import { TokenizerLink } from "${import.meta.dir}/../src/engine/serving/tokenizer-link.ts";
const rss = () => Number(/VmRSS:\\s+(\\d+)/.exec(require("fs").readFileSync("/proc/self/status", "utf8"))[1]) * 1024;
Bun.gc(true);
const r0 = rss(), link = new TokenizerLink({ dir: process.argv[1], vocab: 1 << 20, ctx: 1 << 20 }, () => {});
for (let i = 0; i < 2000 && link.up < 2; i++) await Bun.sleep(25);
for (const n of [1000, 10000]) await new Promise((res) => link.prompt(n, { prompt: { kind: "text", text: "hello world ".repeat(n) } }, res));
let peak = 0;
for (let i = 0; i < 10; i++) { peak = Math.max(peak, rss() - r0); await Bun.sleep(50); }
console.log(JSON.stringify({ up: link.up, bytes: peak }));
link.close(); process.exit(0);
`;

test.each([["the tiny preset", 512], ["a 65,536-token vocabulary", 65536]])("the plan's reserve covers the helpers: %s", (_, vocab) => {
  const dir = genModel({ preset: "tiny", seed: 4, set: { vocab_size: vocab } });
  const r = Bun.spawnSync({ cmd: [process.execPath, "-e", script, dir], stderr: "pipe" });
  expect(r.exitCode).toBe(0);
  const m = JSON.parse(r.stdout.toString()) as { up: number; bytes: number }, reserve = helpersBytes(dir);
  console.log(`tokenizer.json ${(statSync(`${dir}/tokenizer.json`).size / 2 ** 20).toFixed(1)} MiB: the helpers took ${(m.bytes / 2 ** 20).toFixed(0)} MiB, reserved ${(reserve / 2 ** 20).toFixed(0)} MiB`);
  expect(m.up).toBe(2);
  expect(m.bytes).toBeLessThan(reserve);
  expect(m.bytes).toBeGreaterThan(reserve / 4); // (a reserve that means something)
}, 60_000);
