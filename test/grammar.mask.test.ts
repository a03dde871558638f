// Token masks over a real byte-level BPE vocabulary (../shared/fixtures/glm-tiny/tokenizer.json, or a
// generated one when the fixture is absent): TokenVocab decodes like the HF tokenizer, the trie
// walk allows exactly the tokens a brute-force prefix check allows, end ids only when complete,
// special ids never, and the real Sampler only ever draws allowed tokens after mask().
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { compileGrammar, GrammarError, GrammarState, jsonObjectGbnf, schemaToGbnf, TokenVocab } from "../src/engine/grammar/index.ts";
import { makeTokenizerJson } from "../src/model/make-tokenizer.ts";
import { TextCodec } from "../src/model/tokenizer.ts";
import { Rng, Sampler } from "../src/engine/sampler.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";

const EOS = [1, 2, 5];
if (!hasTiny) console.warn("[skip] glm-tiny tokenizer absent: grammar masks use a generated 1024-token vocabulary");
const tokJson = hasTiny ? JSON.parse(readFileSync(join(TINY, "tokenizer.json"), "utf8")) : makeTokenizerJson(1024);
const vocab = TokenVocab.fromTokenizerJson(tokJson, { eosIds: EOS });
const codec = new TextCodec(tokJson, { clean_up_tokenization_spaces: false }); // decode text exactly
const enc = new TextEncoder(), dec = new TextDecoder();

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const o = new Uint8Array(a.length + b.length);
  o.set(a); o.set(b, a.length);
  return o;
}

describe("TokenVocab", () => {
  test("every token decodes to the bytes the HF tokenizer decodes", () => {
    let n = 0;
    for (let id = 0; id < vocab.size; id++) {
      const b = vocab.bytes[id];
      if (b === null) continue;
      expect([id, dec.decode(b)]).toEqual([id, codec.decode([id])]);
      n++;
    }
    expect(n).toBe(vocab.size - 16); // all but the 16 GLM special tokens
    for (let id = 0; id < 16; id++) expect(vocab.bytes[id]).toBeNull();
  });

  test("the trie holds every token once, in preorder with subtree ends", () => {
    const t = vocab.trie;
    expect(t.ids.length).toBe(vocab.size - 16);
    expect(new Set(t.ids).size).toBe(t.ids.length);
    for (let v = 1; v < t.n; v++) {
      expect(t.end[v]).toBeGreaterThan(v);
      if (v + 1 < t.end[v]) expect(t.depth[v + 1]).toBe(t.depth[v] + 1); // first child follows
    }
  });

  test("a tokenizer that is not byte-level or SentencePiece is rejected", () => {
    expect(() => TokenVocab.fromTokenizerJson({ model: { type: "WordPiece", vocab: { a: 0 } }, decoder: { type: "WordPiece" } }))
      .toThrow("unsupported tokenizer");
    expect(() => TokenVocab.fromTokenizerJson({ model: {} })).toThrow("tokenizer.json");
  });

  test("SentencePiece-style vocabularies (▁ and <0xHH>)", () => {
    const v = TokenVocab.fromTokenizerJson({
      model: { type: "BPE", byte_fallback: true, vocab: { "<s>": 0, "<0x0A>": 1, "▁hi": 2, "é": 3 } },
      added_tokens: [{ id: 0, content: "<s>", special: true }],
      decoder: { type: "Sequence", decoders: [{ type: "Replace", pattern: { String: "▁" }, content: " " }] },
    });
    expect(v.bytes.map((b) => (b ? dec.decode(b) : null))).toEqual([null, "\n", " hi", "é"]);
  });
});

/** Brute force: the tokens allowed after `prefix` are those whose bytes keep a grammar prefix. */
function bruteAllowed(g: ReturnType<typeof compileGrammar>, prefix: Uint8Array, complete: boolean): number[] {
  const out: number[] = [];
  for (let id = 0; id < vocab.size; id++) {
    const b = vocab.bytes[id];
    if (b === null) { if (complete && EOS.includes(id)) out.push(id); continue; }
    if (g.isPrefix(concat(prefix, b))) out.push(id);
  }
  return out;
}

function allowedIds(gs: GrammarState): number[] {
  const logits = new Float32Array(vocab.size + 7); // the model's vocab may be padded past the tokenizer's
  const n = gs.mask(logits);
  const ids: number[] = [];
  logits.forEach((x, i) => { if (x !== -Infinity) ids.push(i); });
  expect(ids.length).toBe(n);
  return ids;
}

