// GLSL compute shaders (shaders/*.comp) compiled to SPIR-V with `glslc` at first use, cached in
// build/shaders/<name>[.<DEF>=<val>...].spv and rebuilt when the .comp (or this file) is newer. Without glslc, a
// prebuilt .spv there is used as is (a copied tree), with a warning when it looks older than its source. The compiled
// binary carries every variant in one pack (build/shaders.spvpack: JSON, variant name -> base64 SPIR-V; packSpirv).
// Env: GLSLC = the compiler (default `glslc`); HB_SPV_PACK = take every variant from this pack, compile nothing.
// State: the loaded SPIR-V words per variant, the pack, whether glslc runs.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dir, "..", "..", "..");
export const shaderDir = join(root, "shaders");
export const spvDir = join(root, "build", "shaders");
const loaded = new Map<string, Uint32Array>();
const warned = new Set<string>();

export type Defines = Record<string, string | number>;

function variantName(name: string, defs: Defines): string {
  const keys = Object.keys(defs).sort();
  return [name, ...keys.map((k) => `${k}=${defs[k]}`)].join(".");
}

let glslcWhy: string | null | undefined;
/** Is `glslc` runnable? (the reason why not, else null; asked once per process) */
export function glslcMissing(): string | null {
  if (glslcWhy !== undefined) return glslcWhy;
  const exe = process.env.GLSLC || "glslc";
  try {
    const r = Bun.spawnSync({ cmd: [exe, "--version"], stdout: "pipe", stderr: "pipe" });
    return (glslcWhy = r.exitCode === 0 ? null : `${exe} --version exited ${r.exitCode}`);
  } catch {
    return (glslcWhy = `${exe} not found (install glslc / shaderc, or set GLSLC)`);
  }
}

let pack: Record<string, string> | null | undefined;
/** the pack named by HB_SPV_PACK (null when none is named) */
function spvPack(): Record<string, string> | null {
  if (pack !== undefined) return pack;
  const f = process.env.HB_SPV_PACK;
  if (!f) return (pack = null);
  try {
    return (pack = JSON.parse(readFileSync(f, "utf8")) as Record<string, string>);
  } catch (e) {
    throw new Error(`shaders: HB_SPV_PACK=${f}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** Compile each (shader, defines) variant and write them as one pack to `out` (glslc missing: an empty pack, so
 *  a binary built here runs on the CPU, saying why); returns how many variants it holds. */
export function packSpirv(variants: [string, Defines][], out: string): number {
  const why = glslcMissing();
  const entries = why ? [["", why]] : variants.map(([n, d]) => [variantName(n, d), Buffer.from(spirv(n, d).buffer).toString("base64")]);
  writeFileSync(out, JSON.stringify(Object.fromEntries(entries)));
  return entries.filter(([k]) => k).length;
}

/** Can every shader be had (glslc, or else a prebuilt build/shaders/<name>*.spv for each)? The reason why not, else null. */
export function shadersMissing(): string | null {
  const p = spvPack();
  if (p) return Object.keys(p).some((k) => k !== "") ? null : `this binary was built without shaders (${p[""] ?? "an empty pack"})`;
  const why = glslcMissing();
  if (!why) return null;
  const have = existsSync(spvDir) ? readdirSync(spvDir) : [];
  const lack = readdirSync(shaderDir).filter((f) => f.endsWith(".comp")).map((f) => f.slice(0, -5))
    .filter((n) => !have.some((h) => h === `${n}.spv` || (h.startsWith(`${n}.`) && h.endsWith(".spv") && !h.endsWith(".tmp"))));
  return lack.length ? `${why}; no prebuilt SPIR-V in ${spvDir} for ${lack.join(", ")}` : null;
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
  const p = spvPack();
  if (p) {
    if (!p[v]) throw new Error(`shaders: ${v} is not in the pack ${process.env.HB_SPV_PACK}${p[""] ? ` (${p[""]})` : ""}`);
    const b = Buffer.from(p[v], "base64"), words = new Uint32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
    loaded.set(v, words);
    return words;
  }
  const src = join(shaderDir, `${name}.comp`);
  if (!existsSync(src)) throw new Error(`shaders: ${src} does not exist`);
  const out = join(spvDir, `${v}.spv`);
  const newest = Math.max(statSync(src).mtimeMs, statSync(import.meta.path).mtimeMs);
  if (!existsSync(out) || statSync(out).mtimeMs < newest) {
    if (existsSync(out) && glslcMissing()) { // a copied tree without glslc: trust the prebuilt SPIR-V, say so once
      if (!warned.has(v)) console.warn(`[shaders] ${glslcMissing()}: using the prebuilt ${out} (older than ${name}.comp)`);
      warned.add(v);
    } else compile(src, defs, out);
  }
  const b = readFileSync(out);
  if (b.byteLength % 4 !== 0 || b.byteLength < 20 || b.readUInt32LE(0) !== 0x07230203)
    throw new Error(`shaders: ${out} is not SPIR-V (${b.byteLength} bytes)`);
  const words = new Uint32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
  loaded.set(v, words);
  return words;
}
