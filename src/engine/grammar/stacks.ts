// The byte matcher: llama.cpp-style pushdown stacks, determinized lazily. A stack is an interned
// cons list of grammar positions still to match (top first); after expansion every top is a
// terminal, or the stack is empty (= the grammar may end here). A set of stacks is a DState,
// interned by its members, whose 256 byte transitions are computed on first use and memoized: the
// grammar runs as a lazily built DFA, so a trie walk over a vocabulary costs one array lookup per
// trie node once warm. Holds the intern tables (bounded: cleared, never corrupted, when they grow
// past a budget) and, per DState, the cached token mask for one vocabulary.
import { END, symRule, type CompiledGrammar } from "./compile.ts";

export class Stack {
  kids: Map<number, Stack> | null = null; // interning: pos -> the stack with that pos on top of this
  exp: Stack[] | null = null; // memoized expansion
  mark = 0;
  constructor(readonly pos: number, readonly next: Stack | null, readonly id: number) {}
}

export class DState {
  next: (DState | undefined)[] | null = null; // byte -> state, filled lazily
  forced = -2; // the only possible next byte, -1 when none or several, -2 not computed yet
  mask: Uint32Array | null = null; // allowed-token bitset for `maskOwner`
  maskOwner: object | null = null;
  nAllowed = 0;
  constructor(readonly stacks: Stack[], readonly complete: boolean, readonly id: number) {}
  /** true when nothing can follow (dead, or only the end of the grammar) */
  get final(): boolean { return this.stacks.every((s) => s.pos < 0); }
}

const MAX_STACKS = 1_000_000;
const MAX_STATES = 50_000; // each holds a 256-slot transition array once stepped

export class Matcher {
  readonly sym: Int32Array;
  readonly bits: Uint32Array;
  readonly dead: DState;
  private empty!: Stack;
  private states!: Map<string, DState>;
  private nStacks = 0;
  private ids = 1; // stack and state ids are never reused, even across table resets
  private gen = 0;
  private root!: DState;

  constructor(readonly g: CompiledGrammar) {
    this.sym = g.sym;
    this.bits = g.termBits;
    this.dead = new DState([], false, 0);
    this.reset();
  }

  /** Drop the intern tables (states already handed out stay valid; they just stop being shared). */
  private reset(): void {
    this.empty = new Stack(-1, null, this.ids++);
    this.states = new Map();
    this.nStacks = 0;
    this.root = this.intern([...this.expand(this.push(this.g.start, this.empty))]);
  }

  initial(): DState {
    if (this.nStacks > MAX_STACKS || this.states.size > MAX_STATES) this.reset();
    return this.root;
  }

  push(pos: number, next: Stack): Stack {
    if (next.kids === null) next.kids = new Map();
    let s = next.kids.get(pos);
    if (s === undefined) { s = new Stack(pos, next, this.ids++); next.kids.set(pos, s); this.nStacks++; }
    return s;
  }

  /** All stacks reachable from `s` without consuming a byte whose top is a terminal, or empty. */
  expand(s: Stack): Stack[] {
    if (s.exp !== null) return s.exp;
    const sym = this.sym;
    let out: Stack[];
    if (s.pos < 0 || sym[s.pos] >= 0) out = [s];
    else {
      const rule = symRule(sym[s.pos]);
      const cont = sym[s.pos + 1] === END ? s.next! : this.push(s.pos + 1, s.next!);
      const seen = new Set<Stack>();
      out = [];
      for (const a of this.g.ruleAlts[rule]) {
        const sub = this.expand(sym[a] === END ? cont : this.push(a, cont));
        for (const x of sub) if (!seen.has(x)) { seen.add(x); out.push(x); }
      }
    }
    s.exp = out;
    return out;
  }

  private intern(stacks: Stack[]): DState {
    if (stacks.length === 0) return this.dead;
    stacks.sort((a, b) => a.id - b.id);
    let key = "";
    for (const s of stacks) key += s.id + ",";
    let st = this.states.get(key);
    if (st === undefined) {
      st = new DState(stacks, stacks.some((s) => s.pos < 0), this.ids++);
      this.states.set(key, st);
    }
    return st;
  }

  /** The state after byte `b` (memoized; `dead` when no stack accepts b). */
  step(st: DState, b: number): DState {
    if (st.next === null) st.next = new Array(256);
    const hit = st.next[b];
    if (hit !== undefined) return hit;
    const sym = this.sym, bits = this.bits, gen = ++this.gen, word = b >>> 5, bit = 1 << (b & 31);
    const out: Stack[] = [];
    for (const s of st.stacks) {
      if (s.pos < 0 || (bits[(sym[s.pos] << 3) | word] & bit) === 0) continue;
      const nx = sym[s.pos + 1] === END ? s.next! : this.push(s.pos + 1, s.next!);
      for (const x of this.expand(nx)) if (x.mark !== gen) { x.mark = gen; out.push(x); }
    }
    const res = this.intern(out);
    st.next[b] = res;
    return res;
  }

  /** The single byte every stack of `st` requires next, or -1 (several, none, or st may end). */
  forcedByte(st: DState): number {
    if (st.forced !== -2) return st.forced;
    let f = -1;
    if (!st.complete && st.stacks.length) {
      const acc = new Uint32Array(8);
      for (const s of st.stacks) { const t = this.sym[s.pos] << 3; for (let w = 0; w < 8; w++) acc[w] |= this.bits[t + w]; }
      let n = 0;
      for (let w = 0; w < 8; w++) for (let x = acc[w]; x !== 0; x &= x - 1) { n++; f = w * 32 + (31 - Math.clz32(x & -x)); }
      if (n !== 1) f = -1;
    }
    st.forced = f;
    return f;
  }
}
