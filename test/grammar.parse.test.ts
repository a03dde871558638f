// GBNF parser and compiler: accepted dialect (llama.cpp's) and rejected inputs, whose errors name the
// line and column (or the rule) of the problem.
import { describe, expect, test } from "bun:test";
import { compileGrammar, GrammarError, parseGbnf } from "../src/engine/grammar/index.ts";

function err(text: string): GrammarError {
  try { compileGrammar(text); } catch (e) {
    if (e instanceof GrammarError) return e;
    throw e;
  }
  throw new Error(`accepted: ${text}`);
}

describe("GBNF parser accepts llama.cpp's dialect", () => {
  test("rules, alternation, groups, repetitions, literals, classes, comments", () => {
    const g = parseGbnf(`# a comment
root ::= greeting ("," ws name)* "!"?   # trailing comment
greeting ::= "hi" | "hello" |
  "hey"
name ::= [A-Z] [a-z]{1,8} | "\\u00e9\\x41\\U0001F600\\t\\n\\r\\\\\\"\\[\\]"
ws ::= [ \\t]{0,}
other ::= ( "a"
  | "b" )+ . [^\\n-] x{3} x{2,} x{1,4}
x ::= "x"
`);
    expect(g.rules.map((r) => r.name)).toEqual(["root", "greeting", "name", "ws", "other", "x"]);
    const name = g.rules[2].body;
    expect(name.k).toBe("alt");
    if (name.k !== "alt") return;
    expect(name.alts.length).toBe(2);
    expect(name.alts[1]).toEqual({ k: "seq", items: [{ k: "lit", cps: [0xe9, 0x41, 0x1f600, 9, 10, 13, 92, 34, 91, 93] }] });
    const other = g.rules[4].body;
    if (other.k !== "alt") throw new Error("alt expected");
    const items = (other.alts[0] as { items: { k: string; min?: number; max?: number }[] }).items;
    expect(items.map((i) => i.k)).toEqual(["rep", "any", "cls", "rep", "rep", "rep"]);
    expect(items.slice(3).map((i) => [i.min, i.max])).toEqual([[3, 3], [2, Infinity], [1, 4]]);
    expect(() => compileGrammar(g.text)).not.toThrow();
  });

  test("class ranges, negation, '-' first or last is literal, raw UTF-8", () => {
    const text = `root ::= [^a-z0-9] [-az] [az-] [é-ü😀]`;
    const g = parseGbnf(text);
    const items = (g.rules[0].body as { alts: { items: unknown[] }[] }).alts[0].items;
    expect(items).toEqual([
      { k: "cls", neg: true, ranges: [[97, 122], [48, 57]], at: text.indexOf("[^") },
      { k: "cls", neg: false, ranges: [[45, 45], [97, 97], [122, 122]], at: text.indexOf("[-az]") },
      { k: "cls", neg: false, ranges: [[97, 97], [122, 122], [45, 45]], at: text.indexOf("[az-]") },
      { k: "cls", neg: false, ranges: [[0xe9, 0xfc], [0x1f600, 0x1f600]], at: text.indexOf("[é") },
    ]);
  });

  test("empty alternatives and empty literals", () => {
    expect(compileGrammar(`root ::= | "a"`).matches("")).toBe(true);
    expect(compileGrammar(`root ::= "" "a" ""`).matches("a")).toBe(true);
    expect(compileGrammar(`root ::= "a" |\n`).matches("")).toBe(true);
  });

  test("a rule name followed by ::= starts the next rule", () => {
    expect(parseGbnf(`root ::=\nx ::= "x"`).rules.map((r) => r.name)).toEqual(["root", "x"]);
  });
});

describe("GBNF errors name the line and column", () => {
  const cases: [string, string, number, number][] = [
    ['root ::= "abc', "unterminated string literal", 1, 10],
    ['root ::= "a"\nfoo ::= [a-z', "unterminated character class", 2, 9],
    ['root ::= "a"\n  bad', "expecting '::=' after rule name \"bad\", found end of input", 2, 6],
    ['root ::= "a"\n  ::= "b"', "expecting a rule name", 2, 3],
    ["root ::= ( \"a\" | \"b\"", "expecting ')'", 1, 21],
    ['root ::= "a" )', "unmatched ')'", 1, 14],
    ["root = \"a\"", "expecting '::='", 1, 6],
    ['root ::= "a" | * "b"', "no preceding item", 1, 16],
    ['root ::= "a"{2,1}', "max < min", 1, 16],
    ['root ::= "a"{x}', "expecting an integer", 1, 14],
    ['root ::= "a"{2;}', "expecting ',' or '}'", 1, 15],
    ['root ::= "a"{99999}', "over the limit", 1, 14],
    ['root ::= "\\q"', "unknown escape \\q", 1, 11],
    ['root ::= "\\x4"', "expecting 2 hex digits", 1, 11],
    ['root ::= "\\ud800"', "surrogate", 1, 11],
    ['root ::= "\\U00110000"', "beyond U+10FFFF", 1, 11],
    ["root ::= [z-a]", "backwards", 1, 11],
    ["root ::= []", "empty character class", 1, 10],
    ["root ::= \"a\" $", "expecting newline or end of rule", 1, 14],
    ["\n\nroot ::= x y\nx ::= \"x\"", "undefined rule \"y\"", 3, 12],
    ['root ::= "a"\nroot ::= "b"', "defined twice (first at line 1, column 1)", 2, 1],
    ['rot ::= "a"', 'no rule named "root"', 1, 1],
  ];
  for (const [text, msg, line, col] of cases)
    test(`${JSON.stringify(text)} -> ${msg}`, () => {
      const e = err(text);
      expect(e.message).toContain(msg);
      expect([e.line, e.col]).toEqual([line, col]);
      expect(e.message).toContain(`line ${line}, column ${col}`);
    });
});

describe("grammar structure errors", () => {
  test("direct left recursion", () => {
    const e = err(`root ::= expr\nexpr ::= expr "+" term | term\nterm ::= [0-9]`);
    expect(e.message).toContain("left recursion: expr -> expr");
    expect(e.rule).toBe("expr");
    expect(e.line).toBe(2);
  });
  test("indirect left recursion through a nullable prefix", () => {
    const e = err(`root ::= a\na ::= opt b "x"\nb ::= opt a | "y"\nopt ::= "o"?`);
    expect(e.message).toMatch(/left recursion: (a -> b -> a|b -> a -> b)/);
  });
  test("a repetition of something that can match empty", () => {
    const e = err(`root ::= ("a"?)* "b"`);
    expect(e.message).toContain("left recursion");
    expect(e.message).toContain("repetition");
  });
  test("right recursion is fine; a root that can never finish is not", () => {
    expect(compileGrammar(`root ::= "a" root | "b"`).matches("aaab")).toBe(true);
    const e = err(`root ::= "a" root`);
    expect(e.message).toContain("can never finish");
  });
  test("a negated class that excludes everything", () => {
    const e = err(`root ::= [^\\x00-\\U0010FFFF]`);
    expect(e.message).toContain("matches nothing");
  });
});
