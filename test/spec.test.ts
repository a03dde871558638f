// Speculative decoding: incremental MTP state vs the from-scratch reference, lossless greedy
// verification (MTP and n-gram drafts) on a generated drafting model and on the shared fixture,
// stop/length handling, the acceptance gate, n-gram lookup, Session.truncate / reuse.
import { describe, expect, test } from "bun:test";
import { genModel } from "./helpers/models.ts";
import { hasTiny, readRef, relRms, TINY } from "./helpers/fixture.ts";
import { loadModel, type Model } from "../src/engine/model.ts";
import { argmax, Session } from "../src/engine/session.ts";
import { generate } from "../src/engine/generate.ts";
import { AcceptGate, type DraftSource } from "../src/engine/speculative.ts";
import { lookup } from "../src/engine/ngram.ts";

const drafter = loadModel(genModel({ preset: "tiny", seed: 1, mtpDrafts: true }));
const drafter2 = loadModel(genModel({ preset: "tiny", seed: 4, mtpDrafts: true }));
const prompt = (n: number, seed: number) => Array.from({ length: n }, (_, i) => 16 + ((i + 1) * (37 + seed) + seed * 11) % 480);

function greedy(m: Model, p: number[], n: number, stopIds: number[] = []): number[] {
  return generate(m, p, { maxTokens: n, temperature: 0, stopIds }).gen_ids;
}

describe("incremental MTP state", () => {
  test("mtpSync/mtpChain equal the from-scratch chained drafts after decode steps and truncations", () => {
    const m = drafter, s = new Session(m);
    let l = s.feed(prompt(12, 1));
    const check = () => {
      const next = argmax(l), ref = s.mtpDrafts(next, 3);
      const a = s.mtpSync(next);
      expect(relRms(a, ref.logits[0])).toBeLessThan(1e-5);
      const d1 = argmax(a);
      expect(d1).toBe(ref.drafts[0]);
      const b = s.mtpChain(d1);
      expect(relRms(b, ref.logits[1])).toBeLessThan(1e-5);
      expect(relRms(s.mtpChain(argmax(b)), ref.logits[2])).toBeLessThan(1e-5);
    };
    check();
    for (let i = 0; i < 3; i++) l = s.feed([argmax(l)]); // MTP lags 3 pairs behind
    check();
    s.truncate(s.tokens.length - 2);                    // rows past the cut (and their pairs) go
    l = s.feed([77, 78], true).subarray(s.m.cfg.vocab_size);
    check();
    check(); // a second sync at the same length recomputes only row T-1
    for (let i = 0; i < 5; i++) { l = s.feed([argmax(l)]); if (i % 2 === 0) s.mtpAbsorb(); } // absorbed ahead (a server's prefill chunks)
    check();
    s.truncate(s.tokens.length - 3);
    s.mtpAbsorb(); // after a cut: the pairs past it are dropped first
    l = s.feed([5, 6, 7], true).subarray(2 * s.m.cfg.vocab_size);
    s.mtpAbsorb();
    check();
  });

  test("a Session made with hidden: false (no hidden rows recorded) refuses MTP drafts, saying why", () => {
    const s = new Session(drafter, { hidden: false });
    const l = s.feed(prompt(12, 1));
    expect(s.hidden.length).toBe(0);
    expect(() => s.mtpSync(argmax(l))).toThrow(/hidden: false/);
  });
});

describe("lossless greedy verification on a drafting model (mtpDrafts)", () => {
  for (const [name, m] of [["seed 1", drafter], ["seed 4", drafter2]] as const) {
    test(`${name}: mtp drafts give the greedy tokens with > 1 token per forward`, () => {
      const p = prompt(20, 3), ref = greedy(m, p, 48);
      for (const draftLen of [1, 3, 5]) {
        const r = generate(m, p, { maxTokens: 48, temperature: 0, draft: "mtp", draftLen, gate: { off: -1 } }); // (not the gate's test)
        expect(r.gen_ids).toEqual(ref);
        expect(r.stats.draft_acceptance).toBeGreaterThan(0.5);
        expect(r.stats.tokens_per_forward).toBeGreaterThan(1.4);
        expect(r.stats.accepted).toBeGreaterThan(0);
      }
    });
  }

  test("n-gram drafts on a repetitive prompt (the model's own greedy cycle)", () => {
    const m = drafter, cyc = greedy(m, prompt(8, 2), 120);
    // the drafting model is ≈ a bigram function, so its greedy output cycles; feed that back
    const p = cyc.slice(0, 100), ref = greedy(m, p, 40);
    const r = generate(m, p, { maxTokens: 40, temperature: 0, draft: "ngram" });
    expect(r.gen_ids).toEqual(ref);
    expect(r.stats.draft).toBe("ngram");
    expect(r.stats.accepted).toBeGreaterThan(10);
    expect(r.stats.tokens_per_forward).toBeGreaterThan(1.5);
  });

  test("a stop id inside an accepted draft ends the output there; the history ends before it", () => {
    const m = drafter, p = prompt(20, 3), ref = greedy(m, p, 30);
    const stopAt = 9, stopId = ref[stopAt];
    expect(ref.indexOf(stopId)).toBe(stopAt);
    const s = new Session(m);
    const r = generate(m, p, { maxTokens: 30, temperature: 0, draft: "mtp", stopIds: [stopId], session: s });
    expect(r.gen_ids).toEqual(ref.slice(0, stopAt + 1));
    expect(r.finish_reason).toBe("stop");
    expect(s.tokens).toEqual([...p, ...ref.slice(0, stopAt)]);
    expect(s.kv.len).toBe(s.tokens.length);
  });

  test("max tokens cuts a round; sampled output is reproducible with a seed", () => {
    const m = drafter, p = prompt(20, 5);
    for (const n of [1, 2, 7]) expect(generate(m, p, { maxTokens: n, temperature: 0, draft: "mtp" }).gen_ids).toEqual(greedy(m, p, n));
    const o = { maxTokens: 24, temperature: 0.8, top_p: 0.95, seed: 42, draft: "mtp" as const };
    const a = generate(m, p, o), b = generate(m, p, o);
    expect(a.gen_ids).toEqual(b.gen_ids);
    expect(a.gen_ids.length).toBe(24);
    expect(a.stats.accepted).toBeGreaterThan(0);
  });

  test("a lying draft source is always rejected and the output is still greedy", () => {
    const m = drafter, p = prompt(16, 7), ref = greedy(m, p, 20);
    const liar: DraftSource = { name: "liar", propose: (_s, next, k) => ({ tokens: Array(k).fill((next + 1) % 512) }) };
    const r = generate(m, p, { maxTokens: 20, temperature: 0, draft: liar, draftLen: 4, gate: { off: -1 } });
    expect(r.gen_ids).toEqual(ref);
    expect(r.stats.drafted).toBeGreaterThan(0);
  });
});

