// The aarch64 kernels, which no x86 test can reach: libhb and a C driver from test/native are cross-compiled for
// aarch64 (static) and run under qemu-aarch64 with a CPU that has the dot-product extension (on an arm64 host the
// drivers are built with the native compiler and run directly). q8_check.c: the fast-mode matmuls (NEON + SDOT,
// ffi/matmul_q8_neon.c) equal the scalar reference bit for bit, every weight format and a spread of shapes, rows
// alone equal to rows in a batch. mm_check.c: the exact-mode matmuls (ffi/matmul_neon.c) near the reference, rows
// alone equal to rows in a batch. attn_check.c: attention (ffi/attn_neon.c) near the reference with every row of a
// batch equal to the row alone; the indexer (ffi/dsa_neon.c), e^(x−m), SwiGLU and the softmax helpers (ffi/elt.c)
// equal to the forced-scalar ones. Skipped, saying so, where neither the cross tools nor an arm64 host are there
// (.ci/run installs them).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dir, "..");
const native = process.arch === "arm64";
const cc = native ? (process.env.CC || "cc") : Bun.which("aarch64-linux-gnu-gcc");
const qemu = native ? null : Bun.which("qemu-aarch64");
const usable = !!cc && (native || !!qemu);
if (!usable) console.log("neon.test: no aarch64 cross compiler (aarch64-linux-gnu-gcc) or qemu-aarch64: the NEON kernels are not checked here");

const dir = mkdtempSync(join(tmpdir(), "hb-neon-"));
let lib = ""; // ffi/*.c compiled once for aarch64 (a static archive the drivers link)
beforeAll(() => {
  if (!usable) return;
  const srcs = readdirSync(join(root, "ffi")).filter((f) => f.endsWith(".c"));
  const objs = srcs.map((f) => join(dir, f.replace(/\.c$/, ".o")));
  const jobs = srcs.map((f, k) => Bun.spawn([cc!, "-std=c11", "-O2", "-pthread", "-D_GNU_SOURCE", "-c", join(root, "ffi", f), "-o", objs[k]], { stderr: "pipe" }));
  return Promise.all(jobs.map(async (j) => { if ((await j.exited) !== 0) throw new Error(`aarch64 build failed:\n${await new Response(j.stderr).text()}`); }))
    .then(() => {
      lib = join(dir, "libhb.a");
      const ar = Bun.spawnSync([native ? "ar" : (Bun.which("aarch64-linux-gnu-ar") ?? "ar"), "rcs", lib, ...objs], { stderr: "pipe" });
      if (ar.exitCode !== 0) throw new Error(`ar failed: ${ar.stderr.toString()}`);
    });
}, 180_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Link a driver from test/native against the aarch64 libhb and run it (under qemu on x86); its stdout. */
function runDriver(driver: string): string {
  const exe = join(dir, driver);
  const build = Bun.spawnSync([cc!, "-std=c11", "-O2", "-pthread", "-D_GNU_SOURCE", ...(native ? [] : ["-static"]),
    join(root, `test/native/${driver}.c`), lib, "-o", exe, "-lm"], { stdout: "pipe", stderr: "pipe" });
  if (build.exitCode !== 0) throw new Error(`aarch64 build failed:\n${build.stderr.toString()}`);
  const run = Bun.spawnSync(native ? [exe] : [qemu!, "-cpu", "max", exe], { stdout: "pipe", stderr: "pipe" });
  const out = run.stdout.toString().trim();
  if (run.exitCode !== 0) throw new Error(`${driver}: ${out} ${run.stderr.toString()}`);
  return out;
}

test.skipIf(!usable)("NEON + SDOT fast-mode kernels equal the scalar reference bit for bit (aarch64, under qemu on x86)", () => {
  const out = runDriver("q8_check");
  // qemu's "max" CPU has SDOT; a native arm64 host may not (then the scalar kernel is what runs)
  expect(out).toMatch(native ? /^ok \d+ neon dotprod=[01]$/ : /^ok \d+ neon dotprod=1$/);
  expect(Number(out.split(" ")[1])).toBe(495);
}, 120_000);

test.skipIf(!usable)("NEON exact-mode matmul: every format near the scalar reference, rows in a batch equal to rows alone (aarch64)", () => {
  expect(runDriver("mm_check")).toBe("ok 720 neon");
}, 120_000);

test.skipIf(!usable)("NEON attention and indexer kernels: attention near the scalar reference and every row of a batch equal to the row alone, indexer scores equal to the scalar ones (aarch64)", () => {
  expect(runDriver("attn_check")).toBe("ok 52 neon");
}, 120_000);
