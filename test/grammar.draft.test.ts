// Grammar helpers for speculative decoding: forced drafts are tokens the grammar accepts in order,
// cut at whole UTF-8 characters; verification rows are masked with the state at their position.
import { describe, expect, test } from "bun:test";
import { compileGrammar, forcedDraft, maskDraftRows, schemaToGbnf, TokenVocab } from "../src/engine/grammar/index.ts";
import { makeTokenizerJson } from "../src/model/make-tokenizer.ts";
import { TextCodec } from "../src/model/tokenizer.ts";

const tokJson = makeTokenizerJson(1024);
const vocab = TokenVocab.fromTokenizerJson(tokJson, { eosIds: [1, 2, 5] });
const codec = new TextCodec(tokJson, { clean_up_tokenization_spaces: false });
const encode = (t: string) => codec.encode(t);

describe("forcedDraft", () => {
  const g = compileGrammar(schemaToGbnf({ type: "object", properties: { name: { type: "string" }, city: { enum: ["Évry", "Èze"] } }, required: ["name", "city"] }, { whitespace: "compact" }));
  test("drafts the forced key text as tokens the grammar accepts", () => {
    const gs = g.state(vocab);
    const d = forcedDraft(gs, 16, encode);
    expect(codec.decode(d)).toBe('{"name":"');
    const c = gs.clone();
    for (const id of d) c.accept(id);
    expect(forcedDraft(gs, 2, encode).length).toBe(2); // at most k
  });
  test("stops before a half UTF-8 character", () => {
    const gs = g.state(vocab);
    expect(gs.acceptBytes('{"name":"a",')).toBe(true);
    // forced bytes are `"city":"` + 0xC3 (É and È share their first byte); the draft stops before it
    expect([...gs.forcedBytes()].slice(-1)).toEqual([0xc3]);
    expect(codec.decode(forcedDraft(gs, 16, encode))).toBe('"city":"');
  });
  test("when only an end id can follow, drafts it; nothing when free", () => {
    const gs = g.state(vocab);
    expect(gs.acceptBytes('{"name":"a","city":"Èze"}')).toBe(true);
    expect(forcedDraft(gs, 4, encode)).toEqual([1]);
    const free = compileGrammar(`root ::= [a-z]+`).state(vocab);
    expect(forcedDraft(free, 4, encode)).toEqual([]);
  });
});

describe("maskDraftRows", () => {
  test("row j gets the mask of the state after j drafts", () => {
    const g = compileGrammar(`root ::= "ab" [0-9]+`);
    const gs = g.state(vocab);
    const drafts = [...codec.encode("ab"), ...codec.encode("7")];
    const V = vocab.size, rows = new Float32Array((drafts.length + 1) * V);
    maskDraftRows(gs, drafts, rows, V);
    const c = gs.clone();
    for (let j = 0; j <= drafts.length; j++) {
      const want = new Float32Array(V);
      c.mask(want);
      expect(rows.subarray(j * V, (j + 1) * V)).toEqual(want);
      if (j < drafts.length) c.accept(drafts[j]);
    }
  });
  test("rows after a rejected draft keep the last valid mask", () => {
    const gs = compileGrammar(`root ::= "a" "b"`).state(vocab);
    const a = codec.encode("a")[0], z = codec.encode("z")[0];
    const V = vocab.size, rows = new Float32Array(3 * V);
    maskDraftRows(gs, [a, z], rows, V);
    expect(rows.subarray(V, 2 * V)).toEqual(rows.subarray(2 * V, 3 * V));
    expect(rows[V + codec.encode("b")[0]]).toBe(0);
  });
});
