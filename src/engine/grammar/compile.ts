// Lower a parsed GBNF grammar to a flat byte-level grammar: every alternative is a run of symbols ended by END in
// one Int32Array; a symbol is a terminal (a 256-bit byte set) or a rule reference. Literals become UTF-8 bytes,
// character classes over code points alternations of UTF-8 byte-range sequences, repetitions generated rules
// (`X*` -> `R ::= X R |`, `{m,n}` -> m copies then nested optionals, like llama.cpp). What it rejects: on `compile`.
// Pure; the result is immutable.
import { GrammarError, lineCol } from "./errors.ts";
import type { Expr, ParsedGrammar } from "./gbnf.ts";
import { MAX_SYMBOLS } from "./limits.ts";
import { MAX_CP, normalizeRanges, utf8, utf8Sequences, type Range } from "./utf8.ts";

export const END = -1;
/** rule id -> symbol and back (symbols <= -2 are rule references) */
export const refSym = (rule: number) => -2 - rule;
export const symRule = (sym: number) => -2 - sym;

export interface CompiledGrammar {
  sym: Int32Array; // alternatives laid out back to back, each ended by END
  ruleAlts: Int32Array[]; // per rule: offsets in `sym` where its alternatives start
  ruleNames: string[];
  termBits: Uint32Array; // 8 words (256 bits) per terminal: bit b set = byte b matches
  start: number; // offset of the synthetic sequence [ref root, END]
  root: number;
}

/** rules reached from one another without consuming a byte (each a recursion of the matcher's expand) */
const MAX_LEFT_DEPTH = 2000;

class Builder {
  names: string[] = [];
  at: number[] = [];
  alts: number[][][] = [];
  byName = new Map<string, number>();
  terms: Uint32Array[] = [];
  termIds = new Map<string, number>();
  classes = new Map<string, number>();
  byteTerms: number[] = [];
  size = 0;

  constructor(readonly text: string) {}

  fail(msg: string, at: number, rule?: string): never {
    throw new GrammarError(msg, { ...lineCol(this.text, at), rule });
  }

  rule(name: string, at: number): number {
    const id = this.names.length;
    this.names.push(name); this.at.push(at); this.alts.push([]);
    return id;
  }

  term(bits: Uint32Array): number {
    const key = bits.join(",");
    let t = this.termIds.get(key);
    if (t === undefined) { t = this.terms.length; this.terms.push(bits); this.termIds.set(key, t); }
    return t;
  }

  byteTerm(lo: number, hi: number): number {
    if (lo === hi && this.byteTerms[lo] !== undefined) return this.byteTerms[lo];
    const bits = new Uint32Array(8);
    for (let b = lo; b <= hi; b++) bits[b >>> 5] |= 1 << (b & 31);
    const t = this.term(bits);
    if (lo === hi) this.byteTerms[lo] = t;
    return t;
  }

  /** A code point class as one symbol: a terminal when all of it is ASCII, else a rule. */
  classSym(ranges: Range[], ctx: string, at: number): number {
    if (ranges.length === 0) this.fail("character class matches nothing", at, ctx);
    const key = JSON.stringify(ranges);
    const hit = this.classes.get(key);
    if (hit !== undefined) return hit;
    const seqs: Range[][] = [];
    for (const [a, b] of ranges) utf8Sequences(a, b, seqs);
    const ascii = new Uint32Array(8);
    let nAscii = 0;
    const multi: number[][] = [];
    for (const s of seqs) {
      if (s.length === 1) { for (let b = s[0][0]; b <= s[0][1]; b++) ascii[b >>> 5] |= 1 << (b & 31); nAscii++; }
      else multi.push(s.map(([lo, hi]) => this.byteTerm(lo, hi)));
    }
    let sym: number;
    if (multi.length === 0) sym = this.term(ascii);
    else {
      const r = this.rule(`${ctx}_class${this.names.length}`, at);
      this.alts[r] = nAscii ? [[this.term(ascii)], ...multi] : multi;
      sym = refSym(r);
    }
    this.classes.set(key, sym);
    return sym;
  }

