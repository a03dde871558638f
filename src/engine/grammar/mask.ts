// Token masks: which token ids can continue the grammar from a DState. One preorder walk of the
// vocabulary trie per (state, vocabulary): each trie node costs one memoized DFA transition, and a
// subtree is skipped as soon as its prefix is rejected. End ids are allowed iff the state is
// complete. Masks are cached on the DState (bounded FIFO per Matcher, ~64 MiB of bitsets). One mask is
// one budgeted matcher operation: a grammar too ambiguous to mask throws GrammarError (stacks.ts).
import type { DState, Matcher } from "./stacks.ts";
import type { TokenVocab } from "../../model/vocab.ts";

const CACHE_BYTES = 64 << 20;
const caches = new WeakMap<Matcher, DState[]>();

/** The allowed-token bitset of `st` (bit id set = allowed), computed or cached. */
export function tokenMask(m: Matcher, st: DState, vocab: TokenVocab): Uint32Array {
  if (st.mask !== null && st.maskOwner === vocab) return st.mask;
  const words = (vocab.size + 31) >>> 5;
  const mask = new Uint32Array(words);
  let allowed = 0;
  if (st.stacks.length !== 0 && !st.final) {
    m.budget();
    const t = vocab.trie, byte = t.byte, depth = t.depth, end = t.end, ts = t.tokStart, te = t.tokEnd, ids = t.ids;
    const path: DState[] = new Array(t.maxDepth + 1);
    path[0] = st;
    for (let v = 1; v < t.n;) {
      const from = path[depth[v] - 1], b = byte[v];
      let nx = from.next !== null ? from.next[b] : undefined;
      if (nx === undefined) nx = m.step(from, b);
      if (nx === m.dead) { v = end[v]; continue; }
      path[depth[v]] = nx;
      for (let k = ts[v], e = te[v]; k < e; k++) { const id = ids[k]; mask[id >>> 5] |= 1 << (id & 31); allowed++; }
      v++;
    }
  }
  if (st.complete) for (const e of vocab.eosIds) if (e < vocab.size && !(mask[e >>> 5] & (1 << (e & 31)))) { mask[e >>> 5] |= 1 << (e & 31); allowed++; }
  st.mask = mask; st.maskOwner = vocab; st.nAllowed = allowed;
  let fifo = caches.get(m);
  if (!fifo) caches.set(m, (fifo = []));
  fifo.push(st);
  const limit = Math.max(4, Math.floor(CACHE_BYTES / (words * 4)));
  while (fifo.length > limit) { const old = fifo.shift()!; old.mask = null; old.maskOwner = null; }
  return mask;
}

/** Set logits of disallowed ids to −Infinity (ids ≥ vocab.size too). Returns the allowed count. */
export function applyMask(mask: Uint32Array, vocabSize: number, logits: Float32Array): number {
  const L = logits.length;
  let n = 0;
  for (let w = 0; w * 32 < L; w++) {
    const bits = w < mask.length ? mask[w] : 0, base = w * 32;
    if (bits === -1 >>> 0 && base + 32 <= vocabSize) { n += Math.min(32, L - base); continue; }
    for (let j = 0; j < 32 && base + j < L; j++) {
      if (base + j < vocabSize && (bits >>> j) & 1) n++;
      else logits[base + j] = -Infinity;
    }
  }
  return n;
}
