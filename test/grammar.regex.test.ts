// Regular expressions as GBNF (vLLM's guided_regex): for a set of patterns, every string up to length 4 over a small
// alphabet matches the compiled grammar exactly when JavaScript's RegExp matches it whole (the oracle); unsupported
// constructs are GrammarErrors naming the offset. JSON Schema's `pattern` likewise: a JSON string is accepted exactly
// when RegExp finds the pattern in its value (a search unless anchored), whatever quotes, backslashes and newlines it
// holds; string formats; integer ranges (JSON Schema's minimum / maximum) against plain comparisons.
import { describe, expect, test } from "bun:test";
import { isIPv6 } from "node:net";
import { compileGrammar, GrammarError, schemaToGbnf } from "../src/engine/grammar/index.ts";
import { regexToGbnf } from "../src/engine/grammar/regex.ts";
import { intRangeRegex } from "../src/engine/grammar/int-range.ts";
import { decimalOf, numRangeRegex } from "../src/engine/grammar/num-range.ts";

const PATTERNS = ["a*b", "(ab|ba)+", "[a-c]{2,3}", "\\d+(\\.\\d{1,2})?", "[^a]*", "\\w+\\s\\w+", "a{2}", "a{2,}", "(?:a|b)?0",
  "(?<n>ab)*", "^ab$", ".*", "[\\d.]+", "a|", "[-a]+", "[a-]+", "\\x61\\u0062", "[\\s\\S]{2}", "\\W*", "b{1,2}?a", "(a|b|)(0|1)",
  "\\.\\*", "[^\\n]+", "a{0}b", "a.b", "\\A[ab]+\\Z"];
const ALPHABET = ["a", "b", "0", "1", ".", " ", "\n", "{", "*"];

function strings(max: number): string[] {
  const out = [""];
  let level = [""];
  for (let n = 1; n <= max; n++) { level = level.flatMap((s) => ALPHABET.map((c) => s + c)); out.push(...level); }
  return out;
}

