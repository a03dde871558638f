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
// fraction digits are capped at r (Infinity: uncapped; JSON Schema's multipleOf 10^-q caps them at q)
/** lo..r digits of c ("[0-9]" or "0") */
const run = (c: string, lo: number, r: number): Re => (r < lo ? NONE : r === Infinity ? `${c}${lo ? "+" : "*"}` : r === 0 ? "" : `${c}{${lo},${r}}`);
/** 1..r digits holding a non-zero one */
const nonzero = (r: number): Re => (r < 1 ? NONE : r === Infinity ? "0*[1-9][0-9]*"
  : alt(...Array.from({ length: r }, (_, i) => `${"0".repeat(i)}[1-9]${run("[0-9]", 0, r - 1 - i)}`)));

/** non-empty fraction digits (at most r) whose value is ≥ (incl) or > .d (d: digits, no trailing zeros, "" for 0) */
function above(d: string, incl: boolean, r: number): Re {
  if (r < 1) return NONE;
  if (d === "") return incl ? run("[0-9]", 1, r) : nonzero(r);
  const [a, rest] = [d[0], d.slice(1)];
  return alt(a < "9" ? `[${up(a)}-9]${run("[0-9]", 0, r - 1)}` : NONE,
    rest === "" ? (incl ? `${a}${run("[0-9]", 0, r - 1)}` : cat(a, nonzero(r - 1))) : cat(a, above(rest, incl, r - 1)));
}

/** non-empty fraction digits (at most r) whose value is ≤ (incl) or < .d */
function below(d: string, incl: boolean, r: number): Re {
  if (r < 1) return NONE;
  if (d === "") return incl ? run("0", 1, r) : NONE;
  const [a, rest] = [d[0], d.slice(1)];
  return alt(a > "0" ? `[0-${down(a)}]${run("[0-9]", 0, r - 1)}` : NONE,
    rest === "" ? (incl ? `${a}${run("0", 0, r - 1)}` : NONE) : `${a}${opt(below(rest, incl, r - 1))}`);
}

/** non-empty fraction digits (at most r) whose value lies between .d and .e (d ≤ e; each end closed or open) */
function between(d: string, e: string, il: boolean, ih: boolean, r: number): Re {
  if (r < 1) return NONE;
  if (d === "" && e === "") return il && ih ? run("0", 1, r) : NONE;
  const a = d[0] ?? "0", b = e[0] ?? "0", dr = d.slice(1), er = e.slice(1);
  if (a === b) { // the same first digit: the rest between dr and er; the digit alone when its value is in range
    const alone = dr === "" && il && (er !== "" || ih), rest = between(dr, er, il, ih, r - 1);
    return rest === null ? (alone ? a : NONE) : alone ? `${a}${opt(rest)}` : cat(a, rest);
  }
  return alt(
    dr === "" && il ? `${a}${opt(above("", true, r - 1))}` : cat(a, above(dr, il, r - 1)),
    up(a) <= down(b) ? `[${up(a)}-${down(b)}]${run("[0-9]", 0, r - 1)}` : NONE,
    er !== "" || ih ? `${b}${opt(below(er, ih, r - 1))}` : cat(b, below(er, ih, r - 1)),
  );
}

/** a decimal string as [integer part (bigint), fraction digits without trailing zeros]; negative values not here */
function split(x: string): [bigint, string] {
  const [i, f = ""] = x.split(".");
  return [BigInt(i), f.replace(/0+$/, "")];
}

/** numerals of the non-negative values from lo to hi (hi null: unbounded), at most r fraction digits */
function nonNegative(lo: string, il: boolean, hi: string | null, ih: boolean, r: number): Re {
  const [ia, fa] = split(lo), f = run("[0-9]", 1, r), frac = f ? `(\\.${f})?` : "";
  // the values from lo within its integer part: ia itself (and its zero fractions) when lo is ia and closed
  const first = fa === "" && il ? `${ia}${opt(cat("\\.", above("", true, r)))}` : cat(`${ia}\\.`, above(fa, il, r));
  if (hi === null) {
    const more = intRangeRegex(ia + 1n, null)!;
    return alt(first, `${more.slice(1, -1)}${frac}`);
  }
  const [ib, fb] = split(hi), w = Math.max(fa.length, fb.length);
  if (ia > ib || (ia === ib && fa.padEnd(w, "0") > fb.padEnd(w, "0"))) return NONE;
  if (ia === ib) {
    const alone = fa === "" && il && (fb !== "" || ih), b = between(fa, fb, il, ih, r);
    return b === null ? (alone ? `${ia}` : NONE) : alone ? `${ia}${opt(cat("\\.", b))}` : cat(`${ia}\\.`, b);
  }
  const mid = ia + 1n <= ib - 1n ? intRangeRegex(ia + 1n, ib - 1n) : null;
  return alt(
    first,
    mid && `${mid.slice(1, -1)}${frac}`,
    fb !== "" || ih ? `${ib}${opt(cat("\\.", below(fb, ih, r)))}` : cat(`${ib}\\.`, below(fb, ih, r)),
  );
}

/** a decimal's string without sign, and whether it was negative */
const abs = (x: string): [string, boolean] => (x.startsWith("-") ? [x.slice(1), true] : [x, false]);
const isZero = (x: string) => /^-?0(\.0*)?$/.test(x);

/**
 * A regex (for regex.ts) of the JSON numbers without exponent whose value v satisfies lo ≤ v ≤ hi (or < with an open
 * end), with at most maxFrac fraction digits; lo / hi: decimal strings or null (unbounded). null when no such number
 * exists.
 */
export function numRangeRegex(lo: string | null, il: boolean, hi: string | null, ih: boolean, maxFrac = Infinity): string | null {
  const alts: Re[] = [];
  const [loAbs, loNeg] = lo === null ? ["", true] : abs(lo), [hiAbs, hiNeg] = hi === null ? ["", false] : abs(hi);
  // the negatives: −y, y from (0 or −hi) up to −lo — y never 0 (no "-0")
  if (lo === null || (loNeg && !isZero(lo))) {
    const yLo = hi !== null && hiNeg && !isZero(hi) ? hiAbs : "0", yLoIncl = hi !== null && hiNeg && !isZero(hi) ? ih : false;
    const r = nonNegative(yLo, yLoIncl, lo === null ? null : loAbs, il, maxFrac);
    if (r !== null) alts.push(`-(${r})`);
  }
  // the non-negatives: from (0 or lo) up to hi
  if (hi === null || !hiNeg || isZero(hi)) {
    const start = lo === null || (loNeg && !isZero(lo)) ? "0" : loAbs, startIncl = lo === null || (loNeg && !isZero(lo)) ? true : il;
    const r = nonNegative(start, startIncl, hi === null ? null : hiAbs, ih, maxFrac);
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
