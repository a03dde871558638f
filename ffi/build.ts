// Native build of libhb: compiles every ffi/*.c (not subfolders) with the system `cc` into one portable
// shared library build/libhb.so (.dylib on macOS). Holds one piece of state: the path already checked
// by this process. Rebuilds when the library is missing or older than any ffi/*.c, ffi/*.h or this file.
// Objects are cached in build/obj (a .c recompiles when it, a header or this file is newer) and compiled
// in parallel. Every output (.o and the library) is written to a temp file and renamed, so concurrent
// test processes never load half a .so.
// Env: CC = compiler (default cc); HB_LIB = use this prebuilt library as is (e.g. next to a compiled
// binary); HB_NATIVE_EXCLUDE = comma-separated ffi/*.c names to leave out (development only).
// Every build says what it builds and why on stderr, one progress line per finished object (src/progress.ts: redrawn
// in place on a TTY, plain lines otherwise), so a first start after a clone never waits in silence.
// Script: `bun ffi/build.ts [--force]` (package.json postinstall / build:native).
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { Progress } from "../src/progress.ts";

const ffiDir = import.meta.dir;
const root = resolve(ffiDir, "..");
const buildDir = join(root, "build");
const objDir = join(buildDir, "obj");
const ext = process.platform === "darwin" ? "dylib" : "so";
export const libPath = join(buildDir, `libhb.${ext}`);

// No -march=native: one binary for every x86-64 (or arm64); SIMD paths use per-function target attributes.
const CFLAGS = ["-std=c11", "-O3", "-fPIC", "-pthread", "-D_GNU_SOURCE", "-Wall", "-Wno-unused-function"];
const LDFLAGS = ["-shared", "-pthread"];

const mtime = (p: string) => statSync(p).mtimeMs;
const ffiFiles = (suffix: string) => readdirSync(ffiDir).filter((f) => f.endsWith(suffix)).sort();

function sources(): string[] {
  const skip = new Set((process.env.HB_NATIVE_EXCLUDE ?? "").split(",").map((s) => s.trim()).filter(Boolean));
  return ffiFiles(".c").filter((f) => !skip.has(f)).map((f) => join(ffiDir, f));
}

/** newest of the headers and this file: every object depends on them */
function sharedInputs(): number {
  return Math.max(mtime(join(ffiDir, "build.ts")), ...ffiFiles(".h").map((f) => mtime(join(ffiDir, f))));
}

function isFresh(): boolean {
  if (!existsSync(libPath)) return false;
  const newest = Math.max(sharedInputs(), ...ffiFiles(".c").map((f) => mtime(join(ffiDir, f))));
  return mtime(libPath) >= newest;
}

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** Run `cmd`, its output collected (stderr straight to ours with `live`: a shell drawing progress there). */
function run(cmd: string[], what: string, live = false): void {
  let r: ReturnType<typeof Bun.spawnSync>;
  try {
    r = Bun.spawnSync({ cmd, stdout: "pipe", stderr: live ? "inherit" : "pipe" });
  } catch (e) {
    throw new Error(`libhb: cannot run '${cmd[0]}' (install gcc or clang, or set CC): ${String(e)}`);
  }
  const out = `${r.stdout?.toString() ?? ""}${r.stderr?.toString() ?? ""}`.trim();
  if (r.exitCode !== 0) throw new Error(`libhb: ${what} failed (exit ${r.exitCode})\n${out}`);
  if (out) console.error(out); // warnings: show them, they are not fatal
}

/** remove temp files left by killed builds (older than 10 minutes; younger ones may be in flight) */
function sweepTemps(dir: string): void {
  for (const f of existsSync(dir) ? readdirSync(dir) : []) {
    const p = join(dir, f);
    if (f.endsWith(".tmp") && Date.now() - mtime(p) > 600_000) rmSync(p, { force: true });
  }
}

/** Compile libhb now (stale objects only, all of them with force). Throws with the compiler's output. */
export function buildNative(force = false): string {
  const srcs = sources();
  if (srcs.length === 0) throw new Error(`libhb: no C sources in ${ffiDir}`);
  mkdirSync(objDir, { recursive: true });
  sweepTemps(buildDir);
  sweepTemps(objDir);
  const cc = process.env.CC || "cc";
  const tag = `${process.pid}.${Date.now()}.tmp`;
  const shared = sharedInputs();
  const objs = srcs.map((s) => join(objDir, `${basename(s, ".c")}.o`));
  const stale = srcs
    .map((s, k) => [s, objs[k]] as const)
    .filter(([s, o]) => force || !existsSync(o) || mtime(o) < Math.max(shared, mtime(s)));
  const bar = stale.length > 0 ? new Progress(`building libhb (${why(force, stale.map(([s]) => basename(s)), srcs.length, shared)})`, stale.length, { unit: "count", every: true }) : null;
  if (bar) compile(cc, stale, tag, bar);
  const tmp = `${libPath}.${tag}`;
  try {
    bar?.update(stale.length, "linking");
    run([cc, ...LDFLAGS, "-o", tmp, ...objs, "-lm"], "linking");
    renameSync(tmp, libPath);
  } finally {
    rmSync(tmp, { force: true });
  }
  bar?.end(`libhb: built ${stale.length} of ${srcs.length} objects in ${bar.elapsedS().toFixed(1)} s`);
  return libPath;
}

