// Properties of the exact forward on generated models of several shapes and seeds.
import { describe, expect, test } from "bun:test";
import { genModel } from "./helpers/models.ts";
import { relRms } from "./helpers/fixture.ts";
import { loadModel, type Model } from "../src/engine/model.ts";
import { Session } from "../src/engine/session.ts";
import { forward, type ForwardOpts } from "../src/engine/forward.ts";
import { RunState } from "../src/engine/state.ts";
import { newKV } from "../src/engine/model.ts";
import { openModel, readF32, writeSafetensors } from "../src/model/safetensors.ts";
import { cpSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

function ids(n: number, V: number, seed: number): number[] {
  let s = seed;
  return Array.from({ length: n }, () => ((s = (s * 1103515245 + 12345) >>> 0) % (V - 16)) + 16);
}
function tf(m: Model, toks: number[], opts: ForwardOpts = {}): Float32Array {
  return new Session(m, opts).feed(toks, true).slice();
}
function worst(a: Float32Array, b: Float32Array, V: number): number {
  let w = 0;
  for (let p = 0; p < a.length / V; p++) w = Math.max(w, relRms(a.subarray(p * V, (p + 1) * V), b.subarray(p * V, (p + 1) * V)));
  return w;
}

const shapes = [
  { name: "tiny seed 1", opts: { preset: "tiny" as const, seed: 1 } },
  { name: "tiny seed 7, 3 layers, topk 5, heads 2", opts: { preset: "tiny" as const, seed: 7, set: { num_hidden_layers: 3, index_topk: 5, num_attention_heads: 2, indexer_types: ["full", "shared", "full"], mlp_layer_types: ["dense", "sparse", "sparse"] } } },
  { name: "tiny seed 3, kv_lora 24, all full", opts: { preset: "tiny" as const, seed: 3, set: { indexer_types: ["full", "full", "full", "full"], kv_lora_rank: 24 } } },
];

for (const sh of shapes) {
  describe(`generated ${sh.name}`, () => {
    const m = loadModel(genModel(sh.opts));
    const V = m.cfg.vocab_size;
    const toks = ids(20, V, 11);

    test("index_topk ≥ context equals dense attention exactly", () => {
      const wide = { ...m, cfg: { ...m.cfg, index_topk: 64 } };
      const dense = { ...m, cfg: { ...m.cfg, has_dsa: false } };
      expect(tf(wide, toks)).toEqual(tf(dense, toks));
    });

    test("absorbed equals naive to 1e-5", () => {
      expect(worst(tf(m, toks, { attn: "absorbed" }), tf(m, toks, { attn: "naive" }), V)).toBeLessThan(1e-5);
    });

    test("incremental decode equals teacher forcing", () => {
      const all = tf(m, toks);
      const s = new Session(m);
      const inc = new Float32Array(all.length);
      inc.set(s.feed(toks.slice(0, 5), true).slice(0, 5 * V));
      for (let p = 5; p < toks.length; p++) inc.set(s.feed([toks[p]]), p * V);
      expect(worst(inc, all, V)).toBeLessThan(1e-5);
    });

    test("logits \"last\" per segment: all rows (allLogits), the last, or none (noLogits), in batch order", () => {
      const st = new RunState(m.cfg), a = toks.slice(0, 6), b = toks.slice(6, 9), c = toks.slice(9, 13);
      const segs = [{ kv: newKV(m), r0: 0, n: 6, pos0: 0, noLogits: true }, { kv: newKV(m), r0: 6, n: 3, pos0: 0, allLogits: true },
        { kv: newKV(m), r0: 9, n: 4, pos0: 0 }];
      expect(forward(m, st, segs, [...a, ...b, ...c], { logits: "last" })).toBe(4);
      expect(Array.from(st.logits.subarray(0, 4 * V))).toEqual([...tf(m, b), ...tf(m, c).subarray(3 * V)]);
      expect(segs[0].kv.len).toBe(6); // (its rows are in its cache all the same)
      expect(forward(m, st, [{ kv: newKV(m), r0: 0, n: 2, pos0: 0, noLogits: true }], a.slice(0, 2), { logits: "last" })).toBe(0);
    });

    test("the last layer's FFN only for rows with logits (hidden: false) gives those rows the same bits", () => {
      const D = m.cfg.hidden_size, run = (hidden: boolean) => {
        const st = new RunState(m.cfg);
        const segs = [{ kv: newKV(m), r0: 0, n: 5, pos0: 0, noLogits: true }, { kv: newKV(m), r0: 5, n: 3, pos0: 0, allLogits: true },
          { kv: newKV(m), r0: 8, n: 1, pos0: 0 }, { kv: newKV(m), r0: 9, n: 4, pos0: 0 }];
        expect(forward(m, st, segs, toks.slice(0, 13), { logits: "last", hidden })).toBe(5);
        return { logits: st.logits.slice(0, 5 * V), x: st.x.slice(0, 13 * D), kv: segs.map((g) => g.kv.kv.map((a) => Array.from(a.subarray(0, g.n * g.kv.rowElems)))) };
      };
      const all = run(true), some = run(false), row = (x: Float32Array, r: number) => Array.from(x.subarray(r * D, (r + 1) * D));
      expect(Array.from(some.logits)).toEqual(Array.from(all.logits));
      expect(some.kv).toEqual(all.kv);
      for (const r of [5, 6, 7, 8, 12]) expect(row(some.x, r)).toEqual(row(all.x, r)); // the rows with logits
      for (const r of [0, 4, 9, 11]) expect(row(some.x, r)).not.toEqual(row(all.x, r)); // skipped: x after attention
    });

    test("DSA is active and changes the result beyond index_topk", () => {
      const dense = { ...m, cfg: { ...m.cfg, has_dsa: false } };
      expect(worst(tf(m, toks), tf(dense, toks), V)).toBeGreaterThan(1e-6);
    });
  });
}

describe("bf16 weights", () => {
  test("a bf16 model equals its f32 upcast", () => {
    const dir = genModel({ preset: "tiny", seed: 5, dtype: "bf16" });
    const up = mkdtempSync(join(tmpdir(), "hb-up-"));
    for (const f of ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]) cpSync(join(dir, f), join(up, f));
    const store = openModel(dir);
    writeSafetensors(join(up, "model.safetensors"), store.names().map((n) => {
      const t = store.get(n);
      return { name: n, dtype: "F32", shape: t.shape, data: readF32(t) };
    }));
    const mb = loadModel(dir), mf = loadModel(up);
    expect(mb.w.layers[1].attn.kv_b.fmt).toBe(5);
    expect(mf.w.layers[1].attn.kv_b.fmt).toBe(0);
    const toks = ids(16, mb.cfg.vocab_size, 3);
    expect(worst(tf(mb, toks), tf(mf, toks), mb.cfg.vocab_size)).toBeLessThan(1e-6);
  });
});

