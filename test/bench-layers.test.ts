// `hummingbird bench --per-layer` (src/cli/bench-layers.ts) on a generated tiny model: the report's structure (a
// prefill, then one decode run per context, every layer with its parts), the KV extension repeating real rows,
// the layers' parts + the rest adding up to the plain step (the onPart hook's timers must
// not miss or double-count work), the indexer timed on DSA models, and the CLI's table.
import { expect, test } from "bun:test";
import { genModel } from "./helpers/models.ts";
import { loadModel } from "../src/engine/model.ts";
import { Session } from "../src/engine/session.ts";
import { benchPrompt } from "../src/model/bench-model.ts";
import { extendKv, formatLayers, perLayer, type LayerRun } from "../src/cli/bench-layers.ts";
import { hb } from "../src/native/hb.ts";

const dir = genModel({ preset: "tiny", seed: 3 });

test("extendKv repeats the prompt's rows up to the context", () => {
  const m = loadModel(dir), s = new Session(m, { hidden: false });
  s.feed(benchPrompt(m.cfg.vocab_size, 5));
  extendKv(s.kv, 13);
  expect(s.kv.len).toBe(13);
  const e = s.kv.rowElems;
  for (let i = 0; i < s.kv.nLayers; i++) {
    const kv = s.kv.kv[i], ik = s.kv.ik[i], w = s.kv.ikWidth;
    expect(Array.from(kv.subarray(10 * e, 13 * e))).toEqual(Array.from(kv.subarray(0, 3 * e)));
    expect(Array.from(kv.subarray(5 * e, 10 * e))).toEqual(Array.from(kv.subarray(0, 5 * e)));
    if (ik) expect(Array.from(ik.subarray(10 * w, 13 * w))).toEqual(Array.from(ik.subarray(0, 3 * w)));
  }
});

test("per-layer parts add up to the step; structure; symbols restored", () => {
  const m = loadModel(dir), before = hb().hb_dsa_select, L = m.cfg.num_hidden_layers;
  const sum = (r: LayerRun) => r.layers.reduce((a, x) => a + x.attnUs + x.indexerUs + x.ffnUs + x.routedUs, 0);
  // instrumented (parts + rest) against the plain forward of the same positions: within 35% (best of three on a shared machine)
  const off = (runs: LayerRun[]) => Math.max(...runs.map((r) => Math.abs(sum(r) + r.restUs - r.stepUs) / r.stepUs));
  let runs = perLayer(m, { contexts: [64, 300], steps: 16, warmup: 8, prefill: 24 });
  for (let t = 0; t < 2 && off(runs) > 0.35; t++) runs = perLayer(m, { contexts: [64, 300], steps: 16, warmup: 8, prefill: 24 });
  const bad = off(runs) >= 0.35 || runs.some((r) => r.restUs < 0 || r.layers.some((x) => x.kind === "moe" && x.routedUs <= 0));
  if (bad) console.error("bench-layers: off", off(runs).toFixed(3), JSON.stringify(runs.map((r) => ({ step: r.stepUs, rest: r.restUs, layers: r.layers }))));
  expect(runs.map((r) => [r.mode, r.ctx])).toEqual([["prefill", 24], ["decode", 64], ["decode", 300]]);
  for (const r of runs) {
    expect(r.layers.map((x) => x.layer)).toEqual([...Array(L).keys()]);
    for (const [i, x] of r.layers.entries()) {
      expect(x.kind).toBe(m.w.layers[i].moe ? "moe" : "dense");
      if (x.kind === "dense") expect(x.routedUs).toBe(0);
      else expect(x.routedUs).toBeGreaterThan(0);
      expect(x.attnUs).toBeGreaterThan(0);
      expect(x.ffnUs).toBeGreaterThan(0);
    }
    expect(r.restUs).toBeGreaterThanOrEqual(0);
    expect(sum(r)).toBeGreaterThan(0.5 * (sum(r) + r.restUs)); // the layers are the bulk of a step
  }
  expect(off(runs)).toBeLessThan(0.35);
  if (m.cfg.has_dsa && m.cfg.indexer_types.includes("full")) {
    const full = m.cfg.indexer_types.indexOf("full");
    expect(runs[2].layers[full].indexerUs).toBeGreaterThan(0); // 300 keys > index_topk: scored and selected
  }
  expect(hb().hb_dsa_select).toBe(before);
  const text = formatLayers(runs, 1000);
  expect(text).toContain("decode 300");
  expect(text).toContain("KV 0.3 MiB");
  expect(text.split("\n").length).toBe(1 + runs.length * (L + 1));
});

test("the pass with every expert in RAM is skipped, saying so, where it does not fit the budget", () => {
  const run = (...a: string[]) => Bun.spawnSync({ cmd: ["bun", "src/cli.ts", "bench", "--per-layer", "--model", dir, "--contexts", "64",
    "--gen", "2", "--warmup", "1", "--prompt-tokens", "8", "--ram-gb", "0.001", ...a], cwd: `${import.meta.dir}/..`, stdout: "pipe", stderr: "pipe" });
  const none = run();
  expect(none.exitCode).toBe(2);
  expect(none.stderr.toString()).toContain("give --expert-cache N for a pass from disk");
  const disk = run("--expert-cache", "1");
  expect(disk.exitCode).toBe(0);
  expect(disk.stderr.toString()).toContain("the pass with every expert in RAM is skipped");
  expect(disk.stdout.toString()).toContain("experts streamed through 1 slots/layer");
  expect(disk.stdout.toString()).not.toContain("experts in RAM");
}, 60_000);
