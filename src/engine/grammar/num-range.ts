// Decimal ranges as a regex over JSON numbers without an exponent (an integer part without leading zeros, an optional
// fraction; no "-0"): JSON Schema's minimum / maximum and their exclusive forms on `number`, compiled by regex.ts.
// Bounds are decimal strings (exactly as written, not as binary doubles); either may be open. A fraction is compared
// digit by digit: its trailing zeros change nothing. Pure.
import { intRangeRegex } from "./int-range.ts";

const up = (c: string) => String.fromCharCode(c.charCodeAt(0) + 1), down = (c: string) => String.fromCharCode(c.charCodeAt(0) - 1);
const NONE = null; // the empty language
type Re = string | null;
const alt = (...rs: Re[]): Re => { const xs = rs.filter((r): r is string => r !== null); return xs.length ? xs.map((r) => `(${r})`).join("|") : NONE; };
const cat = (a: string, r: Re): Re => (r === null ? NONE : `${a}(${r})`);
const opt = (r: Re): string => (r === null ? "" : `(${r})?`);

/** non-empty fraction digits whose value is ≥ (incl) or > .d (d: digits, no trailing zeros, "" for 0) */
function above(d: string, incl: boolean): Re {
  if (d === "") return incl ? "[0-9]+" : "0*[1-9][0-9]*";
  const [a, rest] = [d[0], d.slice(1)];
  return alt(a < "9" ? `[${up(a)}-9][0-9]*` : NONE, rest === "" ? (incl ? `${a}[0-9]*` : `${a}0*[1-9][0-9]*`) : cat(a, above(rest, incl)));
}

/** non-empty fraction digits whose value is ≤ (incl) or < .d */
function below(d: string, incl: boolean): Re {
  if (d === "") return incl ? "0+" : NONE;
  const [a, rest] = [d[0], d.slice(1)];
  return alt(a > "0" ? `[0-${down(a)}][0-9]*` : NONE, rest === "" ? (incl ? `${a}0*` : NONE) : `${a}${opt(below(rest, incl))}`);
}

/** non-empty fraction digits whose value lies between .d and .e (d ≤ e; each end closed or open) */
function between(d: string, e: string, il: boolean, ih: boolean): Re {
  if (d === "" && e === "") return il && ih ? "0+" : NONE;
  const a = d[0] ?? "0", b = e[0] ?? "0", dr = d.slice(1), er = e.slice(1);
  if (a === b) { // the same first digit: the rest between dr and er; the digit alone when its value is in range
    const alone = dr === "" && il && (er !== "" || ih), rest = between(dr, er, il, ih);
    return rest === null ? (alone ? a : NONE) : alone ? `${a}${opt(rest)}` : cat(a, rest);
  }
  return alt(
    dr === "" && il ? `${a}${opt(above("", true))}` : cat(a, above(dr, il)),
    up(a) <= down(b) ? `[${up(a)}-${down(b)}][0-9]*` : NONE,
    er !== "" || ih ? `${b}${opt(below(er, ih))}` : cat(b, below(er, ih)),
  );
}

/** a decimal string as [integer part (bigint), fraction digits without trailing zeros]; negative values not here */
function split(x: string): [bigint, string] {
  const [i, f = ""] = x.split(".");
  return [BigInt(i), f.replace(/0+$/, "")];
}

/** numerals of the non-negative values from lo to hi (hi null: unbounded) */
function nonNegative(lo: string, il: boolean, hi: string | null, ih: boolean): Re {
  const [ia, fa] = split(lo), frac = "(\\.[0-9]+)?";
  // the values from lo within its integer part: ia itself (and its zero fractions) when lo is ia and closed
  const first = fa === "" && il ? `${ia}${opt(cat("\\.", above("", true)))}` : cat(`${ia}\\.`, above(fa, il));
  if (hi === null) {
    const more = intRangeRegex(ia + 1n, null)!;
    return alt(first, `${more.slice(1, -1)}${frac}`);
  }
  const [ib, fb] = split(hi), w = Math.max(fa.length, fb.length);
  if (ia > ib || (ia === ib && fa.padEnd(w, "0") > fb.padEnd(w, "0"))) return NONE;
  if (ia === ib) {
    const alone = fa === "" && il && (fb !== "" || ih), f = between(fa, fb, il, ih);
    return f === null ? (alone ? `${ia}` : NONE) : alone ? `${ia}${opt(cat("\\.", f))}` : cat(`${ia}\\.`, f);
  }
  const mid = ia + 1n <= ib - 1n ? intRangeRegex(ia + 1n, ib - 1n) : null;
  return alt(
    first,
    mid && `${mid.slice(1, -1)}${frac}`,
    fb !== "" || ih ? `${ib}${opt(cat("\\.", below(fb, ih)))}` : cat(`${ib}\\.`, below(fb, ih)),
  );
}

/** a decimal's string without sign, and whether it was negative */
const abs = (x: string): [string, boolean] => (x.startsWith("-") ? [x.slice(1), true] : [x, false]);
const isZero = (x: string) => /^-?0(\.0*)?$/.test(x);

/**
 * A regex (for regex.ts) of the JSON numbers without exponent whose value v satisfies lo ≤ v ≤ hi (or < with an open
 * end); lo / hi: decimal strings or null (unbounded). null when no such number exists.
 */
export function numRangeRegex(lo: string | null, il: boolean, hi: string | null, ih: boolean): string | null {
  const alts: Re[] = [];
  const [loAbs, loNeg] = lo === null ? ["", true] : abs(lo), [hiAbs, hiNeg] = hi === null ? ["", false] : abs(hi);
  // the negatives: −y, y from (0 or −hi) up to −lo — y never 0 (no "-0")
  if (lo === null || (loNeg && !isZero(lo))) {
    const yLo = hi !== null && hiNeg && !isZero(hi) ? hiAbs : "0", yLoIncl = hi !== null && hiNeg && !isZero(hi) ? ih : false;
    const r = nonNegative(yLo, yLoIncl, lo === null ? null : loAbs, il);
    if (r !== null) alts.push(`-(${r})`);
  }
  // the non-negatives: from (0 or lo) up to hi
  if (hi === null || !hiNeg || isZero(hi)) {
    const start = lo === null || (loNeg && !isZero(lo)) ? "0" : loAbs, startIncl = lo === null || (loNeg && !isZero(lo)) ? true : il;
    const r = nonNegative(start, startIncl, hi === null ? null : hiAbs, ih);
    if (r !== null) alts.push(r);
  }
  const a = alt(...alts);
  return a === null ? null : `^(${a})$`;
}

/** the exact decimal a JSON number's shortest form spells (1e-7 -> "0.0000001", 2e21 -> "2000000000000000000000") */
export function decimalOf(v: number): string {
  const s = String(v);
  const m = /^(-?)(\d+)(?:\.(\d+))?e([+-]\d+)$/.exec(s);
  if (!m) return s;
  const [, sign, i, f = "", e] = m, exp = Number(e), digits = i + f, point = i.length + exp;
  const body = point <= 0 ? `0.${"0".repeat(-point)}${digits}` : point >= digits.length ? digits + "0".repeat(point - digits.length) : `${digits.slice(0, point)}.${digits.slice(point)}`;
  return sign + body;
}
