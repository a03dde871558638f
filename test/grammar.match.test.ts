// The byte matcher (pushdown stacks, lazily determinized): whole-string matches, prefixes, UTF-8
// handling of classes over code points, agreement with equivalent JS regular expressions on random
// strings, ambiguous and deeply nested grammars, and forcedBytes.
import { describe, expect, test } from "bun:test";
import { compileGrammar, TokenVocab } from "../src/engine/grammar/index.ts";
import { Rng } from "../src/engine/sampler.ts";

const dec = new TextDecoder();

describe("matcher: whole strings", () => {
  const table: [string, string[], string[]][] = [
    [`root ::= "a"{2,4}`, ["aa", "aaa", "aaaa"], ["", "a", "aaaaa", "ab"]],
    [`root ::= "a"{3}`, ["aaa"], ["aa", "aaaa"]],
    [`root ::= "a"{2,} "b"`, ["aab", "aaaaaab"], ["ab", "aa"]],
    [`root ::= ("x" | "yz")+ "!"?`, ["x", "yzx!", "xxyz"], ["", "y", "!", "x!!"]],
    [`root ::= [0-9a-fA-F]{4}`, ["00ff", "BEEF"], ["0fg0", "123"]],
    [`root ::= "say " ("hi" | "hello") "."`, ["say hi.", "say hello."], ["say hey.", "say hi"]],
    [`root ::= [^"\\\\]* "\\""`, ['abc"', '"', 'é😀"'], ['a\\"', "abc"]],
    [`root ::= . . .`, ["abc", "é€😀", "a\nb"], ["ab", "abcd"]],
    [`root ::= [а-я]+`, ["привет"], ["hello", "при вет"]],
    [`root ::= "\\x00" [\\x01-\\x1f]`, ["\u0000\u0001"], ["\u0000 "]],
  ];
  for (const [gbnf, yes, no] of table)
    test(gbnf, () => {
      const g = compileGrammar(gbnf);
      for (const s of yes) expect([s, g.matches(s)]).toEqual([s, true]);
      for (const s of no) expect([s, g.matches(s)]).toEqual([s, false]);
    });

  test("arithmetic (llama.cpp example, right-recursive)", () => {
    const g = compileGrammar(`root  ::= (expr "=" ws term "\\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \\t\\n]*`);
    expect(g.matches("1+2=3\n")).toBe(true);
    expect(g.matches("(a +2)*b = x1\n(1)=2\n")).toBe(true);
    expect(g.matches("(a + 2)=1\n")).toBe(false); // no space after an operator
    expect(g.matches("1+=3\n")).toBe(false);
    expect(g.matches("(1=2\n")).toBe(false);
  });
});

describe("matcher: UTF-8 at the byte level", () => {
  const g = compileGrammar(`root ::= .`);
  test("`.` accepts one code point of each encoded length", () => {
    for (const s of ["a", "\u007f", "\u0080", "é", "\u07ff", "\u0800", "€", "\uffff", "😀", "\u{10ffff}"]) expect([s, g.matches(s)]).toEqual([s, true]);
  });
  test("invalid UTF-8 is rejected byte by byte", () => {
    const bad = [[0x80], [0xc0, 0x80], [0xc1, 0xbf], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xf5, 0x80, 0x80, 0x80], [0xff], [0xc3]];
    for (const b of bad) expect([b, g.matches(Uint8Array.from(b))]).toEqual([b, false]);
    expect(g.isPrefix(Uint8Array.of(0xc3))).toBe(true); // half of "é" may still be completed
    expect(g.isPrefix(Uint8Array.of(0xed, 0xa0))).toBe(false); // a surrogate's encoding never is
  });
  test("negated class over code points", () => {
    const n = compileGrammar(`root ::= [^aé]`);
    expect(n.matches("b")).toBe(true);
    expect(n.matches("è")).toBe(true);
    expect(n.matches("😀")).toBe(true);
    expect(n.matches("é")).toBe(false);
    expect(n.matches("a")).toBe(false);
  });
});

