// The cost model behind the drafting gate (engine/draft-cost.ts): its byte counts equal what the kernels count
// (a one-row decode step, a chained MTP step, a multi-row forward of a model without routed experts), its expected
// expert union matches routing on average, and the gate it sets drafts where drafting pays (n-gram drafts on the
// demo model's repetitive text) and stops where it does not (the demo's MTP head, ~30% of drafts kept).
import { describe, expect, test } from "bun:test";
import { genModel } from "./helpers/models.ts";
import { loadModel } from "../src/engine/model.ts";
import { Session, argmax } from "../src/engine/session.ts";
import { weightBytes } from "../src/native/hb.ts";
import { costGate, forwardBytes, roundCost } from "../src/engine/draft-cost.ts";
import { AcceptGate } from "../src/engine/speculative.ts";
import { generate } from "../src/engine/generate.ts";
import { demoModelDir } from "../src/model/demo.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";

const counted = (f: () => void) => { weightBytes(true); f(); return weightBytes(); };

describe("draft cost model", () => {
  test("byte counts equal the kernels' counters: one-row step, MTP step, rows of a dense model", () => {
    const m = loadModel(genModel({ preset: "tiny", seed: 5 }));
    const s = new Session(m, { attn: "absorbed" });
    let next = argmax(s.feed([5, 9, 13, 21, 3]));
    expect(counted(() => { next = argmax(s.feed([next])); })).toBe(forwardBytes(m.cfg, m.w, 1));
    s.mtpSync(next);
    expect(counted(() => s.mtpChain(7))).toBe(forwardBytes(m.cfg, m.w, 1, true));
    // without routed experts every row reads the same matrices: k+1 rows cost one row's bytes
    const d = loadModel(genModel({ preset: "tiny", seed: 5, set: { first_k_dense_replace: 99 } }));
    const sd = new Session(d, { attn: "absorbed" });
    sd.feed([5, 9]);
    expect(counted(() => sd.feed([1, 2, 3, 4], true))).toBe(forwardBytes(d.cfg, d.w, 4));
    expect(roundCost(d.cfg, d.w, 3, false)).toBeCloseTo(1, 12);
  });

  test("the expected union of experts matches routing on average (4-row forwards of the bench-like tiny model)", () => {
    const m = loadModel(genModel({ preset: "tiny", seed: 6 }));
    const s = new Session(m, { attn: "absorbed" });
    let got = 0, n = 0;
    for (let i = 0; i < 48; i++) {
      s.truncate(0);
      s.feed([3 + i, 40 + 2 * i]);
      got += counted(() => s.feed([100 + 3 * i, 7 + i, 250 - i, 33 + 5 * i], true));
      n++;
    }
    const want = forwardBytes(m.cfg, m.w, 4);
    expect(Math.abs(got / n / want - 1)).toBeLessThan(0.1); // (a generated router is not quite uniform)
  });

  test("gates: never drafts when nothing can pay; on the demo, n-gram drafts stay on and MTP drafts go off", () => {
    const never = new AcceptGate({ off: 1.2, on: Infinity, probeEvery: Infinity });
    expect(Array.from({ length: 40 }, () => never.wants()).some(Boolean)).toBe(false);
    const dir = demoModelDir(), m = loadModel(dir), codec = loadTokenizer(dir);
    const g3 = costGate(m.cfg, m.w, 3, true), g4 = costGate(m.cfg, m.w, 4, false);
    expect(g3.off!).toBeGreaterThan(g4.off!); // MTP steps cost bytes of their own
    const p = codec.encode("The "), plain = generate(m, p, { maxTokens: 150, temperature: 0, draft: "off" });
    const ng = generate(m, p, { maxTokens: 150, temperature: 0, draft: "ngram" });
    const mtp = generate(m, p, { maxTokens: 150, temperature: 0, draft: "mtp" });
    expect(ng.gen_ids).toEqual(plain.gen_ids);
    expect(mtp.gen_ids).toEqual(plain.gen_ids);
    expect(ng.stats.tokens_per_forward).toBeGreaterThan(1.5);
    expect(mtp.stats.draft_acceptance).toBeLessThan(g3.off!);
    expect(mtp.stats.draft_pays_at).toBe(g3.off!); // reported with the stats
    expect(plain.stats.draft_pays_at).toBeUndefined();
    expect(mtp.stats.drafted).toBeLessThan(mtp.stats.forwards); // off after the first rounds: probes only
  });
});
