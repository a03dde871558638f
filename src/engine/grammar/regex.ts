// Regular expressions (vLLM's guided_regex / structured_outputs.regex) as GBNF whose language is the strings the
// pattern matches whole (`regexToGbnf`; the supported subset of JS / Python syntax is listed there), and JSON
// Schema's `pattern` (`regexJsonString`): the characters as a JSON string spells them, and a search unless
// anchored. Unsupported syntax is a GrammarError naming the offset. Pure.
import { GrammarError } from "./errors.ts";
import { gbnfLiteral } from "./literal.ts";

type Ranges = [number, number][];
const MAX_CP = 0x10ffff;
const DIGIT: Ranges = [[48, 57]], WORD: Ranges = [[48, 57], [65, 90], [95, 95], [97, 122]];
const SPACE: Ranges = [[9, 13], [32, 32], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029],
  [0x202f, 0x202f], [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff]];

/** the code points not in r (r sorted, disjoint) */
function complement(r: Ranges): Ranges {
  const out: Ranges = [];
  let lo = 0;
  for (const [a, b] of normalize(r)) { if (a > lo) out.push([lo, a - 1]); lo = b + 1; }
  if (lo <= MAX_CP) out.push([lo, MAX_CP]);
  return out;
}
function normalize(r: Ranges): Ranges {
  const s = r.slice().sort((x, y) => x[0] - y[0]), out: Ranges = [];
  for (const [a, b] of s) { const l = out[out.length - 1]; if (l && a <= l[1] + 1) l[1] = Math.max(l[1], b); else out.push([a, b]); }
  return out;
}
const esc = (c: number) => (c <= 0xffff ? `\\u${c.toString(16).padStart(4, "0")}` : `\\U${c.toString(16).padStart(8, "0")}`);
const cls = (r: Ranges) => `[${normalize(r).map(([a, b]) => (a === b ? esc(a) : `${esc(a)}-${esc(b)}`)).join("")}]`;

/** a code point as a JSON string spells it (JSON.stringify's escapes; DEL as \u007f, as schema.ts's `char` wants) */
function jsonSpelling(c: number): string {
  const short: Record<number, string> = { 34: String.raw`\\\"`, 92: String.raw`\\\\`, 8: String.raw`\\b`, 12: String.raw`\\f`, 10: String.raw`\\n`, 13: String.raw`\\r`, 9: String.raw`\\t` };
  if (c in short) return `"${short[c]}"`;
  return c < 0x20 || c === 0x7f ? `"${String.raw`\\u`}${c.toString(16).padStart(4, "0")}"` : gbnfLiteral(String.fromCodePoint(c));
}
/** a class of code points as JSON string characters: the ones written as themselves in one class, the others spelled */
function jsonClass(r: Ranges): string {
  const raw: Ranges = [], spelled: number[] = [];
  for (const [a, b] of normalize(r)) {
    let lo = a;
    for (const sp of [...Array(32).keys(), 34, 92, 0x7f]) {
      if (sp < lo || sp > b) continue;
      if (sp > lo) raw.push([lo, sp - 1]);
      spelled.push(sp);
      lo = sp + 1;
    }
    if (lo <= b) raw.push([lo, b]);
  }
  const noSurrogates = raw.flatMap(([a, b]): Ranges => (b < 0xd800 || a > 0xdfff ? [[a, b]]
    : [...(a < 0xd800 ? [[a, 0xd7ff] as [number, number]] : []), ...(b > 0xdfff ? [[0xe000, b] as [number, number]] : [])]));
  const alts = [...(noSurrogates.length ? [cls(noSurrogates)] : []), ...spelled.map(jsonSpelling)];
  return alts.length === 1 ? alts[0] : `(${alts.join(" | ")})`;
}

class RegexToGbnf {
  i = 0;
  anchoredStart = false;
  anchoredEnd = false;
  topAlts = 0;
  /** json: characters as a JSON string spells them */
  constructor(readonly s: string, readonly json = false) {}
  lit(c: number): string { return this.json ? jsonSpelling(c) : gbnfLiteral(String.fromCodePoint(c)); }
  set(r: Ranges): string { return this.json ? jsonClass(r) : cls(r); }
  fail(msg: string, at = this.i): never { throw new GrammarError(`regex: ${msg} at offset ${at}`); }
  peek(): string | undefined { return this.s[this.i]; }
  eat(ch: string): boolean { if (this.s[this.i] === ch) { this.i++; return true; } return false; }

