// GBNF parser (llama.cpp's dialect): text -> rule definitions as expression trees over code points.
// `name ::= alternates` per rule (a rule ends at a newline outside parentheses; a trailing `|` or an
// open `(` continues it), `|`, sequences, `( )`, postfix `* + ? {m} {m,} {m,n}`, "literals" and
// [classes] with escapes (\x.. \u.... \U........ \t \r \n \\ \" \[ \] \- \^), [^negated], `.`,
// `#` comments. Errors are GrammarErrors naming line and column; text over MAX_GBNF_CHARS and nesting
// (parentheses, stacked repetitions) over MAX_NESTING are refused. Pure; no state between calls.
import { GrammarError, lineCol } from "./errors.ts";
import { MAX_GBNF_CHARS, MAX_NESTING } from "./limits.ts";

export type Expr =
  | { k: "lit"; cps: number[] } // a literal string as code points (may be empty)
  | { k: "cls"; ranges: [number, number][]; neg: boolean; at: number } // code point ranges, inclusive
  | { k: "any"; at: number } // `.`: any code point
  | { k: "ref"; name: string; at: number } // rule reference; `at` = offset in the text
  | { k: "seq"; items: Expr[] }
  | { k: "alt"; alts: Expr[]; at: number } // alternatives (each a seq)
  | { k: "rep"; e: Expr; min: number; max: number; at: number }; // max = Infinity when unbounded

export interface RuleDef { name: string; body: Expr; at: number }
export interface ParsedGrammar { text: string; rules: RuleDef[] }

export const MAX_REPEAT = 10_000;

