// Faults of expert streaming, with the I/O pool's injector (the n-th chunk read fails): EIO or a
// short read on a needed expert fails that request with a ModelError naming the expert, file and
// offset, and the store keeps serving; a truncated file is a short read (also under mmap); a failed
// speculative prefetch is logged once and ignored; O_DIRECT falls back with a warning.
import { afterAll, describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, rmSync, truncateSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { attachExperts, type ExpertOptions } from "../src/engine/experts/index.ts";
import { injectFailure, submit, wait, ioErrorText, startPool, openRaw, closeFd, Kind, poolCounters } from "../src/engine/experts/io.ts";
import { loadModel } from "../src/engine/model.ts";
import { generate } from "../src/engine/generate.ts";
import { ModelError } from "../src/model/errors.ts";
import { LazyMoe } from "../src/model/weights.ts";
import { convert } from "../src/model/convert.ts";
import { parseFmt } from "../src/model/quant.ts";
import { genModel } from "./helpers/models.ts";

const root = mkdtempSync(join(tmpdir(), "hb-faults-"));
afterAll(() => { injectFailure(0); rmSync(root, { recursive: true, force: true }); });
const q = (s: string) => parseFmt(s)!;
let made = "";
const model = () => {
  if (!made) { made = join(root, "m"); convert(genModel({ preset: "tiny", seed: 71 }), made, { experts: q("int4g8"), dense: q("int8"), mtp: q("int8") }); }
  return made;
};
const prompt = [14, 51, 88, 125, 162, 199];
const gen = (m: ReturnType<typeof loadModel>) => generate(m, prompt, { maxTokens: 6, temperature: 0, stopIds: [] }).gen_ids;

function thrown(f: () => unknown): ModelError {
  try { f(); } catch (e) { if (e instanceof ModelError) return e; throw e; }
  throw new Error("expected a ModelError");
}

describe("I/O pool", () => {
  test("injected EIO and short reads come back as codes; reads past the end are short", () => {
    startPool();
    const fd = openRaw(join(model(), "model.safetensors"), false);
    const buf = new Uint8Array(4096);
    injectFailure(1, 5);
    expect(ioErrorText(wait(submit([{ fd, off: 0, len: 100, need: 100, bufOff: 0 }], buf, Kind.read)))).toContain("EIO");
    injectFailure(1, 0);
    expect(ioErrorText(wait(submit([{ fd, off: 0, len: 100, need: 100, bufOff: 0 }], buf, Kind.read)))).toContain("short read");
    expect(wait(submit([{ fd, off: 0, len: 100, need: 100, bufOff: 0 }], buf, Kind.read))).toBe(100);
    expect(ioErrorText(wait(submit([{ fd, off: 1e9, len: 100, need: 100, bufOff: 0 }], buf, Kind.read)))).toContain("short read");
    closeFd(fd);
  });
});

describe("expert read faults", () => {
  for (const [name, o] of [["buffered", {}], ["direct", { direct: true }], ["mmap", { mmap: true }]] as [string, ExpertOptions][]) {
    test(`${name}: EIO on a needed expert fails the request, the next one is served`, () => {
      const m = loadModel(model());
      const ref = gen(m);
      const store = attachExperts(m, { ...o, slots: 1, learn: false, quiet: true });
      injectFailure(3, 5);
      const e = thrown(() => gen(m));
      expect(e.message).toMatch(/expert \d+ of layer \d+: read failed: EIO/);
      expect(e.file).toContain("model.safetensors");
      expect(e.tensor).toMatch(/^model\.layers\.\d+\.mlp\.experts\.\d+\.gate_proj\.weight$/);
      expect(e.offset).toBeGreaterThan(0);
      expect(store.stats().failures).toBe(1);
      expect(gen(m)).toEqual(ref); // the store keeps serving
      injectFailure(2, 0);
      expect(thrown(() => gen(m)).message).toContain("short read");
      expect(gen(m)).toEqual(ref);
      store.close();
      m.store.close();
    });
  }

  test("a truncated model file: a short read naming the file, for buffered and mmap reads", () => {
    const dir = join(root, "trunc");
    cpSync(model(), dir, { recursive: true });
    const m = loadModel(dir);
    const file = join(dir, "model.safetensors");
    const first = (m.w.layers[1].moe as LazyMoe).plans[0].gate.w.offset; // experts are written last
    for (const mmap of [false, true]) {
      const store = attachExperts(m, { mmap, slots: 1, learn: false, quiet: true });
      truncateSync(file, first + 10);
      const e = thrown(() => gen(m));
      expect(e.message).toContain("short read");
      expect(e.file).toBe(file);
      store.close();
    }
    m.store.close();
  });

  test("a failed speculative prefetch is logged once and ignored", () => {
    const m = loadModel(model());
    const ref = gen(m);
    const logs: string[] = [];
    const store = attachExperts(m, { slots: 1, prefetch: true, learn: false, quiet: true, log: (s) => logs.push(s) });
    const last = store.layers.filter((L) => L.layer < m.cfg.num_hidden_layers).at(-1)!;
    const idle = () => { while (poolCounters().inflight > 0) Bun.sleepSync(1); };
    for (let round = 0; round < 6 && store.stats().prefetchFailures < 2; round++) {
      store.prefetch = "off";
      gen(m); // every layer has a last union; no speculative reads in flight
      idle();
      store.prefetch = "on";
      injectFailure(1, 5);
      store.prefetchAfter(last); // speculative reads for the first MoE layer: the first one fails
      idle();
      injectFailure(0);
      expect(store.stats().prefetchIssued).toBeGreaterThan(0);
    }
    expect(gen(m)).toEqual(ref);
    const st = store.stats();
    expect(st.prefetchFailures).toBeGreaterThanOrEqual(2);
    expect(st.failures).toBe(0);
    expect(logs.filter((l) => l.includes("speculative prefetch failed")).length).toBe(1);
    store.close();
    m.store.close();
  });

  test("--direct where O_DIRECT is refused: a warning and buffered reads", () => {
    const m = loadModel(model());
    const ref = gen(m);
    const logs: string[] = [];
    process.env.HB_IO_NODIRECT = "1";
    try {
      const store = attachExperts(m, { direct: true, slots: 2, learn: false, quiet: true, log: (s) => logs.push(s) });
      expect(store.direct).toBe(false);
      expect(logs.join("\n")).toMatch(/--direct is not supported .*falling back to buffered reads/);
      expect(gen(m)).toEqual(ref);
      store.close();
    } finally {
      delete process.env.HB_IO_NODIRECT;
    }
    m.store.close();
  });
});
