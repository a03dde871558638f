// OpenAI `response_format` -> GBNF: {type: "text"} -> null (unconstrained), {type: "json_object"}
// -> the generic JSON-object grammar (with llama-server's `schema` beside it: schemaToGbnf), {type: "json_schema",
// json_schema: {schema}} -> schemaToGbnf.
// Validates the request shape with zod (errors name the field). Pure.
import { z } from "zod";
import { GrammarError } from "./errors.ts";
import { jsonObjectGbnf, schemaToGbnf, type SchemaOpts } from "./schema.ts";

const ResponseFormat = z.discriminatedUnion("type", [
  z.looseObject({ type: z.literal("text") }),
  z.looseObject({ type: z.literal("json_object"), schema: z.unknown().optional() }),
  z.looseObject({
    type: z.literal("json_schema"),
    json_schema: z.looseObject({ name: z.string().optional(), schema: z.unknown().optional(), strict: z.boolean().nullish() }),
  }),
]);

export function responseFormatGbnf(rf: unknown, opts: SchemaOpts = {}): string | null {
  const r = ResponseFormat.safeParse(rf);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new GrammarError(`response_format${i.path.length ? "." + i.path.join(".") : ""}: ${i.message}`);
  }
  const f = r.data;
  if (f.type === "text") return null;
  if (f.type === "json_object") return f.schema === undefined ? jsonObjectGbnf(opts) : schemaToGbnf(f.schema, opts);
  const schema = (f as { json_schema: { schema?: unknown } }).json_schema.schema;
  return schema === undefined ? jsonObjectGbnf(opts) : schemaToGbnf(schema, opts);
}
