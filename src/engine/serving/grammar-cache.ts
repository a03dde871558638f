// Constrained output in the engine worker: compiled grammars cached by GBNF text (a small LRU; a
// compiled Grammar is shareable and keeps its own DFA-state and token-mask caches) and the ONE
// TokenVocab of the model (token id -> bytes, end ids = the model's stop ids) they all mask over,
// built on first use. A compile is bounded (engine/grammar/limits.ts: text size, symbols, nesting, the start
// state's stacks), so one request cannot stall the decoding of the others for long. State: the LRU map and the vocabulary.
import { compileGrammar, type Grammar, type GrammarState, type TokenVocab } from "../grammar/index.ts";
import type { GrammarSpec } from "./protocol.ts";

export type GrammarResult = { ok: true; gs: GrammarState } | { ok: false; detail: string };

const msg = (e: unknown) => (e instanceof Error ? e.message : String(e));

export class GrammarCache {
  private lru = new Map<string, Grammar>();   // insertion order = least recently used first
  private vocab: TokenVocab | null = null;

  constructor(private readonly makeVocab: () => TokenVocab, readonly size = 8) {}

  /** A fresh generation state of `spec`, or why it cannot be had (detail starts with spec.field). */
  state(spec: GrammarSpec): GrammarResult {
    try {
      this.vocab ??= this.makeVocab();
    } catch (e) {
      return { ok: false, detail: `${spec.field} constrained output is not available for this tokenizer: ${msg(e)}` };
    }
    let g = this.lru.get(spec.gbnf);
    if (g) this.lru.delete(spec.gbnf);
    else {
      try {
        g = compileGrammar(spec.gbnf);
      } catch (e) {
        return { ok: false, detail: `${spec.field} ${msg(e)}` }; // GrammarError names line/column/rule
      }
      while (this.lru.size >= this.size) this.lru.delete(this.lru.keys().next().value!);
    }
    this.lru.set(spec.gbnf, g);
    try {
      return { ok: true, gs: g.state(this.vocab) };
    } catch (e) {
      return { ok: false, detail: `${spec.field} ${msg(e)}` }; // its start state is too ambiguous
    }
  }

  /** Cached grammars (for tests). */
  get cached(): number { return this.lru.size; }
}
