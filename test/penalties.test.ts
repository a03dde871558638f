// Penalties, logit_bias and DRY: the processor against the formulas written out here (DRY against a brute-force
// search for repeated runs), then the server:
// 400s naming the field, and a penalised greedy generation over HTTP equal to an in-process reference
// that applies the same formulas to the engine's logits (so the wiring, order and accounting are tested).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { badWordIds, banBadWords, Penalties, penaltiesOff, type DryParams } from "../src/engine/penalties.ts";
import { loadModel } from "../src/engine/model.ts";
import { argmax, Session } from "../src/engine/session.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import type { Server } from "../src/server/server.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { generate } from "../src/engine/generate.ts";
import type { DraftSource } from "../src/engine/speculative.ts";
import { post, startTiny } from "./server.helpers.ts";

/** the rules written out: bias, then repetition over prompt ∪ output, then presence / frequency over the output */
function reference(l: Float32Array, o: { presence: number; frequency: number; repetition: number; bias: [number, number][] },
  prompt: number[], out: number[]): Float32Array {
  const r = Float32Array.from(l);
  for (const [t, b] of o.bias) r[t] += b;
  for (const t of new Set([...prompt, ...out])) if (o.repetition !== 1) r[t] = r[t] > 0 ? r[t] / o.repetition : r[t] * o.repetition;
  const c = new Map<number, number>();
  for (const t of out) c.set(t, (c.get(t) ?? 0) + 1);
  for (const [t, n] of c) r[t] -= o.presence + o.frequency * n;
  return r;
}

/** llama.cpp's rules written out: bias, then for every token counted c_t > 0 in the last `w` tokens of prompt + output
 *  (−1: all): l / r (l > 0) or l · r, then l −= frequency · c_t + presence */
function llamaReference(l: Float32Array, o: { presence: number; frequency: number; repetition: number; bias: [number, number][] },
  w: number, ctx: number[]): Float32Array {
  const r = Float32Array.from(l);
  for (const [t, b] of o.bias) r[t] += b;
  const win = w < 0 ? ctx : w === 0 ? [] : ctx.slice(-w), c = new Map<number, number>();
  for (const t of win) c.set(t, (c.get(t) ?? 0) + 1);
  for (const [t, k] of c) {
    r[t] = r[t] > 0 ? r[t] / o.repetition : r[t] * o.repetition;
    r[t] -= o.frequency * k + o.presence;
  }
  return r;
}

describe("Penalties", () => {
  test("llama.cpp's window (repeat_last_n): every rule over the last w tokens of prompt + output, rollback included", () => {
    const V = 12, prompt = [1, 2, 2, 9], out = [3, 3, 1, 7, 3, 2];
    const base = Float32Array.from({ length: V }, (_, i) => Math.sin(i * 1.7) * 3);
    const o = { presence: 0.4, frequency: 0.7, repetition: 1.3, bias: [[4, 1]] as [number, number][] };
    for (const w of [3, 5, 64, -1, 0]) {
      const p = new Penalties({ ...o, window: w }, prompt);
      for (let k = 0; k <= out.length; k++) {
        const l = Float32Array.from(base);
        p.apply(l);
        expect([...l]).toEqual([...llamaReference(base, o, w, [...prompt, ...out.slice(0, k)])]);
        if (k < out.length) {
          const m = p.mark();
          p.accept(5); p.accept(5); p.rollback(m); // drafts tried and dropped leave no trace
          p.accept(out[k]);
        }
      }
    }
  });

  test("each rule, alone and together, equals the written-out formulas over a few steps", () => {
    const V = 12, prompt = [1, 2, 2, 9], out = [3, 3, 1, 7, 3];
    const base = Float32Array.from({ length: V }, (_, i) => Math.sin(i * 1.7) * 3);
    const cases = [
      { presence: 0.5, frequency: 0, repetition: 1, bias: [] },
      { presence: 0, frequency: 0.75, repetition: 1, bias: [] },
      { presence: 0, frequency: 0, repetition: 1.3, bias: [] },
      { presence: 0, frequency: 0, repetition: 1, bias: [[4, 5], [0, -100]] },
      { presence: -0.4, frequency: 1.25, repetition: 0.8, bias: [[3, 2], [11, -1.5]] },
    ] as { presence: number; frequency: number; repetition: number; bias: [number, number][] }[];
    for (const o of cases) {
      const p = new Penalties(o, prompt);
      for (let k = 0; k <= out.length; k++) {
        const l = Float32Array.from(base);
        p.apply(l);
        expect([...l]).toEqual([...reference(base, o, prompt, out.slice(0, k))]);
        if (k < out.length) p.accept(out[k]);
      }
    }
  });

  test("a penalty that is off changes nothing; ids past the vocabulary are ignored", () => {
    expect(penaltiesOff(undefined)).toBe(true);
    expect(penaltiesOff({ presence: 0, frequency: 0, repetition: 1, bias: [] })).toBe(true);
    expect(penaltiesOff({ repetition: 1.1 })).toBe(false);
    expect(penaltiesOff({ bias: [[0, 0]] })).toBe(false);
    const l = Float32Array.of(1, 2, 3), p = new Penalties({ bias: [[7, 5]], frequency: 1 }, [9]);
    p.accept(8);
    p.apply(l);
    expect([...l]).toEqual([1, 2, 3]);
  });
});

