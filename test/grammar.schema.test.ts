// JSON Schema -> GBNF: which JSON texts each generated grammar accepts and rejects, errors for
// unsupported keywords (naming the schema path), strict: false, and response_format handling.
import { describe, expect, test } from "bun:test";
import { compileGrammar, gbnfLiteral, GrammarError, jsonObjectGbnf, responseFormatGbnf, schemaToGbnf } from "../src/engine/grammar/index.ts";
import { Rng } from "../src/engine/sampler.ts";

function check(schema: unknown, yes: string[], no: string[]): void {
  const g = compileGrammar(schemaToGbnf(schema));
  for (const s of yes) expect([s, g.matches(s)]).toEqual([s, true]);
  for (const s of no) expect([s, g.matches(s)]).toEqual([s, false]);
}

describe("schemaToGbnf: accepted and rejected texts", () => {
  test("object: declared order, required, optional, no extra keys", () => {
    check({ type: "object", properties: { a: { type: "integer" }, b: { type: "string" }, c: { type: "boolean" } }, required: ["b"] },
      ['{"b":""}', '{"a":1,"b":"x"}', '{"b":"x","c":true}', '{ "a" : -3 , "b" : "y" , "c" : false }', '{"a":0,"b":"","c":true}\n'],
      ["{}", '{"a":1}', '{"b":"x","a":1}', '{"b":"x",}', '{,"b":"x"}', '{"b":"x","d":1}', '{"a":01,"b":""}', '{"a":1.5,"b":""}']);
  });
  test("object without properties: any keys (or values of additionalProperties)", () => {
    check({ type: "object" }, ["{}", '{"x":[1,{"y":null}],"z":"w"}'], ["[]", '{"x"}']);
    check({ type: "object", additionalProperties: { type: "number" } }, ['{"x":1,"y":2e5}'], ['{"x":"1"}']);
    check({ type: "object", additionalProperties: false }, ["{}", "{ }"], ['{"x":1}']);
  });
  test("strings: enum, const, lengths, escapes, unicode", () => {
    check({ enum: ["red", "green", 3, null] }, ['"red"', '"green"', "3", "null"], ['"blue"', '"Red"', "4"]);
    check({ const: { k: [1, "x"] } }, ['{"k":[1,"x"]}'], ['{"k":[1,"y"]}', '{ "k":[1,"x"]}']);
    check({ type: "string", minLength: 2, maxLength: 3 },
      ['"ab"', '"abc"', '"é😀"', '"\\n\\""', '"\\u00e9x"', '"\\ud83d\\ude00x"'],
      ['"a"', '"abcd"', '"\\ud83d"', '"\\q"', '"a\nb"', '"\u0001x"']);
  });
  test("numbers, integers, booleans, null", () => {
    check({ type: "number" }, ["0", "-0", "1.5", "-12.25e-3", "7E+2"], ["01", "1.", ".5", "+1", "1e", "NaN"]);
    check({ type: "integer" }, ["0", "-7", "1234567890123456"], ["1.0", "1e3", "12345678901234567"]);
    check({ type: "boolean" }, ["true", "false"], ["True", "1"]);
    check({ type: "null" }, ["null"], ["nil"]);
    check({ type: ["integer", "null"] }, ["1", "null"], ['"1"']);
  });
  test("arrays: items, minItems, maxItems", () => {
    check({ type: "array", items: { type: "integer" }, minItems: 1, maxItems: 3 }, ["[1]", "[1, 2,3]"], ["[]", "[1,2,3,4]", "[1,]", '["1"]']);
    check({ type: "array", items: { type: "string" }, minItems: 2 }, ['["a","b"]', '["a","b","c","d"]'], ['["a"]']);
    check({ type: "array", maxItems: 0 }, ["[]"], ["[1]"]);
    check({ type: "array" }, ['[1,"a",{},[null]]', "[]"], ["[,]"]);
  });
  test("anyOf / oneOf, nested objects, local $ref recursion", () => {
    check({ anyOf: [{ type: "integer" }, { type: "object", properties: { x: { type: "null" } }, required: ["x"] }] },
      ["5", '{"x":null}'], ['{"x":1}', '"5"']);
    const tree = { type: "object", properties: { v: { type: "integer" }, kids: { type: "array", items: { $ref: "#" } } }, required: ["v"] };
    check(tree, ['{"v":1}', '{"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]}'], ['{"v":1,"kids":[{}]}']);
    const defs = { $defs: { P: { type: "object", properties: { q: { $ref: "#/definitions/Q" } } } }, definitions: { Q: { type: "string" } }, $ref: "#/$defs/P" };
    check(defs, ['{"q":"s"}', "{}"], ['{"q":1}']);
  });
  test("keys with quotes, backslashes and non-ASCII characters", () => {
    check({ type: "object", properties: { 'a"b': { type: "integer" }, "c\\d": { type: "integer" }, "ключ ☃": { type: "integer" } }, required: ['a"b', "c\\d", "ключ ☃"] },
      ['{"a\\"b":1,"c\\\\d":2,"ключ ☃":3}'], ['{"a"b":1,"c\\\\d":2,"ключ ☃":3}']);
  });
  test("json_object grammar", () => {
    const g = compileGrammar(jsonObjectGbnf());
    expect(g.matches('{"a":[1,2,{"b":"c"}],"d":true}')).toBe(true);
    expect(g.matches("[1]")).toBe(false);
    expect(g.matches('"x"')).toBe(false);
  });
  test("gbnfLiteral round-trips arbitrary strings", () => {
    const rng = new Rng(11), pool = ['"', "\\", "\n", "\r", "\t", "\u0000", "\u007f", "a", "é", "😀", "[", "]", "#", " "];
    for (let k = 0; k < 200; k++) {
      let s = "";
      for (let i = 0; i < 6; i++) s += pool[Math.floor(rng.next() * pool.length)];
      expect(compileGrammar(`root ::= ${gbnfLiteral(s)}`).matches(s)).toBe(true);
    }
  });
});

