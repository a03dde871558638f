// `--device auto`'s startup measurement (src/device/autopick.ts): the decision over injected timings (no device
// needed), and the race itself on the test device (skips without Vulkan): figures usable, the chain's stats
// reset after it. On a CPU Vulkan device (lavapipe) openDevice("auto") never measures.
import { describe, expect, test } from "bun:test";
import { genModel } from "./helpers/models.ts";
import { loadModel } from "../src/engine/model.ts";
import { measureAuto, pickFaster } from "../src/device/autopick.ts";
import { testDevice } from "./helpers/device.ts";
import { chainOpener } from "./helpers/chain.ts";

describe("auto device decision (injected timings)", () => {
  test("the faster path wins and `why` gives both figures", () => {
    const a = pickFaster({ chainMs: 2, cpuMs: 5, runs: 3 }, "H200");
    expect(a.chain).toBe(true);
    expect(a.why).toContain("H200 measured faster");
    expect(a.why).toContain("2.00 ms");
    expect(a.why).toContain("5.00 ms");
    const b = pickFaster({ chainMs: 7.5, cpuMs: 5, runs: 2 }, "H200");
    expect(b.chain).toBe(false);
    expect(b.why).toContain("CPU measured faster");
    expect(b.why).toContain("7.50 ms");
  });

  test("a tie or unusable figures keep the CPU", () => {
    expect(pickFaster({ chainMs: 4, cpuMs: 4, runs: 1 }, "gpu").chain).toBe(false);
    for (const bad of [NaN, 0, -1, Infinity]) {
      const p = pickFaster({ chainMs: bad, cpuMs: 4, runs: 1 }, "gpu");
      expect(p.chain).toBe(false);
      expect(p.why).toContain("no usable measurement");
    }
    expect(pickFaster({ chainMs: 1, cpuMs: NaN, runs: 1 }, "gpu").chain).toBe(false);
  });
});

const vk = testDevice();
const open = chainOpener();

describe.skipIf(!vk)("auto device measurement on the test device", () => {
  test("measureAuto: finite positive figures within the run cap, chain stats reset; auto skips CPU devices unmeasured", async () => {
    const m = loadModel(genModel({ preset: "tiny", seed: 1 })), ch = open(m);
    const t = measureAuto(m, ch, 50, 3);
    expect(t.runs).toBeGreaterThanOrEqual(1);
    expect(t.runs).toBeLessThanOrEqual(3);
    expect(t.chainMs).toBeGreaterThan(0);
    expect(t.cpuMs).toBeGreaterThan(0);
    expect(Number.isFinite(t.chainMs) && Number.isFinite(t.cpuMs)).toBe(true);
    expect(ch.stats.forwards).toBe(0);
    if (vk!.isCpu) {
      const { openDevice } = await import("../src/device/device.ts");
      let measured = false;
      const a = openDevice(m, "auto", {}, () => { measured = true; return { chainMs: 1, cpuMs: 2, runs: 1 }; });
      expect(a.chain).toBeNull();
      expect(measured).toBe(false);
    }
  });
});
