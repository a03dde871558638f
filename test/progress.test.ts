// src/progress.ts: the shared progress line (convert, make-model, the expert warmup, the libhb build): no ETA until a few
// percent and a second are done, TTY lines redrawn with `\r\x1b[K` and never wider than the terminal, plain lines
// throttled (one per step with `every`); `make-model` shows its bar (plain lines on a pipe) while it writes.
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eta, Progress } from "../src/progress.ts";

function sink(isTTY: boolean, columns = 200) {
  const chunks: string[] = [];
  return { chunks, out: { isTTY, columns, write: (s: string) => chunks.push(s) } };
}

test("no ETA before 3% and 1 s; then the remaining share of the elapsed time", () => {
  expect(eta(1, 1000, 0.05)).toBeNull(); // the old bar: ETA 16075s from the first 200 ms
  expect(eta(500, 1000, 0.5)).toBeNull();
  expect(eta(20, 1000, 10)).toBeNull();
  expect(eta(500, 1000, 10)).toBe(10);
});

test("TTY: each draw erases the line first, is cut to the terminal's width, and end() clears it", () => {
  const prev = process.env.HB_PROGRESS;
  delete process.env.HB_PROGRESS;
  let t = 0;
  const s = sink(true, 40), p = new Progress("convert", 1000, { out: s.out, now: () => t });
  p.update(1);
  expect(s.chunks[0]).toStartWith("\r\x1b[K");
  expect(s.chunks[0]).not.toContain("ETA");
  t = 50; p.update(2); // within 100 ms: not drawn
  expect(s.chunks.length).toBe(1);
  t = 2000; p.update(500, "a-rather-long-tensor-name.weight-that-would-wrap");
  expect(s.chunks[1].length).toBeLessThanOrEqual(4 + 39);
  t = 4000; p.update(1000);
  p.end("done");
  expect(s.chunks.slice(-2)).toEqual(["\r\x1b[K", "done\n"]);
  if (prev !== undefined) process.env.HB_PROGRESS = prev;
});

test("plain: lines, one a second (or one per step with every), counted form k/N", () => {
  const prev = process.env.HB_PROGRESS;
  delete process.env.HB_PROGRESS;
  let t = 0;
  const s = sink(false), p = new Progress("x", 100, { out: s.out, now: () => t });
  for (let i = 1; i <= 100; i++) { t = i * 20; p.update(i); } // 2 s of updates
  expect(s.chunks.length).toBeLessThanOrEqual(4);
  expect(s.chunks.every((c) => c.endsWith("\n") && !c.includes("\r"))).toBe(true);
  const c = sink(false), q = new Progress("building libhb (first build)", 3, { unit: "count", every: true, out: c.out, now: () => t });
  q.update(1, "a.c"); q.update(2, "b.c"); q.update(3, "c.c");
  expect(c.chunks).toEqual(["building libhb (first build): 1/3 a.c\n", "building libhb (first build): 2/3 b.c\n", "building libhb (first build): 3/3 c.c\n"]);
  if (prev !== undefined) process.env.HB_PROGRESS = prev;
});

test("make-model shows progress on stderr while it writes the weights", () => {
  const dir = mkdtempSync(join(tmpdir(), "hb-progress-"));
  try {
    const r = Bun.spawnSync({ cmd: ["bun", "src/cli.ts", "make-model", join(dir, "m"), "--preset", "tiny"], cwd: join(import.meta.dir, ".."),
      env: { ...process.env, HB_PROGRESS: "plain" }, stdout: "pipe", stderr: "pipe" });
    expect(r.exitCode, r.stderr.toString()).toBe(0);
    expect(r.stderr.toString()).toMatch(/^make-model \[#+ *\] \d+\.\d%/m);
    expect(r.stderr.toString()).toMatch(/100\.0%/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 30_000);