describe("matcher agrees with JS regular expressions on random strings", () => {
  const cases: [string, RegExp, string[]][] = [
    [`root ::= ("a" | "bc")* [x-z]{1,3}`, /^(?:a|bc)*[x-z]{1,3}$/u, ["a", "b", "c", "x", "y"]],
    [`root ::= [^a-c]+ "!"?`, /^[^a-c]+!?$/u, ["a", "d", "é", "😀", "!", "\n"]],
    [`root ::= ("ab" | "a")* "b"`, /^(?:ab|a)*b$/u, ["a", "b"]],
    [`root ::= .{2,3} "x"`, /^[\s\S]{2,3}x$/u, ["x", "é", "😀", "\n"]],
    [`root ::= "-"? ([0-9] | [1-9] [0-9]{0,3}) ("." [0-9]+)?`, /^-?(?:[0-9]|[1-9][0-9]{0,3})(?:\.[0-9]+)?$/u, ["-", "0", "1", "9", "."]],
  ];
  const rng = new Rng(7);
  for (const [gbnf, re, alphabet] of cases)
    test(gbnf, () => {
      const g = compileGrammar(gbnf);
      let yes = 0;
      for (let k = 0; k < 600; k++) {
        let s = "";
        const n = Math.floor(rng.next() * 9);
        for (let i = 0; i < n; i++) s += alphabet[Math.floor(rng.next() * alphabet.length)];
        const want = re.test(s);
        expect([s, g.matches(s)]).toEqual([s, want]);
        if (want) {
          yes++;
          const b = new TextEncoder().encode(s);
          for (let i = 0; i <= b.length; i++) expect(g.isPrefix(b.subarray(0, i))).toBe(true);
        }
      }
      expect(yes).toBeGreaterThan(5); // the sample reaches the accepting side too
    });

  test("balanced parentheses (not regular) against a counter", () => {
    const g = compileGrammar(`root ::= ( "(" root ")" )*`);
    for (let k = 0; k < 400; k++) {
      let s = "", depth = 0, ok = true;
      const n = Math.floor(rng.next() * 12);
      for (let i = 0; i < n; i++) {
        const c = rng.next() < 0.5 ? "(" : ")";
        s += c;
        depth += c === "(" ? 1 : -1;
        if (depth < 0) ok = false;
      }
      expect([s, g.matches(s)]).toEqual([s, ok && depth === 0]);
    }
  });
});

describe("matcher: ambiguity and depth", () => {
  test("an ambiguous grammar stays small (stacks are deduplicated)", () => {
    const g = compileGrammar(`root ::= ("a" | "aa" | "aaa")* "b"`);
    expect(g.matches("a".repeat(3000) + "b")).toBe(true);
    expect(g.matches("a".repeat(3000))).toBe(false);
  });
  test("5000 levels of nesting", () => {
    const g = compileGrammar(`root ::= "[" root "]" | "x"`);
    expect(g.matches("[".repeat(5000) + "x" + "]".repeat(5000))).toBe(true);
    expect(g.matches("[".repeat(5000) + "x" + "]".repeat(4999))).toBe(false);
  });
});

describe("forcedBytes", () => {
  const none = new TokenVocab([]);
  test("follows single-choice bytes up to a choice, without moving the state", () => {
    const s = compileGrammar(`root ::= "hello" (" world" | " there") "!"`).state(none);
    expect(dec.decode(s.forcedBytes())).toBe("hello ");
    expect(dec.decode(s.forcedBytes())).toBe("hello "); // unchanged
    expect(s.acceptBytes("hello t")).toBe(true);
    expect(dec.decode(s.forcedBytes())).toBe("here!");
    expect(s.acceptBytes("here!")).toBe(true);
    expect(s.isComplete()).toBe(true);
    expect(s.forcedBytes().length).toBe(0);
  });
  test("stops where the grammar may end, and at the max", () => {
    const s = compileGrammar(`root ::= "ab" "c"?`).state(none);
    expect(dec.decode(s.forcedBytes())).toBe("ab");
    const t = compileGrammar(`root ::= "abcdef"`).state(none);
    expect(dec.decode(t.forcedBytes(3))).toBe("abc");
  });
  test("forced multi-byte characters and across rules", () => {
    const s = compileGrammar(`root ::= a b\na ::= "é"\nb ::= "😀" [xy]`).state(none);
    expect(dec.decode(s.forcedBytes())).toBe("é😀");
  });
});
