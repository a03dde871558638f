// JSON Schema -> GBNF (after llama.cpp's json-schema-to-grammar): `schemaToGbnf` (the keywords it supports are
// listed there), and the generic JSON grammar for `response_format: {type: "json_object"}`. Keywords that constrain
// values but cannot be enforced are errors (strict) or ignored (strict: false). Bounded (limits.ts): schemas nested
// over MAX_NESTING deep, over SCHEMA_WORK units of work (nodes, properties, list entries, references) or over
// MAX_GBNF_CHARS of grammar are refused with a GrammarError, before the cost grows.
// Pure; the converter state lives for one call.
import { GrammarError } from "./errors.ts";
import { MAX_GBNF_CHARS, MAX_NESTING, SCHEMA_WORK } from "./limits.ts";
import { gbnfLiteral } from "./literal.ts";
import { intRangeRegex } from "./int-range.ts";
import { decimalOf, numRangeRegex } from "./num-range.ts";
import { INT_DIGITS, multipleRules, multiplesRegex, stepOf } from "./multiple.ts";
import { regexJsonString, regexToGbnf } from "./regex.ts";
import { FORMATS } from "./formats.ts";
import { ANNOTATIONS, isObj, mergeAllOf, ptr } from "./allof.ts";

export interface SchemaOpts {
  /** "flexible" (default): llama.cpp's bounded optional whitespace after tokens; "compact": none. */
  whitespace?: "flexible" | "compact";
  /** true (default): unenforceable keywords (pattern, format, minimum, ...) are errors; false: ignored. */
  strict?: boolean;
}

const SPACE = { flexible: '| " " | "\\n"{1,2} [ \\t]{0,20}', compact: '""' } as const;
const PRIMS: Record<string, [string, string[]]> = {
  value: ["object | array | string | number | boolean | null", ["object", "array", "string", "number", "boolean", "null"]],
  object: ['"{" space ( string ":" space value ( "," space string ":" space value )* )? "}" space', ["string", "value", "space"]],
  array: ['"[" space ( value ( "," space value )* )? "]" space', ["value", "space"]],
  string: ['"\\"" char* "\\"" space', ["char", "space"]],
  // one JSON string character = one code point: a raw one, an escape, \uXXXX outside the surrogates,
  // or a \uD8xx\uDCxx surrogate pair (lone surrogates excluded), so minLength/maxLength count right
  char: ['[^"\\\\\\x7F\\x00-\\x1F] | [\\\\] (["\\\\/bfnrt] | "u" (hex4 | [dD] [89abAB] hex hex "\\\\u" [dD] [c-fC-F] hex hex))', ["hex4", "hex"]],
  hex4: ["[0-9a-cA-CefEF] hex hex hex | [dD] [0-7] hex hex", ["hex"]],
  hex: ["[0-9a-fA-F]", []],
  number: ['("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space', ["integral-part", "decimal-part", "space"]],
  integer: ['("-"? integral-part) space', ["integral-part", "space"]],
  "integral-part": ["[0] | [1-9] [0-9]{0,15}", []],
  "decimal-part": ["[0-9]{1,16}", []],
  boolean: ['("true" | "false") space', ["space"]],
  null: ['"null" space', ["space"]],
};

const UNSUPPORTED = [ "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
  "allOf", "not", "if", "then", "else", "patternProperties", "propertyNames", "minProperties", "maxProperties",
  "uniqueItems", "contains", "minContains", "maxContains", "dependentRequired",
  "dependentSchemas", "dependencies", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef",
  "contentEncoding", "contentMediaType", "contentSchema"];
const MAX_ITEMS = 10_000;
/** keywords of objects used as maps (no properties): object() enforces them */
const MAP_KEYS = ["patternProperties", "propertyNames", "minProperties", "maxProperties"];
const BOUNDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"];
const LIMIT = 10n ** 16n - 1n; // the 16 integer digits of the primitives (an open side of a range ends there too)
const MAX_MULTIPLES = 1000, MAX_STEP_STATES = 4096; // multipleOf: values listed within bounds; remainder states unbounded
const sanitize = (k: string) => k.replace(/[^a-zA-Z0-9-]+/g, "-").replace(/^-+|-+$/g, "") || "x";

