// JSON Schema's multipleOf on JSON numbers without an exponent, for a step m = p·10^−q (p > 1: a step of 10^−q alone
// is a cap on the fraction digits, num-range.ts), spelled with at most q fraction digits. A number is a multiple when
// its value times 10^q — its digits, the fraction padded to q — is a multiple of p: unbounded, the digits run through
// the remainders mod p (a DFA written as GBNF rules); bounded, the multiples in range are listed. Pure.

export const INT_DIGITS = 16; // as the JSON primitives' integer part

/** m as [p, q] with m = p·10^−q exactly as the shortest decimal of m spells it (0.05 -> [5, 2], 100 -> [100, 0]) */
export function stepOf(dec: string): [bigint, number] {
  const [i, f = ""] = dec.split("."), frac = f.replace(/0+$/, "");
  return [BigInt(i + frac), frac.length];
}

/** the regex of n·10^−q's spellings with at most q fraction digits (trailing zeros up to there) */
function spellings(n: bigint, q: number): string {
  const neg = n < 0n, digits = (neg ? -n : n).toString().padStart(q + 1, "0");
  const int = digits.slice(0, digits.length - q), frac = digits.slice(digits.length - q).replace(/0+$/, "");
  const zeros = q - frac.length;
  return `${neg ? "-" : ""}${int}${frac ? `\\.${frac}${zeros ? `0{0,${zeros}}` : ""}` : q ? `(\\.0{1,${q}})?` : ""}`;
}

/** a decimal string times 10^q, rounded up (ceil) or down; and whether it was an integer */
function scaled(dec: string, q: number, ceil: boolean): [bigint, boolean] {
  const neg = dec.startsWith("-"), [i, f = ""] = (neg ? dec.slice(1) : dec).split(".");
  const whole = BigInt(i + f.slice(0, q).padEnd(q, "0")), rest = /[1-9]/.test(f.slice(q));
  if (!rest) return [neg ? -whole : whole, true];
  return [neg ? (ceil ? -whole : -whole - 1n) : (ceil ? whole + 1n : whole), false];
}

/** The multiples of p·10^−q within [lo, hi] (each [decimal, closed]) as one regex of their spellings, or null when
 *  there are none; a RangeError past `limit` of them. */
export function multiplesRegex(p: bigint, q: number, lo: [string, boolean], hi: [string, boolean], limit: number): string | null {
  const [a, aExact] = scaled(lo[0], q, true), [b, bExact] = scaled(hi[0], q, false);
  let k0 = a >= 0n ? (a + p - 1n) / p : -(-a / p), k1 = b >= 0n ? b / p : -((-b + p - 1n) / p);
  if (!lo[1] && aExact && k0 * p === a) k0++; // open ends
  if (!hi[1] && bExact && k1 * p === b) k1--;
  if (k0 > k1) return null;
  if (k1 - k0 + 1n > BigInt(limit)) throw new RangeError(`${k1 - k0 + 1n} multiples lie within the bounds (at most ${limit} are listed)`);
  const alts: string[] = [];
  for (let k = k0; k <= k1; k++) alts.push(spellings(k * p, q));
  return `^(${alts.join("|")})$`;
}

/**
 * GBNF rules (names prefixed by `base`, the entry rule `base` itself) for the JSON numbers without exponent that are
 * multiples of p·10^−q (p > 1), up to INT_DIGITS integer digits: the integer digits, then up to q fraction digits, each moving the
 * remainder of (value·10^k) mod p; a numeral may end where its value·10^q is 0 mod p. nonNegative: no minus sign.
 */
export function multipleRules(p: number, q: number, base: string, nonNegative: boolean): Map<string, string> {
  const rules = new Map<string, string>();
  const pow = (k: number) => { let x = 1; for (let i = 0; i < k; i++) x = (x * 10) % p; return x; };
  const ends = (s: number, k: number) => (s * pow(q - k)) % p === 0; // k fraction digits written, remainder s
  // the digit classes from remainder s, grouped by the remainder they lead to
  const moves = (s: number, digits: number[]) => {
    const by = new Map<number, number[]>();
    for (const d of digits) { const t = (10 * s + d) % p; by.set(t, [...(by.get(t) ?? []), d]); }
    return [...by].map(([t, ds]) => [`[${ds.join("")}]`, t] as const);
  };
  // live fraction states: A(t, k) after k fraction digits (k ≤ q) with remainder t
  const live = new Map<string, boolean>();
  const alive = (t: number, k: number): boolean => {
    const key = `${t},${k}`;
    if (!live.has(key)) {
      live.set(key, false);
      live.set(key, ends(t, k) || (k < q && moves(t, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]).some(([, u]) => alive(u, k + 1))));
    }
    return live.get(key)!;
  };
  const frac = (s: number, k: number): string => `${base}-f${k}-${s}`; // k fraction digits written, remainder s
  const fracRule = (s: number, k: number) => {
    const n = frac(s, k);
    if (rules.has(n)) return n;
    rules.set(n, "");
    const next = k < q ? moves(s, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]).filter(([, t]) => alive(t, k + 1)) : [];
    const alts = [...(ends(s, k) ? ['""'] : []), ...next.map(([c, t]) => `${c} ${fracRule(t, k + 1)}`)];
    rules.set(n, alts.join(" | "));
    return n;
  };
  // after the integer part with remainder s: the end, or "." and one fraction digit at least
  const afterInt = (s: number) => {
    const dot = q > 0 ? moves(s, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]).filter(([, t]) => alive(t, 1)) : [];
    const alts = [...(ends(s, 0) ? ['""'] : []), ...(dot.length ? [`"." (${dot.map(([c, t]) => `${c} ${fracRule(t, 1)}`).join(" | ")})`] : [])];
    return alts.length ? `(${alts.join(" | ")})` : null;
  };
  // the integer part: n digits so far (at most INT_DIGITS, as the JSON primitives), remainder s; live: a numeral can end
  const intLive = new Map<string, boolean>();
  const intAlive = (s: number, n: number): boolean => {
    const key = `${s},${n}`;
    if (!intLive.has(key))
      intLive.set(key, afterInt(s) !== null || (n < INT_DIGITS && moves(s, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]).some(([, t]) => intAlive(t, n + 1))));
    return intLive.get(key)!;
  };
  const intRule = (s: number, n: number): string => {
    const name = `${base}-i${n}-${s}`;
    if (rules.has(name)) return name;
    rules.set(name, "");
    const next = n < INT_DIGITS ? moves(s, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]).filter(([, t]) => intAlive(t, n + 1)) : [];
    const more = next.map(([c, t]) => `${c} ${intRule(t, n + 1)}`), end = afterInt(s);
    rules.set(name, [...more, ...(end ? [end] : [])].join(" | "));
    return name;
  };
  const zero = afterInt(0)!; // (0 is a multiple)
  rules.set(base, `${nonNegative ? "" : '"-"? '}("0" ${zero} | ${moves(0, [1, 2, 3, 4, 5, 6, 7, 8, 9]).filter(([, t]) => intAlive(t, 1)).map(([c, t]) => `${c} ${intRule(t, 1)}`).join(" | ")})`);
  return rules;
}
