// zod schemas of the OpenAI request bodies (/v1/chat/completions, /v1/completions) and the mapping of a zod failure
// to an OpenAI error naming the field. Unknown fields are ignored (logged once: unknown-fields.ts); fields we cannot
// honour (suffix, best_of > 1, legacy functions) are a 400. Penalties and logit_bias become one PenaltyParams;
// response_format, `grammar` and vLLM's guided_* / structured_outputs become one GrammarSpec (grammarOf). No state.
import { z } from "zod";
import { gbnfLiteral, GrammarError, regexToGbnf, responseFormatGbnf } from "../engine/grammar/index.ts";
import { MAX_GBNF_CHARS } from "../engine/grammar/limits.ts";
import { apiError, type ApiError } from "./http-errors.ts";
import type { GrammarSpec } from "../engine/serving/protocol.ts";
import { DRY_BREAKERS, penaltiesOff, type PenaltyParams } from "../engine/penalties.ts";
import { dict, jsonObject, list, tokenIds } from "./bounded.ts";
import { forcedSchema, ToolCallSchema, ToolChoiceSchema, ToolSchema, type Tool, type ToolChoice } from "./tools.ts";

export const nullish = <T extends z.ZodType>(t: T) => t.nullable().optional();
/** messages of a chat (and content parts of a message): more than any chat template renders within its budget of 2^18
 *  steps (model/template-budget.ts), and each list is counted before its items are parsed (bounded.ts) */
export const MAX_MESSAGES = 1 << 16;
/** token ids of one prompt or one /detokenize call */
export const MAX_IDS = 1 << 20;
/** one stop string: not empty, at most MAX_STOP characters (the held-back text and the matcher's tables are bounded by it) */
export const MAX_STOP = 4096;
export const StopString = z.string().min(1, "stop strings must not be empty").max(MAX_STOP, `stop strings are at most ${MAX_STOP} characters`);
const unsupported = (what: string) => z.unknown().refine(() => false, { message: `${what} is not supported` });
/** llama-server's sampler fields: locally typical sampling, XTC, mirostat, top-n-sigma and dynamic temperature
 *  (engine/sampler.ts), DRY and the penalty window (engine/penalties.ts) */
export const llamaSamplers = {
  typical_p: nullish(z.number().gt(0).max(1)),
  xtc_probability: nullish(z.number().min(0).max(1)),
  xtc_threshold: nullish(z.number().min(0).max(1)),
  mirostat: nullish(z.union([z.literal(0), z.literal(1), z.literal(2)], { message: "mirostat is 0 (off), 1 or 2" })),
  mirostat_tau: nullish(z.number().min(0).max(100)),
  mirostat_eta: nullish(z.number().min(0).max(1)),
  dry_multiplier: nullish(z.number().min(0).max(100)),
  dry_base: nullish(z.number().min(1).max(10)),
  dry_allowed_length: nullish(z.int().min(0).max(1 << 20)),
  dry_penalty_last_n: nullish(z.int().min(-1)),
  dry_sequence_breakers: nullish(list(z.string().min(1).max(64), { max: 32 })),
  repeat_last_n: nullish(z.int().min(-1)), // llama.cpp's penalty window (given on an OpenAI route: its rules there too)
  top_n_sigma: nullish(z.number().max(1000)), // ≤ 0: off (llama-server's default −1)
  dynatemp_range: nullish(z.number().min(0).max(10)),
  dynatemp_exponent: nullish(z.number().min(0).max(100)),
};
type Samplers = { [K in "typical_p" | "xtc_probability" | "xtc_threshold" | "mirostat" | "mirostat_tau" | "mirostat_eta" | "top_n_sigma"
  | "dynatemp_range" | "dynatemp_exponent"]?: number | null };