class Converter {
  rules = new Map<string, string>();
  reserved = new Set<string>(["root", ...Object.keys(PRIMS), "space"]);
  refs = new Map<string, string>();
  suffix = new Map<string, number>(); // unique(): the next number to try after a base name
  depth = 0; // visit's nesting
  work = 0;
  chars = 0; // of the rule bodies defined

  constructor(readonly rootSchema: unknown, readonly opts: Required<SchemaOpts>) {}

  fail(msg: string, path: string): never { throw new GrammarError(msg, { path }); }

  /** Count `n` units of work at `path` (a GrammarError past SCHEMA_WORK). */
  spend(n: number, path: string): void {
    if ((this.work += n) > SCHEMA_WORK) this.fail(`the schema is too large to convert (over ${SCHEMA_WORK} nodes, properties and entries)`, path);
  }

  define(name: string, body: string): void {
    if ((this.chars += name.length + body.length) > MAX_GBNF_CHARS) this.fail(`the schema's grammar is too large (over ${MAX_GBNF_CHARS} characters)`, "#");
    this.rules.set(name, body);
  }

  prim(name: string): string {
    if (this.rules.has(name)) return name;
    if (name === "space") { this.rules.set(name, SPACE[this.opts.whitespace]); return name; }
    const [body, deps] = PRIMS[name];
    this.rules.set(name, body);
    for (const d of deps) this.prim(d);
    return name;
  }

  unique(base: string): string {
    if (!this.rules.has(base) && !this.reserved.has(base)) return base;
    for (let i = this.suffix.get(base) ?? 2; ; i++)
      if (!this.rules.has(`${base}-${i}`) && !this.reserved.has(`${base}-${i}`)) { this.suffix.set(base, i + 1); return `${base}-${i}`; }
  }

  /** Define rule `name` (a fresh name when taken by another body); returns the name used. */
  add(name: string, body: string, own = false): string {
    if (this.rules.get(name) === body) return name;
    const n = own && !this.rules.has(name) ? name : this.unique(name);
    this.define(n, body);
    return n;
  }

  int(s: Record<string, unknown>, key: string, path: string): number | undefined {
    const v = s[key];
    if (v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0) this.fail(`${key} must be a non-negative integer`, `${path}/${key}`);
    if (v > MAX_ITEMS) this.fail(`${key} ${v} is over the supported limit of ${MAX_ITEMS}`, `${path}/${key}`);
    return v;
  }

  rep(a: number, b: number): string {
    return b === Infinity ? (a === 0 ? "*" : a === 1 ? "+" : `{${a},}`) : a === b ? `{${a}}` : `{${a},${b}}`;
  }

  /** The name of a rule matching `s` (plus trailing space). `own`: `name` is reserved for this schema. */
  visit(s: unknown, name: string, path: string, own = false): string {
    if (this.depth >= MAX_NESTING) this.fail(`the schema nests deeper than ${MAX_NESTING} levels`, path.length > 200 ? `${path.slice(0, 200)}…` : path);
    this.spend(1, path);
    this.depth++;
    try { return this.visitIn(s, name, path, own); } finally { this.depth--; }
  }

