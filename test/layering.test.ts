// The import rule: every source file (src/, ffi/) sits in one layer, and a layer imports only its own and lower ones.
// Lowest first: native (ffi/, src/native/: the libhb binding and weight memory, the progress line) < model < engine <
// device (src/device/: the engine calls it only through ForwardOpts.executor) < serving (src/engine/serving/: the engine
// worker thread, the scheduler and everything per request; no HTTP module loads there) < server (HTTP) < cli (src/cli/;
// src/*.ts: bin.ts, cli.ts, their helpers). A static scan of every relative `from "…"`, `import "…"`, `import("…")`, `require("…")` and
// `new URL("…", import.meta.url)` (a Worker's entry), type-only imports included. test/ and bench/ are exempt.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..");
const LAYERS = ["native", "model", "engine", "device", "serving", "server", "cli"] as const;
type Layer = (typeof LAYERS)[number];

const NATIVE = ["src/progress.ts"]; // (besides ffi/ and src/native/)

/** Imports allowed against the rule, each with why: `from` → `to` (repository paths). None today. */
const EXCEPTIONS: { from: string; to: string; why: string }[] = [];

/** The layer of a repository path; null: not a source file under the rule (an asset, package.json, …). */
function layerOf(path: string): Layer | null {
  if (!/\.(ts|tsx|js|mjs)$/.test(path)) return null;
  if (path.startsWith("ffi/") || path.startsWith("src/native/") || NATIVE.includes(path)) return "native";
  if (path.startsWith("src/model/")) return "model";
  if (path.startsWith("src/engine/serving/")) return "serving"; // (above the device: the worker opens it)
  if (path.startsWith("src/engine/")) return "engine";
  if (path.startsWith("src/device/")) return "device";
  if (path.startsWith("src/server/")) return "server";
  if (path.startsWith("src/cli/") || /^src\/[^/]+$/.test(path)) return "cli"; // (src/*.ts: bin.ts, cli.ts and their helpers)
  return null;
}

interface Edge { file: string; line: number; spec: string; target: string }

/** One line's code with its comments blanked out; `st` carries an open block comment or template literal over lines. */
function code(line: string, st: { block: boolean; tpl: boolean }): string {
  let out = "", q: string | null = st.tpl ? "`" : null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i], n = line[i + 1];
    if (st.block) { if (c === "*" && n === "/") { st.block = false; i++; } out += " "; continue; }
    if (q) { out += c; if (c === "\\") out += line[++i] ?? ""; else if (c === q) q = null; continue; }
    if (c === "/" && n === "/") break;
    if (c === "/" && n === "*") { st.block = true; i++; out += " "; continue; }
    if (c === '"' || c === "'" || c === "`") q = c;
    out += c;
  }
  st.tpl = q === "`"; // (a quote other than a backtick ends with its line)
  return out;
}

/** Every relative import of one file's text (comments skipped). */
function importsOf(file: string, text: string): Edge[] {
  const out: Edge[] = [], st = { block: false, tpl: false };
  const re = /\bfrom\s*["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)|\bimport\s+["']([^"']+)["']|\brequire\s*\(\s*["']([^"']+)["']\s*\)|\bnew\s+URL\s*\(\s*["']([^"']+)["']\s*,\s*import\.meta\.url/g;
  text.split("\n").forEach((raw, i) => {
    for (const m of code(raw, st).matchAll(re)) {
      const spec = m[1] ?? m[2] ?? m[3] ?? m[4] ?? m[5];
      if (!spec.startsWith(".")) continue; // packages, node: and bun: builtins
      out.push({ file, line: i + 1, spec, target: relative(ROOT, resolve(ROOT, dirname(file), spec)) });
    }
  });
  return out;
}

/** The imports of `edges` that go up a layer (exceptions left out), as "file:line → target (from → to)". */
function violations(edges: readonly Edge[], exceptions = EXCEPTIONS): string[] {
  const bad: string[] = [];
  for (const e of edges) {
    const a = layerOf(e.file), b = layerOf(e.target);
    if (a === null || b === null || LAYERS.indexOf(b) <= LAYERS.indexOf(a)) continue;
    if (exceptions.some((x) => x.from === e.file && x.to === e.target)) continue;
    bad.push(`${e.file}:${e.line} → ${e.target} (${a} → ${b})`);
  }
  return bad;
}

