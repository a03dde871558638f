// `hummingbird bench profile` (src/cli/bench-profile.ts) on a generated tiny model: every libhb call of the
// profiled steps is accounted for (kinds' time + the TypeScript between them ≈ the step; kinds' weight bytes = the
// step's), the ragged batch of N
// streams decodes, a prefill profiles the same way, the symbol table is restored afterwards, and the CLI prints the table.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { formatProfile, type Profile, profileDecode, profilePrefill } from "../src/cli/bench-profile.ts";
import { hb } from "../src/native/hb.ts";
import { loadModel } from "../src/engine/model.ts";
import { makeModel } from "../src/model/make-model.ts";

const root = mkdtempSync(join(tmpdir(), "hb-profile-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const dir = join(root, "tiny");
makeModel(dir, { preset: "tiny", seed: 3 });
/** the share of the timed steps that the kinds, the time between calls and the bookkeeping account for */
const covered = (q: Profile) => (q.rows.reduce((a, r) => a + r.us, 0) + q.betweenUs + q.overheadUs) / q.stepUs;

test("kinds and the time between them add up to the step; symbols restored", () => {
  const m = loadModel(dir), before = hb().hb_rmsnorm;
  for (const streams of [1, 3]) {
    // only the last step's tail after its final call is unaccounted: a preemption there on a loaded machine could
    // take a share of a tiny model's step, so the best of three profiles is held to the bound
    let p = profileDecode(m, { streams, steps: 6, warmup: 2, probe: 1e10 });
    for (let t = 0; t < 2 && covered(p) <= 0.95; t++) p = profileDecode(m, { streams, steps: 6, warmup: 2, probe: 1e10 });
    expect(p.streams).toBe(streams);
    expect(p.positions).toEqual([16, 16 + 6 - 1]); // the timed steps replay the warm-up's positions, not past them
    const kinds = p.rows.map((r) => r.kind);
    expect(kinds).toContain("hb_mla_absorbed"); // the absorbed attention: q side, core (hb_attn_segs), v side
    expect(kinds.some((k) => k.startsWith("hb_matmul_many f32"))).toBe(true);
    const F = m.cfg.moe_intermediate_size, D = m.cfg.hidden_size; // the routed experts' calls, named by format and shape
    expect(kinds).toContain(`hb_moe_up f32 ${F}x${D} (gate, up)`);
    expect(kinds).toContain(`hb_moe_down f32 ${D}x${F}`);
    // the first layer's input norm; per layer the attention's residual add and the FFN's norm in one call, then the
    // FFN's residual add and the next layer's (the head's: every row gets logits) norm in one
    expect(p.rows.find((r) => r.kind === "hb_rmsnorm")!.calls).toBe(1);
    expect(p.rows.find((r) => r.kind === "hb_add_rmsnorm")!.calls).toBe(2 * m.cfg.num_hidden_layers);
    expect(p.rows.reduce((a, r) => a + r.beforeUs, 0)).toBeCloseTo(p.betweenUs, 6);
    expect(covered(p)).toBeLessThanOrEqual(1.001); // the first step's head is TypeScript before its first call
    expect(covered(p)).toBeGreaterThan(0.95);
    expect(p.tokS).toBeCloseTo((streams * 1e6) / p.stepUs, 6);
    // per kind the weights its calls read: the profiled steps replay the unprofiled ones, so they add up to the union
    expect(p.rows.reduce((a, r) => a + r.mb, 0)).toBeCloseTo(p.plain!.weightMB, 6);
    expect(p.rows.find((r) => r.kind.startsWith("hb_moe_up"))!.mb).toBeGreaterThan(0);
    expect(p.rows.find((r) => r.kind === "hb_rmsnorm")!.mb).toBe(0);
    expect(formatProfile(p)).toContain("between libhb calls");
    expect(formatProfile(p)).toMatch(/ TS before +GB\/s  kind\n/);
  }
  expect(hb().hb_rmsnorm).toBe(before);
});

test("unprofiled steps: the union's weight bytes grow with the streams; the step against them at the probe", () => {
  const m = loadModel(dir);
  const one = profileDecode(m, { streams: 1, steps: 4, warmup: 1, probe: 1e10, randomIds: true }).plain!;
  const four = profileDecode(m, { streams: 4, steps: 4, warmup: 1, probe: 1e10, randomIds: true }).plain!;
  let dense = 0; // what a step reads besides the routed experts: every non-expert matrix once
  for (const n of m.store.names()) if (/\.weight$/.test(n) && !/experts\.\d+\.|norm|embed_tokens|e_score|mtp|layers\.4\./.test(n)) dense += m.store.get(n).nbytes;
  expect(one.weightMB).toBeGreaterThan(dense / 1e6 * 0.99);
  expect(four.weightMB).toBeGreaterThan(one.weightMB); // four rows route to more experts than one
  for (const q of [one, four]) {
    expect(q.probeGBs).toBe(10);
    expect(q.idealUs).toBeCloseTo((q.weightMB * 1e6) / 1e10 * 1e6, 3);
    expect(q.ofIdeal).toBeCloseTo(q.stepUs / q.idealUs, 6);
    expect(q.tokS).toBeCloseTo(1e6 / q.stepUs * (q === one ? 1 : 4), 3);
  }
});

test("a prefill profile: its calls and the time between them add up to the prefill", () => {
  const m = loadModel(dir);
  let p = profilePrefill(m, { tokens: 20, reps: 3, warmup: 1 }); // best of three, as the decode's above
  for (let t = 0; t < 2 && covered(p) <= 0.95; t++) p = profilePrefill(m, { tokens: 20, reps: 3, warmup: 1 });
  expect(p.mode).toBe("prefill");
  expect(p.positions).toEqual([0, 19]);
  // as decode's, but the last layer's FFN runs on the last row alone and the head norms it apart
  expect(p.rows.find((r) => r.kind === "hb_rmsnorm")!.calls).toBe(2);
  expect(p.rows.find((r) => r.kind === "hb_add_rmsnorm")!.calls).toBe(2 * m.cfg.num_hidden_layers - 1);
  expect(covered(p)).toBeLessThanOrEqual(1.001);
  expect(covered(p)).toBeGreaterThan(0.95);
  expect(p.tokS).toBeCloseTo((20 * 1e6) / p.stepUs, 6);
  expect(formatProfile(p)).toStartWith("prefill of 20 tokens:");
});

test("the CLI prints a table per stream count; bad --streams exit 2", async () => {
  const run = (...a: string[]) => Bun.spawnSync({ cmd: ["bun", "src/cli.ts", "bench", "profile", "--model", dir, ...a], cwd: resolve(import.meta.dir, ".."), stdout: "pipe", stderr: "pipe" });
  const ok = run("--streams", "1,2", "--steps", "3", "--warmup", "1");
  expect(ok.exitCode).toBe(0);
  const out = ok.stdout.toString();
  const cpu = cpus()[0]?.model.trim() || "unknown CPU"; // the figures' machine heads the output
  expect(out.split("\n")[0]).toMatch(new RegExp(`^\\d+ thread\\(s\\) of ${cpu.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}, \\w+$`));
  expect(out).toContain("1 stream(s):");
  expect(out).toContain("2 stream(s):");
  expect(out).toMatch(/unprofiled: \d+ us per step, [\d.]+ tok\/s in all; weights [\d.]+ MB per step \(the union\)/);
  // with the experts' store attached (as here) its calls outside the steps stay out: the shares add up to ≤ 100%
  for (const table of out.split(/\n(?=\d+ stream\(s\):)/).slice(1)) {
    const shares = [...table.matchAll(/^ +[\d.]+ +([\d.]+)%/gm)].map((x) => Number(x[1]));
    expect(shares.length).toBeGreaterThan(5);
    expect(shares.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(100.5);
  }
  const bad = run("--streams", "0");
  expect(bad.exitCode).toBe(2);
  expect(bad.stderr.toString()).toContain("--streams");
  const pre = run("--prefill", "12", "--steps", "2", "--warmup", "1");
  expect(pre.exitCode).toBe(0);
  expect(pre.stdout.toString()).toContain("prefill of 12 tokens:");
  for (const args of [["--prefill", "0"], ["--prefill", "8", "--streams", "2"], ["--prefill", "8", "--random-ids"]]) {
    const r = run(...args);
    expect(r.exitCode).toBe(2);
    expect(r.stderr.toString()).toContain("--prefill");
  }
}, 60_000);