const isWord = (c: number) =>
  (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 45 || c === 95;
const isDigit = (c: number) => c >= 48 && c <= 57;

class Parser {
  i = 0;
  depth = 0; // open parentheses
  constructor(readonly s: string) {}

  fail(msg: string, at = this.i): never {
    throw new GrammarError(msg, lineCol(this.s, at));
  }
  c(o = 0): number { return this.i + o < this.s.length ? this.s.charCodeAt(this.i + o) : -1; }

  /** Skip spaces, tabs and comments; newlines too when `nl`. */
  space(nl: boolean): void {
    for (;;) {
      const c = this.c();
      if (c === 32 || c === 9 || (nl && (c === 10 || c === 13))) this.i++;
      else if (c === 35) while (this.i < this.s.length && this.c() !== 10 && this.c() !== 13) this.i++;
      else return;
    }
  }

  name(): string {
    const st = this.i;
    while (isWord(this.c())) this.i++;
    if (this.i === st) this.fail(`expecting a rule name, found ${this.show()}`);
    return this.s.slice(st, this.i);
  }

  show(): string {
    if (this.i >= this.s.length) return "end of input";
    const cp = this.s.codePointAt(this.i)!;
    return cp === 10 ? "newline" : JSON.stringify(String.fromCodePoint(cp));
  }

  int(): number {
    const st = this.i;
    while (isDigit(this.c())) this.i++;
    if (this.i === st) this.fail(`expecting an integer, found ${this.show()}`);
    const n = Number(this.s.slice(st, this.i));
    if (n > MAX_REPEAT) this.fail(`repetition count ${n} is over the limit of ${MAX_REPEAT}`, st);
    return n;
  }

  /** One (possibly escaped) code point inside a literal or class. */
  char(): number {
    const at = this.i;
    if (this.i >= this.s.length) this.fail("unexpected end of input");
    if (this.c() !== 92) {
      const cp = this.s.codePointAt(this.i)!;
      this.i += cp > 0xffff ? 2 : 1;
      return cp;
    }
    const e = this.s[this.i + 1];
    this.i += 2;
    const hex = (n: number) => {
      const h = this.s.slice(this.i, this.i + n);
      if (h.length !== n || !/^[0-9a-fA-F]+$/.test(h)) this.fail(`expecting ${n} hex digits after \\${e}`, at);
      this.i += n;
      const cp = parseInt(h, 16);
      if (cp > 0x10ffff) this.fail(`code point U+${h} is beyond U+10FFFF`, at);
      if (cp >= 0xd800 && cp <= 0xdfff) this.fail(`surrogate code point U+${h} cannot be encoded in UTF-8`, at);
      return cp;
    };
    switch (e) {
      case "x": return hex(2);
      case "u": return hex(4);
      case "U": return hex(8);
      case "t": return 9;
      case "r": return 13;
      case "n": return 10;
      case "\\": case '"': case "[": case "]": case "-": case "^": return e.charCodeAt(0);
      default: this.fail(e === undefined ? "unexpected end of input after \\" : `unknown escape \\${e}`, at);
    }
  }

  literal(): Expr {
    const open = this.i++;
    const cps: number[] = [];
    for (;;) {
      if (this.i >= this.s.length) this.fail("unterminated string literal", open);
      if (this.c() === 34) { this.i++; return { k: "lit", cps }; }
      cps.push(this.char());
    }
  }

  cls(): Expr {
    const open = this.i++;
    const neg = this.c() === 94;
    if (neg) this.i++;
    const ranges: [number, number][] = [];
    for (;;) {
      if (this.i >= this.s.length) this.fail("unterminated character class", open);
      if (this.c() === 93) { this.i++; break; }
      const at = this.i;
      const lo = this.char();
      let hi = lo;
      if (this.c() === 45 && this.c(1) !== 93 && this.c(1) !== -1) {
        this.i++;
        hi = this.char();
        if (hi < lo) this.fail(`character range is backwards (U+${lo.toString(16)} > U+${hi.toString(16)})`, at);
      }
      ranges.push([lo, hi]);
    }
    if (!neg && ranges.length === 0) this.fail("empty character class matches nothing", open);
    return { k: "cls", ranges, neg, at: open };
  }

  /** alternates := sequence ("|" sequence)*; `nested` = inside parentheses (newlines are spaces). */
  alternates(nested: boolean): Expr {
    const at = this.i;
    const alts: Expr[] = [this.sequence(nested)];
    while (this.c() === 124) {
      this.i++;
      this.space(true);
      alts.push(this.sequence(nested));
    }
    return { k: "alt", alts, at };
  }

  sequence(nested: boolean): Expr {
    const items: Expr[] = [];
    let reps = 0; // repetitions stacked on the last item
    for (;;) {
      const c = this.c(), at = this.i;
      if (c === 34) items.push(this.literal());
      else if (c === 91) items.push(this.cls());
      else if (c === 46) { this.i++; items.push({ k: "any", at }); }
      else if (c === 40) {
        if (++this.depth > MAX_NESTING) this.fail(`parentheses nest deeper than ${MAX_NESTING}`);
        this.i++;
        this.space(true);
        const e = this.alternates(true);
        this.depth--;
        if (this.c() !== 41) this.fail(`expecting ')' to close the '(' at ${fmt(lineCol(this.s, at))}, found ${this.show()}`);
        this.i++;
        items.push(e);
      } else if (isWord(c)) {
        const save = this.i;
        const name = this.name();
        this.space(false);
        if (this.s.startsWith("::=", this.i)) { this.i = save; break; } // the next rule starts
        this.i = save + name.length;
        items.push({ k: "ref", name, at });
      } else if (c === 42 || c === 43 || c === 63 || c === 123) {
        const last = items.pop();
        if (!last) this.fail(`'${String.fromCharCode(c)}' has no preceding item to repeat`);
        if (++reps + this.depth > MAX_NESTING) this.fail(`repetitions and parentheses nest deeper than ${MAX_NESTING}`);
        this.i++;
        let min = 0, max = Infinity;
        if (c === 43) min = 1;
        else if (c === 63) max = 1;
        else if (c === 123) {
          this.space(nested);
          min = this.int();
          this.space(nested);
          if (this.c() === 125) max = min;
          else if (this.c() === 44) {
            this.i++;
            this.space(nested);
            if (isDigit(this.c())) {
              const mAt = this.i;
              max = this.int();
              if (max < min) this.fail(`repetition {${min},${max}} has max < min`, mAt);
              this.space(nested);
            }
            if (this.c() !== 125) this.fail(`expecting '}', found ${this.show()}`);
          } else this.fail(`expecting ',' or '}', found ${this.show()}`);
          this.i++;
        }
        items.push({ k: "rep", e: last, min, max, at });
      } else break;
      if (c !== 42 && c !== 43 && c !== 63 && c !== 123) reps = 0;
      this.space(nested);
    }
    return { k: "seq", items };
  }

  grammar(): ParsedGrammar {
    const rules: RuleDef[] = [];
    this.space(true);
    while (this.i < this.s.length) {
      const at = this.i;
      const name = this.name();
      this.space(false);
      if (!this.s.startsWith("::=", this.i)) this.fail(`expecting '::=' after rule name ${JSON.stringify(name)}, found ${this.show()}`);
      this.i += 3;
      this.space(true);
      const body = this.alternates(false);
      if (this.c() === 41) this.fail("unmatched ')'");
      if (this.i < this.s.length && this.c() !== 10 && this.c() !== 13 && !isWord(this.c()))
        this.fail(`expecting newline or end of rule, found ${this.show()}`);
      rules.push({ name, body, at });
      this.space(true);
    }
    return { text: this.s, rules };
  }
}

const fmt = (p: { line: number; col: number }) => `line ${p.line}, column ${p.col}`;

/** Parse GBNF text. Throws GrammarError (with line/col) on syntax errors. */
export function parseGbnf(text: string): ParsedGrammar {
  if (text.length > MAX_GBNF_CHARS) throw new GrammarError(`grammar is too large: ${text.length} characters (the limit is ${MAX_GBNF_CHARS})`);
  return new Parser(text).grammar();
}