  /** alternatives up to `)` or the end */
  alt(top = false): string {
    const alts = [this.seq()];
    while (this.eat("|")) alts.push(this.seq());
    if (top) this.topAlts = alts.length;
    return alts.length === 1 ? alts[0] : `(${alts.join(" | ")})`;
  }

  seq(): string {
    const items: string[] = [];
    for (let c = this.peek(); c !== undefined && c !== "|" && c !== ")"; c = this.peek()) {
      const at = this.i, atom = this.atom();
      if (atom === null) continue;
      const q = this.quantifier(at);
      items.push(q ? `(${atom})${q}` : atom);
    }
    return items.length ? items.join(" ") : '""';
  }

  /** one atom as GBNF text, or null for an anchor that is allowed where it stands */
  atom(): string | null {
    const at = this.i, c = this.s[this.i++];
    if (c === "^") { if (at !== 0) this.fail("^ inside the pattern (only a leading one is supported)", at); this.anchoredStart = true; return null; }
    if (c === "$") { if (this.i !== this.s.length) this.fail("$ inside the pattern (only a trailing one is supported)", at); this.anchoredEnd = true; return null; }
    if (c === "(") {
      if (this.eat("?")) {
        if (this.eat(":")) { /* non-capturing */ }
        else if (this.s.startsWith("P<", this.i) || (this.peek() === "<" && this.s[this.i + 1] !== "=" && this.s[this.i + 1] !== "!")) {
          const close = this.s.indexOf(">", this.i);
          if (close < 0) this.fail("unterminated group name", at);
          this.i = close + 1;
        } else this.fail("lookarounds and inline flags are not supported", at);
      }
      const inner = this.alt();
      if (!this.eat(")")) this.fail("unclosed (", at);
      return `(${inner})`;
    }
    if (c === ")") this.fail("unmatched )", at);
    if (c === "[") return this.classAtom(at);
    if (c === ".") return this.set(complement(this.json ? [[10, 10], [13, 13], [0x2028, 0x2029]] : [[10, 10]])); // (ECMA / Python)
    if (c === "*" || c === "+" || c === "?" || (c === "{" && /^\{\d+(,\d*)?\}/.test(this.s.slice(at)))) this.fail(`'${c}' has nothing to repeat`, at);
    if (c === "\\") {
      const e = this.escape(at, false);
      if (e === "anchor") { if (at === 0) this.anchoredStart = true; else this.anchoredEnd = true; return null; }
      return typeof e === "number" ? this.lit(e) : this.set(e);
    }
    const cp = this.s.codePointAt(at)!;
    if (cp > 0xffff) this.i++;
    return this.lit(cp);
  }

  /** after a backslash: a code point, a class (\d ...), or "anchor" (\A \Z \z where allowed) */
  escape(at: number, inClass: boolean): number | Ranges | "anchor" {
    const c = this.s[this.i++];
    if (c === undefined) this.fail("a trailing backslash", at);
    const simple: Record<string, number> = { n: 10, t: 9, r: 13, f: 12, v: 11, "0": 0 };
    if (c in simple) return simple[c];
    const sets: Record<string, Ranges> = { d: DIGIT, w: WORD, s: SPACE, D: complement(DIGIT), W: complement(WORD), S: complement(SPACE) };
    if (c in sets) return sets[c];
    if (c === "x" || c === "u") {
      let hex: string;
      if (c === "u" && this.peek() === "{") { const close = this.s.indexOf("}", this.i); hex = close < 0 ? "" : this.s.slice(this.i + 1, close); this.i = close + 1; }
      else { hex = this.s.slice(this.i, this.i + (c === "x" ? 2 : 4)); this.i += hex.length; }
      const v = /^[0-9a-fA-F]+$/.test(hex) ? parseInt(hex, 16) : NaN;
      if (!(v <= MAX_CP)) this.fail(`a bad \\${c} escape`, at);
      return v;
    }
    if (!inClass && (c === "A" || ((c === "Z" || c === "z") && this.i === this.s.length))) {
      if (c === "A" && at !== 0) this.fail("\\A inside the pattern", at);
      return "anchor";
    }
    if (/[A-Za-z0-9]/.test(c)) this.fail(`\\${c} is not supported (backreferences, \\b, \\p{..} and the like)`, at);
    return c.codePointAt(0)!; // escaped punctuation: itself
  }