/** DRY by brute force: for each token t, the longest m ≥ allowed such that the context's last m tokens (no breaker
 *  among them) followed by t stand earlier inside the window; penalty multiplier · base^(m − allowed) */
function dryReference(ctx: number[], t: number, d: DryParams, brk: Set<number>): number {
  const n = ctx.length, start = d.lastN > 0 ? Math.max(0, n - d.lastN) : 0;
  let best = -1;
  for (let m = 1; m <= Math.min(n, 64); m++) {
    const tail = ctx.slice(n - m);
    if (tail.some((x) => brk.has(x))) break;
    for (let i = start + m; i < n; i++) // the run at [i − m, i), followed by ctx[i] = t
      if (ctx[i] === t && tail.every((x, k) => ctx[i - m + k] === x)) { best = m; break; }
  }
  return best >= d.allowed ? d.multiplier * d.base ** (best - d.allowed) : 0;
}

describe("bad_words", () => {
  test("each word as written and, when that is a new first token of the same length, with a leading space (vLLM's)", () => {
    const enc: Record<string, number[]> = { "ab": [1, 2], " ab": [3, 2], "x": [7], " x": [8, 9], "yz": [4, 5], " yz": [4, 5] };
    expect(badWordIds(["ab", " x", "yz"], (t) => enc[t])).toEqual([[1, 2], [3, 2], [7], [4, 5]]);
  });
  test("the last token is banned where the output ends with the others; one-token words always", () => {
    const ban = (out: number[]) => { const l = new Float32Array(10); banBadWords(l, [[1, 2], [3, 4, 5], [9]], out); return [...l].map((v) => (v === -Infinity ? 1 : 0)); };
    expect(ban([])).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    expect(ban([7, 1])).toEqual([0, 0, 1, 0, 0, 0, 0, 0, 0, 1]);
    expect(ban([3, 4])).toEqual([0, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
    expect(ban([4])).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
  });
});

describe("DRY", () => {
  const dry = (o: Partial<DryParams> = {}): DryParams => ({ multiplier: 1, base: 2, allowed: 2, lastN: -1, breakers: [], ...o });
  const after = (seq: number[], d: DryParams, brk = new Set<number>(), V = 8) => {
    const p = new Penalties({ dry: d }, seq, brk), l = new Float32Array(V);
    p.apply(l);
    return [...l];
  };

  test("hand-computed: the token that would extend a repeat pays base^(run − allowed); breakers and the window end runs", () => {
    // 1 2 3 4 1 2 3: the run 1 2 3 stood before 4, so 4 pays 2^(3 − 2)
    expect(after([1, 2, 3, 4, 1, 2, 3], dry())).toEqual([0, 0, 0, 0, -2, 0, 0, 0]);
    expect(after([1, 2, 3, 4, 1, 2, 3], dry({ multiplier: 0.5, base: 3, allowed: 1 }))).toEqual([0, 0, 0, 0, -0.5 * 9, 0, 0, 0]);
    expect(after([1, 2, 3, 4, 1, 2, 3], dry(), new Set([2]))).toEqual(new Array(8).fill(0)); // run cut to 1 < 2
    expect(after([1, 2, 3, 4, 1, 2, 3], dry(), new Set([3]))).toEqual(new Array(8).fill(0)); // ends on a breaker
    expect(after([1, 2, 3, 4, 1, 2, 3], dry({ lastN: 4 }))).toEqual(new Array(8).fill(0));   // 4 is outside the last 4
    expect(after([5, 5, 5, 5], dry())).toEqual([0, 0, 0, 0, 0, -2, 0, 0]); // 5 5 5 then 5: the longest run, 3
  });

  test("equals the brute-force definition on random sequences, short and long, and accept / rollback keep the sequence", () => {
    let seed = 7;
    const rnd = (k: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8) % k;
    for (let round = 0; round < 300; round++) {
      const V = 2 + rnd(4), n = 1 + rnd(40), seq = Array.from({ length: n }, () => rnd(V));
      const d = dry({ multiplier: 0.5 + rnd(3), base: 1.5 + rnd(2), allowed: rnd(4), lastN: rnd(3) === 0 ? 5 + rnd(30) : -1 });
      const brk = new Set(rnd(2) ? [rnd(V)] : []);
      const got = after(seq, d, brk, V), want = Array.from({ length: V }, (_, t) => Math.fround(-dryReference(seq, t, d, brk)));
      if (got.some((g, t) => Math.abs(g - want[t]) > 1e-4 * Math.max(1, Math.abs(want[t]))))
        throw new Error(`seq ${seq} ${JSON.stringify(d)} breakers ${[...brk]}: ${got} vs ${want}`);
    }
    // long repeats (past DRY_MAX, and enough of them that the runs are found by the Z-function, not one by one)
    for (let round = 0; round < 40; round++) {
      const V = 2 + rnd(3), n = 200 + rnd(1200), unit = Array.from({ length: 1 + rnd(5) }, () => rnd(V));
      const seq = Array.from({ length: n }, (_, k) => (rnd(50) === 0 ? rnd(V) : unit[k % unit.length]));
      const d = dry({ allowed: rnd(4), lastN: rnd(3) === 0 ? 100 + rnd(400) : -1 }), brk = new Set(rnd(3) === 0 ? [rnd(V)] : []);
      const got = after(seq, d, brk, V), want = Array.from({ length: V }, (_, t) => Math.fround(-dryReference(seq, t, d, brk)));
      if (got.some((g, t) => Math.abs(g - want[t]) > 1e-4 * Math.max(1, Math.abs(want[t]))))
        throw new Error(`round ${round}: ${JSON.stringify(d)} breakers ${[...brk]}: ${got} vs ${want}`);
    }
    const p = new Penalties({ dry: dry() }, [1, 2, 3, 4, 1, 2]), l0 = new Float32Array(8), l1 = new Float32Array(8);
    p.apply(l0);
    const m = p.mark();
    p.accept(3); p.accept(4);
    p.rollback(m);
    p.apply(l1);
    expect([...l1]).toEqual([...l0]);
    expect(penaltiesOff({ dry: dry({ multiplier: 0 }) })).toBe(true);
    expect(penaltiesOff({ dry: dry() })).toBe(false);
  });
});

/** N greedy tokens after `prompt` (fast mode, in process), each chosen from `process`(its logits, the output so far) */
function greedy(m: ReturnType<typeof loadModel>, prompt: number[], N: number, process: (l: Float32Array, out: number[]) => Float32Array): number[] {
  const sess = new Session(m, { exact: false }), out: number[] = [];
  let l = sess.feed(prompt);
  for (let k = 0; k < N; k++) {
    const id = argmax(process(l, out));
    if (m.cfg.stop_ids.includes(id)) break;
    out.push(id);
    l = sess.feed([id]);
  }
  return out;
}

describe.skipIf(!hasTiny)("serve: penalties and logit_bias", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 2 }); });
  afterAll(() => s.stop());

  const bad: [string, object, string][] = [
    ["presence_penalty 3", { presence_penalty: 3 }, "presence_penalty"],
    ["frequency_penalty -2.5", { frequency_penalty: -2.5 }, "frequency_penalty"],
    ["repetition_penalty 0", { repetition_penalty: 0 }, "repetition_penalty"],
    ["logit_bias key not an id", { logit_bias: { abc: 1 } }, "logit_bias"],
    ["logit_bias value 101", { logit_bias: { 5: 101 } }, "logit_bias"],
    ["logit_bias id outside the vocabulary", { logit_bias: { 999999: 1 } }, "logit_bias"],
  ];
  for (const [what, extra, param] of bad)
    test(`400 naming the field: ${what}`, async () => {
      for (const [path, body] of [["/v1/chat/completions", { messages: [{ role: "user", content: "hi" }] }], ["/v1/completions", { prompt: "hi" }]] as const) {
        const res = await post(s.url, path, { ...body, max_tokens: 2, ...extra });
        expect(res.status).toBe(400);
        expect(((await res.json()) as any).error.param).toStartWith(param);
      }
    });

  test("logit_bias +100 forces a token, -100 bans the greedy one", async () => {
    const prompt = [5, 17, 42, 8, 99, 3];
    const gen = async (extra: object) => ((await (await post(s.url, "/v1/completions", { prompt, max_tokens: 4, temperature: 0, ...extra })).json()) as any).choices[0];
    const codec = loadTokenizer(TINY);
    const forced = await gen({ logit_bias: { 200: 100 } });
    expect(forced.text).toBe(codec.decode([200, 200, 200, 200]));
    const plain = await gen({ max_tokens: 1 }), banned = await gen({ max_tokens: 1, logit_bias: { [codec.encode(plain.text)[0]]: -100 } });
    expect(banned.text).not.toBe(plain.text);
  });

  test("penalised greedy text over HTTP equals the in-process reference; it differs from the unpenalised one", async () => {
    const m = loadModel(TINY), codec = loadTokenizer(TINY);
    const prompt = [5, 17, 42, 8, 99, 3, 17, 42], N = 24;
    const o = { presence: 0.3, frequency: 0.6, repetition: 1.2, bias: [[7, 1.5]] as [number, number][] };
    const ref = (pen: boolean) => codec.decode(greedy(m, prompt, N, (l, out) => (pen ? reference(l, o, prompt, out) : l)));
    const body = { prompt, max_tokens: N, temperature: 0, presence_penalty: o.presence, frequency_penalty: o.frequency,
      repetition_penalty: o.repetition, logit_bias: { 7: 1.5 } };
    const got = ((await (await post(s.url, "/v1/completions", body)).json()) as any).choices[0].text;
    const want = ref(true);
    expect(got).toBe(want);
    expect(want).not.toBe(ref(false));
    // llama-server's name for the repetition penalty
    const alias = { ...body, repetition_penalty: undefined, repeat_penalty: o.repetition };
    expect(((await (await post(s.url, "/v1/completions", alias)).json()) as any).choices[0].text).toBe(want);
  });

  test("llama-server's /completion: the penalties over its window of the last 64 tokens (repeat_last_n), as llama.cpp", async () => {
    const m = loadModel(TINY), codec = loadTokenizer(TINY);
    const prompt = [5, 17, 42, 8, 99, 3, 17, 42], N = 24;
    // a bias that makes the prompt's token 17 tempting: llama.cpp's window counts its two prompt occurrences, OpenAI's
    // rules only what the output repeats
    const o = { presence: 2, frequency: 2, repetition: 1.2, bias: [[17, 5]] as [number, number][] };
    const ref = (w: number) => codec.decode(greedy(m, prompt, N, (l, out) => llamaReference(l, o, w, [...prompt, ...out])));
    const body = { prompt, n_predict: N, temperature: 0, presence_penalty: o.presence, frequency_penalty: o.frequency, repeat_penalty: o.repetition };
    const text = async (route: string, extra: object) => {
      const bias = route === "/completion" ? [[17, 5]] : { 17: 5 };
      const j = (await (await post(s.url, route, { ...body, max_tokens: N, logit_bias: bias, ...extra })).json()) as any;
      return route === "/completion" ? j.content : j.choices[0].text;
    };
    expect(await text("/completion", {})).toBe(ref(64));
    expect(await text("/v1/completions", {})).not.toBe(ref(64)); // OpenAI's rules there: presence / frequency over the output
    const short = ref(4);
    expect(short).not.toBe(ref(64));
    expect(await text("/completion", { repeat_last_n: 4 })).toBe(short);
    expect(await text("/v1/completions", { repeat_last_n: 4 })).toBe(short); // named on an OpenAI route: the same rules
  });
});