/** typical_p / XTC / mirostat / top-n-sigma / dynamic temperature as GenRequest fields (absent when off) */
export const samplersOf = (b: Samplers) => ({
  ...(b.top_n_sigma != null && b.top_n_sigma > 0 ? { top_n_sigma: b.top_n_sigma } : {}),
  ...(b.dynatemp_range ? { dynatemp_range: b.dynatemp_range, ...(b.dynatemp_exponent != null ? { dynatemp_exponent: b.dynatemp_exponent } : {}) } : {}),
  ...(b.typical_p != null && b.typical_p < 1 ? { typical_p: b.typical_p } : {}),
  ...(b.xtc_probability ? { xtc_probability: b.xtc_probability, ...(b.xtc_threshold != null ? { xtc_threshold: b.xtc_threshold } : {}) } : {}),
  ...(b.mirostat ? { mirostat: b.mirostat, ...(b.mirostat_tau != null ? { mirostat_tau: b.mirostat_tau } : {}),
    ...(b.mirostat_eta != null ? { mirostat_eta: b.mirostat_eta } : {}) } : {}),
});

/** The thinking budget's fields (engine/think-budget.ts): vLLM's `thinking_token_budget`, llama-server's
 *  `reasoning_budget_tokens` (−1: the server's --reasoning-budget, as there) */
export const budgetFields = {
  thinking_token_budget: nullish(z.int().min(0).max(2 ** 31 - 1)),
  reasoning_budget_tokens: nullish(z.int().min(-1).max(2 ** 31 - 1)),
};
type Budget = { thinking_token_budget?: number | null; reasoning_budget_tokens?: number | null };
/** the request's budget as a GenRequest field (absent: the server's) */
export const budgetOf = (b: Budget) => {
  const n = b.thinking_token_budget ?? (b.reasoning_budget_tokens === -1 ? null : b.reasoning_budget_tokens);
  return n != null ? { think_budget: n } : {};
};
/** both budget spellings given with different values: the error (zod refine) */
export const oneBudget: [(b: Budget) => boolean, { message: string; path: string[] }] = [(b: Budget) => b.thinking_token_budget == null || b.reasoning_budget_tokens == null || b.reasoning_budget_tokens === -1
  || b.thinking_token_budget === b.reasoning_budget_tokens,
{ message: "thinking_token_budget and reasoning_budget_tokens differ (give one)", path: ["reasoning_budget_tokens"] }];

