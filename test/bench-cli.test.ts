// `hummingbird bench` (src/cli/bench.ts) on a generated tiny model: the JSON names the CPU beside the figures, and the
// text header says which CPU, threads and SIMD level the numbers come from (the dev machine changes kind).
import { expect, test } from "bun:test";
import { cpus } from "node:os";
import { join } from "node:path";
import { genModel } from "./helpers/models.ts";

const root = join(import.meta.dir, "..");

test("bench names the CPU in its JSON and its header", () => {
  const dir = genModel({ preset: "tiny", seed: 71 });
  const run = (...a: string[]) => Bun.spawnSync({ cmd: ["bun", "src/cli.ts", "bench", "--model", dir, "--prompt-tokens", "8", "--gen", "4",
    "--reps", "1", "--warmup", "0", "--threads", "1", ...a], cwd: root, stderr: "pipe" });
  const j = run("--json");
  expect(j.exitCode, j.stderr.toString()).toBe(0);
  const r = JSON.parse(j.stdout.toString()) as { cpu: string; threads: number; simd: string; decode_tok_s: number };
  expect(r.cpu).toBe(cpus()[0]?.model.trim() || "unknown CPU");
  expect(r.threads).toBe(1);
  expect(r.decode_tok_s).toBeGreaterThan(0);
  const t = run();
  expect(t.exitCode, t.stderr.toString()).toBe(0);
  expect(t.stdout.toString()).toContain(`fast mode, 1 thread(s) of ${r.cpu}, ${r.simd}`);
}, 120_000);
