// Grammar helpers for speculative decoding. `forcedDraft`: draft tokens for the bytes the grammar
// forces next (tokenized, trimmed to whole UTF-8 characters, kept only while the grammar accepts
// them). `maskDraftRows`: mask each verification row with the grammar state at its position, so
// rejection sampling stays lossless with respect to the grammar-masked target. Both take the state
// AFTER the pending token (the caller accepts each sampled token at once) and leave it unchanged.
import { GrammarError } from "./errors.ts";
import type { GrammarState } from "./state.ts";

const dec = new TextDecoder();

/** Length of the longest prefix of `b` that ends on a UTF-8 character boundary. */
function wholeChars(b: Uint8Array): number {
  let i = b.length, back = 0;
  while (i > 0 && back < 4 && (b[i - 1] & 0xc0) === 0x80) { i--; back++; }
  if (i === 0) return 0;
  const lead = b[i - 1], need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  return need === back + 1 ? b.length : i - 1;
}

/**
 * Up to `k` tokens the grammar forces after the current state (`encode`: the tokenizer's
 * text -> ids, e.g. TextCodec.encode). When only an end id can follow, drafts the first end id.
 */
export function forcedDraft(gs: GrammarState, k: number, encode: (text: string) => number[]): number[] {
  if (k <= 0) return [];
  if (gs.isDone()) { const eos = gs.vocab.eosIds; return eos.length && gs.isAllowed(eos[0]) ? [eos[0]] : []; }
  const forced = gs.forcedBytes(1024);
  const n = wholeChars(forced);
  if (n === 0) return [];
  const out: number[] = [], g = gs.clone();
  try {
    for (const id of encode(dec.decode(forced.subarray(0, n)))) {
      if (out.length >= k || !g.isAllowed(id)) break;
      g.accept(id);
      out.push(id);
    }
  } catch (e) { // a grammar too ambiguous to follow: no more drafts (the sampler's mask reports it)
    if (!(e instanceof GrammarError)) throw e;
  }
  return out;
}

/**
 * rows = logits [drafts.length + 1, V]: row j predicts the token after drafts[0..j). Row j is masked
 * with the state after drafts[0..j); rows past the first draft the grammar rejects keep the mask of
 * the last valid state (verification rejects that draft, so they are never sampled from).
 */
export function maskDraftRows(gs: GrammarState, drafts: readonly number[], rows: Float32Array, V: number): void {
  const g = gs.clone();
  let ok = true;
  for (let j = 0; j <= drafts.length && (j + 1) * V <= rows.length; j++) {
    g.mask(rows.subarray(j * V, (j + 1) * V));
    if (j < drafts.length && ok) {
      if (g.isAllowed(drafts[j])) g.accept(drafts[j]);
      else ok = false;
    }
  }
}
