// ffi/build.ts says what it builds: a line per finished object ("building libhb (...): k/N name", then "linking") on
// stderr while the compilers run, redrawn in place on a TTY (HB_PROGRESS=tty) — never a silent wait. Built here from a
// temp folder of three small C files (buildLibAt: the real build's compile step), so it takes a second, not minutes.
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { why } from "../ffi/build.ts";

const root = resolve(import.meta.dir, "..");

function build(mode: string) {
  const dir = mkdtempSync(join(tmpdir(), "hb-buildp-"));
  try {
    for (const n of ["a", "b", "c"]) writeFileSync(join(dir, `${n}.c`), `int hb_${n}(int x) { return x + ${n.charCodeAt(0)}; }\n`);
    const out = join(dir, "out", "lib.so");
    Bun.spawnSync({ cmd: ["mkdir", "-p", join(dir, "out")] });
    const r = Bun.spawnSync({ cmd: ["bun", "-e", `import { buildLibAt } from "./ffi/build.ts"; buildLibAt(${JSON.stringify(dir)}, ${JSON.stringify(out)});`],
      cwd: root, env: { ...process.env, HB_PROGRESS: mode }, stdout: "pipe", stderr: "pipe" });
    return { code: r.exitCode, err: r.stderr.toString(), built: existsSync(out) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("plain: one line per compiled object, numbered 1..N, then linking", () => {
  const r = build("plain");
  expect(r.code, r.err).toBe(0);
  expect(r.built).toBe(true);
  const lines = r.err.trim().split("\n");
  expect(lines[0]).toMatch(/^building libhb from .*: 0\/3 …$/);
  const done = lines.slice(1, 4).map((l) => l.match(/: (\d)\/3 ([abc])\.c$/)?.slice(1));
  expect(done.map((d) => d?.[0]).sort()).toEqual(["1", "2", "3"]);
  expect(done.map((d) => d?.[1]).sort()).toEqual(["a", "b", "c"]);
  expect(lines[4]).toMatch(/: 3\/3 linking$/);
}, 30_000);

test("tty: the same line redrawn in place and cleared at the end", () => {
  const r = build("tty");
  expect(r.code, r.err).toBe(0);
  expect(r.err.split("\r\x1b[K").length).toBeGreaterThanOrEqual(6); // 0/3, three objects, linking, the clear
  expect(r.err).not.toContain("\n");
  expect(r.err.endsWith("\r\x1b[K")).toBe(true);
}, 30_000);

test("the reason names the changed sources, or says first build / --force", () => {
  expect(why(true, ["a.c"], 9, 0)).toBe("--force");
  expect(why(false, ["matmul_q8.c", "attn.c"], 9, 0)).toBe("ffi/matmul_q8.c, ffi/attn.c changed");
  expect(why(false, ["a.c", "b.c", "c.c", "d.c", "e.c"], 9, 0)).toBe("ffi/a.c, ffi/b.c, ffi/c.c and 2 more changed");
});
