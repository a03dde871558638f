// The learning cache's usage file: atomic writes (a writer killed mid-write leaves the old file
// valid), corrupt / foreign files ignored with a warning, the cache-dir fallback for read-only model
// dirs, and end to end: usage recorded by one run pins the hottest experts of the next; re-pin moves
// pins towards new heat with bounded swaps.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { loadUsage, saveUsage, usagePath, USAGE_FILE, type Usage } from "../src/engine/experts/usage.ts";
import { attachExperts } from "../src/engine/experts/index.ts";
import { hottest } from "../src/engine/experts/learn.ts";
import { loadModel } from "../src/engine/model.ts";
import { generate } from "../src/engine/generate.ts";
import { convert } from "../src/model/convert.ts";
import { parseFmt } from "../src/model/quant.ts";
import { genModel } from "./helpers/models.ts";

const root = mkdtempSync(join(tmpdir(), "hb-usage-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const REPO = resolve(import.meta.dir, "..");
const u = (tokens: number, fp = "fp"): Usage => ({ version: 1, fingerprint: fp, tokens, layers: { "1": [1, 2, 3], "2": [0, 5, 0] } });

describe("usage file", () => {
  test("round trip; another model's, corrupt or ill-shaped files are ignored with a warning", () => {
    const p = join(root, "a", USAGE_FILE);
    saveUsage(p, u(7));
    expect(loadUsage(p, "fp")).toEqual(u(7));
    const warns: string[] = [];
    expect(loadUsage(p, "other", (w) => warns.push(w))).toBeNull();
    writeFileSync(p, "{\"version\": 1, \"finger");
    expect(loadUsage(p, "fp", (w) => warns.push(w))).toBeNull();
    writeFileSync(p, JSON.stringify({ ...u(1), layers: { "1": [-1] } }));
    expect(loadUsage(p, "fp", (w) => warns.push(w))).toBeNull();
    expect(warns.length).toBe(3);
    expect(warns[0]).toContain("another model");
    expect(warns[1]).toContain("corrupt");
    expect(loadUsage(join(root, "none"), "fp")).toBeNull();
  });

  test("it sits in the model's directory: a FIFO there is refused, not waited on; a file over 16 MiB is not read", () => {
    const dir = join(root, "hostile"), p = join(dir, USAGE_FILE), warns: string[] = [];
    mkdirSync(dir, { recursive: true });
    expect(Bun.spawnSync({ cmd: ["mkfifo", p] }).exitCode).toBe(0);
    const t0 = performance.now();
    expect(loadUsage(p, "fp", (w) => warns.push(w))).toBeNull(); // before: readFileSync blocked for ever (serve never ready)
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(warns).toEqual([`${p}: ignoring an unreadable usage file (not a regular file)`]);
    saveUsage(p, u(2)); // the FIFO replaced by the file, as any old usage file is
    expect(loadUsage(p, "fp")).toEqual(u(2));
    rmSync(p);
    writeFileSync(p, ""); // sparse: 17 MiB claimed, nothing read
    Bun.spawnSync({ cmd: ["truncate", "-s", `${17 << 20}`, p] });
    expect(loadUsage(p, "fp", (w) => warns.push(w))).toBeNull();
    expect(warns[1]).toBe(`${p}: ignoring an unreadable usage file (file is ${17 << 20} bytes, over the ${16 << 20}-byte limit)`);
  });

  test("a writer killed mid-write leaves the old file valid", async () => {
    const p = join(root, "crash", USAGE_FILE);
    saveUsage(p, u(1));
    const script = join(root, "crash.ts");
    writeFileSync(script, `import { saveUsage } from ${JSON.stringify(join(REPO, "src/engine/experts/usage.ts"))};
const big = { version: 1, fingerprint: "fp", tokens: 2, layers: Object.fromEntries(Array.from({ length: 50 }, (_, i) => [String(i), Array(1000).fill(1.5)])) };
saveUsage(process.argv[2], big, { onPartial: () => process.kill(process.pid, "SIGKILL") });`);
    const child = Bun.spawn(["bun", script, p], { stdout: "pipe", stderr: "pipe" });
    await child.exited;
    expect(child.signalCode).toBe("SIGKILL");
    const leftovers = readdirSync(join(root, "crash")).filter((f) => f.includes(".tmp-"));
    expect(leftovers.length).toBe(1); // the half-written tmp file, never renamed
    expect(loadUsage(p, "fp")).toEqual(u(1));
    saveUsage(p, u(3)); // the next write still works
    expect(loadUsage(p, "fp")!.tokens).toBe(3);
  });

  test("model dir without write permission → the cache dir, keyed by the model path", () => {
    const dir = join(root, "ro-model");
    mkdirSync(dir);
    expect(usagePath(dir)).toBe(join(dir, USAGE_FILE));
    chmodSync(dir, 0o555);
    const prev = process.env.HB_CACHE_DIR;
    process.env.HB_CACHE_DIR = join(root, "cache");
    try {
      const p = usagePath(dir);
      expect(p.startsWith(join(root, "cache") + "/")).toBe(true);
      expect(p).toContain("ro-model");
      expect(usagePath(join(root, "other", "ro-model"))).not.toBe(p);
    } finally {
      if (prev === undefined) delete process.env.HB_CACHE_DIR; else process.env.HB_CACHE_DIR = prev;
      chmodSync(dir, 0o755);
    }
  });
});

describe("learning cache", () => {
  const model = () => {
    const out = join(root, "model");
    if (!existsSync(out)) convert(genModel({ preset: "tiny", seed: 61 }), out, { experts: parseFmt("int4g8")!, dense: parseFmt("int8")!, mtp: parseFmt("int8")! });
    return out;
  };

  test("a run records usage; the next run pins each layer's hottest experts (more with more history)", () => {
    const dir = model();
    const path = join(root, "learn.usage");
    const m = loadModel(dir);
    const a = attachExperts(m, { slots: 8, usagePath: path, quiet: true });
    expect(a.stats().pinned).toBe(0);
    const ref = generate(m, [14, 51, 88, 125, 162, 199, 236], { maxTokens: 12, temperature: 0, stopIds: [] }).gen_ids;
    a.close();
    const fp = a.learner!.fingerprint;
    const saved = loadUsage(path, fp)!;
    expect(saved.tokens).toBeGreaterThan(10);
    expect(Object.keys(saved.layers).sort()).toEqual(["1", "2", "3", "4"]);
    // history of 1e6 tokens: pinned share ~3/4 of 8 slots = 5 per layer, the hottest
    saveUsage(path, { ...saved, tokens: 1e6 });
    const b = attachExperts(m, { slots: 8, usagePath: path, quiet: true });
    expect(b.plan!.pinned).toBe(5);
    for (const L of b.layers) {
      const pinned = L.slots.filter((s) => s.pinned).map((s) => s.e).sort((x, y) => x - y);
      expect([L.layer, pinned]).toEqual([L.layer, hottest(L.heat, 5).sort((x, y) => x - y)]);
    }
    const want = b.layers.reduce((a, L) => a + hottest(L.heat, 5).length, 0);
    expect(want).toBe(15); // 3 main MoE layers × 5; the MTP layer (4) never ran: no heat, no pins
    expect(b.stats().pinned).toBe(want);
    // pinned experts survive any amount of streaming, and the tokens do not change
    expect(generate(m, [14, 51, 88, 125, 162, 199, 236], { maxTokens: 12, temperature: 0, stopIds: [] }).gen_ids).toEqual(ref);
    expect(b.stats().pinned).toBe(want);
    // re-pin: make two unpinned experts of layer 1 very hot → at most maxSwaps change per pass
    const L1 = b.layers[0];
    const cold = Array.from({ length: L1.E }, (_, e) => e).filter((e) => !L1.slots.some((s) => s.pinned && s.e === e)).slice(0, 2);
    for (const e of cold) L1.heat[e] = 1e6;
    const r = b.repin({ maxSwaps: 1 });
    expect(r.pinned).toBe(1);
    expect(L1.slots.filter((s) => s.pinned).map((s) => s.e)).toContain(cold[0]);
    b.repin({ maxSwaps: 1 });
    expect(L1.slots.filter((s) => s.pinned).map((s) => s.e)).toContain(cold[1]);
    expect(L1.slots.filter((s) => s.pinned).length).toBe(5);
    b.close();
    m.store.close();
  });
});
