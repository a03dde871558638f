// GLSL compute shaders (shaders/*.comp) compiled to SPIR-V with `glslc` at first use, cached in
// build/shaders/<name>[.<DEF>=<val>...].spv and rebuilt when the .comp (or this file) is newer.
// State: the loaded SPIR-V words per variant. Env: GLSLC = the compiler to run (default `glslc`).
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dir, "..");
export const shaderDir = join(root, "shaders");
export const spvDir = join(root, "build", "shaders");
const loaded = new Map<string, Uint32Array>();

export type Defines = Record<string, string | number>;

function variantName(name: string, defs: Defines): string {
  const keys = Object.keys(defs).sort();
  return [name, ...keys.map((k) => `${k}=${defs[k]}`)].join(".");
}

/** Is `glslc` runnable? (the reason why not, else null) */
export function glslcMissing(): string | null {
  const exe = process.env.GLSLC || "glslc";
  try {
    const r = Bun.spawnSync({ cmd: [exe, "--version"], stdout: "pipe", stderr: "pipe" });
    return r.exitCode === 0 ? null : `${exe} --version exited ${r.exitCode}`;
  } catch {
    return `${exe} not found (install glslc / shaderc, or set GLSLC)`;
  }
}

/** Compile shaders/<name>.comp with -D defines into `out` (atomic rename). Throws with glslc's output. */
function compile(src: string, defs: Defines, out: string): void {
  mkdirSync(spvDir, { recursive: true });
  const tmp = `${out}.${process.pid}.${Date.now()}.tmp`;
  const exe = process.env.GLSLC || "glslc";
  const cmd = [exe, "-O", "--target-env=vulkan1.0", ...Object.entries(defs).map(([k, v]) => `-D${k}=${v}`), "-o", tmp, src];
  let r: ReturnType<typeof Bun.spawnSync>;
  try {
    r = Bun.spawnSync({ cmd, stdout: "pipe", stderr: "pipe" });
  } catch (e) {
    throw new Error(`shaders: cannot run ${exe}: ${String(e)}`);
  }
  if (r.exitCode !== 0) {
    rmSync(tmp, { force: true });
    throw new Error(`shaders: ${cmd.join(" ")} failed:\n${r.stdout?.toString() ?? ""}${r.stderr?.toString() ?? ""}`);
  }
  renameSync(tmp, out);
}

/** SPIR-V words of shaders/<name>.comp compiled with `defs` (compiled when missing or stale). */
export function spirv(name: string, defs: Defines = {}): Uint32Array {
  const v = variantName(name, defs);
  const hit = loaded.get(v);
  if (hit) return hit;
  const src = join(shaderDir, `${name}.comp`);
  if (!existsSync(src)) throw new Error(`shaders: ${src} does not exist`);
  const out = join(spvDir, `${v}.spv`);
  const newest = Math.max(statSync(src).mtimeMs, statSync(import.meta.path).mtimeMs);
  if (!existsSync(out) || statSync(out).mtimeMs < newest) compile(src, defs, out);
  const b = readFileSync(out);
  if (b.byteLength % 4 !== 0 || b.byteLength < 20 || b.readUInt32LE(0) !== 0x07230203)
    throw new Error(`shaders: ${out} is not SPIR-V (${b.byteLength} bytes)`);
  const words = new Uint32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
  loaded.set(v, words);
  return words;
}