const sampling = {
  model: nullish(z.string().max(256)),
  max_tokens: nullish(z.int().min(1, "must be ≥ 1")),
  temperature: nullish(z.number().min(0).max(100)), // (OpenAI's bound is 2; vLLM and llama-server take more)
  top_p: nullish(z.number().gt(0).max(1)),
  min_p: nullish(z.number().min(0).max(1)),
  top_k: nullish(z.int().min(-1)), // -1 or 0: off (vLLM's and llama.cpp's spellings of "all tokens")
  seed: nullish(z.int().min(-(2 ** 53)).max(2 ** 53)),
  stop: nullish(z.union([StopString, list(StopString, { max: 16 })])),
  stream: nullish(z.boolean()),
  stream_options: nullish(z.object({ include_usage: nullish(z.boolean()), continuous_usage_stats: nullish(z.boolean()) })), // (the latter vLLM's)
  n: nullish(z.int().min(1).max(16)),
  presence_penalty: nullish(z.number().min(-2).max(2)),
  frequency_penalty: nullish(z.number().min(-2).max(2)),
  repetition_penalty: nullish(z.number().gt(0).max(10)), // vLLM / HF
  repeat_penalty: nullish(z.number().gt(0).max(10)),     // llama-server's name for the same
  logit_bias: nullish(dict(z.string().regex(/^\d{1,9}$/, "keys must be token ids"), z.number().min(-100).max(100), 1024, "at most 1024 entries")),
  user: nullish(z.string()),
  slot: nullish(z.int().min(0)), // extension: pin the request to a KV slot
  response_format: nullish(z.discriminatedUnion("type", [
    z.looseObject({ type: z.literal("text") }),
    z.looseObject({ type: z.literal("json_object"), schema: nullish(z.union([jsonObject, z.boolean()])) }), // (schema: llama-server's)
    z.looseObject({
      type: z.literal("json_schema"),
      json_schema: z.looseObject({
        name: z.string().min(1, "must not be empty").max(64),
        description: nullish(z.string()),
        schema: nullish(z.union([jsonObject, z.boolean()])),
        strict: nullish(z.boolean()),
      }),
    }),
  ], { message: "type must be text, json_object or json_schema" })),
  grammar: nullish(z.string().min(1, "must not be empty")), // extension (llama-server): GBNF, start rule `root`
  ...llamaSamplers,
  ...budgetFields,
  // vLLM's (ignore_eos also llama-server's): the model's end ids do not stop; more ids that stop; end and stop ids
  // banned until min_tokens tokens are out
  ignore_eos: nullish(z.boolean()),
  stop_token_ids: nullish(tokenIds({ max: 64 })),
  min_tokens: nullish(z.int().min(0)),
  // vLLM's: sample only these ids; keep a matched stop string in the text; special tokens in the text; only the
  // prompt's last N tokens
  allowed_token_ids: nullish(tokenIds({ min: 1, max: 1 << 16 })),
  bad_words: nullish(list(z.string().min(1).max(256), { max: 256 })), // vLLM's
  include_stop_str_in_output: nullish(z.boolean()),
  skip_special_tokens: nullish(z.boolean()),
  truncate_prompt_tokens: nullish(z.int().min(1)),
  return_tokens_as_token_ids: nullish(z.boolean()), // vLLM's: logprobs name tokens `token_id:ID`
  return_token_ids: nullish(z.boolean()), // vLLM's: the prompt's and the output's token ids beside the text
  priority: nullish(z.int().min(-(2 ** 31)).max(2 ** 31 - 1)), // vLLM's: lower first (serve --scheduling-policy priority)
  use_beam_search: nullish(z.literal(false, { message: "beam search is not supported" })), // vLLM's (not silently sampled instead)
  // vLLM's guided decoding (and its newer structured_outputs spelling): a JSON schema, a list of choices, a grammar,
  // a regular expression (the whole output matches it)
  guided_json: nullish(z.union([jsonObject, z.string()])),
  json_schema: nullish(jsonObject), // llama-server's: a JSON schema the output follows
  guided_choice: nullish(list(z.string(), { min: 1, max: 256 })),
  guided_grammar: nullish(z.string().min(1, "must not be empty")),
  guided_regex: nullish(z.string().min(1, "must not be empty").max(1 << 14)),
  structured_outputs: nullish(z.object({
    json: nullish(z.union([jsonObject, z.string()])),
    choice: nullish(list(z.string(), { min: 1, max: 256 })),
    grammar: nullish(z.string().min(1, "must not be empty")),
    regex: nullish(z.string().min(1, "must not be empty").max(1 << 14)),
  })),
};

const Part = z.object({ type: z.literal("text", { message: "only text content parts are supported" }), text: z.string() });
export const ChatMessageSchema = z.object({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: nullish(z.union([z.string(), list(Part, { max: MAX_MESSAGES })])),
  tool_calls: nullish(list(ToolCallSchema, { max: 128 })), // assistant: calls it made
  tool_call_id: nullish(z.string().max(256)),            // tool: the call this result answers
  name: nullish(z.string().max(256)),
  // assistant: its reasoning (llama-server's / DeepSeek's name, and vLLM's newer one), for templates that show it
  // (GLM's: the reasoning of the turns since the last user message, interleaved with their tool calls)
  reasoning_content: nullish(z.string()), reasoning: nullish(z.string()),
});
export const MessagesSchema = list(ChatMessageSchema, { min: 1, minMessage: "messages must not be empty", max: MAX_MESSAGES });

/** chat_template_kwargs: template variables (vLLM passes them all to the template); enable_thinking also splits the
 *  reply into reasoning_content and content */
export const TemplateKwargs = nullish(z.looseObject({ enable_thinking: nullish(z.boolean()) }));
/** a request's template variables over the server's (--chat-template-kwargs) as PromptSpec fields (enable_thinking given
 *  by neither: the template decides, as vLLM and llama-server leave it) */
export function templateOf(kw: Record<string, unknown> | null | undefined, defaults: Record<string, unknown> = {}): { enableThinking?: boolean; kwargs?: Record<string, unknown> } {
  const { enable_thinking, ...rest } = { ...defaults, ...Object.fromEntries(Object.entries(kw ?? {}).filter(([, v]) => v !== null && v !== undefined)) };
  return { ...(typeof enable_thinking === "boolean" ? { enableThinking: enable_thinking } : {}), ...(Object.keys(rest).length ? { kwargs: rest } : {}) };
}

