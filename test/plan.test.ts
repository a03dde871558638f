// `hummingbird plan`: the forecast of GLM-5 from its config alone (test/fixtures/glm5-config.json), its byte figures
// against values computed here by hand from the config (convert's default formats: experts int4g64, dense and MTP
// int8 with a scale per row, vectors / routers / embedding f32), the tok/s against the formula over a fixed profile,
// a model directory's figures against its files, and bad inputs (exit 2, naming the flag or the field).
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { makeModel } from "../src/model/make-model.ts";
import { parseFmt } from "../src/model/formats.ts";

const REPO = resolve(import.meta.dir, ".."), GLM5 = join(REPO, "test/fixtures/glm5-config.json");
const root = mkdtempSync(join(tmpdir(), "hb-plan-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function cli(...args: string[]) {
  const p = Bun.spawn(["bun", "src/cli.ts", "plan", ...args], { cwd: REPO, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { out, err, code };
}
/** a fixed profile: the figures below depend on nothing measured */
const PROFILE = join(root, "profile.json");
writeFileSync(PROFILE, JSON.stringify({ membw_gb_s: 40, threads: 2, simd: "avx512vnni", gemm: [
  { mix: "dense", fmt: "int8", S: 1, gmac_s: 10, gb_s: 10 }, { mix: "dense", fmt: "int8", S: 128, gmac_s: 250, gb_s: 2 },
  { mix: "experts", fmt: "int4g64", S: 1, gmac_s: 20, gb_s: 11.25 }, { mix: "experts", fmt: "int4g64", S: 4, gmac_s: 60, gb_s: 8 },
] }));

test("--save-profile records the shapes it measured; --profile with them warns of nothing", async () => {
  const dir = join(root, "p"), file = join(root, "saved.json");
  makeModel(dir, { preset: "tiny", seed: 2, quant: { experts: parseFmt("int4g64")!, dense: parseFmt("int8")! } });
  const a = await cli("--model", dir, "--ram-gb", "4", "--save-profile", file, "--json");
  expect(a.code).toBe(0);
  const saved = JSON.parse(readFileSync(file, "utf8"));
  expect(saved.gemm.length).toBe(16); // 1..128 rows, dense and experts
  expect(saved.shapes.experts).toEqual([[32, 64], [32, 64], [64, 32]]);
  const b = await cli("--model", dir, "--ram-gb", "4", "--profile", file);
  expect([b.code, b.err]).toEqual([0, ""]);
  expect(b.out).toContain(`(${file})`);
}, 60_000);

describe("plan --config (GLM-5, no weights)", () => {
  const D = 6144, V = 154880, H = 64, E = 256, K = 8;
  const i8 = (O: number, I: number) => O * I + 4 * O; // int8: a byte per value, an f32 scale per row
  const attn = 2 * 4 * D + i8(2048, D) + 4 * 2048 + i8(H * 256, 2048) + i8(576, D) + 4 * 512 + i8(H * 448, 512) + i8(D, H * 256)
    + i8(32 * 128, 2048) + i8(128, D) + 2 * 4 * 128 + i8(32, D);
  const dense = 2 * i8(12288, D) + i8(D, 12288), moe = 4 * E * D + 4 * E + 2 * i8(2048, D) + i8(D, 2048);
  const mtp = attn + moe + 3 * 4 * D + i8(D, 2 * D);
  const resident = 4 * V * D + 4 * D + i8(V, D) + 3 * (attn + dense) + 75 * (attn + moe) + mtp;
  const decodeBytes = resident - 4 * V * D - mtp;
  const expert = 3 * (2048 * D / 2 + 4 * 2048 * D / 64), mtpExpert = 2 * i8(2048, D) + i8(D, 2048);
  const kvPerToken = 79 * 576 * 4 + 4 * (78 * 128 + D) + 78 * (128 + 4);

  test("bytes resident, per token, per expert and of the KV cache are the config's; tok/s follow from the profile", async () => {
    const r = await cli("--config", GLM5, "--ram-gb", "64", "--disk-gbs", "3.5", "--profile", PROFILE, "--json");
    expect(r.err).toContain("measured on matrix shapes it does not record"); // a warning: the profile names no shapes
    expect(r.code).toBe(0);
    const j = JSON.parse(r.out);
    expect(j.footprint.residentBytes).toBe(resident);
    expect(j.footprint.decodeBytes).toBe(decodeBytes);
    expect(j.footprint.expertBytes).toBe(expert);
    expect(expert).toBe(21_233_664); // ~21 MB
    expect(j.footprint.slotBytes).toBe(mtpExpert); // the MTP layer's int8 experts size the working slabs, as the store does
    expect(j.readPerToken.routed).toBe(K * expert * 75);
    expect(j.kvBytesPerToken).toBe(kvPerToken);
    expect(j.kvBytes).toBe(4096 * kvPerToken);
    expect(j.expertsOnDisk).toBe(E * (75 * expert + mtpExpert));
    // the cache: what the budget left, each layer's slots of its own experts' bytes (75 main + MTP); hit = share
    // under uniform routing
    expect(j.budget.cacheBytes).toBe(j.budget.slots * (75 * expert + mtpExpert));
    const left = j.budget.ram - j.budget.reserve; // the same budget in slots of the largest expert: ~1.7× fewer
    expect(j.budget.slots).toBe(Math.floor(left / (75 * expert + mtpExpert)));
    expect(Math.floor(left / (76 * mtpExpert))).toBeLessThan(0.6 * j.budget.slots);
    expect(j.budget.slots).toBeGreaterThan(0);
    expect(j.budget.slots).toBeLessThan(E);
    expect(j.hit[0]).toBeCloseTo(j.budget.slots / E, 12);
    expect(j.hit[1]).toBeGreaterThan(j.hit[0]);
    // decode at the low hit rate: dense at 10 GB/s, attention at 40, hits at 11.25, misses at 3.5
    const attnBytes = 78 * 2048 * 576 * 4 + 78 * 4096 * 132;
    expect(j.readPerToken.attention).toBe(attnBytes);
    const t = decodeBytes / 10e9 + attnBytes / 40e9 + K * expert * 75 * (j.hit[0] / 11.25e9 + (1 - j.hit[0]) / 3.5e9);
    expect(j.decode[0]).toBeCloseTo(1 / t, 9);
    expect(j.prefill[1]).toBeGreaterThan(j.prefill[0]);
  });

  test("the text report names the figures", async () => {
    const r = await cli("--config", GLM5, "--ram-gb", "128", "--disk-gbs", "7", "--profile", PROFILE);
    expect(r.code).toBe(0);
    for (const w of ["resident", "experts", "KV", "hit rate", "decode", "prefill", "78 layers (75 MoE) + MTP"]) expect(r.out).toContain(w);
    expect(r.out).toContain(`${((4096 * kvPerToken) / 2 ** 20).toFixed(2)} MiB`);
  });

  test("bad inputs exit 2 naming the flag or the field", async () => {
    const bad = join(root, "bad.json");
    writeFileSync(bad, JSON.stringify({ ...JSON.parse(readFileSync(GLM5, "utf8")), hidden_size: "wide" }));
    const badProfile = join(root, "bad-profile.json");
    writeFileSync(badProfile, JSON.stringify({ threads: 2, simd: "x", gemm: [] }));
    const cases: [string[], string][] = [
      [["--config", GLM5], "--ram-gb"],
      [["--config", GLM5, "--ram-gb=-3"], "--ram-gb"],
      [["--config", GLM5, "--ram-gb", "64", "--model", root], "--model"],
      [["--ram-gb", "64"], "--config"],
      [["--config", GLM5, "--ram-gb", "64", "--profile", PROFILE], "--disk-gbs"],
      [["--config", GLM5, "--ram-gb", "64", "--disk-gbs", "0"], "--disk-gbs"],
      [["--config", GLM5, "--ram-gb", "64", "--experts", "int5"], "--experts"],
      [["--config", GLM5, "--ram-gb", "64", "--device", "vulkan"], "--device"],
      [["--config", bad, "--ram-gb", "64"], "hidden_size"],
      [["--config", GLM5, "--ram-gb", "64", "--profile", badProfile], "membw_gb_s"],
    ];
    const rs = await Promise.all(cases.map(([a]) => cli(...a)));
    rs.forEach((r, i) => {
      expect([cases[i][0].join(" "), r.code]).toEqual([cases[i][0].join(" "), 2]);
      expect(r.err).toContain(cases[i][1]);
    });
  });
});

test("plan --model: a directory's stored bytes (a quantized model written by make-model)", async () => {
  const dir = join(root, "m");
  const made = makeModel(dir, { preset: "tiny", seed: 1, quant: { experts: parseFmt("int4g64")!, dense: parseFmt("int8")! } });
  const r = await cli("--model", dir, "--ram-gb", "4", "--profile", PROFILE, "--json");
  expect(r.code).toBe(0);
  const j = JSON.parse(r.out);
  expect(j.formats).toEqual({ experts: "int4g64", dense: "int8" });
  const experts = made.written.filter((t) => /\.experts\.\d+\./.test(t.name));
  const resident = made.written.filter((t) => !/\.experts\.\d+\./.test(t.name))
    .reduce((a, t) => a + (t.dtype === "BF16" || t.dtype === "F32" ? 4 * t.bytes / (t.dtype === "BF16" ? 2 : 4) : t.bytes), 0);
  expect(j.footprint.residentBytes).toBe(resident);
  const mainExperts = experts.filter((t) => Number(/layers\.(\d+)\./.exec(t.name)![1]) < made.config.num_hidden_layers);
  expect(j.footprint.expertBytes).toBe(mainExperts.reduce((a, t) => a + t.bytes, 0) / (3 * made.config.n_routed_experts));
  expect(j.hit).toEqual([1, 1]); // 4 GiB holds every expert: no disk rate needed
});
