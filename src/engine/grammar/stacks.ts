// The byte matcher: llama.cpp-style pushdown stacks, determinized lazily. A stack is an interned cons list of
// grammar positions still to match (top first); after expansion every top is a terminal, or the stack is empty
// (= the grammar may end here). A set of stacks is a DState, interned by its members, whose 256 byte transitions
// are memoized on first use: a lazily built DFA, so a warm trie walk over a vocabulary costs one lookup per node.
// State: the intern tables (bounded: cleared, never corrupted, when they grow past a budget) and, per DState, the
// cached token mask for one vocabulary. Per-operation bounds: on Matcher.
import { END, symRule, type CompiledGrammar } from "./compile.ts";
import { GrammarError } from "./errors.ts";
import { MAX_HELD_STACKS, MAX_LIVE_STACKS, STEP_WORK } from "./limits.ts";

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

const MAX_STATES = 50_000; // each holds a 256-slot transition array once stepped
const MAX_EXPAND_DEPTH = 3000; // expand's recursion (rules and nullable continuations entered before a byte)

const ambiguous = (what: string) => new GrammarError(`grammar is too ambiguous: ${what} (merge alternatives that start alike)`);

/** Bounded per operation too (limits.ts): a state may hold at most MAX_LIVE_STACKS stacks, and each mask / token /
 *  start may spend STEP_WORK stack visits (budget()); past either a GrammarError names the grammar as too ambiguous,
 *  so an exponentially ambiguous grammar fails fast instead of doubling its stacks per byte. */
export class Matcher {
  readonly sym: Int32Array;
  readonly bits: Uint32Array;
  readonly dead: DState;
  private empty!: Stack;
  private states!: Map<string, DState>;
  private nStacks = 0; // stacks interned, plus stacks listed by interned states
  private work = 0; // stack visits so far; an operation may go up to `limit`
  private limit = STEP_WORK;
  private units = STEP_WORK; // the current operation's budget
  private depth = 0; // expand's recursion
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
    if (this.nStacks > MAX_HELD_STACKS || this.states.size > MAX_STATES) { this.budget(); this.reset(); }
    return this.root;
  }

  /** Start an operation (a mask, a token, a start): it may spend `units` stack visits before a GrammarError. */
  budget(units = STEP_WORK): void { this.limit = this.work + units; this.units = units; }

  private spend(n: number): void {
    this.work += n;
    if (this.work > this.limit) this.depth = 0;
    if (this.work > this.limit) throw ambiguous(`one step needs over ${this.units} parse-stack visits`);
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
      if (++this.depth > MAX_EXPAND_DEPTH) { this.depth = 0; throw ambiguous(`over ${MAX_EXPAND_DEPTH} rules entered before matching a byte`); }
      for (const a of this.g.ruleAlts[rule]) {
        const sub = this.expand(sym[a] === END ? cont : this.push(a, cont));
        this.spend(sub.length);
        for (const x of sub) if (!seen.has(x)) { seen.add(x); out.push(x); }
        if (out.length > MAX_LIVE_STACKS) { this.depth = 0; throw ambiguous(`over ${MAX_LIVE_STACKS} parse stacks alive at once`); }
      }
      this.depth--;
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
      this.nStacks += stacks.length;
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
    this.spend(st.stacks.length);
    for (const s of st.stacks) {
      if (s.pos < 0 || (bits[(sym[s.pos] << 3) | word] & bit) === 0) continue;
      const nx = sym[s.pos + 1] === END ? s.next! : this.push(s.pos + 1, s.next!), exp = this.expand(nx);
      this.spend(exp.length);
      for (const x of exp) if (x.mark !== gen) { x.mark = gen; out.push(x); }
      if (out.length > MAX_LIVE_STACKS) throw ambiguous(`over ${MAX_LIVE_STACKS} parse stacks alive at once`);
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