describe("attention form cost model (auto)", () => {
  test("counts the keys a query attends to: DSA's top-k on long contexts, all of them on dense layers", async () => {
    const { naiveIsCheaper } = await import("../src/engine/attention.ts");
    const { planModel } = await import("../src/model/make-model.ts");
    const cfg = planModel({ preset: "bench", seed: 0 }).config;
    expect(naiveIsCheaper(cfg, 512, 512, 128)).toBe(true);    // a fresh prompt: the rebuilt k_nope / v serve every query
    expect(naiveIsCheaper(cfg, 512, 4096, 128)).toBe(false);  // a late chunk of a long prompt: rebuilding 4096 rows costs more
    expect(naiveIsCheaper(cfg, 512, 4096, Infinity)).toBe(true); // no key cap: every query attends to all 4096
    expect(naiveIsCheaper(cfg, 1, 4096, 128)).toBe(false);    // decode
  });

  test("the naive form's buffers: only up to the context where a batch may take it (a long decode: none)", async () => {
    const { NAIVE_MAX_BYTES, naiveCtx, naiveIsCheaper, reserveNaive } = await import("../src/engine/attention.ts");
    const { RunState } = await import("../src/engine/state.ts");
    const { parseConfig } = await import("../src/model/config.ts");
    const { runStateBytes } = await import("../src/engine/experts/budget.ts");
    const cfg = parseConfig(await Bun.file(join(import.meta.dir, "fixtures/glm5-config.json")).json()), topk = cfg.index_topk; // GLM-5's widths
    for (const n of [64, 512, 2048]) {
      const t = naiveCtx(cfg, n, 1 << 17, topk);
      expect(t).toBeGreaterThan(0);
      expect(t).toBeLessThan(1 << 17);
      expect(naiveIsCheaper(cfg, n, t, topk)).toBe(true);
      for (const u of [t + 1, 2 * t, 1 << 17]) expect(naiveIsCheaper(cfg, n, u, topk)).toBe(false);
    }
    expect(naiveCtx(cfg, 1, 1 << 17, topk)).toBe(1); // one row: only over a one-position context
    // a 512-row chunk on a layer without a key cap (the MTP layer's): cheaper naive at any length, but its buffers are
    // capped (1 GiB: 5890 positions at these widths), so a 128k prompt's last chunks take the absorbed form
    expect(naiveIsCheaper(cfg, 512, 4096, Infinity)).toBe(true);
    expect(naiveCtx(cfg, 512, 1 << 17, Infinity)).toBe(Math.floor(NAIVE_MAX_BYTES / 182272));
    expect(runStateBytes(cfg, 512, 1 << 17)).toBeLessThan(2.5 * 2 ** 30); // (the naive form at 128k: 22 GiB more)
    const st = new RunState(cfg, 1, 1 << 17), seg = (n: number, pos0: number) => [{ kv: { dtype: "f32" }, r0: 0, n, pos0 }] as never;
    reserveNaive(cfg, st, seg(1, (1 << 17) - 1), "auto");
    expect(st.naiveCtx).toBeLessThanOrEqual(1); // decode at 128k: the ~180 KiB a position of the naive form is not allocated
    expect(runStateBytes(cfg, 1, 1 << 17)).toBeLessThan(1.5 * 2 ** 20 * 4); // scores [1, T] and the rows' buffers
    reserveNaive(cfg, st, seg(512, 0), "auto"); // a fresh 512-token prompt takes the naive form
    expect(st.naiveCtx).toBe(512);
    reserveNaive(cfg, st, seg(512, 4096), "absorbed");
    expect(st.naiveCtx).toBe(512);
    reserveNaive(cfg, st, seg(8, 100), "naive");
    expect(st.naiveCtx).toBe(512);
    reserveNaive(cfg, st, seg(8, 1000), "naive");
    expect(st.naiveCtx).toBe(1024); // grown geometrically
  });
});

describe("Session.copyPrefix (a slot taking a prompt prefix another slot holds)", () => {
  const m = loadModel(genModel({ preset: "tiny", seed: 5 })), V = m.cfg.vocab_size, toks = ids(24, V, 3);
  for (const dtype of ["f32", "f16", "q8"] as const) test(`${dtype} cache: the copied rows continue as the source's own would, bit for bit`, () => {
    const fresh = () => new Session(m, { attn: "absorbed" }, { kv: newKV(m, 64, dtype) });
    const src = fresh(), dst = fresh(), want = fresh();
    src.feed(toks.slice(0, 20));
    dst.feed(toks.slice(5, 9)); // (something else first: replaced)
    dst.copyPrefix(src, 16);
    expect(dst.tokens).toEqual(toks.slice(0, 16));
    const got = dst.feed(toks.slice(16), true).slice();
    want.feed(toks.slice(0, 16));
    expect(Array.from(got)).toEqual(Array.from(want.feed(toks.slice(16), true)));
  });
});
