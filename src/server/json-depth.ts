// How deep a parsed JSON body nests, measured without recursion. JSON.parse takes any depth, but zod, the chat
// template, the schema converter and the copy to the engine worker (structuredClone) recurse and die past a few
// thousand levels with a 500 "Maximum call stack size exceeded": a body nesting deeper than MAX_BODY_DEPTH is refused
// first, with a 400 naming the field where it goes too deep. No state.
import { apiError, type ApiError } from "./http-errors.ts";

export const MAX_BODY_DEPTH = 256;

interface Node { v: unknown; d: number; key: string; up: Node | null }

/** null when `value` nests at most `max` levels deep; else the 400 naming the path to the first level past it. */
export function depthError(value: unknown, max = MAX_BODY_DEPTH): ApiError | null {
  const todo: Node[] = [{ v: value, d: 0, key: "", up: null }];
  while (todo.length) {
    const n = todo.pop()!;
    if (n.v === null || typeof n.v !== "object") continue;
    if (n.d >= max) {
      const path: string[] = [];
      for (let x: Node | null = n; x && x.up; x = x.up) path.push(x.key);
      path.reverse();
      const field = path.slice(0, 4).join(".") || "body";
      return apiError(400, `${field}${path.length > 4 ? ".…" : ""}: nests deeper than ${max} levels`, field, "too_deep");
    }
    if (Array.isArray(n.v)) for (let i = n.v.length - 1; i >= 0; i--) todo.push({ v: n.v[i], d: n.d + 1, key: String(i), up: n });
    else { const e = Object.entries(n.v); for (let i = e.length - 1; i >= 0; i--) todo.push({ v: e[i][1], d: n.d + 1, key: e[i][0], up: n }); }
  }
  return null;
}