  private visitIn(s: unknown, name: string, path: string, own: boolean): string {
    if (s === true) return this.prim("value");
    if (s === false) this.fail("the schema `false` matches nothing", path);
    if (!isObj(s)) this.fail("a schema must be an object or a boolean", path);
    // allOf of one schema beside annotations only (as pydantic v1 wraps a described $ref): that schema
    if (Array.isArray(s.allOf) && s.allOf.length === 1 && Object.keys(s).every((k) => k === "allOf" || ANNOTATIONS.has(k)))
      return this.visit(s.allOf[0], name, `${path}/allOf/0`, own);
    // allOf of object schemas (an OpenAPI-style composition): one merged object (strict: false ignores what cannot merge)
    if ("allOf" in s) {
      let merged: Record<string, unknown>;
      try { merged = mergeAllOf(s, path, (r, at) => this.resolve(r, at).schema); } catch (e) {
        if (this.opts.strict || !(e instanceof GrammarError)) throw e;
        merged = Object.fromEntries(Object.entries(s).filter(([k]) => k !== "allOf"));
      }
      return this.visit(merged, name, path, own);
    }
    // (numeric bounds are enforced on integers and numbers: see `bounded`)
    const numeric = [s.type].flat().some((t) => t === "integer" || t === "number");
    const map = [s.type].flat().includes("object") || (s.type === undefined && !("properties" in s)); // (object() checks the rest)
    const handled = (k: string) => (numeric && BOUNDS.includes(k)) || (map && MAP_KEYS.includes(k)) || (k === "uniqueItems" && s.uniqueItems === false);
    if (this.opts.strict) for (const k of UNSUPPORTED) if (k in s && !handled(k)) this.fail(`unsupported keyword ${JSON.stringify(k)} (pass strict: false to ignore it)`, `${path}/${k}`);
    const sp = () => this.prim("space");
    if ("$ref" in s) {
      const extra = Object.keys(s).filter((k) => k !== "$ref" && !ANNOTATIONS.has(k) && !UNSUPPORTED.includes(k));
      if (extra.length) this.fail(`keywords beside $ref are not supported: ${extra.join(", ")}`, path);
      return this.ref(s.$ref, `${path}/$ref`);
    }
    if ("const" in s) return this.add(name, `${gbnfLiteral(JSON.stringify(s.const))} ${sp()}`, own);
    if ("enum" in s) {
      if (!Array.isArray(s.enum) || s.enum.length === 0) this.fail("enum must be a non-empty array", `${path}/enum`);
      this.spend(s.enum.length, `${path}/enum`);
      return this.add(name, `(${s.enum.map((v) => gbnfLiteral(JSON.stringify(v))).join(" | ")}) ${sp()}`, own);
    }
    for (const key of ["anyOf", "oneOf"] as const) {
      if (!(key in s)) continue;
      const subs = s[key];
      if (!Array.isArray(subs) || subs.length === 0) this.fail(`${key} must be a non-empty array`, `${path}/${key}`);
      const extra = Object.keys(s).filter((k) => k !== key && !ANNOTATIONS.has(k) && !UNSUPPORTED.includes(k));
      if (extra.length) this.fail(`keywords beside ${key} are not supported: ${extra.join(", ")}`, path);
      const alts = subs.map((x, i) => this.visit(x, `${name}-${i}`, `${path}/${key}/${i}`));
      return this.add(name, alts.join(" | "), own);
    }
    let type = s.type;
    if (Array.isArray(type)) {
      if (type.length === 0) this.fail("type must not be an empty list", `${path}/type`);
      // each type with its keywords (numeric bounds only go to the numeric ones: they apply to nothing else)
      const keywordsFor = (t: unknown) => (t === "integer" || t === "number" ? s : Object.fromEntries(Object.entries(s).filter(([k]) => !BOUNDS.includes(k))));
      if (type.length > 1) return this.add(name, type.map((t, i) => this.visit({ ...keywordsFor(t), type: t }, `${name}-${typeof t === "string" ? t : i}`, `${path}/type/${i}`)).join(" | "), own);
      type = type[0];
    }
    if (type === undefined) {
      if ("properties" in s || "required" in s || "additionalProperties" in s || MAP_KEYS.some((k) => k in s)) type = "object";
      else if ("items" in s || "prefixItems" in s || "minItems" in s || "maxItems" in s) type = "array";
      else if ("minLength" in s || "maxLength" in s || "pattern" in s || "format" in s) type = "string";
      else return this.prim("value");
    }
    switch (type) {
      case "string": {
        const lo = this.int(s, "minLength", path) ?? 0, hi = this.int(s, "maxLength", path) ?? Infinity;
        if (lo > hi) this.fail("minLength is greater than maxLength", path);
        // a pattern (regex.ts) or a format (FORMATS); with each other or a length bound (an intersection) not enforced
        for (const key of ["pattern", "format"] as const) {
          if (!(key in s)) continue;
          const v = s[key];
          if (typeof v !== "string") this.fail(`${key} must be a string`, `${path}/${key}`);
          let inner: string | null = null;
          try {
            if (lo > 0 || hi !== Infinity || ("pattern" in s && "format" in s))
              throw new GrammarError(`${key} together with ${"pattern" in s && "format" in s ? "pattern / format" : "minLength / maxLength"} is not supported`);
            if (key === "format" && !(v in FORMATS)) throw new GrammarError(`format ${JSON.stringify(v)} is not supported (${Object.keys(FORMATS).join(", ")} are)`);
            inner = regexJsonString(key === "format" ? FORMATS[v] : v, this.prim("char"));
          } catch (e) {
            if (!(e instanceof GrammarError)) throw e;
            if (this.opts.strict) this.fail(`${key}: ${e.message} (pass strict: false to ignore it)`, `${path}/${key}`);
          }
          if (inner !== null) return this.add(name, `"\\"" ${inner} "\\"" ${sp()}`, own);
        }
        if (lo === 0 && hi === Infinity) return this.prim("string");
        this.prim("char");
        return this.add(name, `"\\"" char${this.rep(lo, hi)} "\\"" ${sp()}`, own);
      }
      case "integer": case "number": return this.bounded(type, s, name, path, own);
      case "boolean": case "null": return this.prim(type);
      case "object": return this.object(s, name, path, own);
      case "array": return this.array(s, name, path, own);
      default: this.fail(`unknown type ${JSON.stringify(type)}`, `${path}/type`);
    }
  }