export const ChatRequest = z.object({
  ...sampling,
  messages: MessagesSchema,
  max_completion_tokens: nullish(z.int().min(1, "must be ≥ 1")),
  logprobs: nullish(z.boolean()),
  top_logprobs: nullish(z.int().min(0).max(20)),
  chat_template_kwargs: TemplateKwargs,
  // OpenAI's: passed to the template (as vLLM does) and, unless chat_template_kwargs name enable_thinking, thinking
  // on for low / medium / high, off for none / minimal (as the Responses route reads reasoning.effort)
  reasoning_effort: nullish(z.enum(["none", "minimal", "low", "medium", "high"])),
  tools: nullish(list(ToolSchema, { max: 128 })),
  tool_choice: nullish(ToolChoiceSchema),
  parallel_tool_calls: nullish(z.boolean()),
  functions: nullish(unsupported("functions (use tools)")),
  function_call: nullish(unsupported("function_call (use tool_choice)")), // (the legacy pair: refused together)
  // vLLM's: no generation prompt after the messages; or the final (assistant) message continued, as written
  add_generation_prompt: nullish(z.boolean()),
  continue_final_message: nullish(z.boolean()),
  prompt_logprobs: nullish(z.int().min(0).max(20)), // vLLM's (in the response, beside the choices; not streamed)
}).refine(...oneBudget).refine((b) => !b.continue_final_message || b.messages[b.messages.length - 1].role === "assistant",
  { message: "continue_final_message needs an assistant message last", path: ["continue_final_message"] })
  .refine((b) => !(b.continue_final_message && b.add_generation_prompt === true),
    { message: "continue_final_message and add_generation_prompt: true cannot go together", path: ["add_generation_prompt"] })
  .refine((b) => b.prompt_logprobs == null || !b.stream, { message: "prompt_logprobs is not supported with stream", path: ["prompt_logprobs"] });
export type ChatRequest = z.infer<typeof ChatRequest>;

export const Ids = tokenIds({ min: 1, max: MAX_IDS }); // a prompt as token ids
/** prompts of one /v1/completions request (a batch: each its own `n` choices), and choices in all */
export const MAX_PROMPTS = 64, MAX_CHOICES = 128;
export const CompletionRequest = z.object({
  ...sampling,
  max_tokens: nullish(z.int().min(0, "must be ≥ 0")), // 0: with echo, the prompt's logprobs alone (scoring)
  prompt: z.union([z.string(), list(z.string(), { min: 1, max: MAX_PROMPTS }), Ids, list(Ids, { min: 1, max: MAX_PROMPTS })]),
  logprobs: nullish(z.int().min(0).max(20)),
  echo: nullish(z.boolean()),
  prompt_logprobs: nullish(z.int().min(0).max(20)), // vLLM's: each prompt token's logprob, rank and alternatives
  suffix: nullish(unsupported("suffix")),
  best_of: nullish(z.literal(1, { message: "only best_of = 1 is supported" })),
}).refine(...oneBudget).refine((b) => b.max_tokens !== 0 || b.echo === true, { message: "0 needs echo: true", path: ["max_tokens"] })
  .refine((b) => promptCount(b.prompt) * (b.n ?? 1) <= MAX_CHOICES, { message: `prompts × n must be at most ${MAX_CHOICES} choices`, path: ["n"] });
/** how many prompts a completions `prompt` holds (a list of strings or of token-id lists: a batch) */
export function promptCount(p: string | string[] | number[] | number[][]): number {
  return typeof p === "string" || typeof p[0] === "number" ? 1 : p.length;
}
export type CompletionRequest = z.infer<typeof CompletionRequest>;

/** A zod failure as an OpenAI 400 naming the first bad field. */
export function zodError(e: z.ZodError): ApiError {
  const i = e.issues[0] && deepest(e.issues[0]);
  const param = i && i.path.length ? i.path.map(String).join(".") : null;
  return apiError(400, param ? `${param}: ${i.message}` : (i?.message ?? "invalid request"), param, "invalid_value");
}

