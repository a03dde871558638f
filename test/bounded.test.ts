// Request-body validation whose work is bounded by what the request holds (src/server/bounded.ts, json-bounds.ts):
// the bounded lists and maps answer as zod's own schemas do (same data, same first issue), but count before they
// parse and stop at the first bad item; the text scan finds the same too-deep path as a walk of the parsed value,
// and refuses bodies past its value and container counts.
import { describe, expect, test } from "bun:test";
import { z } from "zod";
import { dict, jsonObject, list, tokenIds } from "../src/server/bounded.ts";
import { jsonBoundsError, MAX_BODY_CONTAINERS, MAX_BODY_VALUES, MAX_OBJECT_KEYS } from "../src/server/json-bounds.ts";
import { CompletionRequest, zodError } from "../src/server/schemas.ts";

let seed = 7;
const rnd = (n: number) => { // (mulberry32)
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = Math.imul(seed ^ (seed >>> 15), seed | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) % n;
};
const pick = <T>(xs: T[]): T => xs[rnd(xs.length)];
const answer = (s: z.ZodType, v: unknown) => {
  const r = s.safeParse(v);
  return r.success ? { ok: r.data } : { error: zodError(r.error).message };
};

describe("bounded lists and maps", () => {
  const Item = z.object({ role: z.enum(["user", "tool"]), content: z.string().max(3) });
  const item = () => pick<unknown>([{ role: "user", content: "ab" }, { role: "tool", content: "" }, { role: "bot", content: "a" }, { content: "abcd" }, 5, null, "x", {}]);
  const id = () => pick<unknown>([0, 1, 7, 123456, -1, 2.5, "3", null, 2 ** 53, -0]);

  test("answer as zod's arrays and records do: the same data, or the same first issue", () => {
    const pairs: [z.ZodType, z.ZodType, () => unknown][] = [
      [z.object({ m: list(Item, { min: 1, max: 6, minMessage: "must not be empty" }) }), z.object({ m: z.array(Item).min(1, "must not be empty").max(6) }),
        () => ({ m: rnd(8) === 0 ? "no" : Array.from({ length: rnd(7) }, item) })],
      [z.object({ ids: tokenIds({ min: 1, max: 8 }) }), z.object({ ids: z.array(z.int().min(0)).min(1).max(8) }), () => ({ ids: Array.from({ length: rnd(9) }, id) })],
      [z.object({ b: dict(z.string().regex(/^\d+$/, "keys must be token ids"), z.number().max(10), 6) }),
        z.object({ b: z.record(z.string().regex(/^\d+$/, "keys must be token ids"), z.number().max(10)).refine((r) => Object.keys(r).length <= 6) }),
        () => ({ b: Object.fromEntries(Array.from({ length: rnd(7) }, () => [pick(["1", "22", "x", "0"]) + rnd(3), pick<unknown>([1, 11, "a", -4])])) })],
      [z.object({ o: z.union([jsonObject, z.boolean()]) }), z.object({ o: z.union([z.record(z.string(), z.unknown()), z.boolean()]) }),
        () => ({ o: pick<unknown>([{ a: [1] }, {}, true, [], "s", null, 3]) })],
    ];
    for (const [ours, zods, gen] of pairs) {
      for (let k = 0; k < 400; k++) {
        const v = gen();
        // (a bad key: zod's record says "Invalid key in record"; ours gives the key schema's own message)
        const theirs = answer(zods, v), named = theirs.error?.replace(/Invalid key in record$/, "keys must be token ids");
        expect([v, answer(ours, v)]).toEqual([v, named ? { error: named } : theirs]);
      }
    }
  });

  test("a list is counted before its items are parsed, and its items are parsed up to the first bad one", () => {
    let parsed = 0;
    const El = z.custom<string>((x) => { parsed++; return typeof x === "string"; }, "not a string");
    const L = list(El, { max: 1000 });
    expect(answer(L, ["a", 5, ...Array(998).fill("b")])).toEqual({ error: "1: not a string" });
    expect(parsed).toBe(2); // (z.array parses all 1000)
    parsed = 0;
    expect(answer(L, Array(1001).fill("b")).error).toBe("Too big: expected array to have <=1000 items");
    expect(parsed).toBe(0);
    parsed = 0;
    const D = dict(z.string(), El, 10);
    expect(answer(D, Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`k${i}`, "v"]))).error).toMatch(/^Too big/);
    expect(answer(D, { a: "v", b: 3, c: "v" })).toEqual({ error: "b: not a string" });
    expect(parsed).toBe(2);
  });

  test("token ids: one loop, the first bad id named; the input kept, not copied", () => {
    const ids = Array.from({ length: 100_000 }, (_, i) => i);
    const r = tokenIds({ max: 1 << 20 }).safeParse(ids);
    expect(r.success && r.data === ids).toBe(true);
    ids[70_000] = -1;
    expect(answer(tokenIds({ max: 1 << 20 }), ids)).toEqual({ error: "70000: Too small: expected number to be >=0" });
  });

  test("a union names the alternative whose items all took their type", () => {
    expect(answer(CompletionRequest, { prompt: [1, -2] })).toEqual({ error: "prompt.1: Too small: expected number to be >=0" });
    expect(answer(CompletionRequest, { prompt: ["a", 5] })).toEqual({ error: "prompt.1: Invalid input: expected string, received number" });
    expect(answer(CompletionRequest, { prompt: [[1], [2, "x"]] })).toEqual({ error: "prompt.1.1: Invalid input: expected number, received string" });
  });
});

