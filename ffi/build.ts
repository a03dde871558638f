// Native build of libhb: compiles every ffi/*.c (not subfolders) with the system `cc` into one portable
// shared library build/libhb.so (.dylib on macOS). Holds one piece of state: the path already checked
// by this process. Rebuilds when the library is missing or older than any ffi/*.c, ffi/*.h or this file.
// The library is written to a temp file and renamed, so concurrent test processes never load half a .so.
// Env: HB_LIB = use this prebuilt library as is (e.g. next to a compiled binary); HB_NATIVE_EXCLUDE =
// comma-separated ffi/*.c names to leave out (development only, while a file is being written).
// Script: `bun ffi/build.ts [--force]` (package.json postinstall / build:native).
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";

const ffiDir = import.meta.dir;
const root = resolve(ffiDir, "..");
const ext = process.platform === "darwin" ? "dylib" : "so";
export const libPath = join(root, "build", `libhb.${ext}`);

// No -march=native: one binary for every x86-64 (or arm64); SIMD paths use per-function target attributes.
const CFLAGS = ["-std=c11", "-O3", "-fPIC", "-shared", "-pthread", "-D_GNU_SOURCE", "-Wall", "-Wno-unused-function"];

function sources(): string[] {
  const skip = new Set((process.env.HB_NATIVE_EXCLUDE ?? "").split(",").map((s) => s.trim()).filter(Boolean));
  return readdirSync(ffiDir)
    .filter((f) => f.endsWith(".c") && !skip.has(f))
    .sort()
    .map((f) => join(ffiDir, f));
}

function newestInput(): number {
  let t = statSync(join(ffiDir, "build.ts")).mtimeMs;
  for (const f of readdirSync(ffiDir)) {
    if (f.endsWith(".c") || f.endsWith(".h")) t = Math.max(t, statSync(join(ffiDir, f)).mtimeMs);
  }
  return t;
}

function isFresh(): boolean {
  return existsSync(libPath) && statSync(libPath).mtimeMs >= newestInput();
}

/** Compile libhb now (always). Throws with the compiler's output on failure. */
export function buildNative(): string {
  const srcs = sources();
  if (srcs.length === 0) throw new Error(`libhb: no C sources in ${ffiDir}`);
  mkdirSync(join(root, "build"), { recursive: true });
  const tmp = `${libPath}.${process.pid}.${Date.now()}.tmp`;
  const cc = process.env.CC || "cc";
  const cmd = [cc, ...CFLAGS, "-o", tmp, ...srcs, "-lm"];
  let r: ReturnType<typeof Bun.spawnSync>;
  try {
    r = Bun.spawnSync({ cmd, stdout: "pipe", stderr: "pipe" });
  } catch (e) {
    throw new Error(`libhb: cannot run the C compiler '${cc}' (install gcc or clang, or set CC): ${String(e)}`);
  }
  const out = `${r.stdout?.toString() ?? ""}${r.stderr?.toString() ?? ""}`.trim();
  if (r.exitCode !== 0) {
    rmSync(tmp, { force: true });
    throw new Error(`libhb: build failed (exit ${r.exitCode}): ${cmd.join(" ")}\n${out}`);
  }
  if (out) console.error(out); // warnings: show them, they are not fatal
  renameSync(tmp, libPath);
  return libPath;
}

let checked: string | null = null;

/** Absolute path of the built library, compiling it first when missing or stale. */
export function ensureNative(): string {
  if (checked) return checked;
  const pre = process.env.HB_LIB;
  if (pre) {
    if (!existsSync(pre)) throw new Error(`libhb: HB_LIB=${pre} does not exist`);
    return (checked = resolve(pre));
  }
  if (!isFresh()) buildNative();
  return (checked = libPath);
}

if (import.meta.main) {
  const force = process.argv.includes("--force");
  try {
    const t0 = performance.now();
    const fresh = !force && isFresh();
    const path = fresh ? libPath : buildNative();
    console.log(`libhb: ${fresh ? "up to date" : `built in ${((performance.now() - t0) / 1000).toFixed(1)} s`}: ${path}`);
  } catch (e) {
    console.error(e instanceof Error ? e.message : String(e));
    process.exit(1);
  }
}
