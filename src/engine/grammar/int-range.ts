// Integer ranges as a regex over canonical decimal numerals (no leading zeros, no "-0"): JSON Schema's minimum /
// maximum on integers, compiled by regex.ts. Either bound may be infinite. Pure.

const nines = (n: number) => "9".repeat(n), zeros = (n: number) => "0".repeat(n);

/** numerals of exactly x.length digits from x to y (x ≤ y as numbers, equal length): digit by digit */
function sameLength(x: string, y: string): string {
  if (x === y) return x;
  if (/^0*$/.test(x) && /^9*$/.test(y)) return `[0-9]{${x.length}}`; // (every numeral of that length: keeps it linear)
  if (x.length === 1) return `[${x}-${y}]`;
  if (x[0] === y[0]) return x[0] + `(${sameLength(x.slice(1), y.slice(1))})`;
  const rest = x.length - 1, alts = [`${x[0]}(${sameLength(x.slice(1), nines(rest))})`];
  const lo = Number(x[0]) + 1, hi = Number(y[0]) - 1;
  if (lo <= hi) alts.push(`[${lo}-${hi}][0-9]{${rest}}`);
  alts.push(`${y[0]}(${sameLength(zeros(rest), y.slice(1))})`);
  return alts.join("|");
}

/** the non-negative numerals from a to b (b may be Infinity) */
function nonNegative(a: bigint, b: bigint | null): string[] {
  const alts: string[] = [];
  const la = a.toString().length, lb = b === null ? la : b.toString().length;
  for (let len = la; len <= lb; len++) {
    const first = len === 1 ? 0n : 10n ** BigInt(len - 1), last = 10n ** BigInt(len) - 1n;
    const x = a > first ? a : first, y = b !== null && b < last ? b : last;
    if (x <= y) alts.push(sameLength(x.toString(), y.toString()));
  }
  if (b === null) alts.push(`[1-9][0-9]{${lb},}`); // every longer numeral
  return alts;
}

/**
 * A regex (for regex.ts) of the canonical numerals n with lo ≤ n ≤ hi (null: unbounded on that side); null when the
 * range is empty.
 */
export function intRangeRegex(lo: bigint | null, hi: bigint | null): string | null {
  if (lo !== null && hi !== null && lo > hi) return null;
  const alts: string[] = [];
  if (lo === null || lo < 0n) { // the negatives: -(numerals from max(1, −hi) to −lo)
    const a = hi !== null && hi < 0n ? -hi : 1n;
    alts.push(...nonNegative(a, lo === null ? null : -lo).map((r) => `-(${r})`));
  }
  if (hi === null || hi >= 0n) alts.push(...nonNegative(lo !== null && lo > 0n ? lo : 0n, hi));
  return `^(${alts.map((r) => `(${r})`).join("|")})$`;
}
