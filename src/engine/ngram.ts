// N-gram prompt-lookup drafts: find the most recent earlier occurrence of the history's last n
// tokens (n = maxN down to minN; the history ends with the pending token) and propose the tokens
// that followed it. Deterministic (q is one-hot), so at T > 0 a draft d is accepted with p(d).
// Stateless apart from its two parameters.
import type { DraftSource, Draft } from "./speculative.ts";
import type { Session } from "./session.ts";

/** Longest match wins; among equal lengths the most recent occurrence. Returns k tokens or none. */
export function lookup(hist: ArrayLike<number>, k: number, maxN = 3, minN = 1): number[] {
  const L = hist.length;
  for (let n = Math.min(maxN, L - 1); n >= minN; n--) {
    // pattern = hist[L-n, L); candidates start at i ≤ L-n-1 so at least one token follows
    for (let i = L - n - 1; i >= 0; i--) {
      let j = 0;
      while (j < n && hist[i + j] === hist[L - n + j]) j++;
      if (j < n) continue;
      const out: number[] = [];
      // past the end, the match keeps copying its own proposal (a cycle continues)
      for (let t = i + n; out.length < k; t++) out.push(t < L ? hist[t] : out[t - L]);
      return out;
    }
  }
  return [];
}

export class NgramDrafts implements DraftSource {
  readonly name = "ngram";
  constructor(readonly maxN = 3, readonly minN = 1) {}

  propose(s: Session, next: number, k: number): Draft {
    const hist = s.tokens.slice();
    hist.push(next);
    return { tokens: lookup(hist, k, this.maxN, this.minN) };
  }
}
