// bench/ab.ts: two builds of libhb in one process. Git HEAD's ffi/ built into a temp dir (buildLibAt) against
// the working tree's library, one decode-shaped round: both load, run the expert calls and report a ratio.
import { expect, test } from "bun:test";
import { join } from "node:path";

const root = join(import.meta.dir, "..");

test("bench/ab.ts builds git HEAD's libhb and compares it with the working tree's", () => {
  const r = Bun.spawnSync({ cmd: ["bun", "bench/ab.ts", "--base", "HEAD", "--shapes", "0", "--rounds", "2", "--block", "1", "--json"], cwd: root, stderr: "pipe" });
  expect(r.exitCode, r.stderr.toString()).toBe(0);
  const out = JSON.parse(r.stdout.toString()) as { a: string; rows: { shape: string; a_us: number; b_us: number; b_speed: number; b_won: number; rounds: number }[] };
  expect(out.a).toMatch(/hb-ab-.*libhb\.so$/);
  expect(out.rows).toHaveLength(1);
  const row = out.rows[0];
  expect(row.shape).toMatch(/^decode/);
  expect(row.rounds).toBe(2);
  expect(row.a_us).toBeGreaterThan(0);
  expect(row.b_speed).toBeCloseTo(row.a_us / row.b_us, 6);
  expect(row.b_won).toBeGreaterThanOrEqual(0);
  expect(row.b_won).toBeLessThanOrEqual(2);
}, 300_000);

test("bench/ab.ts names a bad revision", () => {
  const r = Bun.spawnSync({ cmd: ["bun", "bench/ab.ts", "--base", "no-such-rev", "--shapes", "0", "--rounds", "1"], cwd: root, stderr: "pipe" });
  expect(r.exitCode).not.toBe(0);
  expect(r.stderr.toString()).toContain("--base no-such-rev");
});
