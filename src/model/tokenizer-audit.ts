// Hostile regexes in tokenizer.json. The normalizer's, pre-tokenizer's and decoder's `Regex` patterns run in
// JavaScript's backtracking engine (through @huggingface/tokenizers) on every prompt: one with nested or
// overlapping quantifiers takes polynomial or exponential time in its input (`a*a*a*b|` before the fixture's split
// pattern: a prompt of 8,000 `a` took 25 s of the engine's thread). At load the RegExps that each component holding
// a Regex compiled are timed alone, scanning probes as a split does: units (a base set and the patterns' own literal
// characters and runs) repeated along a ladder of lengths up to 4,096 characters, with and without a foreign last
// character. A time (the thread's CPU time; the scan allocates nothing) over 3x a linear growth from either of the
// two rungs before (+3 ms), or over 20 us a character, confirmed twice by the best of five, refuses the file naming
// the component and the pattern. A probe, not a proof (docs/security.md). Holds the components already audited in
// this process (by their JSON).
import { ModelError } from "./errors.ts";
import { hb } from "../native/hb.ts";

/** a Regex pattern longer than this, or more patterns than this in one file, are refused before they are compiled
 *  (known tokenizers have one to three, of a few hundred characters) */
export const MAX_REGEX = 16384, MAX_PATTERNS = 64;
const PARTS = ["normalizer", "pre_tokenizer", "decoder"] as const;
type Part = (typeof PARTS)[number];
/** the tokenizer's components (null: absent) */
export type Components = Record<Part, unknown>;

// short rungs close together (an exponential shows between them), long ones 4x apart (a quadratic shows)
const LADDER = [4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 64, 256, 1024, 4096];
const FACTOR = 3, SLACK_MS = 3, PER_CHAR_MS = 0.02, MAX_UNITS = 48, CONFIRM = 5;
const BASE = [" ", "\n", "\r", "\t", "a", "A", "0", "!", "'", ".", "é", "中", "😀", "\u00a0", "ab", "a ", " a", "\r\n", "a1", "'s"];
const done = new Set<string>();

/** The Regex patterns of each component (an explicit stack: a deeply nested component cannot overflow it);
 *  a pattern over MAX_REGEX characters, or one past MAX_PATTERNS, is a ModelError naming its path. */
export function findRegexes(json: unknown, file: string): Map<Part, string[]> {
  const out = new Map<Part, string[]>();
  const root = json as Record<string, unknown>;
  let count = 0;
  for (const part of PARTS) {
    const stack: [unknown, string][] = [[root?.[part], part]];
    while (stack.length) {
      const [v, path] = stack.pop()!;
      if (v === null || typeof v !== "object") continue;
      for (const [k, x] of Object.entries(v)) {
        if (k === "Regex" && typeof x === "string") {
          if (x.length > MAX_REGEX) throw new ModelError(`a Regex of ${x.length} characters, over the ${MAX_REGEX} allowed`, { file, field: `${path}.Regex` });
          if (++count > MAX_PATTERNS) throw new ModelError(`over ${MAX_PATTERNS} Regex patterns`, { file, field: `${path}.Regex` });
          out.set(part, out.get(part) ?? []).get(part)!.push(x);
        } else stack.push([x, Array.isArray(v) ? `${path}[${k}]` : `${path}.${k}`]);
      }
    }
  }
  return out;
}

/** probe units: the base set, then each pattern's literal characters and runs of them (escapes of letters and
 *  digits are classes, skipped with a \p{…}'s braces; escaped punctuation is literal) */
export function probeUnits(patterns: string[]): string[] {
  const set = new Set(BASE);
  for (const p of patterns) {
    let run = "";
    const flush = () => { if (run.length > 1) set.add(run.slice(0, 8)); run = ""; };
    for (let i = 0; i < p.length && set.size < MAX_UNITS; i++) {
      let c = p[i];
      if (c === "\\") {
        c = p[++i] ?? "";
        if (/[A-Za-z0-9]/.test(c)) { flush(); if ((c === "p" || c === "P") && p[i + 1] === "{") i = Math.max(i, p.indexOf("}", i)); continue; }
      } else if ("()[]{}|*+?^$.-,:=!<".includes(c)) { flush(); continue; }
      set.add(c); run += c;
    }
    flush();
  }
  return [...set].slice(0, MAX_UNITS);
}