/** A union's issue as the first issue of the alternative that came closest — of those that took the value's type
 *  (their first issue is not a wrong type at the value itself), one whose items all took theirs (its first issue is
 *  not a wrong type: token ids [1, -2] are "1: too small", not "0: expected string"), then the one with the fewest
 *  issues, then the deepest (a list of content parts holding an image part: "messages.0.content.0.type: only text
 *  content parts are supported", not "Invalid input"); when none took the type, what each expected. A union with a
 *  message of its own keeps it. */
function deepest(i: z.core.$ZodIssue): { path: PropertyKey[]; message: string } {
  if (i.code !== "invalid_union" || !i.errors.length || i.message !== "Invalid input") return i; // (a union's own message says it)
  let best: { path: PropertyKey[]; message: string; n: number; typed: boolean } | null = null;
  for (const branch of i.errors) {
    const f = branch[0];
    if (!f || (f.code === "invalid_type" && f.path.length === 0)) continue;
    const b = deepest(f), typed = f.code !== "invalid_type";
    if (!best || typed > best.typed || (typed === best.typed && (branch.length < best.n || (branch.length === best.n && b.path.length > best.path.length))))
      best = { ...b, n: branch.length, typed };
  }
  if (best) return { path: [...i.path, ...best.path], message: best.message };
  const each = [...new Set(i.errors.map((b) => b[0]?.message.replace(/^Invalid input: /, "")).filter(Boolean))];
  return { path: i.path, message: each.length ? `invalid input: ${each.join("; or ")}` : i.message };
}

/**
 * The grammar a request's output must follow, or null (unconstrained); an ApiError naming the field
 * when a schema cannot be converted. json_schema with `strict: true` rejects schema keywords that
 * cannot be enforced (pattern, format, minimum, ...); otherwise they are ignored (best effort).
 * Whitespace between JSON tokens is compact (none).
 */
type Guided = Partial<Pick<ChatRequest, "guided_json" | "guided_choice" | "guided_grammar" | "guided_regex" | "structured_outputs" | "json_schema">>;
/** a grammar, or the 400 naming its field when its text is over MAX_GBNF_CHARS (refused before the worker compiles it) */
const sized = (g: GrammarSpec, n = g.gbnf.length): GrammarSpec | ApiError => n <= MAX_GBNF_CHARS ? g
  : apiError(400, `${g.field}: the grammar is too large (${n} characters; the limit is ${MAX_GBNF_CHARS})`, g.field, "invalid_value");
/** vLLM's guided decoding as a GrammarSpec (undefined: none asked; an ApiError naming the field) */
function guidedOf(b: Guided, others: boolean): GrammarSpec | ApiError | undefined {
  const so = b.structured_outputs ?? {};
  const asked = ([["json_schema", b.json_schema], ["guided_json", b.guided_json], ["guided_choice", b.guided_choice], ["guided_grammar", b.guided_grammar],
    ["guided_regex", b.guided_regex], ["structured_outputs.json", so.json], ["structured_outputs.choice", so.choice],
    ["structured_outputs.grammar", so.grammar], ["structured_outputs.regex", so.regex]] as const)
    .filter(([, v]) => v != null);
  if (asked.length === 0) return undefined;
  const [field, v] = asked[0];
  if (asked.length > 1 || others)
    return apiError(400, `${field}: only one of response_format, grammar, tool_choice and the guided / structured_outputs fields may constrain the output`, field, "invalid_value");
  if (Array.isArray(v)) {
    const n = v.reduce((a, c) => a + c.length + 3, 0); // (measured before the grammar is built)
    return n > MAX_GBNF_CHARS ? sized({ gbnf: "", field }, n) : sized({ gbnf: `root ::= ${v.map(gbnfLiteral).join(" | ")}`, field });
  }
  if (field.endsWith("grammar")) return sized({ gbnf: v as string, field });
  if (field.endsWith("regex")) {
    try { return { gbnf: regexToGbnf(v as string), field }; } catch (e) {
      if (e instanceof GrammarError) return apiError(400, `${field}: ${e.message}`, field, "invalid_value");
      throw e;
    }
  }
  let schema: unknown = v;
  if (typeof v === "string") {
    try { schema = JSON.parse(v); } catch (e) { return apiError(400, `${field}: not JSON: ${(e as Error).message}`, field, "invalid_value"); }
  }
  const g = grammarOf({ response_format: { type: "json_schema", json_schema: { name: "guided", schema: schema as Record<string, unknown> } } });
  if (g && "status" in g) { const param = g.param?.replace("response_format.json_schema.schema", field) ?? field; return { ...g, param, message: g.message.replace("response_format.json_schema.schema", field) }; }
  return g ? { ...g, field } : g ?? undefined;
}

