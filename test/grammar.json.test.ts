// "Grammar-constrained JSON output always parses": a random-walk sampler that picks a random allowed
// token (from the real byte-level BPE vocabulary) until the grammar lets it end must produce text
// that JSON.parses and validates against the schema — several schemas, many seeds, both whitespace
// modes. Also grammar-forced drafts (forcedBytes) on schemas with fixed keys.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { compileGrammar, jsonObjectGbnf, schemaToGbnf, TokenVocab, type Grammar } from "../src/engine/grammar/index.ts";
import { makeTokenizerJson } from "../src/model/make-tokenizer.ts";
import { TextCodec } from "../src/model/tokenizer.ts";
import { Rng } from "../src/engine/sampler.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";

const EOS = [1, 2, 5];
const tokJson = hasTiny ? JSON.parse(readFileSync(join(TINY, "tokenizer.json"), "utf8")) : makeTokenizerJson(1024);
const vocab = TokenVocab.fromTokenizerJson(tokJson, { eosIds: EOS });
const codec = new TextCodec(tokJson, { clean_up_tokenization_spaces: false }); // decode text exactly
const fatal = new TextDecoder("utf-8", { fatal: true });

type S = Record<string, any>;

/** A small JSON Schema validator for the supported subset (independent of the grammar code). */
function validate(v: unknown, s: S | boolean, root: S, path = "$"): string | null {
  if (s === true) return null;
  if (s === false) return `${path}: false schema`;
  if (s.$ref) return validate(v, s.$ref === "#" ? root : root[s.$ref.split("/")[1]][s.$ref.split("/")[2]], root, path);
  if ("const" in s) return JSON.stringify(v) === JSON.stringify(s.const) ? null : `${path}: not const`;
  if (s.enum) return s.enum.some((e: unknown) => JSON.stringify(e) === JSON.stringify(v)) ? null : `${path}: not in enum`;
  const alts = s.anyOf ?? s.oneOf;
  if (alts) return alts.some((a: S) => validate(v, a, root, path) === null) ? null : `${path}: no alternative matches`;
  if (Array.isArray(s.type)) return s.type.some((t: string) => validate(v, { ...s, type: t }, root, path) === null) ? null : `${path}: no type matches`;
  const t = s.type ?? (s.properties ? "object" : s.items ? "array" : undefined);
  switch (t) {
    case undefined: return null;
    case "null": return v === null ? null : `${path}: not null`;
    case "boolean": return typeof v === "boolean" ? null : `${path}: not boolean`;
    case "number": return typeof v === "number" ? null : `${path}: not number`;
    case "integer": return Number.isInteger(v) ? null : `${path}: not integer`;
    case "string": {
      if (typeof v !== "string") return `${path}: not string`;
      const n = [...v].length;
      if (n < (s.minLength ?? 0) || n > (s.maxLength ?? Infinity)) return `${path}: length ${n}`;
      return null;
    }
    case "array": {
      if (!Array.isArray(v)) return `${path}: not array`;
      if (v.length < (s.minItems ?? 0) || v.length > (s.maxItems ?? Infinity)) return `${path}: ${v.length} items`;
      for (let i = 0; i < v.length; i++) { const e = validate(v[i], s.items ?? true, root, `${path}[${i}]`); if (e) return e; }
      return null;
    }
    case "object": {
      if (typeof v !== "object" || v === null || Array.isArray(v)) return `${path}: not object`;
      const props: S = s.properties ?? {}, keys = Object.keys(v as S);
      for (const r of s.required ?? []) if (!(r in (v as S))) return `${path}: missing ${r}`;
      const declared = Object.keys(props);
      if (declared.length) {
        const order = keys.map((k) => declared.indexOf(k));
        if (order.some((i) => i < 0)) return `${path}: extra key`;
        if (order.some((i, j) => j > 0 && i <= order[j - 1])) return `${path}: keys out of declared order`;
      }
      for (const k of keys) {
        const sub = k in props ? props[k] : s.additionalProperties ?? true;
        const e = validate((v as S)[k], sub, root, `${path}.${k}`);
        if (e) return e;
      }
      return null;
    }
  }
  return `${path}: unknown type ${t}`;
}

const closing = new Set([0x22, 0x5d, 0x7d, 0x2c]); // " ] } ,

/** Random allowed tokens until the walker picks an end id (or nothing else can follow). */
function walk(g: Grammar, seed: number): { ids: number[]; bytes: Uint8Array } {
  const rng = new Rng(seed), gs = g.state(vocab), ids: number[] = [], out: number[] = [];
  const logits = new Float32Array(vocab.size);
  for (let step = 0; ; step++) {
    if (step > 5000) throw new Error(`seed ${seed}: no end after 5000 tokens`);
    logits.fill(0);
    const n = gs.mask(logits);
    if (n === 0) throw new Error(`seed ${seed}: nothing allowed at step ${step} (${JSON.stringify(codec.decode(ids))})`);
    const allowed: number[] = [], closers: number[] = [];
    logits.forEach((x, i) => {
      if (x === -Infinity) return;
      allowed.push(i);
      const b = vocab.bytes[i];
      if (b === null || b.some((c) => closing.has(c))) closers.push(i);
    });
    // a random allowed token; a third of the time one that closes something (keeps walks short)
    const pool = closers.length && rng.next() < 0.35 ? closers : allowed;
    const id = pool[Math.floor(rng.next() * pool.length)];
    gs.accept(id);
    if (EOS.includes(id)) break;
    ids.push(id);
    out.push(...vocab.bytes[id]!);
    if (gs.isDone()) break;
  }
  expect(gs.isComplete()).toBe(true);
  return { ids, bytes: Uint8Array.from(out) };
}

