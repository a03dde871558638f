// Regular expressions as GBNF (vLLM's guided_regex): for a set of patterns, every string up to length 4 over a small
// alphabet matches the compiled grammar exactly when JavaScript's RegExp matches it whole (the oracle); unsupported
// constructs are GrammarErrors naming the offset.
import { describe, expect, test } from "bun:test";
import { compileGrammar, GrammarError } from "../src/engine/grammar/index.ts";
import { regexToGbnf } from "../src/engine/grammar/regex.ts";

const PATTERNS = ["a*b", "(ab|ba)+", "[a-c]{2,3}", "\\d+(\\.\\d{1,2})?", "[^a]*", "\\w+\\s\\w+", "a{2}", "a{2,}", "(?:a|b)?0",
  "(?<n>ab)*", "^ab$", ".*", "[\\d.]+", "a|", "[-a]+", "[a-]+", "\\x61\\u0062", "[\\s\\S]{2}", "\\W*", "b{1,2}?a", "(a|b|)(0|1)",
  "\\.\\*", "[^\\n]+", "a{0}b", "a.b", "\\A[ab]+\\Z"];
const ALPHABET = ["a", "b", "0", "1", ".", " ", "\n", "{", "*"];

function strings(max: number): string[] {
  const out = [""];
  let level = [""];
  for (let n = 1; n <= max; n++) { level = level.flatMap((s) => ALPHABET.map((c) => s + c)); out.push(...level); }
  return out;
}

describe("regex to GBNF", () => {
  test("the grammar accepts exactly what RegExp matches whole", () => {
    const all = strings(4);
    for (const p of PATTERNS) {
      const g = compileGrammar(regexToGbnf(p)), js = new RegExp(`^(?:${p.replace(/^\\A/, "").replace(/\\Z$/, "")})$`, "u");
      for (const s of all) if (g.matches(s) !== js.test(s)) throw new Error(`${JSON.stringify(p)} on ${JSON.stringify(s)}: grammar ${g.matches(s)}, RegExp ${js.test(s)}`);
    }
  });

  test("literal braces where they are no quantifier, and characters past the BMP", () => {
    expect(compileGrammar(regexToGbnf("x{y}")).matches("x{y}")).toBe(true);
    const g = compileGrammar(regexToGbnf("[😀-😂]+é"));
    expect(g.matches("😁😀é")).toBe(true);
    expect(g.matches("😃é")).toBe(false);
  });

  test("what is not a regular language, or not supported, is a GrammarError naming the offset", () => {
    for (const [p, at] of [["(a)\\1", 3], ["(?=a)b", 0], ["a\\bb", 1], ["a^b", 1], ["a$b", 1], ["*a", 0], ["[b-a]", 0], ["(ab", 0],
      ["ab)", 2], ["\\p{L}", 0], ["a**", 0], ["[]", 0], ["\\", 0]] as const) {
      let err: unknown;
      try { regexToGbnf(p); } catch (e) { err = e; }
      expect(err).toBeInstanceOf(GrammarError);
      expect((err as Error).message).toContain(`offset ${at}`);
    }
  });
});
