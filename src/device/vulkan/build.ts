// Native build of libhbvk (the Vulkan shim, ffi/vk/*.c) into build/libhbvk.so, separate from libhb so the
// engine never depends on Vulkan. Holds one piece of state: the path already checked by this process.
// Rebuilds when the library is missing or older than ffi/vk/* or this file; writes a temp file and renames
// it (concurrent test processes never load half a .so); says on stderr what it builds and why (src/progress.ts). Env: HB_VK_LIB = use this prebuilt library as is.
// Script: `bun build.ts [--force] [--spirv-pack]` (the pack: every shader variant the kernels use, in
// build/shaders.spvpack, for the compiled binary).
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { ensureLib } from "../../../ffi/build.ts";
import { Progress } from "../../progress.ts";

const root = resolve(import.meta.dir, "..", "..", "..");
const srcDir = join(root, "ffi", "vk");
const ext = process.platform === "darwin" ? "dylib" : "so";
export const vkLibPath = join(root, "build", `libhbvk.${ext}`);

const CFLAGS = ["-std=c11", "-O2", "-fPIC", "-shared", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Wno-unused-parameter"];

function newestInput(): number {
  let t = statSync(import.meta.path).mtimeMs;
  for (const f of readdirSync(srcDir)) if (f.endsWith(".c") || f.endsWith(".h")) t = Math.max(t, statSync(join(srcDir, f)).mtimeMs);
  return t;
}

const isFresh = () => existsSync(vkLibPath) && statSync(vkLibPath).mtimeMs >= newestInput();

/** Compile libhbvk now. Throws with the compiler's output on failure. */
export function buildVk(): string {
  const srcs = readdirSync(srcDir).filter((f) => f.endsWith(".c")).sort().map((f) => join(srcDir, f));
  if (srcs.length === 0) throw new Error(`libhbvk: no C sources in ${srcDir}`);
  mkdirSync(join(root, "build"), { recursive: true });
  const tmp = `${vkLibPath}.${process.pid}.${Date.now()}.tmp`;
  const cc = process.env.CC || "cc";
  const cmd = [cc, ...CFLAGS, "-o", tmp, ...srcs, ...(process.platform === "linux" ? ["-ldl"] : [])];
  const bar = new Progress(`building libhbvk (${existsSync(vkLibPath) ? "ffi/vk changed" : "first build"})`, 1, { unit: "count", every: true });
  bar.update(0, srcs.map((f) => f.slice(srcDir.length + 1)).join(" ") + " …"); // one compiler call: said before the wait
  let r: ReturnType<typeof Bun.spawnSync>;
  try {
    r = Bun.spawnSync({ cmd, stdout: "pipe", stderr: "pipe" });
  } catch (e) {
    bar.end();
    throw new Error(`libhbvk: cannot run the C compiler '${cc}': ${String(e)}`);
  }
  bar.end(r.exitCode === 0 ? `libhbvk: built in ${bar.elapsedS().toFixed(1)} s` : undefined);
  const out = `${r.stdout?.toString() ?? ""}${r.stderr?.toString() ?? ""}`.trim();
  if (r.exitCode !== 0) {
    rmSync(tmp, { force: true });
    throw new Error(`libhbvk: build failed (exit ${r.exitCode}): ${cmd.join(" ")}\n${out}`);
  }
  if (out) console.error(out);
  renameSync(tmp, vkLibPath);
  return vkLibPath;
}

/** Absolute path of the shim, compiling it first when missing or stale. */
export const ensureVk = (): string => ensureLib("libhbvk", "HB_VK_LIB", vkLibPath, isFresh, buildVk);

if (import.meta.main) {
  try {
    const fresh = !process.argv.includes("--force") && isFresh();
    console.log(`libhbvk: ${fresh ? "up to date" : "built"}: ${fresh ? vkLibPath : buildVk()}`);
    if (process.argv.includes("--spirv-pack")) {
      const { packSpirv } = await import("./shaders.ts"), { pipelineVariants } = await import("../kernels.ts");
      const out = join(root, "build", "shaders.spvpack");
      console.log(`shaders: ${packSpirv(pipelineVariants(), out)} SPIR-V variants in ${out}`);
    }
  } catch (e) {
    console.error(e instanceof Error ? e.message : String(e));
    process.exit(1);
  }
}