describe.skipIf(!hasTiny)("shared fixture (glm-tiny): speculative greedy equals the reference", () => {
  const m = hasTiny ? loadModel(TINY) : (null as unknown as Model);
  for (const name of ["short", "long"]) {
    test(`${name}: draft mtp and ngram`, () => {
      const ref = readRef(name);
      for (const draft of ["mtp", "ngram"] as const) {
        const r = generate(m, ref.prompt_ids, { maxTokens: ref.gen_ids.length, temperature: 0, draft, gate: { off: -1 } });
        expect(r.gen_ids).toEqual(ref.gen_ids);
        if (draft === "mtp") expect(r.stats.drafted).toBeGreaterThan(0);
      }
    });
  }
  test("random MTP head: acceptance is low and the gate turns drafting off", () => {
    const ref = readRef("long");
    const r = generate(m, ref.prompt_ids, { maxTokens: 60, temperature: 0, draft: "mtp" });
    expect(r.gen_ids.slice(0, ref.gen_ids.length)).toEqual(ref.gen_ids);
    expect(r.stats.draft_acceptance).toBeLessThan(0.3);
    expect(r.stats.drafted).toBeLessThan(3 * r.stats.forwards / 2); // off for most rounds
  });
});

describe("acceptance gate", () => {
  test("turns off below `off`, probes every probeEvery rounds, needs `on` to come back", () => {
    const g = new AcceptGate({ alpha: 0.5, off: 0.3, on: 0.6, probeEvery: 4 });
    expect(g.wants()).toBe(true);
    g.update(0, 3); g.update(0, 3);
    expect(g.on).toBe(false);
    expect([g.wants(), g.wants(), g.wants(), g.wants()]).toEqual([false, false, false, true]);
    g.update(1, 3); // ema rises but stays below `on`
    expect(g.on).toBe(false);
    g.update(3, 3); g.update(3, 3);
    expect(g.on).toBe(true);
    g.update(1, 3); // between off and on: stays on (hysteresis)
    expect(g.on).toBe(true);
  });
});

describe("n-gram lookup", () => {
  test("longest, most recent match; continues a cycle past the end", () => {
    expect(lookup([1, 2, 3, 9, 1, 2, 3, 8, 2, 3], 2)).toEqual([8, 2]);
    expect(lookup([5, 1, 2, 7, 1, 2], 3)).toEqual([7, 1, 2]);
    expect(lookup([1, 2, 1, 2], 5)).toEqual([1, 2, 1, 2, 1]);
    expect(lookup([1, 2, 3], 4)).toEqual([]);
    expect(lookup([4], 2)).toEqual([]);
  });
});

describe("Session.truncate / reuse", () => {
  test("reuse keeps the common prefix; feeding the rest equals a fresh prefill", () => {
    const m = drafter, V = m.cfg.vocab_size, a = prompt(24, 1), b = [...a.slice(0, 15), ...prompt(6, 9)];
    const s = new Session(m);
    s.feed(a);
    expect(s.reuse(b)).toBe(15);
    expect(s.tokens).toEqual(b.slice(0, 15));
    const got = s.feed(b.slice(15), true).slice();
    const fresh = new Session(m).feed(b, true).slice(15 * V);
    for (let i = 0; i < 6; i++) expect(relRms(got.subarray(i * V, (i + 1) * V), fresh.subarray(i * V, (i + 1) * V))).toBeLessThan(1e-5);
    // an identical prompt still leaves one token to feed; a longer one reuses the whole history
    expect(s.reuse(b)).toBe(b.length - 1);
    s.feed(b.slice(-1));
    expect(s.reuse([...b, 3, 4])).toBe(b.length);
    expect(() => s.truncate(b.length + 1)).toThrow(/outside/);
  });
});