  seq(e: Expr, out: number[], ctx: string): void {
    switch (e.k) {
      case "lit":
        if (e.cps.length > MAX_SYMBOLS) this.fail(`grammar is too large (a literal of over ${MAX_SYMBOLS} characters)`, 0, ctx);
        for (const cp of e.cps) for (const b of utf8(cp)) out.push(this.byteTerm(b, b));
        break;
      case "cls": out.push(this.classSym(normalizeRanges(e.ranges, e.neg), ctx, e.at)); break;
      case "any": out.push(this.classSym(normalizeRanges([[0, MAX_CP]], false), ctx, e.at)); break;
      case "ref": {
        const id = this.byName.get(e.name);
        if (id === undefined) this.fail(`undefined rule ${JSON.stringify(e.name)}`, e.at, ctx);
        out.push(refSym(id));
        break;
      }
      case "seq": for (const it of e.items) this.seq(it, out, ctx); break;
      case "alt":
        if (e.alts.length === 1) this.seq(e.alts[0], out, ctx);
        else {
          const r = this.rule(`${ctx}_${this.names.length}`, e.at);
          this.alts[r] = e.alts.map((a) => this.body(a, ctx));
          out.push(refSym(r));
        }
        break;
      case "rep": {
        const tmp = this.body(e.e, ctx);
        let x = tmp[0];
        if (tmp.length !== 1) { const r = this.rule(`${ctx}_${this.names.length}`, e.at); this.alts[r] = [tmp]; x = refSym(r); }
        for (let i = 0; i < e.min; i++) out.push(x);
        if (e.max === Infinity) {
          const r = this.rule(`${ctx}_${this.names.length}`, e.at); // R ::= x R | ε
          this.alts[r] = [[x, refSym(r)], []];
          out.push(refSym(r));
        } else if (e.max > e.min) {
          let inner = -1; // nested optionals: O ::= x O' | ε, innermost O ::= x | ε
          for (let i = e.min; i < e.max; i++) {
            const r = this.rule(`${ctx}_${this.names.length}`, e.at);
            this.alts[r] = [inner < 0 ? [x] : [x, refSym(inner)], []];
            inner = r;
          }
          out.push(refSym(inner));
        }
        break;
      }
    }
  }

  body(e: Expr, ctx: string): number[] {
    const out: number[] = [];
    this.seq(e, out, ctx);
    this.size += out.length + 1;
    if (this.size > MAX_SYMBOLS) this.fail(`grammar is too large (over ${MAX_SYMBOLS} symbols after expanding repetitions)`, 0, ctx);
    return out;
  }
}

/** The rules with an alternative whose symbols are all marked rules (or terminals, when `terminals`): nullable
 *  (false) or productive (true) rules. A worklist over "symbols still unmarked" per alternative: linear in size. */
function derives(alts: number[][][], terminals: boolean): boolean[] {
  const mark = alts.map(() => false), need: number[] = [], owner: number[] = [], users: number[][] = alts.map(() => []), todo: number[] = [];
  const set = (r: number) => { if (!mark[r]) { mark[r] = true; todo.push(r); } };
  alts.forEach((as, r) => as.forEach((a) => {
    const id = need.length;
    let n = 0;
    for (const s of a) if (s <= -2) { n++; users[symRule(s)].push(id); } else if (!terminals) n = Infinity;
    need.push(n); owner.push(r);
    if (n === 0) set(r);
  }));
  while (todo.length) for (const id of users[todo.pop()!]) if (--need[id] === 0) set(owner[id]);
  return mark;
}

/** Reject left recursion (a rule reaching itself through a leftmost chain of nullable prefixes) and chains of such
 *  rules over MAX_LEFT_DEPTH long (a depth-first search with its own stack: no recursion). */
