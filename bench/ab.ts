// Two builds of libhb in ONE process, on the routed-expert (and dense) workload of bench/expert-shapes.ts: A (by default
// git HEAD's ffi/, built into a temp dir) against B (by default the working tree's build). The calls of each
// shape alternate between the two in blocks (A B, then B A, ...), each block after a 1 ms pause so that the
// other library's pool has parked (HB_SPIN_US: workers spin 200 µs after a job), and every call draws new
// experts from the same seeded sequence. Reports per shape the median call of each, B's speed relative to A
// (median A / median B) and in how many rounds B's block median beat A's: on a shared, noisy machine
// this tells a 3% change from noise, where separate runs differ by ±15%. Holds no state beyond the temp dir.
// Usage: bun bench/ab.ts [--base REV | --a LIB] [--b LIB] [--shapes 0,1,2,3,4,5] [--rounds 40] [--block 8] [--json]
//        (shapes: 0-3 the experts' decode / 8-stream / prefill calls, 4-6 an attention layer's dense calls at S = 1 / 8 / 128)
//        (HB_THREADS=n: both pools' size; HB_AB_WIDTHS=glm5: the shapes at GLM-5's widths, bench/expert-shapes.ts)
import { dlopen, FFIType } from "bun:ffi";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { buildLibAt, ensureNative } from "../ffi/build.ts";
import type { ManyFn } from "./expert-shapes.ts";

const { values: v } = parseArgs({
  options: { base: { type: "string" }, a: { type: "string" }, b: { type: "string" }, shapes: { type: "string" },
    rounds: { type: "string" }, block: { type: "string" }, json: { type: "boolean" } },
});
const num = (s: string | undefined, d: number) => (s === undefined ? d : Math.max(1, Math.floor(Number(s)) || d));
const rounds = num(v.rounds, 40), block = num(v.block, 8);

const root = resolve(import.meta.dir, "..");
let tmp: string | null = null;
function libAt(rev: string): string {
  tmp = mkdtempSync(join(tmpdir(), "hb-ab-"));
  const tar = join(tmp, "ffi.tar");
  for (const cmd of [["git", "-C", root, "archive", "-o", tar, rev, "ffi"], ["tar", "-xf", tar, "-C", tmp]]) {
    const r = Bun.spawnSync({ cmd, stderr: "pipe" });
    if (r.exitCode !== 0) throw new Error(`--base ${rev}: ${r.stderr.toString().trim()}`);
  }
  return buildLibAt(join(tmp, "ffi"), join(tmp, "libhb.so"));
}
const sym = {
  hb_init: { args: [FFIType.i32], returns: FFIType.i32 },
  hb_matmul_many: { args: [FFIType.i32, FFIType.i32, FFIType.ptr, FFIType.i32], returns: FFIType.void },
};
try {
  const paths = { a: v.a ?? libAt(v.base ?? "HEAD"), b: v.b ?? ensureNative() };
  const libs = [paths.a, paths.b].map((p) => dlopen(p, sym).symbols);
  const { runCalls, shapes } = await import("./expert-shapes.ts"); // ~400 MB of weights: once both libraries exist
  const picked = (v.shapes ?? shapes.map((_, k) => k).join(",")).split(",").map(Number);
  if (picked.some((k) => !shapes[k])) throw new Error(`--shapes: indices in [0, ${shapes.length})`);
  const threads = libs.map((l) => l.hb_init(Number(process.env.HB_THREADS ?? 0) || 0));
  for (const p of [paths.a, paths.b]) // every pool thread in every call (ffi/pool_width.h; a build before it has no width)
    try { dlopen(p, { hb_pool_adapt: { args: [FFIType.i32], returns: FFIType.void } }).symbols.hb_pool_adapt(0); } catch { /* older build */ }
  const fns: ManyFn[] = libs.map((l) => (e, n, d, I) => l.hb_matmul_many(e, n, d, I));
  const med = (a: number[]) => { const s = [...a].sort((p, q) => p - q); return s[s.length >> 1]; };
  const rows = picked.map((k) => {
    const s = shapes[k], t: number[][] = [[], []], gb: number[] = [0, 0];
    let wins = 0;
    for (const f of fns) for (let w = 0; w < 2 * block; w++) runCalls(f, s.draw().calls); // warm-up
    for (let r = 0; r < rounds; r++) {
      const bm: number[] = [0, 0];
      for (const i of r % 2 ? [1, 0] : [0, 1]) {
        Bun.sleepSync(1);
        const bt: number[] = [];
        for (let c = 0; c < block; c++) {
          const d = s.draw(), t0 = performance.now();
          runCalls(fns[i], d.calls);
          const dt = performance.now() - t0;
          bt.push(dt);
          gb[i] += d.bytes / dt / 1e6;
        }
        t[i].push(...bt);
        bm[i] = med(bt);
      }
      if (bm[1] < bm[0]) wins++;
    }
    const [ma, mb] = t.map(med);
    return { shape: s.name, a_us: 1000 * ma, b_us: 1000 * mb, a_gbs: gb[0] / t[0].length, b_gbs: gb[1] / t[1].length, b_speed: ma / mb, b_won: wins, rounds };
  });
  if (v.json) console.log(JSON.stringify({ a: paths.a, b: paths.b, threads: threads[1], block, rows }));
  else {
    console.log(`A ${v.a ?? `git ${v.base ?? "HEAD"}`} vs B ${v.b ?? "working tree"}; ${threads[1]} threads, ${rounds} rounds of ${block} calls each`);
    for (const r of rows)
      console.log(`${r.shape.padEnd(44)} A ${r.a_us.toFixed(1).padStart(7)} us  B ${r.b_us.toFixed(1).padStart(7)} us  B/A speed ${r.b_speed.toFixed(3)}  B won ${r.b_won}/${r.rounds} rounds`);
  }
} finally {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
}