  /** an integer or a number, within minimum / maximum / exclusiveMinimum / exclusiveMaximum when given (draft 4's
   *  boolean exclusive forms too), a multiple of multipleOf when given: integers as int-range.ts's numerals, numbers as
   *  num-range.ts's decimals (no exponent), both within the primitives' 16 integer digits; a step m = p·10^−q with
   *  p > 1 (multiple.ts) runs through remainders when unbounded (or bounded below by minimum: 0 alone) and lists the
   *  multiples between two bounds (at most MAX_MULTIPLES) */
  bounded(type: "integer" | "number", s: Record<string, unknown>, name: string, path: string, own: boolean): string {
    if (!BOUNDS.some((k) => k in s)) return this.prim(type);
    const num = (k: string) => {
      const v = s[k];
      if (v === undefined || typeof v === "boolean") return undefined;
      if (typeof v !== "number" || !Number.isFinite(v)) this.fail(`${k} must be a number`, `${path}/${k}`);
      return v;
    };
    // the step as p·10^−q; on integers only its part that integers can miss (m = 2.5: multiples of 5)
    const m = num("multipleOf");
    if (m !== undefined && !(m > 0)) this.fail("multipleOf must be greater than 0", `${path}/multipleOf`);
    let [p, q] = m === undefined ? [1n, 0] : stepOf(decimalOf(m));
    if (type === "integer") { const t = 10n ** BigInt(q); let g = p, h = t; while (h) [g, h] = [h, g % h]; [p, q] = [p / g, 0]; }
    // the tighter of each side's bounds (at equal values the open one), as [value, closed]
    let lo: [number, boolean] | null = null, hi: [number, boolean] | null = null;
    const atLeast = (v: number, closed: boolean) => { if (lo === null || v > lo[0] || (v === lo[0] && !closed)) lo = [v, closed]; };
    const atMost = (v: number, closed: boolean) => { if (hi === null || v < hi[0] || (v === hi[0] && !closed)) hi = [v, closed]; };
    const min = num("minimum"), max = num("maximum"), xmin = num("exclusiveMinimum"), xmax = num("exclusiveMaximum");
    if (min !== undefined) atLeast(min, s.exclusiveMinimum !== true);
    if (max !== undefined) atMost(max, s.exclusiveMaximum !== true);
    if (xmin !== undefined) atLeast(xmin, false);
    if (xmax !== undefined) atMost(xmax, false);
    const [l, h] = [lo as [number, boolean] | null, hi as [number, boolean] | null];
    const done = (re: string | null) => {
      if (re === null) this.fail(`the ${type} bounds leave no value`, path);
      return this.add(name, `${regexToGbnf(re).replace(/^root ::= /, "").trim()} ${this.prim("space")}`, own);
    };
    if (p > 1n) { // a step other than 10^−q (strict: false ignores one that cannot be enforced)
      const unsupported = (msg: string) => {
        if (this.opts.strict) this.fail(`multipleOf: ${msg} (pass strict: false to ignore it)`, `${path}/multipleOf`);
        return null;
      };
      let out: string | null = null;
      if (l !== null && h !== null) {
        try { out = done(multiplesRegex(p, q, [decimalOf(l[0]), l[1]], [decimalOf(h[0]), h[1]], MAX_MULTIPLES)); } catch (e) {
          if (!(e instanceof RangeError)) throw e;
          unsupported(e.message);
        }
      } else if (h !== null || (l !== null && !(l[0] === 0 && l[1]))) unsupported("with one bound only minimum: 0 is supported");
      else if (p * BigInt(INT_DIGITS + q) > BigInt(MAX_STEP_STATES)) unsupported(`${m} needs too many states (p·10^−q with p·(${INT_DIGITS} + q) ≤ ${MAX_STEP_STATES} is supported)`);
      else {
        const base = this.unique(`${name}-step`), rules = multipleRules(Number(p), q, base, l !== null);
        if ([...rules.keys()].some((k) => this.rules.has(k) || this.reserved.has(k))) this.fail("multipleOf: rule names taken", path);
        for (const [k, v] of rules) this.rules.set(k, v);
        out = this.add(name, `${base} ${this.prim("space")}`, own);
      }
      if (out !== null) return out;
      [p, q] = [1n, type === "integer" ? 0 : Infinity]; // ignored
    }
    if (type === "number") {
      const edge = `${LIMIT}`, outside = (v: number) => Math.abs(v) >= 1e16;
      return done(numRangeRegex(l === null || (outside(l[0]) && l[0] < 0) ? `-${edge}` : decimalOf(l[0]), l === null || outside(l[0]) || l[1],
        h === null || (outside(h[0]) && h[0] > 0) ? edge : decimalOf(h[0]), h === null || outside(h[0]) || h[1], m === undefined ? Infinity : q));
    }
    if (l === null && h === null) return this.prim(type); // (a step integers always meet)
    const ilo = l === null ? -LIMIT : BigInt(Math.floor(l[0])) + (l[1] && Number.isInteger(l[0]) ? 0n : 1n);
    const ihi = h === null ? LIMIT : BigInt(Math.ceil(h[0])) - (h[1] && Number.isInteger(h[0]) ? 0n : 1n);
    return done(intRangeRegex(ilo < -LIMIT ? -LIMIT : ilo, ihi > LIMIT ? LIMIT : ihi));
  }

