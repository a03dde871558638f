// Where a model directory keeps its chat template, as transformers saves it: `chat_template.jinja` (transformers
// 4.47+ writes the template there, not into tokenizer_config.json), else `chat_template.json`'s `chat_template`,
// else tokenizer_config.json's. Each may be a string or a list of named templates ({name, template}): "default"
// (else the first) is the template, "tool_use" the one for requests with tools, as transformers' apply_chat_template
// picks them. Holds no state.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { fromZod, readJsonObject, readModelFile } from "./errors.ts";

/** a model's chat templates: the one used, the one for requests with tools (null: the same), and the file they came from */
export interface ChatTemplates { text: string | null; toolUse: string | null; file: string }

/** a chat template file is read whole: at most this many bytes (the largest known are ~20 KB) */
export const MAX_TEMPLATE_FILE = 4 << 20;

const Named = z.array(z.looseObject({ name: z.string(), template: z.string() })).min(1);
const One = z.string().nullish();

/** The templates of a `chat_template` value (a string or named ones; absent: none); file names it in errors. */
export function pickTemplates(value: unknown, file: string): ChatTemplates {
  const r = (Array.isArray(value) ? Named : One).safeParse(value); // (apart: an entry's error names its index)
  if (!r.success) throw fromZod(r.error, { file }, ["chat_template"]);
  const v = r.data;
  if (v == null) return { text: null, toolUse: null, file };
  if (typeof v === "string") return { text: v, toolUse: null, file };
  const by = (n: string) => v.find((t) => t.name === n)?.template ?? null;
  return { text: by("default") ?? v[0].template, toolUse: by("tool_use"), file };
}

/** The chat templates of model directory dir (tokenizerConfig: its tokenizer_config.json, parsed). */
export function modelTemplates(dir: string, tokenizerConfig: Record<string, unknown>): ChatTemplates {
  const jinja = join(dir, "chat_template.jinja"), json = join(dir, "chat_template.json");
  if (existsSync(jinja)) return { text: readModelFile(jinja, MAX_TEMPLATE_FILE), toolUse: null, file: jinja };
  if (existsSync(json)) return pickTemplates(readJsonObject(json, MAX_TEMPLATE_FILE).chat_template, json);
  return pickTemplates(tokenizerConfig.chat_template, join(dir, "tokenizer_config.json"));
}
