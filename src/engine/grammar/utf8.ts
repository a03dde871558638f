// UTF-8 helpers for the byte-level matcher: encode code points, normalize code point range sets
// (merge, negate, drop surrogates) and split a range set into UTF-8 byte-range sequences, so a
// character class over code points becomes an alternation of byte-range sequences (the RE2 /
// utf8-ranges construction). Pure functions; no state.

export type Range = [number, number]; // inclusive
export const MAX_CP = 0x10ffff;

export function utf8(cp: number): number[] {
  if (cp < 0x80) return [cp];
  if (cp < 0x800) return [0xc0 | (cp >> 6), 0x80 | (cp & 63)];
  if (cp < 0x10000) return [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63)];
  return [0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63)];
}

/** Sorted, merged, surrogate-free ranges; `neg` complements over U+0000..U+10FFFF. */
export function normalizeRanges(ranges: Range[], neg: boolean): Range[] {
  const rs = ranges.map(([a, b]) => [a, b] as Range).sort((x, y) => x[0] - y[0]);
  const merged: Range[] = [];
  for (const r of rs) {
    const last = merged[merged.length - 1];
    if (last && r[0] <= last[1] + 1) last[1] = Math.max(last[1], r[1]);
    else merged.push(r);
  }
  let out = merged;
  if (neg) {
    out = [];
    let next = 0;
    for (const [a, b] of merged) {
      if (a > next) out.push([next, a - 1]);
      next = b + 1;
    }
    if (next <= MAX_CP) out.push([next, MAX_CP]);
  }
  // drop the surrogates D800..DFFF (not encodable in UTF-8)
  const res: Range[] = [];
  for (const [a, b] of out) {
    if (b < 0xd800 || a > 0xdfff) res.push([a, b]);
    else {
      if (a < 0xd800) res.push([a, 0xd7ff]);
      if (b > 0xdfff) res.push([0xe000, b]);
    }
  }
  return res;
}

/**
 * Split [lo, hi] (surrogate-free) into byte-range sequences: each sequence is a list of
 * [byteLo, byteHi] whose cartesian product is exactly the UTF-8 encodings of a sub-range.
 */
export function utf8Sequences(lo: number, hi: number, out: Range[][] = []): Range[][] {
  const todo: Range[] = [[lo, hi]];
  while (todo.length) {
    const [a, b] = todo.pop()!;
    if (a > b) continue;
    let split = false;
    for (const max of [0x7f, 0x7ff, 0xffff]) {
      if (a <= max && b > max) { todo.push([max + 1, b], [a, max]); split = true; break; }
    }
    if (split) continue;
    if (b <= 0x7f) { out.push([[a, b]]); continue; }
    for (let i = 1; i < 4 && !split; i++) {
      const m = (1 << (6 * i)) - 1;
      if ((a & ~m) !== (b & ~m)) {
        if ((a & m) !== 0) { todo.push([(a | m) + 1, b], [a, a | m]); split = true; }
        else if ((b & m) !== m) { todo.push([b & ~m, b], [a, (b & ~m) - 1]); split = true; }
      }
    }
    if (split) continue;
    const ea = utf8(a), eb = utf8(b);
    out.push(ea.map((x, i) => [x, eb[i]] as Range));
  }
  return out;
}