describe.skipIf(!hasTiny)("generate: penalties with speculative decoding", () => {
  test("greedy with penalties: drafted or not, the same tokens as the written-out reference", () => {
    const m = loadModel(TINY);
    const prompt = [5, 17, 42, 8, 99, 3, 17, 42, 8, 99, 3, 17], N = 48;
    // token 100's bias makes it the top choice until its own frequency penalty outweighs it, which happens
    // inside a round of drafts: the rows after it must see the drafts before them, or they pick it again
    const o = { presence: 0, frequency: 2, repetition: 1.15, bias: [[100, 30], [42, -2]] as [number, number][] };
    const sess = new Session(m, { exact: false }), want: number[] = [];
    let l = sess.feed(prompt);
    for (let k = 0; k < N; k++) {
      const id = argmax(reference(l, o, prompt, want));
      want.push(id);
      if (m.cfg.stop_ids.includes(id)) break;
      l = sess.feed([id]);
    }
    expect(want).not.toEqual(generate(m, prompt, { maxTokens: N, temperature: 0, forward: { exact: false } }).gen_ids); // they bite
    // an oracle proposing the reference's own continuation: every draft is accepted only if each verified
    // row saw the penalties of the drafts before it
    const oracle: DraftSource = {
      name: "oracle",
      propose: (s, _next, k) => { const i = s.tokens.length - prompt.length; return { tokens: want.slice(i + 1, i + 1 + k) }; },
    };
    for (const draft of ["off", "ngram", oracle] as const) {
      const r = generate(m, prompt, { maxTokens: N, temperature: 0, penalties: o, draft, forward: { exact: false } });
      expect(r.gen_ids).toEqual(want);
      if (draft === oracle) { expect(r.stats.drafted).toBeGreaterThan(N / 2); expect(r.stats.accepted).toBe(r.stats.drafted); }
    }
  });
});
