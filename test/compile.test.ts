// The single binary (`bun run compile`): built into a temp dir, it runs with no Bun on PATH, serves
// the embedded demo model when no --model is given (mux over stdio; the tokenizer's worker starts), generates from it (also without --model, and
// unpacked into $TMPDIR where the cache cannot be written) and chats with it,
// and (where a Vulkan device is) runs the Vulkan chain from its embedded shim and SPIR-V, glslc off PATH.
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { probe } from "../src/device/vulkan/probe.ts";

const root = resolve(import.meta.dir, "..");

test("compiled binary: serve --stdio with the embedded demo model, without Bun on PATH", () => {
  const dir = mkdtempSync(join(tmpdir(), "hb-bin-")), bin = join(dir, "hummingbird");
  try {
    const pre = Bun.spawnSync({ cmd: ["bun", "src/device/vulkan/build.ts", "--spirv-pack"], cwd: root, stdout: "pipe", stderr: "pipe" }); // as `bun run compile`
    expect(pre.exitCode, pre.stderr.toString()).toBe(0);
    const b = Bun.spawnSync({ cmd: ["bun", "build", "--compile", "src/bin.ts", "src/engine/serving/worker.ts", "src/engine/serving/tokenizer-worker.ts", "--outfile", bin], cwd: root, stderr: "pipe" });
    expect(b.exitCode).toBe(0);
    const env = { PATH: "/nonexistent", HOME: dir, XDG_CACHE_HOME: join(dir, "cache") };
    const r = Bun.spawnSync({ cmd: [bin, "serve", "--stdio"], cwd: dir, env, stdin: Buffer.from("SUBMIT 1 auto 4 8 0 1\nThe \n"), stdout: "pipe", stderr: "pipe" });
    const out = r.stdout.toString();
    expect(out.startsWith("READY glm-demo-int8 ")).toBe(true);
    expect(out).toMatch(/\nDONE 1 length 8 /);
    expect(r.stderr.toString()).toContain("EMBEDDED DEMO MODEL");
    expect(r.stderr.toString()).not.toContain("tokenizer worker:"); // (its worker started: a binary without it says so here)
    const g = Bun.spawnSync({ cmd: [bin, "generate", "--model", join(root, "models/glm-demo-int8"), "--prompt", "The ", "--max-tokens", "12", "--exact"], cwd: dir, env, stdout: "pipe" });
    expect(g.exitCode).toBe(0);
    expect(g.stdout.toString()).toStartWith("entire\nspreted the carp"); // the demo README greedy sample (exact mode)
    // no --model: the embedded demo model, as serve and chat; a cache that cannot be written (XDG_CACHE_HOME under a
    // file): unpacked into $TMPDIR instead, said in one line; nowhere writable: one line and exit 1, no stack trace
    writeFileSync(join(dir, "a-file"), "");
    const ro = { ...env, XDG_CACHE_HOME: join(dir, "a-file", "cache"), TMPDIR: join(dir, "tmp") };
    const d = Bun.spawnSync({ cmd: [bin, "generate", "--prompt", "The ", "--max-tokens", "12", "--exact"], cwd: dir, env: ro, stdout: "pipe", stderr: "pipe" });
    expect(d.exitCode, d.stderr.toString()).toBe(0);
    expect(d.stdout.toString()).toStartWith("entire\nspreted the carp");
    expect(d.stderr.toString()).toMatch(/^hummingbird: .*a-file\/cache\/hummingbird is not writable \((ENOTDIR|EEXIST)[^\n]*: unpacked the embedded files into .*\/tmp\/hummingbird-\S+ instead/);
    expect(d.stderr.toString()).toContain("NO --model GIVEN: generating with the EMBEDDED DEMO MODEL");
    const none = Bun.spawnSync({ cmd: [bin, "generate", "--prompt", "The ", "--max-tokens", "1"], cwd: dir, env: { ...ro, TMPDIR: join(dir, "a-file", "tmp") }, stdout: "pipe", stderr: "pipe" });
    expect(none.exitCode).toBe(1);
    expect(none.stderr.toString()).toMatch(/^hummingbird: cannot unpack the embedded files: [^\n]*; set XDG_CACHE_HOME to a writable folder\n$/);
    if (probe().ok && /\d+ SPIR-V variants/.test(pre.stdout.toString())) { // the dense layers on the device: the same tokens
      const v = Bun.spawnSync({ cmd: [bin, "generate", "--model", join(root, "models/glm-demo-int8"), "--prompt", "The ", "--max-tokens", "12", "--exact", "--device", "vulkan"],
        cwd: dir, env, stdout: "pipe", stderr: "pipe" });
      expect(v.exitCode, v.stderr.toString()).toBe(0);
      expect(v.stdout.toString()).toStartWith("entire\nspreted the carp");
      expect(v.stderr.toString()).toMatch(/^vulkan .*12 forwards/m);
    } else console.warn("[skip] compiled binary on Vulkan: no Vulkan device or no glslc here");
    // chat with the embedded model: the same reply as from the checkout (test/chat.test.ts checks the replies)
    const talk = (cmd: string[], e?: Record<string, string>) =>
      Bun.spawnSync({ cmd: [...cmd, "chat", "--temperature", "0", "--max-tokens", "8"], cwd: e ? dir : root, env: e, stdin: Buffer.from("Good things\n"), stdout: "pipe", stderr: "pipe" });
    const c = talk([bin], env), ref = talk(["bun", "src/cli.ts"]);
    expect(c.exitCode, c.stderr.toString()).toBe(0);
    expect(c.stdout.toString().length).toBeGreaterThan(2);
    expect(c.stdout.toString()).toBe(ref.stdout.toString());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
