// bench/stream.ts: builds bench/stream.c and prints the probe, then GB/s for bare loads and int4g work at 1 and 2
// threads over six run lengths, then one core's us per block from L2 and from memory at K = 1-4 and the decode tile's
// order without and with prefetch (or says why it skipped: not x86-64 with AVX-512 VNNI).
import { expect, test } from "bun:test";
import { join } from "node:path";

test("bench/stream.ts prints the probe and a GB/s table (or why it skipped)", () => {
  const r = Bun.spawnSync({ cmd: ["bun", "bench/stream.ts", "--reps", "1"], cwd: join(import.meta.dir, ".."), stderr: "pipe" });
  expect(r.exitCode, r.stderr.toString()).toBe(0);
  const out = r.stdout.toString();
  expect(out).toMatch(/^cpu: .+\nprobe \(bench's roofline\): [\d.]+ GB\/s with \d+ threads\n/);
  if (/stream: .*skipped/.test(out)) return;
  const rows = out.split("\n").filter((l) => /^(load|int4) /.test(l));
  expect(rows.map((l) => l.split(/\s+/).slice(0, 2).join(" "))).toEqual(["load 1", "load 2", "int4 1", "int4 2"]);
  for (const l of rows) {
    const gbs = l.split(/\s+/).slice(2).map(Number);
    expect(gbs).toHaveLength(6);
    for (const g of gbs) expect(g).toBeGreaterThan(0);
  }
  const ks = [...out.matchAll(/^K=(\d)\s+from L2\s+([\d.]+)\s+from memory\s+([\d.]+)$/gm)];
  expect(ks.map((k) => Number(k[1]))).toEqual([1, 2, 3, 4]);
  for (const k of ks) for (const us of [k[2], k[3]]) expect(Number(us)).toBeGreaterThan(0);
  expect(out).toMatch(/decode tile's order .*: [\d.]+ us without prefetch, [\d.]+ with/);
  expect(out).toMatch(/probe again: [\d.]+ GB\/s/);
}, 120_000);
