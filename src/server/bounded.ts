// zod lists and maps whose cost is bounded by the request, not by the attacker's patience. zod's z.array parses every
// item and makes an issue for each bad one before its .max() is looked at (an 8 MiB body of 2.5M `{}` as messages:
// 4.2 s of the HTTP thread; 4M token ids of -1: 5.2 s), and z.record copies every entry before a count is checked
// (600k logit_bias keys: 1 s). Here the count is checked first, items are parsed in order up to the first bad one
// (its issues, at its index, are the list's), token ids pass one loop, and free-form JSON objects are not copied.
// The issues are zod's own, so messages read as before. No state.
import { z } from "zod";

type Ctx = z.core.$RefinementCtx;
interface Bounds { min?: number; max: number; minMessage?: string; maxMessage?: string }

const refuse = (ctx: Ctx, issue: Parameters<Ctx["addIssue"]>[0]): never => {
  ctx.addIssue(issue);
  return z.NEVER;
};

/** v's length against the bounds (an issue and true when it is outside them) */
function outside(v: unknown[], b: Bounds, ctx: Ctx): boolean {
  const { min = 0, max } = b;
  if (v.length > max) refuse(ctx, { code: "too_big", origin: "array", maximum: max, inclusive: true, input: v, ...(b.maxMessage ? { message: b.maxMessage } : {}) });
  else if (v.length < min) refuse(ctx, { code: "too_small", origin: "array", minimum: min, inclusive: true, input: v, ...(b.minMessage ? { message: b.minMessage } : {}) });
  else return false;
  return true;
}

/** item `at`'s issues as the list's or map's (or its output when it parses after all) */
function item<T extends z.ZodType>(el: T, x: unknown, at: PropertyKey, ctx: Ctx): { ok: true; v: z.output<T> } | { ok: false } {
  const r = el.safeParse(x);
  if (r.success) return { ok: true, v: r.data };
  for (const iss of r.error.issues) ctx.addIssue({ ...iss, path: [at, ...iss.path] } as Parameters<Ctx["addIssue"]>[0]);
  return { ok: false };
}

/** z.array(el) with its bounds; items after the first bad one are not parsed. `fast`: a check that accepts an item
 *  as el would, unchanged, without zod (items it refuses go through el for their issue or output) */
export function list<T extends z.ZodType>(el: T, b: Bounds, fast?: (x: unknown) => boolean) {
  return z.unknown().transform((v, ctx): z.output<T>[] => {
    if (!Array.isArray(v)) return refuse(ctx, { code: "invalid_type", expected: "array", input: v });
    if (outside(v, b, ctx)) return z.NEVER;
    let out: z.output<T>[] | null = null; // (a copy only once an item differs from its input)
    for (let i = 0; i < v.length; i++) {
      if (fast?.(v[i])) { if (out) out[i] = v[i]; continue; }
      const r = item(el, v[i], i, ctx);
      if (!r.ok) return z.NEVER;
      if (!out && r.v !== v[i]) out = v.slice(0, i);
      if (out) out[i] = r.v;
    }
    return out ?? (v as z.output<T>[]);
  });
}

const tokenId = z.int().min(0);
export const isTokenId = (x: unknown) => Number.isSafeInteger(x) && (x as number) >= 0;
/** token ids (integers ≥ 0): one loop over them, zod only for the first bad one's issue */
export const tokenIds = (b: Bounds) => list(tokenId, b, isTokenId);

/** z.record(key, val) with at most `max` entries, counted before any is parsed; entries after the first bad one are
 *  not parsed */
export function dict<K extends z.ZodType<string>, V extends z.ZodType>(key: K, val: V, max: number, maxMessage?: string) {
  return z.unknown().transform((v, ctx): Record<z.output<K>, z.output<V>> => {
    if (!isObject(v)) return refuse(ctx, { code: "invalid_type", expected: "record", input: v });
    let n = 0;
    for (const _ in v) if (++n > max) return refuse(ctx, { code: "too_big", origin: "object", maximum: max, inclusive: true, input: v, ...(maxMessage ? { message: maxMessage } : {}) });
    const out = Object.create(null) as Record<string, z.output<V>>; // (a key "__proto__" is a key)
    for (const [k, x] of Object.entries(v)) {
      const kr = key.safeParse(k);
      if (!kr.success) return refuse(ctx, { ...kr.error.issues[0], path: [k] } as Parameters<Ctx["addIssue"]>[0]);
      const r = item(val, x, k, ctx);
      if (!r.ok) return z.NEVER;
      out[k] = r.v;
    }
    return out;
  });
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
/** a JSON object of any keys and values (a JSON schema, metadata), taken as it is: not walked, not copied */
export const jsonObject = z.unknown().transform((v, ctx): Record<string, unknown> =>
  isObject(v) ? v : refuse(ctx, { code: "invalid_type", expected: "record", input: v }));