  object(s: Record<string, unknown>, name: string, path: string, own: boolean): string {
    const sp = this.prim("space");
    const props = s.properties ?? {};
    if (!isObj(props)) this.fail("properties must be an object", `${path}/properties`);
    const req = s.required ?? [];
    if (!Array.isArray(req) || req.some((r) => typeof r !== "string")) this.fail("required must be an array of strings", `${path}/required`);
    const keys = Object.keys(props), ap = s.additionalProperties, required = new Set(req as string[]);
    this.spend(keys.length + req.length, `${path}/properties`);
    if (keys.length === 0) return this.map(s, name, path, own);
    if (this.opts.strict) for (const k of MAP_KEYS) if (k in s) this.fail(`${k} together with properties is not supported (pass strict: false to ignore it)`, `${path}/${k}`);
    if (ap !== undefined && ap !== false && this.opts.strict)
      this.fail("additionalProperties other than false together with properties is not supported", `${path}/additionalProperties`);
    for (const r of req) if (!Object.hasOwn(props, r as string)) this.fail(`required property ${JSON.stringify(r)} is not in properties`, `${path}/required`);
    const me = own ? name : this.unique(name);
    this.reserved.add(me);
    const kvs = keys.map((k) => {
      const v = this.visit(props[k], `${me}-${sanitize(k)}`, `${path}/properties/${ptr(k)}`);
      return this.add(`${me}-${sanitize(k)}-kv`, `${gbnfLiteral(JSON.stringify(k))} ${sp} ":" ${sp} ${v}`);
    });
    // T_i: members i.. with none written yet; S_i: members i.. after at least one (each needs a comma)
    // (rules nothing references are pruned at the end)
    let S = "", T = "";
    for (let i = keys.length - 1; i >= 0; i--) {
      const need = required.has(keys[i]);
      const s1 = `"," ${sp} ${kvs[i]}${S ? " " + S : ""}`, t1 = `${kvs[i]}${S ? " " + S : ""}`;
      const nS = this.add(`${me}-rest${i}`, need ? s1 : `${s1} | ${S || '""'}`);
      T = this.add(`${me}-from${i}`, need ? t1 : `${t1} | ${T || '""'}`);
      S = nS;
    }
    return this.add(me, `"{" ${sp} ${T} "}" ${sp}`, true);
  }