describe("regex to GBNF", () => {
  test("the grammar accepts exactly what RegExp matches whole", () => {
    const all = strings(4);
    for (const p of PATTERNS) {
      const g = compileGrammar(regexToGbnf(p)), js = new RegExp(`^(?:${p.replace(/^\\A/, "").replace(/\\Z$/, "")})$`, "u");
      for (const s of all) if (g.matches(s) !== js.test(s)) throw new Error(`${JSON.stringify(p)} on ${JSON.stringify(s)}: grammar ${g.matches(s)}, RegExp ${js.test(s)}`);
    }
  });

  test("literal braces where they are no quantifier, and characters past the BMP", () => {
    expect(compileGrammar(regexToGbnf("x{y}")).matches("x{y}")).toBe(true);
    const g = compileGrammar(regexToGbnf("[😀-😂]+é"));
    expect(g.matches("😁😀é")).toBe(true);
    expect(g.matches("😃é")).toBe(false);
  });

  test("what is not a regular language, or not supported, is a GrammarError naming the offset", () => {
    for (const [p, at] of [["(a)\\1", 3], ["(?=a)b", 0], ["a\\bb", 1], ["a^b", 1], ["a$b", 1], ["*a", 0], ["[b-a]", 0], ["(ab", 0],
      ["ab)", 2], ["\\p{L}", 0], ["a**", 0], ["[]", 0], ["\\", 0]] as const) {
      let err: unknown;
      try { regexToGbnf(p); } catch (e) { err = e; }
      expect(err).toBeInstanceOf(GrammarError);
      expect((err as Error).message).toContain(`offset ${at}`);
    }
  });

  test("JSON Schema pattern: the string's value matches as RegExp searches it; anchors, escapes and quotes", () => {
    const values = [""];
    let level = [""];
    for (let n = 1; n <= 4; n++) { level = level.flatMap((v) => ["a", "b", "0", '"', "\\", "\n", "\u0001"].map((c) => v + c)); values.push(...level); }
    for (const p of ["^a+$", "ab", "^\\d", "b$", '^"[^"]*"$', "\\\\", "^[\\s\\S]{2}$", ".\\n", "^(a|b)+0?$", "\\x01", "^$"]) {
      const g = compileGrammar(schemaToGbnf({ type: "string", pattern: p }, { whitespace: "compact" })), js = new RegExp(p, "u");
      for (const v of values) if (g.matches(JSON.stringify(v)) !== js.test(v))
        throw new Error(`pattern ${JSON.stringify(p)} on ${JSON.stringify(v)}: grammar ${g.matches(JSON.stringify(v))}, RegExp ${js.test(v)}`);
    }
    // no type: a pattern makes it a string; strict refuses what it cannot enforce, strict: false ignores it
    expect(compileGrammar(schemaToGbnf({ pattern: "^x$" }, { whitespace: "compact" })).matches('"x"')).toBe(true);
    for (const bad of [{ type: "string", pattern: "(a)\\1" }, { type: "string", pattern: "^a|b" }, { type: "string", pattern: "a", maxLength: 3 }]) {
      expect(() => schemaToGbnf(bad)).toThrow(/pattern/);
      expect(compileGrammar(schemaToGbnf(bad, { strict: false, whitespace: "compact" })).matches('"zz"')).toBe(true);
    }
  });

  test("JSON Schema formats: date, time, date-time, duration, uuid, ipv4, ipv6, hostname, email, uri, uri-reference — in JSON strings", () => {
    const cases: Record<string, [string[], string[]]> = {
      date: [["2024-02-29", "1999-12-31"], ["2024-13-01", "2024-1-01", "24-01-01", "2024-01-32"]],
      time: [["23:59:60Z", "00:00:00.123+05:30", "12:30:00z"], ["24:00:00Z", "12:30:00", "12:60:00Z"]],
      "date-time": [["2024-01-02T03:04:05Z", "2024-01-02t03:04:05.5-08:00"], ["2024-01-02 03:04:05Z", "2024-01-02T03:04Z"]],
      uuid: [["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g"]],
      ipv4: [["192.168.0.1", "0.0.0.0", "255.255.255.255"], ["256.1.1.1", "1.2.3", "01.2.3.4"]],
      hostname: [["example.com", "a-b.c0", "localhost"], ["-a.com", "a..b", "a_b.com"]],
      email: [["a.b+c@example.co"], ["a@b", "@example.com", "a b@example.com"]],
      duration: [["P1D", "PT1H", "P1Y2M3DT4H5M6S", "P2W", "PT0S", "P1M", "PT36H", "P1YT1S"], ["P", "PT", "P1H", "P1DT", "1D", "P1W2D", "P1.5D", "P1D2M"]],
      uri: [["http://example.com/a?b=c#d", "urn:isbn:0451450523", "mailto:a@b.c", "http://[::1]:8080/", "file:///etc/passwd", "a:", "http://a%20b/",
        "http://u:p@h:1/x", "h://[v1.x]/"], ["example.com", "http://a b/", "1http://x", "http://x/%zz", "http://[::1/", "http://x:80a/", "a:b#c#d", "http://[1::2::3]/"]],
      "uri-reference": [["../a/b", "?q", "#f", "", "//host/p", "a/b:c", "http://x/"], ["a:b c", "a b", ":x", "//a:b:c/", "%g0"]],
      ipv6: [["::", "::1", "1::", "1:2:3:4:5:6:7:8", "fe80::1:2", "::ffff:1.2.3.4", "1:2:3:4:5:6:1.2.3.4"],
        ["1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "1:2:3:4:5:6:7", ":1::", "::1.2.3.256", "fe80::1%eth0"]],
    };
    for (const [format, [yes, no]] of Object.entries(cases)) {
      const g = compileGrammar(schemaToGbnf({ type: "string", format }, { whitespace: "compact" }));
      for (const v of yes) expect([format, v, g.matches(JSON.stringify(v))]).toEqual([format, v, true]);
      for (const v of no) expect([format, v, g.matches(JSON.stringify(v))]).toEqual([format, v, false]);
    }
    expect(compileGrammar(schemaToGbnf({ format: "date" }, { whitespace: "compact" })).matches('"2024-01-01"')).toBe(true); // (a string)
    expect(() => schemaToGbnf({ type: "string", format: "date", pattern: "x" })).toThrow(/pattern \/ format/);
  });

  test("format ipv6 accepts exactly what Node's net.isIPv6 does (20000 random strings of groups, colons and dotted quads)", () => {
    const g = compileGrammar(schemaToGbnf({ type: "string", format: "ipv6" }, { whitespace: "compact" }));
    const parts = ["1", "ab", "ffff", "12345", ":", "::", ".", "1.2.3.4", "0", "g", "255.0.0.1", "01.2.3.4"];
    let seed = 7, yes = 0;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let i = 0; i < 20000; i++) {
      let v = "";
      for (let j = 1 + rnd(14); j > 0; j--) v += parts[rnd(parts.length)];
      const m = g.matches(JSON.stringify(v));
      if (m !== isIPv6(v)) throw new Error(`${JSON.stringify(v)}: grammar ${m}, isIPv6 ${isIPv6(v)}`);
      if (m) yes++;
    }
    expect(yes).toBeGreaterThan(1000); // (both sides well covered)
  });

  test("multipleOf: exactly the multiples (spelled with at most the step's fraction digits), unbounded, from 0, or between bounds", () => {
    // the oracle: value and step as exact decimals scaled by 10^6
    const big = (v: string) => { const neg = v.startsWith("-"), [i, f = ""] = v.replace("-", "").split("."); const n = BigInt(i + f.padEnd(6, "0")); return neg ? -n : n; };
    const fracs = ["", ".0", ".5", ".05", ".25", ".3", ".75", ".050", ".125", ".6"];
    const vals = Array.from({ length: 61 }, (_, k) => k - 30).flatMap((i) => fracs.map((f) => `${i}${f}`)).filter((v) => v !== "-0" && !v.startsWith("-0."))
      .concat(fracs.filter(Boolean).map((f) => `-0${f}`), ["100", "125", "1000", "12.5"]).filter((v) => !/^-0(\.0*)?$/.test(v)); // (no "-0")
    const bounds: [string, object][] = [["none", {}], ["min 0", { minimum: 0 }], ["[-10, 10]", { minimum: -10, maximum: 10 }],
      ["(0, 7.5]", { exclusiveMinimum: 0, maximum: 7.5 }], ["[-3.3, 12.25)", { minimum: -3.3, exclusiveMaximum: 12.25 }]];
    for (const type of ["integer", "number"]) for (const step of [5, 3, 0.05, 2.5, 0.25, 7, 0.3, 12, 1.5, 0.01, 1]) for (const [bname, b] of bounds) {
      const schema = { type, multipleOf: step, ...b } as Record<string, number | string>;
      let g: { matches(v: string): boolean };
      try { g = compileGrammar(schemaToGbnf(schema, { whitespace: "compact" })); } catch (e) {
        if (!String(e).includes("bounds leave no value")) throw e;
        g = { matches: () => false }; // (then no value may be wanted below)
      }
      const q = (String(step).split(".")[1] ?? "").length;
      const lo = (b as { minimum?: number; exclusiveMinimum?: number }), hi = (b as { maximum?: number; exclusiveMaximum?: number });
      for (const v of vals) {
        const x = big(v), digits = (v.split(".")[1] ?? "").length;
        const want = (type === "integer" ? digits === 0 : digits <= q) && x % big(String(step)) === 0n
          && (lo.minimum === undefined || x >= big(String(lo.minimum))) && (lo.exclusiveMinimum === undefined || x > big(String(lo.exclusiveMinimum)))
          && (hi.maximum === undefined || x <= big(String(hi.maximum))) && (hi.exclusiveMaximum === undefined || x < big(String(hi.exclusiveMaximum)));
        if (g.matches(v) !== want) throw new Error(`${type} multipleOf ${step} ${bname} on ${v}: grammar ${g.matches(v)}`);
      }
    }
    // unbounded: up to the primitives' 16 integer digits
    const g7 = compileGrammar(schemaToGbnf({ type: "integer", multipleOf: 7 }, { whitespace: "compact" }));
    expect(["7000000000000000", "-9999999999999996", "70000000000000000", "7000000000000001"].map((v) => g7.matches(v))).toEqual([true, true, false, false]);
    // what it cannot do is an error naming multipleOf (strict), ignored otherwise
    for (const [schema, msg] of [[{ type: "integer", multipleOf: 5, minimum: 3 }, "one bound"], [{ type: "integer", multipleOf: 5, maximum: 10 }, "one bound"],
      [{ type: "integer", multipleOf: 3, minimum: 0, maximum: 1e6 }, "333334 multiples"], [{ type: "number", multipleOf: 0.0001234 }, "too many states"],
      [{ type: "number", multipleOf: 0 }, "greater than 0"], [{ type: "number", multipleOf: -2 }, "greater than 0"]] as const) {
      expect(() => schemaToGbnf(schema)).toThrow(msg);
      try { schemaToGbnf(schema); } catch (e) { expect((e as GrammarError).path).toBe("#/multipleOf"); }
    }
  });

  test("integer ranges: exactly the canonical numerals within the bounds (either may be open)", () => {
    const bounds = [null, -101, -100, -9, -1, 0, 1, 9, 10, 99, 100, 1000];
    for (const lo of bounds) for (const hi of bounds) {
      const re = intRangeRegex(lo === null ? null : BigInt(lo), hi === null ? null : BigInt(hi));
      if (lo !== null && hi !== null && lo > hi) { expect(re).toBeNull(); continue; }
      const g = compileGrammar(regexToGbnf(re!));
      for (let v = -1100; v <= 1100; v++)
        if (g.matches(String(v)) !== ((lo === null || v >= lo) && (hi === null || v <= hi))) throw new Error(`[${lo}, ${hi}] on ${v}`);
      for (const bad of ["-0", "007", "01", "-01", ""]) expect(g.matches(bad)).toBe(false);
    }
  });

  test("JSON Schema numeric bounds: minimum / maximum, exclusive ones (numbers, and draft 4's booleans), beside null", () => {
    const ok = (schema: object, v: string) => compileGrammar(schemaToGbnf(schema, { whitespace: "compact" })).matches(v);
    expect(["0", "5", "10", "-1", "11"].map((v) => ok({ type: "integer", minimum: 0, maximum: 10 }, v))).toEqual([true, true, true, false, false]);
    expect(["0", "1", "9", "10"].map((v) => ok({ type: "integer", exclusiveMinimum: 0, exclusiveMaximum: 10 }, v))).toEqual([false, true, true, false]);
    expect(["0", "1", "10"].map((v) => ok({ type: "integer", minimum: 0, exclusiveMinimum: true, maximum: 10, exclusiveMaximum: true }, v))).toEqual([false, true, false]);
    expect(["1", "2", "3"].map((v) => ok({ type: "integer", minimum: 1.5, maximum: 2.5 }, v))).toEqual([false, true, false]);
    expect(["null", "3", "-3"].map((v) => ok({ type: ["integer", "null"], minimum: 0 }, v))).toEqual([true, true, false]); // strict: no error
    expect(["0.5", "0", "1", "1.0", "1.01", "-0.1", "1e-1"].map((v) => ok({ type: "number", minimum: 0, maximum: 1 }, v)))
      .toEqual([true, true, true, true, false, false, false]); // (bounded numbers: no exponent)
    expect(["0.5", "0.51", "0.49", "2"].map((v) => ok({ type: "number", exclusiveMinimum: 0.5 }, v))).toEqual([false, true, false, true]);
    expect(["1e-7", "0.0000001", "0.00000009"].map((v) => ok({ type: "number", minimum: 1e-7 }, v))).toEqual([false, true, false]);
    expect(() => schemaToGbnf({ type: "number", minimum: 2, maximum: 1 })).toThrow(/leave no value/);
    // one open side (up to the 16 digits): a grammar of a few KB, not an exponential one (4.6 MB before a fix)
    for (const b of [{ minimum: 0 }, { maximum: -5 }, { minimum: 0.5 }]) for (const type of ["integer", "number"])
      expect(schemaToGbnf({ type, ...b }).length).toBeLessThan(20_000);
  });

  test("decimal ranges: exactly the JSON numerals (no exponent) within the bounds, closed or open, either side unbounded, fraction digits capped or not", () => {
    const bounds = [null, "-12.5", "-1", "-0.25", "0", "0.1", "0.5", "2.7", "2.705", "10", "99.99"];
    const fracs = ["", ".0", ".00", ".05", ".25", ".5", ".50", ".7", ".705", ".7051", ".99", ".001"];
    const vals = [...Array.from({ length: 31 }, (_, k) => k - 15).flatMap((i) => fracs.map((f) => `${i}${f}`)), ...fracs.filter(Boolean).map((f) => `-0${f}`)]
      .filter((v) => !/^-0(\.0*)?$/.test(v));
    // (and with the fraction digits capped, as multipleOf 1 / 0.1 / 0.01 / 0.001 asks)
    const digits = (v: string) => (v.split(".")[1] ?? "").length;
    for (const cap of [Infinity, 0, 1, 2, 3]) for (const lo of bounds) for (const hi of bounds) for (const il of [true, false]) for (const ih of [true, false]) {
      const re = numRangeRegex(lo, il, hi, ih, cap);
      const inRange = (v: string) => digits(v) <= cap && (lo === null || (il ? Number(v) >= Number(lo) : Number(v) > Number(lo)))
        && (hi === null || (ih ? Number(v) <= Number(hi) : Number(v) < Number(hi)));
      if (re === null) { expect(vals.some(inRange)).toBe(false); continue; }
      const g = compileGrammar(regexToGbnf(re));
      for (const v of vals) if (g.matches(v) !== inRange(v)) throw new Error(`${il ? "[" : "("}${lo}, ${hi}${ih ? "]" : ")"} (≤ ${cap} digits) on ${v}`);
      for (const bad of ["-0", "-0.0", "01", "1.", ".5", "+1", "1e2"]) expect(g.matches(bad)).toBe(false);
    }
    expect(["0.0000001", "2000000000000000000000", "-0.5", "123.25"]).toEqual([1e-7, 2e21, -0.5, 123.25].map(decimalOf));
  });
});
