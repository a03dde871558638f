// A JSON body's shape, judged on its text before JSON.parse, in one pass:
// - how deep it nests. JSON.parse takes any depth, but zod, the chat template, the schema converter and the copy to
//   the engine worker (structuredClone) recurse and die past a few thousand levels with a 500 "Maximum call stack
//   size exceeded": a body nesting deeper than MAX_BODY_DEPTH is a 400 naming the field where it goes too deep. (A
//   walk of the parsed value made a node per item: 0.35-0.7 s for 4M numbers, twice JSON.parse's time.)
// - how many values it holds. JSON.parse's time goes with them, on the HTTP thread: 8 MiB of `{},` took 0.5 s,
//   of `0,` 0.3 s, 600k keys of one object 0.4 s. No request needs more than MAX_BODY_VALUES (a prompt's MAX_IDS ids,
//   and room beside them), MAX_BODY_CONTAINERS objects and arrays (MAX_MESSAGES messages, each with a few parts) or
//   MAX_OBJECT_KEYS keys in one object.
// Text that is not JSON passes, for JSON.parse to name what is wrong. No state.
import { apiError, type ApiError } from "./http-errors.ts";

export const MAX_BODY_DEPTH = 256;
export const MAX_BODY_VALUES = (1 << 20) + (1 << 17), MAX_BODY_CONTAINERS = 1 << 18, MAX_OBJECT_KEYS = 1 << 16;
/** levels of the path an error names (deeper ones are "…") */
const SHOWN = 4;

const QUOTE = 0x22, BACKSLASH = 0x5c, COLON = 0x3a, COMMA = 0x2c;
const OPEN_A = 0x5b, CLOSE_A = 0x5d, OPEN_O = 0x7b, CLOSE_O = 0x7d;

/** null when `text` nests at most `max` levels deep and holds at most MAX_BODY_VALUES values (counted as commas and
 *  openings), MAX_BODY_CONTAINERS objects and arrays and MAX_OBJECT_KEYS keys an object; else the 400 saying which
 *  (too deep: naming the path to the first container past `max`) */
export function jsonBoundsError(text: string, max = MAX_BODY_DEPTH): ApiError | null {
  // the open containers of the first SHOWN levels: an array's item index, an object's key (its quoted text's span)
  const isArray: boolean[] = [], index: number[] = [], keyAt: number[] = [], keyEnd: number[] = [];
  const keys = new Int32Array(max + 1); // each open object's keys so far
  let depth = 0, lastString = -1, lastStringEnd = -1, values = 0, containers = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) { // to the closing quote: one not escaped by an odd run of backslashes
      let j = i;
      for (;;) {
        j = text.indexOf('"', j + 1);
        if (j < 0) return null; // (not JSON)
        let b = j - 1;
        while (text.charCodeAt(b) === BACKSLASH) b--;
        if ((j - 1 - b) % 2 === 0) break;
      }
      lastString = i; lastStringEnd = j + 1;
      i = j;
    } else if (c === COLON) { // the string before it was a key
      if (depth > 0 && ++keys[depth - 1] > MAX_OBJECT_KEYS) return tooMany(`${MAX_OBJECT_KEYS} keys in one object`);
      if (depth > 0 && depth <= SHOWN) { keyAt[depth - 1] = lastString; keyEnd[depth - 1] = lastStringEnd; }
    } else if (c === COMMA) {
      if (++values > MAX_BODY_VALUES) return tooMany(`${MAX_BODY_VALUES} values`);
      if (depth > 0 && depth <= SHOWN && isArray[depth - 1]) index[depth - 1]++;
    } else if (c === OPEN_A || c === OPEN_O) {
      if (depth >= max) return tooDeep(text, depth, max, isArray, index, keyAt, keyEnd);
      if (++values > MAX_BODY_VALUES) return tooMany(`${MAX_BODY_VALUES} values`);
      if (++containers > MAX_BODY_CONTAINERS) return tooMany(`${MAX_BODY_CONTAINERS} objects and arrays`);
      if (depth < SHOWN) { isArray[depth] = c === OPEN_A; index[depth] = 0; }
      keys[depth++] = 0;
    } else if ((c === CLOSE_A || c === CLOSE_O) && depth > 0) depth--;
  }
  return null;
}

/** a key as an error names it: at most 64 characters (a key of megabytes is not echoed back) */
const cut = (k: string) => (k.length > 64 ? `${k.slice(0, 64)}…` : k);
const tooMany = (what: string) => apiError(400, `the body holds more than ${what}`, null, "too_many_values");

function tooDeep(text: string, depth: number, max: number, isArray: boolean[], index: number[], keyAt: number[], keyEnd: number[]): ApiError {
  const path: string[] = [];
  for (let l = 0; l < Math.min(depth, SHOWN); l++)
    path.push(isArray[l] ? String(index[l]) : cut(JSON.parse(text.slice(keyAt[l], keyEnd[l])) as string));
  const field = path.join(".") || "body";
  return apiError(400, `${field}${depth > SHOWN ? ".…" : ""}: nests deeper than ${max} levels`, field, "too_deep");
}