describe("schemaToGbnf: errors name the schema path", () => {
  const cases: [unknown, string, string][] = [
    [{ type: "string", pattern: "(a)\\1" }, "#/pattern", "pattern: regex: \\1 is not supported"],
    [{ type: "object", properties: { n: { type: "array", uniqueItems: true } } }, "#/properties/n/uniqueItems", 'unsupported keyword "uniqueItems"'],
    [{ type: "integer", minimum: 5, maximum: 4 }, "#", "the integer bounds leave no value"],
    [{ type: "object", properties: { d: { type: "string", format: "uri-template" } } }, "#/properties/d/format", "format \"uri-template\" is not supported"],
    [{ allOf: [{ type: "string" }, { minLength: 2 }] }, "#/allOf/0/type", "allOf: every part must be of type object"],
    [{ allOf: [{ type: "string" }], minLength: 2 }, "#", "allOf: only object schemas"],
    [{ allOf: [{ properties: { a: { type: "string" } } }, { properties: { a: { type: "integer" } } }] }, "#/allOf/1/properties/a", "two different schemas"],
    [{ allOf: [{ properties: { a: {} }, additionalProperties: false }, { properties: { b: {} } }] }, "#/allOf/0", 'property "b" is excluded'],
    [{ allOf: [{ $ref: "#/$defs/A", description: "x", minProperties: 1 }, {}], $defs: { A: {} } }, "#/allOf/0", "beside $ref"],
    [{ allOf: [] }, "#/allOf", "non-empty"],
    [{ type: "array", prefixItems: { type: "string" } }, "#/prefixItems", "prefixItems must be an array"],
    [{ type: "array", prefixItems: [{}, {}], items: false, minItems: 3 }, "#", "items: false with minItems > 2"],
    [{ type: "object", properties: { a: {} }, additionalProperties: true }, "#/additionalProperties", "additionalProperties"],
    [{ type: "object", properties: { a: {} }, required: ["b"] }, "#/required", 'required property "b"'],
    [{ $ref: "other.json#/x" }, "#/$ref", "only local references"],
    [{ $ref: "#/$defs/missing" }, "#/$ref", "unresolved reference"],
    [{ type: "strin" }, "#/type", 'unknown type "strin"'],
    [{ enum: [] }, "#/enum", "non-empty"],
    [{ type: "string", maxLength: -1 }, "#/maxLength", "non-negative integer"],
    [{ type: "array", minItems: 3, maxItems: 2 }, "#", "minItems is greater"],
    [false, "#", "matches nothing"],
    ["string", "#", "must be an object or a boolean"],
    [{ anyOf: [{ type: "string" }, { type: "integer", multipleOf: 2, minimum: 1 }] }, "#/anyOf/1/multipleOf", "multipleOf: with one bound"],
    [{ type: "object", anyOf: [{}] }, "#", "beside anyOf"],
  ];
  for (const [schema, path, msg] of cases)
    test(`${JSON.stringify(schema)} -> ${path}`, () => {
      let err: unknown;
      try { schemaToGbnf(schema); } catch (e) { err = e; }
      expect(err).toBeInstanceOf(GrammarError);
      expect((err as GrammarError).path).toBe(path);
      expect((err as GrammarError).message).toContain(msg);
    });

  test("strict: false ignores what it cannot enforce", () => {
    const g = compileGrammar(schemaToGbnf({ type: "object", properties: { n: { type: "integer", multipleOf: 2, minimum: 1 }, s: { type: "string", pattern: "(x)\\1" } } }, { strict: false }));
    expect(g.matches('{"n":3,"s":"y"}')).toBe(true); // (multipleOf ignored, minimum kept)
    expect(g.matches('{"n":0,"s":"y"}')).toBe(false);
  });
  test("allOf of one schema beside annotations (pydantic v1's described $ref) is that schema", () => {
    const schema = { type: "object", properties: { p: { title: "P", description: "a point", allOf: [{ $ref: "#/definitions/Pt" }] } }, required: ["p"],
      definitions: { Pt: { type: "object", properties: { x: { type: "integer" } }, required: ["x"] } } };
    const g = compileGrammar(schemaToGbnf(schema, { whitespace: "compact" }));
    expect(g.matches('{"p":{"x":3}}')).toBe(true);
    expect(g.matches('{"p":3}')).toBe(false);
  });
  test("allOf of object schemas ($ref'd, inline, nested, beside the schema's own properties) is one merged object", () => {
    const defs = { $defs: { Base: { type: "object", properties: { id: { type: "integer" } }, required: ["id"] },
      Named: { allOf: [{ $ref: "#/$defs/Base" }, { properties: { name: { type: "string" } }, required: ["name"] }] } } };
    const ok = (schema: object, v: string) => compileGrammar(schemaToGbnf(schema, { whitespace: "compact" })).matches(v);
    const named = { ...defs, allOf: [{ $ref: "#/$defs/Named" }, { properties: { tag: { enum: ["a", "b"] } } }] };
    expect(['{"id":1,"name":"x"}', '{"id":1,"name":"x","tag":"b"}', '{"name":"x"}', '{"id":1}', '{"id":1,"name":"x","tag":"c"}', '{"id":1,"name":"x","z":1}']
      .map((v) => ok(named, v))).toEqual([true, true, false, false, false, false]);
    // the schema's own properties first, then the parts'; a property in two parts with one schema is one property
    const own = { type: "object", properties: { a: { type: "boolean" } }, required: ["a"], allOf: [{ properties: { b: { type: "null" }, a: { type: "boolean" } } }] };
    expect(['{"a":true,"b":null}', '{"a":true}', '{"b":null}'].map((v) => ok(own, v))).toEqual([true, true, false]);
    // a part closed with additionalProperties: false that lists every property merges
    expect(ok({ allOf: [{ properties: { a: {} }, additionalProperties: false }, { required: ["a"] }] }, '{"a":1}')).toBe(true);
    // strict: false drops an allOf that cannot merge (and keeps the rest)
    const g = compileGrammar(schemaToGbnf({ type: "object", properties: { a: { type: "integer" } }, allOf: [{ type: "string" }] }, { strict: false, whitespace: "compact" }));
    expect(g.matches('{"a":1}')).toBe(true);
  });
  test("tuples (prefixItems, and the older array form of items with additionalItems) accept exactly the arrays they describe", () => {
    const kinds: [object, (v: unknown) => boolean][] = [[{ type: "integer" }, Number.isInteger], [{ type: "string" }, (v) => typeof v === "string"],
      [{ type: "boolean" }, (v) => typeof v === "boolean"]];
    const elems = [1, "a", true], rng = new Rng(5);
    const arrays: unknown[][] = [[]];
    for (let len = 1; len <= 4; len++) for (let k = 0; k < 3 ** len; k++) arrays.push(Array.from({ length: len }, (_, i) => elems[Math.floor(k / 3 ** i) % 3]));
    for (let c = 0; c < 300; c++) {
      const n = Math.floor(rng.next() * 4), heads = Array.from({ length: n }, () => kinds[Math.floor(rng.next() * 3)]);
      const restPick = Math.floor(rng.next() * 3), rest: [unknown, (v: unknown) => boolean] | null =
        restPick === 0 ? [undefined, () => true] : restPick === 1 ? [false, () => false] : [kinds[2][0], kinds[2][1]];
      const lo = rng.next() < 0.5 ? undefined : Math.floor(rng.next() * 4), hi = rng.next() < 0.5 ? undefined : Math.floor(rng.next() * 5);
      if (lo !== undefined && hi !== undefined && lo > hi) continue;
      if (rest![0] === false && (lo ?? 0) > n) continue;
      const old = rng.next() < 0.3; // draft 4's spelling
      const schema: Record<string, unknown> = { type: "array", ...(lo !== undefined ? { minItems: lo } : {}), ...(hi !== undefined ? { maxItems: hi } : {}) };
      if (old) { schema.items = heads.map((h) => h[0]); if (rest![0] !== undefined) schema.additionalItems = rest![0]; }
      else { schema.prefixItems = heads.map((h) => h[0]); if (rest![0] !== undefined) schema.items = rest![0]; }
      if (old && n === 0) continue; // (items: [] alone)
      const g = compileGrammar(schemaToGbnf(schema, { whitespace: "compact" }));
      for (const a of arrays) {
        const want = (lo === undefined || a.length >= lo) && (hi === undefined || a.length <= hi) && a.every((v, i) => (i < n ? heads[i][1](v) : rest![1](v)));
        if (g.matches(JSON.stringify(a)) !== want) throw new Error(`${JSON.stringify(schema)} on ${JSON.stringify(a)}: grammar ${!want}`);
      }
    }
  });
  test("maps: propertyNames, one patternProperties pattern, minProperties / maxProperties accept exactly the objects they describe", () => {
    const keys = ["a", "ab", "x", "k1", "abc", ""], values = [1, true, "s"];
    const objects: [string, unknown][][] = [[]];
    for (let n = 1; n <= 3; n++) for (let k = 0; k < 18 ** n; k += 7) objects.push(Array.from({ length: n }, (_, i) => [keys[Math.floor(k / 18 ** i) % 18 % 6], values[Math.floor(k / 18 ** i / 6) % 3]]));
    const isInt = (v: unknown) => Number.isInteger(v), isBool = (v: unknown) => typeof v === "boolean";
    const cases: [object, (k: string) => boolean, (v: unknown) => boolean][] = [
      [{ propertyNames: { pattern: "^[a-c]+$" }, additionalProperties: { type: "integer" } }, (k) => /^[a-c]+$/.test(k), isInt],
      [{ propertyNames: { maxLength: 1 } }, (k) => k.length <= 1, () => true],
      [{ propertyNames: { enum: ["x", "k1"] }, additionalProperties: { type: "boolean" } }, (k) => k === "x" || k === "k1", isBool],
      [{ patternProperties: { "^k[0-9]$": { type: "boolean" } } }, (k) => /^k[0-9]$/.test(k), isBool],
      [{ additionalProperties: { type: "integer" } }, () => true, isInt],
    ];
    for (const [base, keyOk, valOk] of cases) for (const [lo, hi] of [[undefined, undefined], [1, undefined], [undefined, 2], [2, 2], [0, 0]]) {
      const schema = { type: "object", ...base, ...(lo !== undefined ? { minProperties: lo } : {}), ...(hi !== undefined ? { maxProperties: hi } : {}) };
      const g = compileGrammar(schemaToGbnf(schema, { whitespace: "compact" }));
      for (const o of objects) {
        const text = `{${o.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(",")}}`;
        const want = (lo === undefined || o.length >= lo) && (hi === undefined || o.length <= hi) && o.every(([k, v]) => keyOk(k) && valOk(v));
        if (g.matches(text) !== want) throw new Error(`${JSON.stringify(schema)} on ${text}: grammar ${!want}`);
      }
    }
    // uniqueItems: false is no constraint
    expect(compileGrammar(schemaToGbnf({ type: "array", uniqueItems: false }, { whitespace: "compact" })).matches("[1,1]")).toBe(true);
    for (const [schema, at, msg] of [
      [{ type: "object", properties: { a: {} }, propertyNames: { maxLength: 3 } }, "#/propertyNames", "together with properties"],
      [{ type: "object", patternProperties: { "^a": {}, "^b": {} } }, "#/patternProperties", "one pattern"],
      [{ type: "object", propertyNames: { enum: ["a", 1] } }, "#/propertyNames", "schema of strings"],
      [{ type: "object", minProperties: 3, maxProperties: 2 }, "#", "minProperties is greater"],
      [{ type: "array", uniqueItems: true }, "#/uniqueItems", "unsupported keyword"],
    ] as const) {
      let err: unknown;
      try { schemaToGbnf(schema); } catch (e) { err = e; }
      expect([(err as GrammarError)?.path, String(err).includes(msg)]).toEqual([at, true]);
    }
  });
  test("2000 random schemas (every keyword, odd values): a grammar that compiles, or a GrammarError — never another error", () => {
    const rng = new Rng(3), n = (k: number) => Math.floor(rng.next() * k), pick = <T>(a: T[]): T => a[n(a.length)];
    const val = () => pick<unknown>([0, 1, -1, 0.5, 2.5, 1e300, -0.01, "x", "", null, true, [], {}, [1, "a"], 7, 100, 3]);
    const KEYS = ["type", "properties", "required", "items", "prefixItems", "additionalProperties", "allOf", "anyOf", "oneOf", "enum", "const",
      "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern", "format", "minItems",
      "maxItems", "propertyNames", "patternProperties", "minProperties", "maxProperties", "uniqueItems", "$ref", "$defs", "additionalItems", "not"];
    const gen = (depth: number): unknown => {
      if (depth > 3 || n(5) === 0) return pick<unknown>([true, false, {}, { type: "string" }, { type: "integer" }, 5, "s", null]);
      const s: Record<string, unknown> = {};
      for (let i = n(4) + 1; i > 0; i--) {
        const k = pick(KEYS);
        if (k === "type") s[k] = pick<unknown>(["object", "array", "string", "integer", "number", "boolean", "null", ["integer", "null"], "weird", 3]);
        else if (k === "properties" || k === "$defs" || k === "patternProperties")
          s[k] = Object.fromEntries(Array.from({ length: n(3) }, (_, i) => [pick(["a", "b", "^x", "c/d", "~e", ""]) + i, gen(depth + 1)]));
        else if (k === "required") s[k] = pick<unknown>([["a0"], ["b1", "zz"], [], "a", [1]]);
        else if (["items", "additionalProperties", "propertyNames", "not", "additionalItems"].includes(k)) s[k] = gen(depth + 1);
        else if (["prefixItems", "allOf", "anyOf", "oneOf"].includes(k)) s[k] = n(6) === 0 ? gen(depth + 1) : Array.from({ length: n(3) }, () => gen(depth + 1));
        else if (k === "enum") s[k] = n(5) === 0 ? "x" : Array.from({ length: n(3) }, val);
        else if (k === "pattern") s[k] = pick(["^a+$", "(", "[a-z]{2,4}", "\\d", "a|b", "(?=x)", ".*"]);
        else if (k === "format") s[k] = pick<unknown>(["date", "uri", "ipv6", "duration", "nope", "email", 5]);
        else if (k === "$ref") s[k] = pick<unknown>(["#", "#/$defs/a0", "#/$defs/zz", "http://x", 3]);
        else s[k] = val();
      }
      return s;
    };
    let compiled = 0;
    for (let i = 0; i < 1000; i++) {
      const schema = gen(0);
      for (const strict of [true, false]) {
        try { compileGrammar(schemaToGbnf(schema, { strict, whitespace: "compact" })); compiled++; } catch (e) {
          if (!(e instanceof GrammarError)) throw new Error(`${JSON.stringify(schema)} (strict ${strict}): ${(e as Error).message}`);
        }
      }
    }
    expect(compiled).toBeGreaterThan(500); // (both outcomes well represented)
    expect(() => schemaToGbnf({ $ref: "#" })).toThrow(GrammarError); // (found by it: a root that is only a reference to itself)
  });
  test("annotations and unknown keywords are ignored", () => {
    expect(() => schemaToGbnf({ title: "t", description: "d", $schema: "x", default: 1, examples: [], type: "integer", "x-vendor": 1 })).not.toThrow();
  });
});

describe("responseFormatGbnf", () => {
  test("text, json_object, json_schema", () => {
    expect(responseFormatGbnf({ type: "text" })).toBeNull();
    expect(responseFormatGbnf({ type: "json_object" })).toBe(jsonObjectGbnf());
    const g = compileGrammar(responseFormatGbnf({ type: "json_schema", json_schema: { name: "x", strict: true, schema: { type: "object", properties: { a: { type: "boolean" } }, required: ["a"] } } })!);
    expect(g.matches('{"a":true}')).toBe(true);
    expect(g.matches("{}")).toBe(false);
  });
  test("bad shapes are GrammarErrors naming the field", () => {
    expect(() => responseFormatGbnf({ type: "xml" })).toThrow(GrammarError);
    expect(() => responseFormatGbnf({ type: "json_schema" })).toThrow("response_format.json_schema");
    expect(() => responseFormatGbnf({ type: "json_schema", json_schema: { schema: { type: "object", properties: { a: { format: "x" } } } } }))
      .toThrow("schema #/properties/a/format");
  });
});