  /** an object used as a map (no properties): keys of `propertyNames` (a string schema) or of a single pattern of
   *  `patternProperties` (then its values; other keys are not written), values of `additionalProperties`, and between
   *  minProperties and maxProperties members (distinct keys are not enforced) */
  map(s: Record<string, unknown>, name: string, path: string, own: boolean): string {
    const sp = this.prim("space"), ap = s.additionalProperties, pp = s.patternProperties, pn = s.propertyNames;
    if (Array.isArray(s.required) && s.required.length) this.fail("required without properties is not supported", `${path}/required`);
    let key = this.prim("string"), value: unknown = ap === undefined ? true : ap, valuePath = `${path}/additionalProperties`;
    if (pp !== undefined) {
      if (!isObj(pp) || Object.keys(pp).length !== 1) this.fail("patternProperties with one pattern is supported", `${path}/patternProperties`);
      const [pat, sch] = Object.entries(pp)[0];
      key = this.visit({ type: "string", pattern: pat }, `${name}-key`, `${path}/patternProperties`);
      [value, valuePath] = [sch, `${path}/patternProperties/${ptr(pat)}`];
    }
    if (pn !== undefined) {
      if (pp !== undefined) this.fail("propertyNames together with patternProperties is not supported", `${path}/propertyNames`);
      if (!isObj(pn) || [pn.enum ?? []].flat().concat("const" in pn ? [pn.const] : []).some((v) => typeof v !== "string"))
        this.fail("propertyNames must be a schema of strings", `${path}/propertyNames`);
      key = this.visit({ ...pn, type: "string" }, `${name}-key`, `${path}/propertyNames`);
    }
    const lo = this.int(s, "minProperties", path) ?? 0, hi = value === false ? 0 : this.int(s, "maxProperties", path) ?? Infinity;
    if (lo > hi) this.fail(value === false ? "minProperties > 0 with no property allowed matches nothing" : "minProperties is greater than maxProperties", path);
    if (hi === 0) return this.add(name, `"{" ${sp} "}" ${sp}`, own);
    const v = value === true ? this.prim("value") : this.visit(value, `${name}-value`, valuePath);
    const kv = `${key} ":" ${sp} ${v}`, list = `${kv}${hi === 1 ? "" : ` ( "," ${sp} ${kv} )${this.rep(Math.max(lo - 1, 0), hi - 1)}`}`;
    return this.add(name, lo === 0 ? `"{" ${sp} ( ${list} )? "}" ${sp}` : `"{" ${sp} ${list} "}" ${sp}`, own);
  }

  /** an array: `items` for every element, or a tuple — `prefixItems` (draft 2020-12; pydantic's tuples) or the older
   *  array form of `items` — for the first elements and `items` / `additionalItems` for the rest; minItems, maxItems */
  array(s: Record<string, unknown>, name: string, path: string, own: boolean): string {
    const sp = this.prim("space");
    const tupleKey = "prefixItems" in s ? "prefixItems" : Array.isArray(s.items) ? "items" : null;
    const tuple = tupleKey ? s[tupleKey] : [];
    if (!Array.isArray(tuple)) this.fail("prefixItems must be an array of schemas", `${path}/prefixItems`);
    const restKey = tupleKey === "items" ? "additionalItems" : "items", rest = s[restKey];
    const lo = this.int(s, "minItems", path) ?? 0;
    let hi = this.int(s, "maxItems", path) ?? Infinity;
    if (lo > hi) this.fail("minItems is greater than maxItems", path);
    if (rest === false) { if (lo > tuple.length) this.fail(`${restKey}: false with minItems > ${tuple.length} matches nothing`, path); hi = Math.min(hi, tuple.length); }
    if (hi === 0) return this.add(name, `"[" ${sp} "]" ${sp}`, own);
    const it = () => (rest === undefined || rest === true ? this.prim("value") : this.visit(rest, `${name}-item`, `${path}/${restKey}`));
    // after element i - 1: the elements from i on (each after a comma), the first `lo` of all required
    const n = Math.min(tuple.length, hi);
    const heads = tuple.slice(0, n).map((x, i) => this.visit(x, `${name}-${i}`, `${path}/${tupleKey}/${i}`));
    const tail = hi - n > 0 ? (() => { const e = it(); return ` ( "," ${sp} ${e} )${this.rep(Math.max(lo - n, 0), hi - n)}`; })() : "";
    let after = tail; // the elements after index i, as a body
    for (let i = n - 1; i >= 1; i--) {
      const r = this.add(`${name}-from${i}`, `"," ${sp} ${heads[i]}${after}`);
      after = i >= lo ? ` ${r}?` : ` ${r}`;
    }
    // the first element: a prefix one, else one of `items` (then the rest of them after commas, as before)
    const first = n > 0 ? `${heads[0]}${after}` : (() => { const e = it(); return `${e}${hi === 1 ? "" : ` ( "," ${sp} ${e} )${this.rep(Math.max(lo - 1, 0), hi - 1)}`}`; })();
    return this.add(name, lo === 0 ? `"[" ${sp} ( ${first} )? "]" ${sp}` : `"[" ${sp} ${first} "]" ${sp}`, own);
  }