  classAtom(at: number): string {
    const neg = this.eat("^"), ranges: Ranges = [];
    let first = true;
    while (this.peek() !== "]" || first) {
      if (this.peek() === undefined) this.fail("unclosed [", at);
      first = false;
      const lo = this.classChar();
      if (typeof lo !== "number") { ranges.push(...lo); continue; }
      if (this.peek() === "-" && this.s[this.i + 1] !== "]" && this.s[this.i + 1] !== undefined) {
        this.i++;
        const hi = this.classChar();
        if (typeof hi !== "number" || hi < lo) this.fail("a bad range in a class", at);
        ranges.push([lo, hi]);
      } else ranges.push([lo, lo]);
    }
    this.i++; // ]
    const r = neg ? complement(ranges) : ranges;
    if (r.length === 0) this.fail("a class that matches nothing", at);
    return this.set(r);
  }

  classChar(): number | Ranges {
    const at = this.i;
    if (this.eat("\\")) {
      const e = this.escape(at, true);
      return e === "anchor" ? this.fail("an anchor inside a class", at) : e;
    }
    const cp = this.s.codePointAt(this.i)!;
    this.i += cp > 0xffff ? 2 : 1;
    return cp;
  }

  /** a quantifier after an atom, as GBNF postfix text ("" when none); lazy forms are the same language */
  quantifier(atomAt: number): string {
    const c = this.peek();
    let q = "";
    if (c === "*" || c === "+" || c === "?") { this.i++; q = c; }
    else if (c === "{") {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.s.slice(this.i));
      if (!m) return ""; // a literal { (as Python reads one that is not a quantifier)
      const lo = Number(m[1]), hi = m[2] === undefined ? lo : m[3] === "" ? Infinity : Number(m[3]);
      if (hi < lo) this.fail("a repetition with max < min", this.i);
      this.i += m[0].length;
      q = hi === lo ? `{${lo}}` : hi === Infinity ? `{${lo},}` : `{${lo},${hi}}`;
    } else return "";
    if (this.eat("?")) { /* lazy: the same strings */ }
    if (this.peek() === "*" || this.peek() === "+" || this.peek() === "?" || this.peek() === "{")
      if (this.peek() !== "{" || /^\{\d/.test(this.s.slice(this.i))) this.fail("a quantifier after a quantifier", atomAt);
    return q;
  }
}

/** GBNF (start rule `root`) for the strings `pattern` matches whole; GrammarError naming the offset when unsupported.
 *  The subset that denotes a regular language: literals and escapes (\n \t \r \f \v \0 \xHH \uHHHH \u{H..} and
 *  escaped punctuation), classes with ranges and negation, \d \w (ASCII) and \s (JS's whitespace), their negations
 *  \D \W \S, `.` (any character but a newline; for JSON Schema, ECMA's line terminators), groups (capturing,
 *  non-capturing, named), `|`, and the quantifiers * + ? {m} {m,} {m,n} (their lazy forms match the same strings).
 *  A leading ^ (or \A) and a trailing $ (or \Z, \z) are accepted: the match is whole anyway. Backreferences,
 *  lookarounds, \b, inner anchors and other escapes are refused. */
export function regexToGbnf(pattern: string): string {
  const p = new RegexToGbnf(pattern), body = p.alt(true);
  if (p.i < pattern.length) p.fail("unmatched )", p.i);
  return `root ::= ${body}\n`;
}

/**
 * A GBNF expression for the inside of a JSON string (without its quotes) whose value JSON Schema's `pattern` accepts:
 * a search (ECMA-262), so `anyChar` (a rule for one JSON string character) may come before unless the pattern starts
 * with ^, and after unless it ends with $. Anchors beside a top-level | are refused (they bind to one alternative).
 */
export function regexJsonString(pattern: string, anyChar: string): string {
  const p = new RegexToGbnf(pattern, true), body = p.alt(true);
  if (p.i < pattern.length) p.fail("unmatched )", p.i);
  if (p.topAlts > 1 && (p.anchoredStart || p.anchoredEnd)) p.fail("^ or $ beside a top-level | (anchor a group instead)", 0);
  return `${p.anchoredStart ? "" : `${anyChar}* `}(${body})${p.anchoredEnd ? "" : ` ${anyChar}*`}`;
}
