// POST /completion: llama-server's own completion endpoint over the same engine: its request fields (n_predict,
// id_slot, logit_bias pairs, repeat_last_n penalties, its sampler chain, grammar / json_schema, n_probs, ...) mapped
// onto a completion, and its response shape ({content, stop, tokens_predicted, timings, completion_probabilities,
// ...}), streamed as `data:` lines ending with stop: true (no [DONE]); several prompts give an array, each with its
// `index` (fields: docs/api.md). State: per request only.
import { z } from "zod";
import type { EngineClient } from "./engine-client.ts";
import { collectChoices, literalText, sseResponse, streamChoices, timings, type ChoiceView, type Done, type Tok } from "./gen-stream.ts";
import { errorJson, errorResponse, fromWorker } from "./http-errors.ts";
import type { GenRequest, GrammarSpec, PromptSpec, ReqEvent } from "../engine/serving/protocol.ts";
import { dict, isTokenId, jsonObject, list } from "./bounded.ts";
import { budgetFields, budgetOf, llamaSamplers, MAX_IDS, MAX_PROMPTS, nullish, oneBudget, penaltiesOf, samplersOf, StopString, stoppingOf } from "./schemas.ts";
import { startGeneration, type RouteOptions } from "./routes-common.ts";
import type { SamplingDefaults } from "../model/config.ts";

const Bias = z.union([
  list(z.tuple([z.int().min(0), z.union([z.number().min(-100).max(100), z.literal(false)])]), { max: 1024 }),
  dict(z.string().regex(/^\d{1,9}$/, "keys must be token ids"), z.union([z.number().min(-100).max(100), z.literal(false)]), 1024, "at most 1024 entries"),
]);

/** one prompt as ids and texts mixed (llama-server's `[12, 34, "text", 56]`) */
const Parts = list(z.union([z.int().min(0), z.string()]), { min: 1, max: MAX_IDS }, (x) => typeof x === "string" || isTokenId(x));

/** the request as llama-server reads it, turned into the OpenAI completion fields the rest of the server takes */
const LlamaCompletion = z.object({
  // a text, token ids, or ids and texts mixed (llama-server's `[12, 34, "text", 56]`); or several prompts, each one of
  // those: an array of texts and arrays (`["text", [12, 34, "text"]]`)
  prompt: z.union([z.string(), Parts, list(z.union([z.string(), Parts]), { min: 1, max: MAX_PROMPTS })]),
  n_predict: nullish(z.int().min(-1)),
  temperature: nullish(z.number().min(0).max(2)),
  top_k: nullish(z.int().min(-1)), // (≤ 0: off, as llama.cpp reads it)
  top_p: nullish(z.number().gt(0).max(1)),
  min_p: nullish(z.number().min(0).max(1)),
  seed: nullish(z.int().min(-1).max(2 ** 53)),
  stop: nullish(list(StopString, { max: 16 })),
  stream: nullish(z.boolean()),
  id_slot: nullish(z.int().min(-1)),
  cache_prompt: nullish(z.boolean()),
  ignore_eos: nullish(z.boolean()),
  repeat_penalty: nullish(z.number().gt(0).max(10)),
  presence_penalty: nullish(z.number().min(-2).max(2)),
  frequency_penalty: nullish(z.number().min(-2).max(2)),
  logit_bias: nullish(Bias),
  grammar: nullish(z.string().min(1, "must not be empty")),
  json_schema: nullish(jsonObject),
  n_probs: nullish(z.int().min(0).max(20)),
  ...llamaSamplers,
  ...budgetFields,
}).refine(...oneBudget).transform((b) => ({
  ...b,
  // false: the token is banned (llama-server's spelling), as a bias of -100 is here
  logit_bias: b.logit_bias == null ? undefined
    : Object.fromEntries((Array.isArray(b.logit_bias) ? b.logit_bias : Object.entries(b.logit_bias)).map(([t, v]) => [String(t), v === false ? -100 : v])),
  slot: b.id_slot == null || b.id_slot < 0 ? undefined : b.id_slot,
}));
type LlamaCompletion = z.infer<typeof LlamaCompletion>;

type Part = number | string;
/** one prompt: a text, ids, or both mixed */
const promptOf = (p: string | Part[]): PromptSpec => typeof p === "string" ? { kind: "text", text: p }
  : p.every((t) => typeof t === "number") ? { kind: "ids", ids: p as number[] } : { kind: "parts", parts: p };
/** llama-server's reading of `prompt`: one prompt unless it is an array holding arrays or only texts */
const promptsIn = (p: LlamaCompletion["prompt"]): (string | Part[])[] =>
  typeof p === "string" || !p.some((x) => Array.isArray(x)) && p.some((x) => typeof x === "number") ? [p as string | Part[]] : p as (string | Part[])[];