const schemas: [string, S][] = [
  ["person", {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 12 }, age: { type: "integer" }, email: { type: "string" },
      tags: { type: "array", items: { enum: ["a", "b", "c d"] }, maxItems: 3 }, active: { type: "boolean" },
    },
    required: ["name", "age", "active"],
  }],
  ["order", {
    type: "object",
    properties: {
      id: { type: "integer" },
      lines: { type: "array", minItems: 1, maxItems: 4, items: { type: "object", properties: { sku: { type: "string", maxLength: 8 }, qty: { type: "integer" }, price: { type: "number" } }, required: ["sku", "qty"] } },
      note: { anyOf: [{ type: "string", maxLength: 20 }, { type: "null" }] },
      status: { const: "open" },
    },
    required: ["id", "lines", "status"],
  }],
  ["tree ($defs, recursive)", {
    $defs: { node: { type: "object", properties: { v: { type: "number" }, kids: { type: "array", maxItems: 2, items: { $ref: "#/$defs/node" } } }, required: ["v"] } },
    $ref: "#/$defs/node",
  }],
  ["array of oneOf", { type: "array", maxItems: 5, items: { oneOf: [{ type: "number" }, { type: "boolean" }, { const: "x" }, { type: "null" }] } }],
  ["type list", { type: ["string", "null"], maxLength: 10 }],
  ["map (additionalProperties schema)", { type: "object", additionalProperties: { type: "integer" } }],
  ["all optional", { type: "object", properties: { a: { type: "integer" }, b: { type: "boolean" }, c: { type: "null" } } }],
];

describe("random walks over the grammar always give valid JSON", () => {
  for (const ws of ["flexible", "compact"] as const)
    for (const [name, schema] of schemas)
      test(`${name} (${ws} whitespace), 25 seeds`, () => {
        const g = compileGrammar(schemaToGbnf(schema, { whitespace: ws }));
        const kinds = new Set<string>();
        for (let seed = 0; seed < 25; seed++) {
          const { ids, bytes } = walk(g, seed * 7919 + 1);
          const text = fatal.decode(bytes); // valid UTF-8
          expect(codec.decode(ids)).toBe(text); // the same text through the HF tokenizer
          let value: unknown;
          try { value = JSON.parse(text); } catch (e) { throw new Error(`seed ${seed}: ${(e as Error).message}: ${JSON.stringify(text)}`); }
          expect([text, validate(value, schema, schema)]).toEqual([text, null]);
          kinds.add(JSON.stringify(value));
        }
        expect(kinds.size).toBeGreaterThan(5); // the walks differ
      });

  test("json_object: 60 seeds parse to objects", () => {
    const g = compileGrammar(jsonObjectGbnf());
    let nonEmpty = 0;
    for (let seed = 0; seed < 60; seed++) {
      const text = fatal.decode(walk(g, seed).bytes);
      const v = JSON.parse(text);
      expect(typeof v === "object" && v !== null && !Array.isArray(v)).toBe(true);
      if (Object.keys(v).length) nonEmpty++;
    }
    expect(nonEmpty).toBeGreaterThan(5);
  });
});

describe("grammar-forced drafts", () => {
  const schema = { type: "object", properties: { name: { type: "string" }, age: { type: "integer" }, city: { enum: ["Paris", "Pisa"] } }, required: ["name", "age", "city"] };
  const text = (b: Uint8Array) => new TextDecoder().decode(b);

  test("fixed keys are forced (compact whitespace)", () => {
    const gs = compileGrammar(schemaToGbnf(schema, { whitespace: "compact" })).state(vocab);
    expect(text(gs.forcedBytes())).toBe('{"name":"');
    expect(gs.acceptBytes('{"name":"Ann')).toBe(true);
    expect(text(gs.forcedBytes())).toBe(""); // the string may go on or close
    expect(gs.acceptBytes('"')).toBe(true);
    expect(text(gs.forcedBytes())).toBe(',"age":');
    expect(gs.acceptBytes(",\"age\":41")).toBe(true);
    expect(gs.acceptBytes(",")).toBe(true);
    expect(text(gs.forcedBytes())).toBe('"city":"P');
    expect(gs.acceptBytes('"city":"Pi')).toBe(true);
    expect(text(gs.forcedBytes())).toBe('sa"}');
  });

  test("flexible whitespace forces the key text between the optional spaces", () => {
    const gs = compileGrammar(schemaToGbnf(schema)).state(vocab);
    expect(text(gs.forcedBytes())).toBe("{");
    expect(gs.acceptBytes("{ ")).toBe(true);
    expect(text(gs.forcedBytes())).toBe('"name"');
  });

  test("a tokenized forced draft is accepted token by token", () => {
    const g = compileGrammar(schemaToGbnf(schema, { whitespace: "compact" }));
    const gs = g.state(vocab);
    gs.acceptBytes('{"name":"Bo",');
    const forced = text(gs.forcedBytes());
    expect(forced).toBe('"age":');
    const draft = codec.encode(forced);
    for (const id of draft) { expect(gs.isAllowed(id)).toBe(true); gs.accept(id); }
    expect(text(gs.forcedBytes())).toBe("");
  });
});