function sources(dir: string, out: string[] = []): string[] {
  for (const n of readdirSync(join(ROOT, dir))) {
    const p = `${dir}/${n}`;
    if (statSync(join(ROOT, p)).isDirectory()) sources(p, out);
    else if (/\.(ts|tsx|js|mjs)$/.test(n)) out.push(p);
  }
  return out;
}

const FILES = ["src", "ffi"].flatMap((d) => sources(d));
const EDGES = FILES.flatMap((f) => importsOf(f, readFileSync(join(ROOT, f), "utf8")));

describe("layering", () => {
  test("every source file has a layer, every listed file exists", () => {
    expect(FILES.filter((f) => layerOf(f) === null)).toEqual([]);
    expect(NATIVE.filter((f) => !existsSync(join(ROOT, f)))).toEqual([]);
  });

  test("no layer imports a higher one", () => {
    expect(EDGES.length).toBeGreaterThan(500); // the scan sees the imports
    expect(EDGES.filter((e) => /\.(ts|tsx|js|mjs)$/.test(e.target) && !existsSync(join(ROOT, e.target))).map((e) => `${e.file}:${e.line} → ${e.spec}`)).toEqual([]);
    expect(violations(EDGES)).toEqual([]);
  });

  test("the scan sees every import Bun's own scanner sees (which skips type-only ones)", () => {
    const bun = new Bun.Transpiler({ loader: "ts" }), missed: string[] = [];
    for (const f of FILES) {
      const mine = new Set(EDGES.filter((e) => e.file === f).map((e) => e.spec));
      for (const i of bun.scanImports(readFileSync(join(ROOT, f), "utf8").replace(/^#!.*/, "")))
        if (i.path.startsWith(".") && !mine.has(i.path)) missed.push(`${f} → ${i.path} (${i.kind})`);
    }
    expect(missed).toEqual([]);
  });

  test("every exception is still used", () => {
    for (const x of EXCEPTIONS) expect(EDGES.some((e) => e.file === x.from && e.target === x.to)).toBe(true);
  });

  test("the scan finds each import form, skips comments and reports an upward import with its line", () => {
    const text = [
      `import { a } from "../cli/common.ts";`,
      `// import { b } from "../server/app.ts";`,
      `/* import "../server/x.ts"; */ import type { c } from "./state.ts";`,
      `/*`,
      ` * from "../cli/y.ts"`,
      ` */`,
      `const d = await import("../device/device.ts"), e = require("../model/config.ts"); // from "../cli/z.ts"`,
      `export {`,
      `  f,`,
      `} from "./serving/worker.ts";`,
      `new Worker(new URL("../server/app.ts", import.meta.url).href);`,
      `import "zod"; import "../model/errors.ts";`,
    ].join("\n");
    const edges = importsOf("src/engine/x.ts", text);
    expect(edges.map((e) => `${e.line}:${e.target}`)).toEqual([
      "1:src/cli/common.ts", "3:src/engine/state.ts", "7:src/device/device.ts", "7:src/model/config.ts", "10:src/engine/serving/worker.ts",
      "11:src/server/app.ts", "12:src/model/errors.ts",
    ]);
    expect(violations(edges, [])).toEqual([
      "src/engine/x.ts:1 → src/cli/common.ts (engine → cli)",
      "src/engine/x.ts:7 → src/device/device.ts (engine → device)",
      "src/engine/x.ts:10 → src/engine/serving/worker.ts (engine → serving)",
      "src/engine/x.ts:11 → src/server/app.ts (engine → server)",
    ]);
    expect(violations(importsOf("src/engine/serving/worker.ts", `import { tokenize } from "../../server/tokenize.ts";`), [])).toEqual([
      "src/engine/serving/worker.ts:1 → src/server/tokenize.ts (serving → server)",
    ]);
  });
});