describe("token masks match a brute-force check", () => {
  const grammars: [string, string][] = [
    ["json_object", jsonObjectGbnf()],
    ["schema", schemaToGbnf({ type: "object", properties: { name: { type: "string" }, n: { type: "integer" } }, required: ["name"] })],
    ["utf8 classes", `root ::= [^a-z]{1,6} "é" [α-ω]* "."`],
  ];
  for (const [name, gbnf] of grammars)
    test(name, () => {
      const g = compileGrammar(gbnf);
      const rng = new Rng(3);
      for (let walk = 0; walk < 4; walk++) {
        const gs = g.state(vocab);
        let prefix: Uint8Array = new Uint8Array(0);
        for (let step = 0; step < 25 && !gs.isDone(); step++) {
          const ids = allowedIds(gs);
          expect(ids).toEqual(bruteAllowed(g, prefix, gs.isComplete()));
          const text = ids.filter((i) => vocab.bytes[i]);
          if (text.length === 0) break;
          const id = text[Math.floor(rng.next() * text.length)];
          gs.accept(id);
          prefix = concat(prefix, vocab.bytes[id]!);
        }
      }
    });
});

describe("end and special tokens", () => {
  test("end ids only once complete; special ids never; bad tokens throw", () => {
    const g = compileGrammar(`root ::= "ab" | "ab" "c"`);
    const gs = g.state(vocab);
    expect(allowedIds(gs).some((i) => i < 16)).toBe(false);
    expect(() => gs.accept(1)).toThrow(GrammarError);
    expect(() => gs.accept(3)).toThrow("special or unknown");
    const c = codec.encode("c")[0];
    expect(gs.isAllowed(c)).toBe(false);
    expect(() => gs.accept(c)).toThrow("does not continue the grammar");
    expect(gs.acceptBytes("ab")).toBe(true);
    expect(gs.isComplete()).toBe(true);
    expect(gs.isDone()).toBe(false); // "c" may still follow
    const ids = allowedIds(gs);
    expect(ids.filter((i) => i < 16)).toEqual(EOS);
    expect(ids).toContain(c);
    const fork = gs.clone();
    fork.accept(c);
    expect(fork.isDone()).toBe(true);
    expect(allowedIds(fork)).toEqual(EOS); // only an end id can follow
    gs.accept(2);
    expect(gs.isDone()).toBe(true);
    expect(allowedIds(gs)).toEqual([]);
    expect(() => gs.accept(1)).toThrow("after the grammar finished");
  });
});

describe("the real Sampler draws only allowed tokens after mask()", () => {
  test("json_object: 30 sampled generations all parse", () => {
    const g = compileGrammar(jsonObjectGbnf());
    const closers = [...enc.encode('"]}')].map((c) => vocab.bytes.findIndex((b) => b?.length === 1 && b[0] === c));
    expect(closers.every((i) => i >= 0)).toBe(true);
    for (let seed = 0; seed < 30; seed++) {
      const sampler = new Sampler({ temperature: 0.8, top_p: 0.95, top_k: 200, seed });
      const noise = new Rng(1000 + seed);
      const gs = g.state(vocab);
      const ids: number[] = [];
      for (let step = 0; step < 4000; step++) {
        const logits = new Float32Array(vocab.size);
        for (let i = 0; i < logits.length; i++) logits[i] = noise.next() * 4;
        for (const id of closers) logits[id] += 3; // nudge towards closing
        expect(gs.mask(logits)).toBeGreaterThan(0);
        const id = sampler.sample(logits);
        expect(gs.isAllowed(id)).toBe(true);
        gs.accept(id);
        if (EOS.includes(id) || gs.isDone()) break;
        ids.push(id);
      }
      expect(gs.isComplete()).toBe(true);
      const text = codec.decode(ids);
      expect(typeof JSON.parse(text)).toBe("object");
    }
  });
});

describe("a larger generated vocabulary (8192 ids)", () => {
  test("masks match the brute-force check along a walk", () => {
    const big = TokenVocab.fromTokenizerJson(makeTokenizerJson(8192), { eosIds: EOS });
    const g = compileGrammar(schemaToGbnf({ type: "object", properties: { text: { type: "string" }, k: { type: "array", items: { type: "number" } } } }));
    const gs = g.state(big), rng = new Rng(9);
    let prefix: Uint8Array = new Uint8Array(0);
    for (let step = 0; step < 12 && !gs.isDone(); step++) {
      const logits = new Float32Array(big.size);
      gs.mask(logits);
      const ids: number[] = [];
      for (let id = 0; id < big.size; id++) {
        const b = big.bytes[id];
        const ok = b === null ? gs.isComplete() && EOS.includes(id) : g.isPrefix(concat(prefix, b));
        expect([id, logits[id] === 0]).toEqual([id, ok]);
        if (ok && b) ids.push(id);
      }
      const id = ids[Math.floor(rng.next() * ids.length)];
      gs.accept(id);
      prefix = concat(prefix, big.bytes[id]!);
    }
  });
});
