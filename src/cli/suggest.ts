// "Did you mean …?" for a mistyped flag or command: the nearest known name by edit distance (Levenshtein), or the one
// known name the typed text is a prefix of. Used by parseCli (flags) and the CLI entry (commands). No state.

/** Levenshtein distance between a and b. */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length];
}

/** The known name closest to `typed` (within a third of its length, at least 2 edits), else the only one it starts; or null. */
export function nearest(typed: string, known: readonly string[]): string | null {
  let best: string | null = null, bd = Infinity;
  for (const k of known) {
    const d = editDistance(typed, k);
    if (d < bd) { bd = d; best = k; }
  }
  if (best !== null && bd <= Math.max(2, Math.floor(typed.length / 3))) return best;
  const pre = known.filter((k) => k.startsWith(typed));
  return typed.length >= 3 && pre.length === 1 ? pre[0] : null;
}

/** The hint line for an unknown flag (`--max-token` → "did you mean --max-tokens?"), or undefined. */
export function flagHint(flag: string, options: readonly string[]): string | undefined {
  if (!flag.startsWith("--")) return undefined;
  const n = nearest(flag.slice(2), options.filter((o) => o.length > 1));
  return n ? `did you mean --${n}?` : undefined;
}