/** The RegExps a component holds (its own and its parts', e.g. a Sequence's Split): the ones the library compiled
 *  from the file's patterns, and its fixed ones. A bounded walk of own properties (added_tokens skipped). */
export function regexesOf(component: unknown): RegExp[] {
  const out = new Map<string, RegExp>(), seen = new Set<object>(), stack = [component];
  while (stack.length && seen.size < 10_000) {
    const v = stack.pop();
    if (v === null || (typeof v !== "object" && typeof v !== "function") || seen.has(v)) continue;
    seen.add(v);
    if (v instanceof RegExp) { out.set(`${v.flags}/${v.source}`, v); continue; }
    for (const [k, x] of Object.entries(v)) if (k !== "added_tokens") stack.push(x);
  }
  return [...out.values()];
}

/** ms of this thread's CPU time (a busy machine's scheduling must not look like backtracking), else of the wall */
let now: (() => number) | null = null;
const clock = (): (() => number) => {
  const L = hb();
  return L.hb_thread_cpu_us() >= 0 ? () => L.hb_thread_cpu_us() / 1000 : () => performance.now();
};
/** ms to scan s with re the way a split or a replaceAll does (every match in turn; test() allocates nothing, so no
 *  collection lands in the timing) */
function scan(re: RegExp, s: string): number {
  now ??= clock();
  const t = now();
  re.lastIndex = 0;
  for (let last = -1; re.test(s);) {
    if (re.lastIndex === last) re.lastIndex++; // an empty match: step on, as matchAll does
    last = re.lastIndex;
  }
  return now() - t;
}
const best = (re: RegExp, s: string, t: number) => { for (let i = 1; i < CONFIRM; i++) t = Math.min(t, scan(re, s)); return t; };

/** Time the regexes of each component that holds a Regex of the file on the probes; a super-linear one is a
 *  ModelError naming the component and the pattern. */
export function auditRegexes(c: Components, found: Map<Part, string[]>, file: string): void {
  for (const [part, patterns] of found) {
    const key = `${part}\0${patterns.join("\0")}`;
    if (!c[part] || done.has(key)) continue;
    for (const compiled of regexesOf(c[part])) {
      const re = new RegExp(compiled.source, compiled.flags.replace(/[gy]/g, "") + "g");
      for (const unit of probeUnits([...patterns, re.source]))
        for (const end of ["", "\u0001"]) {
          const rungs: { n: number; s: string; t: number }[] = [];   // the probe's rungs so far
          for (const n of LADDER) {
            const s = unit.repeat(Math.ceil(n / unit.length)) + end;
            // why t is too long after the last two rungs (a quadratic with a small constant shows against the one
            // 16x shorter) or for its length (null: it is not)
            const over = (t: number) => {
              for (const r of rungs.slice(-2)) if (t > FACTOR * (n / r.n) * r.t + SLACK_MS) return `${r.t.toFixed(2)} ms on ${r.n}`;
              return n >= 1024 && t > n * PER_CHAR_MS ? `over ${1000 * PER_CHAR_MS} us a character` : null;
            };
            let t = scan(re, s), why = over(t);
            // confirm twice: the best of five of every rung involved (one over 200 ms is no hiccup)
            for (let round = 0; round < 2 && why; round++) {
              for (const r of rungs.slice(-2)) r.t = best(re, r.s, round ? Infinity : r.t);
              if (t < 200) t = best(re, s, round ? Infinity : t);
              why = over(t);
            }
            if (why) throw new ModelError(`/${re.source.slice(0, 60)}${re.source.length > 60 ? "…" : ""}/ takes ${t.toFixed(1)} ms on ` +
              `${n} characters of ${JSON.stringify(unit)}${end ? " and one other" : ""} (${why}): it backtracks super-linearly, refused ` +
              "(HB_TOKENIZER_AUDIT=0 loads it anyway)",
              { file, field: part });
            rungs.push({ n, s, t });
          }
        }
    }
    done.add(key);
  }
}