/** Why a build runs, for its progress line: --force, the first build, a shared input, or the changed sources. */
export function why(force: boolean, names: string[], all: number, shared: number): string {
  if (force) return "--force";
  if (names.length === all) return existsSync(libPath) && mtime(libPath) < shared ? "a header or ffi/build.ts changed" : "first build";
  return `${names.slice(0, 3).map((n) => `ffi/${n}`).join(", ")}${names.length > 3 ? ` and ${names.length - 3} more` : ""} changed`;
}

/**
 * (source, object) pairs compiled by one shell running the compilers in parallel; each object lands by rename. As each
 * finishes, its name goes down a FIFO to a reader in the same shell that counts and draws `bar`'s next line on our stderr
 * (this process waits synchronously); the compilers' own output is collected and shown (or thrown) after.
 */
function compile(cc: string, pairs: (readonly [string, string])[], tag: string, bar?: Progress): void {
  const flags = CFLAGS.map(quote).join(" "), fifo = quote(`${pairs[0][1]}.fifo.${tag}`), n = pairs.length;
  const live = !!bar && bar.mode !== "off";
  const fmt = bar?.mode === "tty" ? String.raw`'\r\033[K%s: %s/%s %s'` : String.raw`'%s: %s/%s %s\n'`;
  const lines = live ? [`rm -f ${fifo}; mkfifo ${fifo} || exit 1`,
    `(k=0; while read -r f; do k=$((k+1)); printf ${fmt} ${quote(bar!.label)} $k ${n} "$f" >&2; done < ${fifo}) & reader=$!`,
    `exec 3>${fifo}`] : [];
  lines.push(...pairs.map(([s, o], k) =>
    `(${quote(cc)} ${flags} -c ${quote(s)} -o ${quote(`${o}.${tag}`)} 2>&1 && mv -f ${quote(`${o}.${tag}`)} ${quote(o)}; r=$?${live ? `; echo ${quote(basename(s))} >&3` : ""}; exit $r) & p${k}=$!`));
  lines.push("rc=0", ...pairs.map((_, k) => `wait $p${k} || rc=1`), ...(live ? ["exec 3>&-", "wait $reader", `rm -f ${fifo}`] : []), "exit $rc");
  bar?.update(0, "…");
  try {
    run(["sh", "-c", lines.join("\n")], `compiling ${pairs.map(([s]) => basename(s)).join(", ")} with ${cc}`, !!bar);
  } finally {
    for (const [, o] of pairs) rmSync(`${o}.${tag}`, { force: true });
    rmSync(`${pairs[0][1]}.fifo.${tag}`, { force: true });
  }
}

/** Compile every *.c of `dir` (another tree's ffi/, e.g. from `git archive`) into the library `out`, with
 *  the flags of the real build (objects beside `out`, no cache). Throws with the compiler's output. */
export function buildLibAt(dir: string, out: string): string {
  const srcs = readdirSync(dir).filter((f) => f.endsWith(".c")).sort().map((f) => join(dir, f));
  if (srcs.length === 0) throw new Error(`libhb: no C sources in ${dir}`);
  const cc = process.env.CC || "cc", objs = srcs.map((s) => join(dirname(out), `${basename(s, ".c")}.o`)); // beside the library, never in `dir`
  const bar = new Progress(`building libhb from ${dir}`, srcs.length, { unit: "count", every: true });
  compile(cc, srcs.map((s, k) => [s, objs[k]] as const), `${process.pid}.tmp`, bar);
  bar.update(srcs.length, "linking");
  run([cc, ...LDFLAGS, "-o", out, ...objs, "-lm"], "linking");
  bar.end();
  return out;
}

const checked = new Map<string, string>();

/**
 * Absolute path of a native library (`name`), once per process: the prebuilt one named by the env
 * variable `env` when set, else `path`, built first by `build` when `fresh()` says it is missing or stale.
 */
export function ensureLib(name: string, env: string, path: string, fresh: () => boolean, build: () => unknown): string {
  const known = checked.get(name);
  if (known) return known;
  const pre = process.env[env];
  if (pre) {
    if (!existsSync(pre)) throw new Error(`${name}: ${env}=${pre} does not exist`);
    checked.set(name, resolve(pre));
  } else {
    if (!fresh()) build();
    checked.set(name, path);
  }
  return checked.get(name)!;
}

/** Absolute path of libhb, compiling it first when missing or stale. */
export const ensureNative = (): string => ensureLib("libhb", "HB_LIB", libPath, isFresh, buildNative);

if (import.meta.main) {
  const force = process.argv.includes("--force");
  try {
    const t0 = performance.now();
    const fresh = !force && isFresh();
    const path = fresh ? libPath : buildNative(force);
    console.log(`libhb: ${fresh ? "up to date" : `built in ${((performance.now() - t0) / 1000).toFixed(1)} s`}: ${path}`); // (stdout: the build's lines went to stderr)
  } catch (e) {
    console.error(e instanceof Error ? e.message : String(e));
    process.exit(1);
  }
}