/** where a response_format's schema sits (json_object's `schema`: llama-server's) */
const schemaField = (type: string) => (type === "json_schema" ? "response_format.json_schema.schema" : "response_format.schema");

export function grammarOf(b: Pick<ChatRequest, "response_format" | "grammar"> & Guided & { tools?: Tool[] | null; tool_choice?: ToolChoice | null;
  parallel_tool_calls?: boolean | null }): GrammarSpec | null | ApiError {
  const rf = b.response_format;
  const guided = guidedOf(b, (rf != null && rf.type !== "text") || b.grammar != null || (b.tool_choice != null && b.tool_choice !== "auto" && b.tool_choice !== "none"));
  if (guided !== undefined) return guided;
  const constrained = rf != null && rf.type !== "text";
  const tools = b.tools ?? [], choice = b.tool_choice ?? "auto";
  if (choice !== "auto" && choice !== "none") { // a forced call: its JSON under a grammar
    const field = typeof choice === "object" ? "tool_choice.function.name" : "tool_choice";
    if (tools.length === 0) return apiError(400, `${field}: needs tools`, field, "invalid_value");
    if (typeof choice === "object" && !tools.some((t) => t.function.name === choice.function.name))
      return apiError(400, `${field}: no tool is named ${JSON.stringify(choice.function.name).slice(0, 80)}`, field, "invalid_value");
    if (constrained || b.grammar != null) return apiError(400, "tool_choice: a forced tool call cannot be combined with response_format or grammar", "tool_choice", "invalid_value");
    const g = grammarOf({ response_format: { type: "json_schema", json_schema: { name: "tool", schema: forcedSchema(tools, choice, b.parallel_tool_calls === false) as Record<string, unknown> } } });
    return g && "status" in g ? apiError(400, `tools: a parameters schema cannot be enforced (${g.message})`, "tools", "invalid_value") : g;
  }
  if (b.grammar != null) {
    if (constrained) return apiError(400, "grammar: cannot be combined with response_format json_object / json_schema", "grammar", "invalid_value");
    return sized({ gbnf: b.grammar, field: "grammar" });
  }
  if (!constrained) return null;
  const strict = rf.type === "json_schema" && (rf as { json_schema: { strict?: boolean | null } }).json_schema.strict === true;
  try {
    const noSchema = rf.type === "json_schema" ? (rf as { json_schema: { schema?: unknown } }).json_schema.schema == null : (rf as { schema?: unknown }).schema == null;
    const gbnf = responseFormatGbnf(noSchema ? { type: "json_object" } : rf, { whitespace: "compact", strict });
    return gbnf === null ? null : { gbnf, field: schemaField(rf.type) };
  } catch (e) {
    if (!(e instanceof GrammarError)) throw e;
    // a schema location (#/properties/a) becomes a dotted parameter path
    const at = e.path ? e.path.replace(/^#\/?/, "").split("/").filter(Boolean).map((k) => k.replaceAll("~1", "/").replaceAll("~0", "~")) : [];
    const param = [schemaField(rf.type), ...at].join(".");
    return apiError(400, `${param}: ${e.detail}`, param, "invalid_value");
  }
}

/** grammarOf for a response_format another API spells as `field` (the Responses API's text.format, Anthropic's
 *  output_config.format): its errors name that field */
export function grammarAs(b: Parameters<typeof grammarOf>[0], field: string): GrammarSpec | null | ApiError {
  const g = grammarOf(b);
  if (!g || !("status" in g)) return g;
  const rename = (x: string) => x.replace("response_format.json_schema.schema", `${field}.schema`).replace(/\bresponse_format\b/g, field);
  return { ...g, message: rename(g.message), param: g.param ? rename(g.param) : g.param };
}

type Penalized = Pick<ChatRequest, "presence_penalty" | "frequency_penalty" | "repetition_penalty" | "repeat_penalty" | "logit_bias"
  | "dry_multiplier" | "dry_base" | "dry_allowed_length" | "dry_penalty_last_n" | "dry_sequence_breakers" | "repeat_last_n">;

/** The request's penalties, logit_bias and DRY (undefined when they change nothing; DRY at llama-server's defaults:
 *  base 1.75, allowed length 2, the whole context, breakers newline, colon, quote and asterisk). window: llama.cpp's
 *  penalty window when the request names none (llama-server's /completion: 64; absent: vLLM's / OpenAI's rules);
 *  repetition: the repetition penalty when the request names none (the model's generation_config.json). */
export function penaltiesOf(b: Penalized, window?: number, repetition = 1): PenaltyParams | undefined {
  const w = b.repeat_last_n ?? window;
  const p: PenaltyParams = {
    ...(w !== undefined ? { window: w } : {}),
    presence: b.presence_penalty ?? 0, frequency: b.frequency_penalty ?? 0,
    repetition: b.repetition_penalty ?? b.repeat_penalty ?? repetition,
    bias: Object.entries(b.logit_bias ?? {}).map(([t, v]) => [Number(t), v]),
    ...(b.dry_multiplier ? { dry: { multiplier: b.dry_multiplier, base: b.dry_base ?? 1.75, allowed: b.dry_allowed_length ?? 2,
      lastN: b.dry_penalty_last_n ?? -1, breakers: b.dry_sequence_breakers ?? DRY_BREAKERS } } : {}),
  };
  return penaltiesOff(p) ? undefined : p;
}

type Stopping = Pick<ChatRequest, "ignore_eos" | "stop_token_ids" | "min_tokens" | "allowed_token_ids" | "include_stop_str_in_output" | "truncate_prompt_tokens" | "return_tokens_as_token_ids" | "bad_words" | "priority" | "return_token_ids">;
/** The request's vLLM-style extras (end of output, vocabulary, prompt truncation, logprob naming) as GenRequest
 *  fields (absent when at their defaults). */
export const stoppingOf = (b: Stopping) => ({
  ...(b.ignore_eos ? { ignore_eos: true } : {}), ...(b.stop_token_ids?.length ? { stop_ids: b.stop_token_ids } : {}),
  ...(b.min_tokens ? { min_tokens: b.min_tokens } : {}), ...(b.allowed_token_ids ? { allowed_ids: b.allowed_token_ids } : {}),
  ...(b.bad_words?.length ? { bad_words: b.bad_words } : {}),
  ...(b.include_stop_str_in_output ? { include_stop: true } : {}), ...(b.truncate_prompt_tokens ? { truncate: b.truncate_prompt_tokens } : {}),
  ...(b.return_tokens_as_token_ids ? { token_ids_as_text: true } : {}), ...(b.priority ? { priority: b.priority } : {}),
  ...(b.return_token_ids ? { return_ids: true } : {}),
});

/** An ApiError naming logit_bias, stop_token_ids or allowed_token_ids when one of their ids is outside the vocabulary [0, V). */
export function biasOutside(b: Penalized & Stopping, V: number): ApiError | null {
  for (const f of ["stop_token_ids", "allowed_token_ids"] as const) {
    const i = (b[f] ?? []).findIndex((t) => t >= V);
    if (i >= 0) return apiError(400, `${f}: token id ${b[f]![i]} is outside the vocabulary [0, ${V})`, `${f}.${i}`, "invalid_value");
  }
  const t = Object.keys(b.logit_bias ?? {}).find((k) => Number(k) >= V);
  return t === undefined ? null : apiError(400, `logit_bias: token id ${t} is outside the vocabulary [0, ${V})`, `logit_bias.${t}`, "invalid_value");
}

/** Text of a message's content (text parts joined). */
export function contentText(c: z.infer<typeof ChatMessageSchema>["content"]): string {
  if (c == null) return "";
  return typeof c === "string" ? c : c.map((p) => p.text).join("");
}
