// The aarch64 kernels, which no x86 test can reach — NEON with SDOT (ffi/matmul_q8_neon.c) and NEON attention
// (ffi/attn_neon.c): libhb and a C driver from test/native are cross-compiled for aarch64 (static) and run under
// qemu-aarch64 with a CPU that has the dot-product extension. q8_check.c: hb_matmul_q8 against the scalar
// reference, bit for bit, for every weight format and a spread of shapes, and rows alone against rows in a batch.
// attn_check.c: hb_attn near hb_attn_ref and every row of a batch equal to the row alone, and the indexer scores
// (ffi/dsa_neon.c), e^(x−m), SwiGLU and the softmax helpers (ffi/elt.c) equal to the forced-scalar ones. On an arm64 host the
// drivers are built with the native compiler and run directly. Skipped, saying so, where neither the cross tools
// nor an arm64 host are there (.ci/run installs them).
import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dir, "..");
const native = process.arch === "arm64";
const cc = native ? (process.env.CC || "cc") : Bun.which("aarch64-linux-gnu-gcc");
const qemu = native ? null : Bun.which("qemu-aarch64");
const usable = !!cc && (native || !!qemu);
if (!usable) console.log("neon.test: no aarch64 cross compiler (aarch64-linux-gnu-gcc) or qemu-aarch64: the NEON kernels are not checked here");

/** Build ffi/*.c with a driver from test/native for aarch64 (or natively on arm64) and run it; its stdout. */
function runDriver(driver: string): string {
  const dir = mkdtempSync(join(tmpdir(), "hb-neon-"));
  try {
    const srcs = readdirSync(join(root, "ffi")).filter((f) => f.endsWith(".c")).map((f) => join(root, "ffi", f));
    const exe = join(dir, driver);
    const build = Bun.spawnSync([cc!, "-std=c11", "-O2", "-pthread", "-D_GNU_SOURCE", ...(native ? [] : ["-static"]), ...srcs,
      join(root, `test/native/${driver}.c`), "-o", exe, "-lm"], { stdout: "pipe", stderr: "pipe" });
    if (build.exitCode !== 0) throw new Error(`aarch64 build failed:\n${build.stderr.toString()}`);
    const run = Bun.spawnSync(native ? [exe] : [qemu!, "-cpu", "max", exe], { stdout: "pipe", stderr: "pipe" });
    const out = run.stdout.toString().trim();
    if (run.exitCode !== 0) throw new Error(`${driver}: ${out} ${run.stderr.toString()}`);
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test.skipIf(!usable)("NEON + SDOT fast-mode kernels equal the scalar reference bit for bit (aarch64, under qemu on x86)", () => {
  const out = runDriver("q8_check");
  // qemu's "max" CPU has SDOT; a native arm64 host may not (then the scalar kernel is what runs)
  expect(out).toMatch(native ? /^ok \d+ neon dotprod=[01]$/ : /^ok \d+ neon dotprod=1$/);
  expect(Number(out.split(" ")[1])).toBe(495);
}, 120_000);

test.skipIf(!usable)("NEON attention and indexer kernels: attention near the scalar reference and every row of a batch equal to the row alone, indexer scores equal to the scalar ones (aarch64)", () => {
  expect(runDriver("attn_check")).toBe("ok 34 neon");
}, 120_000);