  /** a local reference: the schema it names, its key (null for "#") and its pointer */
  resolve(r: unknown, path: string): { schema: unknown; key: string | null; at: string } {
    this.spend(1, path);
    if (typeof r !== "string") this.fail("$ref must be a string", path);
    if (r === "#") return { schema: this.rootSchema, key: null, at: "#" };
    const m = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(r);
    if (!m) this.fail(`only local references #/$defs/NAME, #/definitions/NAME and # are supported, got ${JSON.stringify(r)}`, path);
    const key = decodeURIComponent(m[2]).replaceAll("~1", "/").replaceAll("~0", "~");
    const defs = isObj(this.rootSchema) ? this.rootSchema[m[1]] : undefined;
    if (!isObj(defs) || !(key in defs)) this.fail(`unresolved reference ${JSON.stringify(r)}`, path);
    return { schema: defs[key], key, at: `#/${m[1]}/${ptr(key)}` };
  }

  ref(r: unknown, path: string): string {
    const hit = typeof r === "string" ? this.refs.get(r) : undefined;
    if (hit) return hit;
    const { schema, key, at } = this.resolve(r, path);
    if (key === null) { this.refs.set("#", "root"); return "root"; }
    const name = this.unique(`def-${sanitize(key)}`);
    this.reserved.add(name);
    this.refs.set(r as string, name);
    const got = this.visit(schema, name, at, true);
    if (got !== name) this.rules.set(name, got); // an alias (e.g. a primitive)
    return name;
  }
}

/** GBNF text (start rule `root`) whose strings are the JSON texts valid under `schema`. Throws GrammarError.
 *  Supported: objects with properties in declared order (optional ones may be left out, commas placed right),
 *  required, additionalProperties (false by default when properties are given), strings (enum, const,
 *  minLength/maxLength, or a pattern: regex.ts, or a format: FORMATS), number and integer (with bounds: num-range.ts,
 *  int-range.ts; multipleOf: multiple.ts), boolean, null, arrays (items, minItems, maxItems; tuples: prefixItems, or
 *  items as an array with additionalItems), anyOf/oneOf, allOf (of one schema: pydantic v1's described $ref; of
 *  object schemas: one merged object), local $ref (#/$defs, #/definitions, #), type lists, and `{}`/`true` = any JSON. */
export function schemaToGbnf(schema: unknown, opts: SchemaOpts = {}): string {
  const c = new Converter(schema, { whitespace: opts.whitespace ?? "flexible", strict: opts.strict ?? true });
  const r = c.visit(schema, "root", "#", true);
  if (r !== "root") c.rules.set("root", r);
  else if (!c.rules.has("root")) throw new GrammarError("the schema is only a reference to itself: it matches nothing", { path: "#/$ref" });
  // keep the rules reachable from root, root first
  const keep = new Set<string>(["root"]), todo = ["root"];
  while (todo.length) {
    const body = c.rules.get(todo.pop()!)!.replace(/"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]/g, " ");
    for (const w of body.match(/[a-zA-Z0-9-]+/g) ?? []) if (c.rules.has(w) && !keep.has(w)) { keep.add(w); todo.push(w); }
  }
  const lines = [...c.rules].filter(([n]) => keep.has(n)).sort(([a], [b]) => Number(b === "root") - Number(a === "root"));
  return lines.map(([n, b]) => `${n} ::= ${b}`).join("\n") + "\n";
}

/** The generic JSON-object grammar, for `response_format: {type: "json_object"}`. */
export function jsonObjectGbnf(opts: Pick<SchemaOpts, "whitespace"> = {}): string {
  return schemaToGbnf({ type: "object" }, opts);
}
