// The tokenizer helpers run niced (src/native/nice.ts): their work takes what the decoding threads leave. niceThread
// changes the calling thread only; a TokenizerLink's two helpers are niced (and threads they start inherit it), the
// thread that made them is not.
// Linux only (elsewhere niceThread answers null and the suite says so).
import { expect, test } from "bun:test";
import { niceThread } from "../src/native/nice.ts";
import { genModel } from "./helpers/models.ts";
import { threadNices as nices } from "./helpers/threads.ts";

const linux = process.platform === "linux";
if (!linux) console.log("nice.test: not Linux: threads keep their priority, nothing to check");

test.skipIf(!linux)("niceThread raises the calling thread's nice value only", async () => {
  const before = nices(), base = before[0], want = Math.max(10, base);
  const w = new Worker(URL.createObjectURL(new Blob([`
    const { niceThread } = await import(${JSON.stringify(`${import.meta.dir}/../src/native/nice.ts`)});
    postMessage([niceThread(10), niceThread(3)]);`], { type: "application/javascript" })));
  const got = await new Promise<number[]>((res) => { w.onmessage = (e) => res(e.data); });
  const during = nices();
  w.terminate();
  expect(got).toEqual([want, want]); // (never lowered again: that would need a privilege)
  // (the worker's thread, and any thread it started since: they inherit its value)
  if (base < 10) expect(during.filter((n) => n === 10).length).toBeGreaterThan(before.filter((n) => n === 10).length);
  expect(niceThread(base - 5)).toBe(base); // asking for less changes nothing
  expect(nices()[0]).toBe(base);
});

test.skipIf(!linux)("a TokenizerLink's two helpers run niced, the thread that made them does not", () => {
  const dir = genModel({ preset: "tiny", seed: 4 });
  const script = `
    import { TokenizerLink } from ${JSON.stringify(`${import.meta.dir}/../src/engine/serving/tokenizer-link.ts`)};
    import { threadNices as nices } from ${JSON.stringify(`${import.meta.dir}/helpers/threads.ts`)};
    const base = nices()[0], before = nices().filter((n) => n >= 10).length;
    const link = new TokenizerLink({ dir: process.argv[1], vocab: 512, ctx: 4096 }, () => {});
    for (let i = 0; i < 2000 && link.up < 2; i++) await Bun.sleep(25);
    console.log(JSON.stringify({ up: link.up, base, before, after: nices().filter((n) => n >= 10).length, main: nices()[0] }));
    link.close(); process.exit(0);`;
  const r = Bun.spawnSync({ cmd: [process.execPath, "-e", script, dir], stderr: "pipe" });
  expect(r.exitCode).toBe(0);
  const m = JSON.parse(r.stdout.toString());
  if (m.base >= 10) return console.log("nice.test: this process already runs at nice >= 10: nothing to tell apart");
  expect(m).toMatchObject({ up: 2, before: 0, main: m.base });
  expect(m.after).toBeGreaterThanOrEqual(2); // (each helper, and any thread it starts later: they inherit its value)
}, 60_000);
