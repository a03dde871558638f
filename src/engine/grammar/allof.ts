// JSON Schema's allOf of object schemas merged into one object schema (an OpenAPI-style composition; schema.ts then
// converts the merge), and the helpers schema.ts shares with it. Pure.
import { GrammarError } from "./errors.ts";

/** keywords that constrain nothing */
export const ANNOTATIONS = new Set(["title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
  "readOnly", "writeOnly", "$defs", "definitions"]);
export const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
/** a key as a JSON pointer token */
export const ptr = (k: string) => k.replaceAll("~", "~0").replaceAll("/", "~1");
function fail(msg: string, path: string): never { throw new GrammarError(msg, { path }); }

/** allOf's parts (each inline or a local $ref; nested allOf too) and the schema's own object keywords merged into one
 *  object schema: the properties in order of appearance (one named twice must be the same schema), every part's
 *  required. A part with additionalProperties: false admits only its own properties, so any other is an error. */
export function mergeAllOf(s: Record<string, unknown>, path: string, resolve: (ref: unknown, at: string) => unknown): Record<string, unknown> {
  const props: Record<string, unknown> = {}, required = new Set<string>(), closed: [string[], string][] = [];
  const MERGEABLE = new Set(["type", "properties", "required", "additionalProperties", "allOf", "$ref"]);
  const take = (x: unknown, at: string, depth: number): void => {
    if (depth > 32) fail("allOf: parts nested too deep", at);
    if (isObj(x) && typeof x.$ref === "string") {
      if (Object.keys(x).some((k) => k !== "$ref" && !ANNOTATIONS.has(k))) fail("allOf: keywords beside $ref are not supported", at);
      return take(resolve(x.$ref, `${at}/$ref`), `${at}/$ref`, depth + 1);
    }
    if (!isObj(x)) fail("allOf: each part must be an object schema", at);
    const extra = Object.keys(x).filter((k) => !MERGEABLE.has(k) && !ANNOTATIONS.has(k));
    if (extra.length) fail(`allOf: only object schemas (properties, required, additionalProperties) merge; not ${extra.join(", ")}`, at);
    if (x.type !== undefined && x.type !== "object") fail("allOf: every part must be of type object", `${at}/type`);
    if (x.allOf !== undefined) {
      if (!Array.isArray(x.allOf) || x.allOf.length === 0) fail("allOf must be a non-empty array", `${at}/allOf`);
      x.allOf.forEach((y, i) => take(y, `${at}/allOf/${i}`, depth + 1));
    }
    const p = x.properties ?? {};
    if (!isObj(p)) fail("properties must be an object", `${at}/properties`);
    for (const [k, v] of Object.entries(p)) {
      if (k in props && JSON.stringify(props[k]) !== JSON.stringify(v)) fail(`allOf: property ${JSON.stringify(k)} has two different schemas`, `${at}/properties/${ptr(k)}`);
      props[k] = v;
    }
    const r = x.required ?? [];
    if (!Array.isArray(r) || r.some((k) => typeof k !== "string")) fail("required must be an array of strings", `${at}/required`);
    for (const k of r) required.add(k);
    if (x.additionalProperties === false) closed.push([Object.keys(p), at]);
    else if (x.additionalProperties !== undefined && x.additionalProperties !== true) fail("allOf: additionalProperties other than true / false is not supported", `${at}/additionalProperties`);
  };
  if (!Array.isArray(s.allOf) || s.allOf.length === 0) fail("allOf must be a non-empty array", `${path}/allOf`);
  take(Object.fromEntries(Object.entries(s).filter(([k]) => k !== "allOf" && !ANNOTATIONS.has(k))), path, 0);
  s.allOf.forEach((y, i) => take(y, `${path}/allOf/${i}`, 1));
  for (const [own, at] of closed) for (const k of Object.keys(props))
    if (!own.includes(k)) fail(`allOf: property ${JSON.stringify(k)} is excluded by a part with additionalProperties: false`, at);
  return { type: "object", properties: props, ...(required.size ? { required: [...required] } : {}) };
}