/** the walk json-bounds.ts replaced: the first container (in document order) at depth ≥ max, its path */
function walkDepth(v: unknown, max: number): string | null {
  const todo: { v: unknown; path: string[] }[] = [{ v, path: [] }];
  while (todo.length) {
    const n = todo.pop()!;
    if (n.v === null || typeof n.v !== "object") continue;
    if (n.path.length >= max) return `${n.path.slice(0, 4).join(".") || "body"}${n.path.length > 4 ? ".…" : ""}: nests deeper than ${max} levels`;
    const kids = Array.isArray(n.v) ? n.v.map((x, i) => [String(i), x] as const) : Object.entries(n.v);
    for (let i = kids.length - 1; i >= 0; i--) todo.push({ v: kids[i][1], path: [...n.path, kids[i][0]] });
  }
  return null;
}

describe("the body's shape, judged on its text", () => {
  const value = (d: number): unknown => {
    const k = d > 6 ? rnd(2) : rnd(8);
    if (k === 0) return pick([0, -1.5e-3, true, null]);
    if (k === 1) return pick(["", "a\"b", "\\", "q\\\\\"[{", "é,:]}"]);
    if (k < 5) return Array.from({ length: rnd(4) }, () => value(d + 1));
    return Object.fromEntries(Array.from({ length: rnd(4) }, () => [pick(["a", "b\"", "c:d", "[", "\\", ""]) + rnd(9), value(d + 1)]));
  };

  test("finds the path a walk of the parsed value finds", () => {
    let deep = 0;
    for (let k = 0; k < 3000; k++) {
      const v = value(0), text = JSON.stringify(v, null, rnd(2) ? 1 : undefined), max = 1 + rnd(7), want = walkDepth(v, max);
      expect([text, max, jsonBoundsError(text, max)?.message ?? null]).toEqual([text, max, want]);
      if (want) deep++;
    }
    expect(deep).toBeGreaterThan(300); // (and as many pass)
    expect(deep).toBeLessThan(2700);
  });

  test("counts values and containers up to their bounds", () => {
    expect(jsonBoundsError(`[${"0,".repeat(MAX_BODY_VALUES - 1)}0]`)).toBeNull();
    expect(jsonBoundsError(`[${"0,".repeat(MAX_BODY_VALUES)}0]`)?.message).toBe(`the body holds more than ${MAX_BODY_VALUES} values`);
    expect(jsonBoundsError(`[${"[],".repeat(MAX_BODY_CONTAINERS - 2)}[]]`)).toBeNull();
    expect(jsonBoundsError(`[${"{},".repeat(MAX_BODY_CONTAINERS - 1)}{}]`)?.message).toBe(`the body holds more than ${MAX_BODY_CONTAINERS} objects and arrays`);
    expect(jsonBoundsError(`{"a":"${",".repeat(2 * MAX_BODY_VALUES)}"}`)).toBeNull(); // (commas in strings are text)
    const obj = (n: number) => `{${Array.from({ length: n }, (_, i) => `"k${i}":{"a":1,"b":2}`).join(",")}}`;
    expect(jsonBoundsError(`[${obj(MAX_OBJECT_KEYS)},${obj(MAX_OBJECT_KEYS)}]`)).toBeNull(); // (each object's own count)
    expect(jsonBoundsError(`[1,{"x":${obj(MAX_OBJECT_KEYS + 1)}}]`)?.message).toBe(`the body holds more than ${MAX_OBJECT_KEYS} keys in one object`);
  });

  test("a key of megabytes is not echoed back in full", () => {
    const key = "k".repeat(1 << 20);
    expect(jsonBoundsError(`{"${key}":[[[]]]}`, 2)?.message).toBe(`${"k".repeat(64)}….0: nests deeper than 2 levels`);
  });

  test("text that is not JSON ends the scan", () => {
    for (const t of ['{"a":"never closed', '"\\"', "]]]}}", '{"a":[[[', "[1,2,", '{"\\x":[]}'])
      expect(jsonBoundsError(t, 2)?.status ?? null).toBe(t === '{"a":[[[' ? 400 : null);
  });
});