/** s: the server's sampling flags (--temp, ...), before llama-server's own defaults; one request per prompt */
function toGen(b: LlamaCompletion, grammar: GrammarSpec | null, s: SamplingDefaults = {}): GenRequest[] {
  return promptsIn(b.prompt).map((p) => toGen1(b, promptOf(p), grammar, s));
}
function toGen1(b: LlamaCompletion, prompt: PromptSpec, grammar: GrammarSpec | null, s: SamplingDefaults): GenRequest {
  return {
    prompt,
    slot: b.slot ?? "auto", max_tokens: b.n_predict == null || b.n_predict < 0 ? undefined : b.n_predict,
    temperature: b.temperature ?? s.temperature ?? 0.8, top_p: b.top_p ?? s.top_p ?? 0.95, min_p: b.min_p ?? s.min_p ?? 0.05,
    top_k: Math.max(0, b.top_k ?? s.top_k ?? 40), // llama-server's defaults
    temperature_last: true, // and its sampler chain: top-k, top-p, min-p (then typical, XTC) on the T = 1 distribution
    seed: b.seed == null || b.seed < 0 ? undefined : b.seed, stop: b.stop ?? [], ...(b.n_probs ? { logprobs: b.n_probs } : {}),
    ...(grammar ? { grammar } : {}), penalties: penaltiesOf(b, 64, s.repetition_penalty), ...stoppingOf(b), ...samplersOf(b), ...budgetOf(b), // (llama-server's penalty window)
  };
}

const bytes = (s: string) => [...new TextEncoder().encode(s)];
/** llama-server's entry of one token with n_probs: its logprob and the best alternatives */
const probEntry = (e: Tok) => ({
  id: e.id, token: e.tt ?? "", bytes: bytes(e.tt ?? ""), logprob: e.lp ?? 0,
  top_logprobs: (e.top ?? []).map((t) => ({ id: t.id, token: t.text, bytes: bytes(t.text), logprob: t.lp })),
});

/** The one choice: the text so far, the tokens' probabilities (n_probs) and llama-server's closing fields. */
class LlamaChoice implements ChoiceView {
  private content = "";
  private slot = -1;
  private readonly probs: ReturnType<typeof probEntry>[] = []; // (for `final`: none kept while streaming)
  streaming?: boolean;
  constructor(private readonly model: string, private readonly stops: string[], private readonly nProbs: number) {}
  onAccept(e: Extract<ReqEvent, { t: "accept" }>): void { this.slot = e.slot; }
  onTok(e: Tok): object[] {
    const text = literalText(e), p = this.nProbs ? [probEntry(e)] : null;
    this.content += text;
    if (p && !this.streaming) this.probs.push(p[0]);
    // every token (text "" while a character is incomplete)
    return [{ content: text, stop: false, id_slot: this.slot, tokens: [e.id], ...(p ? { completion_probabilities: p } : {}) }];
  }
  onDone(e: Done): object[] {
    this.content += e.text;
    return [{ ...this.closing(e), content: e.text }];
  }
  final(e: Done): object {
    return { ...this.closing(e), content: this.content, ...(this.nProbs ? { completion_probabilities: this.probs } : {}) };
  }
  private closing(e: Done) {
    const word = e.stop_text ?? "", limit = e.reason === "length";
    return {
      stop: true, id_slot: this.slot, model: this.model, tokens_predicted: e.emitted, tokens_evaluated: e.prompt_tokens,
      tokens_cached: e.cached_tokens, truncated: false, stop_type: limit ? "limit" : word ? "word" : e.reason === "stopped" ? "none" : "eos",
      stopping_word: word, timings: timings(e),
      generation_settings: { stop: this.stops },
    };
  }
}

export async function llamaCompletion(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const started = await startGeneration(req, engine, o, LlamaCompletion, (b, g) => toGen(b, g, o.defaults.sampling), "prompt");
  if (started instanceof Response) return started;
  const { data, runs, abandon } = started;
  // several prompts: each result (and each streamed line) carries its prompt's `index`, as llama-server's do
  const views = runs.map(() => new LlamaChoice(engine.info!.model, data.stop ?? [], data.n_probs ?? 0)), many = runs.length > 1;
  const shaped = (c: object) => { if (many) return c; const { index: _, ...rest } = c as { index: number }; return rest; };
  if (data.stream) {
    return sseResponse(req, async (send) => {
      const r = await streamChoices(runs, views, abandon, (choices) => { for (const c of choices) send(shaped(c)); });
      if (!Array.isArray(r)) send(errorJson(fromWorker(r.code, r.detail, "prompt")));
      return Array.isArray(r);
    }, started, "plain");
  }
  const r = await collectChoices(runs, views, abandon, o.http.maxReplyBytes);
  if ("t" in r) return errorResponse(fromWorker(r.code, r.detail, "prompt"));
  return Response.json(many ? r.choices : shaped(r.choices[0]));
}
