// Hostile tokenizer.json files. Shapes @huggingface/tokenizers reads without checking (a bad one was a TypeError
// naming nothing) are ModelErrors naming the file and the field. Regexes (src/model/tokenizer-audit.ts): the generated
// and demo tokenizers load; patterns that backtrack exponentially or polynomially, in the pre-tokenizer, a normalizer
// or a decoder, are refused at load within seconds, naming the file and the component (before, a 1,000-character
// prompt took the engine's thread for seconds to minutes); a pattern too long, or too many, are refused before they
// are compiled, naming the path.
import { afterAll, describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { genModel } from "./helpers/models.ts";
import { demoModelDir } from "../src/model/demo.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { findRegexes, MAX_PATTERNS, MAX_REGEX, probeUnits } from "../src/model/tokenizer-audit.ts";
import { ModelError } from "../src/model/errors.ts";

const gen = genModel({ preset: "tiny", seed: 5 });
const root = mkdtempSync(join(tmpdir(), "hb-tok-audit-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const base = JSON.parse(readFileSync(join(gen, "tokenizer.json"), "utf8"));
const split = base.pre_tokenizer.pretokenizers[0].pattern.Regex as string;
let n = 0;
/** a copy of the generated model directory whose tokenizer.json is `change`d; loadTokenizer's error (null: loaded) and ms */
function load(change: (j: any) => void): { err: ModelError | null; ms: number } {
  const d = join(root, `d${n++}`), j = structuredClone(base);
  cpSync(gen, d, { recursive: true });
  change(j);
  writeFileSync(join(d, "tokenizer.json"), JSON.stringify(j));
  const t = performance.now();
  try { loadTokenizer(d); return { err: null, ms: performance.now() - t }; } catch (e) { return { err: e as ModelError, ms: performance.now() - t }; }
}
const pre = (p: string) => (j: any) => { j.pre_tokenizer.pretokenizers[0].pattern.Regex = p; };

describe("tokenizer.json shapes", () => {
  const CASES: [string, (j: any) => void, string][] = [
    ["no model", (j) => { delete j.model; }, "model"],
    ["an unknown model type", (j) => { j.model.type = "Bogus"; }, "model.type"],
    ["a vocab that is a number", (j) => { j.model.vocab = 5; }, "model.vocab"],
    ["a token id past 2^24", (j) => { j.model.vocab = { a: 1e12 }; }, "model.vocab.a"],
    ["merges that are a string", (j) => { j.model.merges = "x"; }, "model.merges"],
    ["a merge that is a number", (j) => { j.model.merges = [5]; }, "model.merges[0]"],
    ["added_tokens that are a number", (j) => { j.added_tokens = 7; }, "added_tokens"],
    ["an added token without content", (j) => { j.added_tokens = [{ id: 3 }]; }, "added_tokens[0].content"],
    ["a decoder whose type is a number", (j) => { j.decoder = { type: 5 }; }, "decoder.type"],
  ];
  for (const [name, change, field] of CASES)
    test(`${name}: a ModelError naming ${field}`, () => {
      const { err } = load(change);
      expect(err).toBeInstanceOf(ModelError);
      expect(err!.field).toBe(field);
      expect(err!.message).toContain("tokenizer.json: ");
    });
  test("a tokenizer.json or tokenizer_config.json that is not a JSON object names its file", () => {
    for (const [f, text] of [["tokenizer.json", "null"], ["tokenizer_config.json", "[1]"], ["tokenizer_config.json", "7"]]) {
      const d = join(root, `d${n++}`);
      cpSync(gen, d, { recursive: true });
      writeFileSync(join(d, f), text);
      let err: unknown = null;
      try { loadTokenizer(d); } catch (e) { err = e; }
      expect(err).toBeInstanceOf(ModelError);
      expect((err as Error).message).toBe(`${join(d, f)}: not a JSON object`);
    }
  });

  test("what the library refuses (an unknown pre-tokenizer, a regex that does not compile) names the file", () => {
    for (const change of [(j: any) => { j.pre_tokenizer = { type: "Nope" }; }, pre("((")]) {
      const { err } = load(change);
      expect(err).toBeInstanceOf(ModelError);
      expect(err!.message).toMatch(/tokenizer\.json: does not load: /);
    }
  });
});

describe("tokenizer regex audit", () => {
  test("the generated and the demo tokenizers load; their patterns are timed", () => {
    expect(load(() => {}).err).toBeNull();
    expect(() => loadTokenizer(demoModelDir())).not.toThrow();
    expect(findRegexes(base, "t").get("pre_tokenizer")).toEqual([split]);
  });

  // the bad branch first: a prompt of its characters reaches it at every position
  const BAD: [string, string][] = [
    ["exponential (nested quantifiers, an anchor)", "(a+)+$|"],
    ["exponential (a quantified empty loop)", "(\\s*)*x|"],
    ["cubic", "a*a*a*b|"],
    ["cubic on a literal run", "(xyz)*(xyz)*(xyz)*w|"],
    ["quadratic (overlapping quantifiers)", "\\s*\\s*[\\r\\n]|"],
    ["exponential alternation", "(?:'s|'s)*q|"],
  ];
  for (const [name, bad] of BAD)
    test(`refused: ${name} ${JSON.stringify(bad)}`, () => {
      const { err, ms } = load(pre(bad + split));
      expect(err).toBeInstanceOf(ModelError);
      expect(err!.message).toContain("tokenizer.json: pre_tokenizer: ");
      expect(err!.message).toContain("backtracks super-linearly");
      expect(ms).toBeLessThan(10_000);
    }, 30_000);

  test("HB_TOKENIZER_AUDIT=0 loads what the audit refuses (the error says so)", () => {
    const { err } = load(pre("(a+)+$|" + split));
    expect(err?.message).toContain("HB_TOKENIZER_AUDIT=0 loads it anyway");
    process.env.HB_TOKENIZER_AUDIT = "0";
    try { expect(load(pre("(a+)+$|" + split)).err).toBeNull(); } finally { delete process.env.HB_TOKENIZER_AUDIT; }
  });

  test("a normalizer's and a decoder's Replace patterns are audited too", () => {
    const rep = (p: string) => ({ type: "Replace", pattern: { Regex: p }, content: "" });
    const nz = load((j) => { j.normalizer = { type: "Sequence", normalizers: [rep("(a+)+$")] }; });
    expect(nz.err?.field).toBe("normalizer");
    const dec = load((j) => { j.decoder = { type: "Sequence", decoders: [rep("a*a*a*b"), j.decoder] }; });
    expect(dec.err?.field).toBe("decoder");
    expect(load((j) => { j.normalizer = { type: "Sequence", normalizers: [rep("\\s+")] }; }).err).toBeNull();
  }, 30_000);

  test("a pattern over the cap, or one pattern too many, is refused before it is compiled, naming its path", () => {
    const { err, ms } = load(pre("a|".repeat(MAX_REGEX)));
    expect(err?.field).toBe("pre_tokenizer.pretokenizers[0].pattern.Regex");
    expect(err?.message).toContain(`over the ${MAX_REGEX} allowed`);
    expect(ms).toBeLessThan(2000);
    const many = load((j) => { j.normalizer = { type: "Sequence", normalizers: Array.from({ length: MAX_PATTERNS + 1 }, () => ({ type: "Replace", pattern: { Regex: "x" }, content: "" })) }; });
    expect(many.err?.field).toMatch(/^normalizer\.normalizers\[\d+\]\.pattern\.Regex$/);
    expect(many.err?.message).toContain(`over ${MAX_PATTERNS} Regex patterns`);
  });

  test("probe units: the base set, the pattern's literal characters and runs; class escapes skipped", () => {
    const u = probeUnits(["(xyz)+\\p{Lu}\\.q"]);
    expect(u).toContain("xyz");
    expect(u).toContain(".q");
    expect(u).toContain(" ");
    expect(u).not.toContain("L");
    expect(u).not.toContain("Lu");
  });
});
