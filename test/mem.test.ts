// Weight memory (src/native/mem.ts, ffi/mem.c): buffers start on a 4 KiB boundary (the O_DIRECT alignment the
// expert reads need), are zeroed, have the asked length and never overlap; big and carved buffers sit in
// mappings aligned to 2 MiB and advised onto huge pages where the kernel has transparent huge pages.
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { ptr } from "bun:ffi";
import { WEIGHT_ALIGN, weightBytes, weightF32 } from "../src/native/mem.ts";
import { DIRECT_ALIGN } from "../src/engine/experts/io.ts";

const addr = (v: Uint8Array | Float32Array) => Number(ptr(v));

/** The smaps entry (start, VmFlags) of the mapping holding address a. */
function smapsOf(a: number): { start: number; flags: string[] } | null {
  const lines = readFileSync("/proc/self/smaps", "utf8").split("\n");
  for (let i = 0; i < lines.length; i++) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) /.exec(lines[i]);
    if (!m || a < parseInt(m[1], 16) || a >= parseInt(m[2], 16)) continue;
    let flags: string[] = [];
    for (let j = i + 1; j < lines.length && !/^[0-9a-f]+-/.test(lines[j]); j++)
      if (lines[j].startsWith("VmFlags:")) flags = lines[j].slice(8).trim().split(/\s+/);
    return { start: parseInt(m[1], 16), flags };
  }
  return null;
}

describe("weight memory", () => {
  test("aligned, zeroed, exact length, disjoint; f32 views of it", () => {
    expect(WEIGHT_ALIGN).toBe(DIRECT_ALIGN);
    const sizes = [1, 4095, 4096, 4097, 100_000, 3 << 20, 9 << 20, 1, 7];
    const bufs = sizes.map((n) => weightBytes(n));
    bufs.forEach((b, k) => {
      expect(b.length).toBe(sizes[k]);
      expect(addr(b) % WEIGHT_ALIGN).toBe(0);
      expect(b.every((v) => v === 0)).toBe(true);
    });
    bufs.forEach((b, k) => b.fill(k + 1));
    bufs.forEach((b, k) => expect(b.every((v) => v === k + 1)).toBe(true)); // no write reached another buffer
    const f = weightF32(1000);
    expect(f.length).toBe(1000);
    expect(addr(f) % WEIGHT_ALIGN).toBe(0);
    f.fill(1.5);
    expect(f[999]).toBe(1.5);
  });

  const thp = "/sys/kernel/mm/transparent_hugepage/enabled";
  const hasThp = process.platform === "linux" && existsSync(thp) && !readFileSync(thp, "utf8").includes("[never]")
    && process.env.HB_HUGEPAGES !== "0";
  if (!hasThp) console.warn(`mem.test: no transparent huge pages here (${thp}, HB_HUGEPAGES): the mapping checks are skipped`);
  test.skipIf(!hasThp)("big and carved buffers live in 2 MiB-aligned mappings advised onto huge pages", () => {
    for (const b of [weightBytes(16 << 20), weightBytes(64 << 10)]) {
      b.fill(1); // fault the pages in
      const s = smapsOf(addr(b));
      expect(s).not.toBeNull();
      expect(s!.start % (2 << 20)).toBe(0);
      expect(s!.flags).toContain("hg"); // MADV_HUGEPAGE took
    }
  });
});