function checkLeftRecursion(b: Builder, nullable: boolean[]): void {
  const edges = b.alts.map((alts) => {
    const e = new Set<number>();
    for (const a of alts) for (const s of a) { if (s >= 0) break; e.add(symRule(s)); if (!nullable[symRule(s)]) break; }
    return [...e];
  });
  const color = new Uint8Array(b.alts.length); // 0 new, 1 on path, 2 done
  const depth = new Int32Array(b.alts.length); // longest chain from the rule (done rules)
  const path: number[] = [], at: number[] = []; // the rules on the path and the next edge of each
  for (let r0 = 0; r0 < b.alts.length; r0++) {
    if (color[r0] !== 0) continue;
    color[r0] = 1; path.push(r0); at.push(0);
    while (path.length) {
      const r = path[path.length - 1], k = at[at.length - 1];
      if (k < edges[r].length) {
        at[at.length - 1]++;
        const s = edges[r][k];
        if (color[s] === 1) {
          const cyc = [...path.slice(path.indexOf(s)), s].map((x) => b.names[x]);
          b.fail(`left recursion: ${cyc.join(" -> ")} (a rule may not start with itself, directly or through rules ` +
            `that can match the empty string; a repetition of something that can match empty is left-recursive too)`, b.at[s], b.names[s]);
        }
        if (color[s] === 0) { color[s] = 1; path.push(s); at.push(0); }
        continue;
      }
      let d = 1;
      for (const s of edges[r]) d = Math.max(d, depth[s] + 1);
      if (d > MAX_LEFT_DEPTH)
        b.fail(`rules nest over ${MAX_LEFT_DEPTH} deep before matching a byte (each may start with the next)`, b.at[r], b.names[r]);
      depth[r] = d; color[r] = 2; path.pop(); at.pop();
    }
  }
}

/** Rejects undefined/duplicate rules, left recursion, a root that can never finish, over MAX_SYMBOLS symbols and
 *  rules that nest over MAX_LEFT_DEPTH deep before a byte (the matcher expands them recursively); each check is
 *  linear in the grammar's size. */
export function compile(pg: ParsedGrammar, rootName = "root"): CompiledGrammar {
  const b = new Builder(pg.text);
  for (const d of pg.rules) {
    if (b.byName.has(d.name)) b.fail(`rule ${JSON.stringify(d.name)} is defined twice (first at ${fmtAt(pg.text, b.at[b.byName.get(d.name)!])})`, d.at, d.name);
    b.byName.set(d.name, b.rule(d.name, d.at));
  }
  const root = b.byName.get(rootName);
  if (root === undefined) throw new GrammarError(`no rule named ${JSON.stringify(rootName)} (the start rule)`, { line: 1, col: 1 });
  for (const d of pg.rules) b.alts[b.byName.get(d.name)!] = d.body.k === "alt" ? d.body.alts.map((a) => b.body(a, d.name)) : [b.body(d.body, d.name)];
  checkLeftRecursion(b, derives(b.alts, false));
  if (!derives(b.alts, true)[root]) b.fail(`rule ${JSON.stringify(rootName)} can never finish: every alternative recurses forever`, b.at[root], rootName);

  const flat: number[] = [];
  const ruleAlts = b.alts.map((alts) => Int32Array.from(alts.map((a) => {
    const at = flat.length;
    for (const s of a) flat.push(s);
    flat.push(END);
    return at;
  })));
  const start = flat.length;
  flat.push(refSym(root), END);
  const termBits = new Uint32Array(b.terms.length * 8);
  b.terms.forEach((t, i) => termBits.set(t, i * 8));
  return { sym: Int32Array.from(flat), ruleAlts, ruleNames: b.names, termBits, start, root };
}

function fmtAt(text: string, at: number): string {
  const p = lineCol(text, at);
  return `line ${p.line}, column ${p.col}`;
}
