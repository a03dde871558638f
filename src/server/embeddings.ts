// Embeddings: POST /v1/embeddings (OpenAI's shape: strings, token ids or vLLM's `messages`; each prefilled in a slot
// and pooled from its final hidden states, engine/pooling.ts, L2-normalized unless asked not; base64 as little-endian
// f32) and POST /embedding (llama-server's shape: one vector per token under --pooling none). Fields: docs/api.md.
// No state.
import { z } from "zod";
import type { EngineClient } from "./engine-client.ts";
import { jsonPieces, run } from "./gen-stream.ts";
import { apiError, errorResponse, fromWorker } from "./http-errors.ts";
import type { GenRequest, PromptSpec, ReqEvent } from "../engine/serving/protocol.ts";
import { templateMessages } from "./chat.ts";
import { promptsOf } from "./completions.ts";
import { list } from "./bounded.ts";
import { Ids, MessagesSchema, nullish, TemplateKwargs, templateOf } from "./schemas.ts";
import { priorityRefused, readRequest, type RouteOptions } from "./routes-common.ts";
import type { Pooling } from "../engine/pooling.ts";

/** inputs of one request (OpenAI allows 2048; each is a prompt in the queue) */
export const MAX_INPUTS = 256;
/** values one /embedding response may carry under pooling none (every token's row): 2^26 floats, ~1 GB of JSON */
export const MAX_ROW_VALUES = 1 << 26;
const Input = z.union([z.string(), list(z.string(), { min: 1, max: MAX_INPUTS }), Ids, list(Ids, { min: 1, max: MAX_INPUTS })]);
const common = {
  model: nullish(z.string().max(256)),
  embd_normalize: nullish(z.int().min(-1).max(64)),  // llama-server's: −1 none, 0 max-abs (int16), 1 taxicab, 2 L2, p-norm
  truncate_prompt_tokens: nullish(z.int().min(1)), // vLLM's: only the last this many tokens
  priority: nullish(z.int().min(-(2 ** 31)).max(2 ** 31 - 1)), // vLLM's: lower first (serve --scheduling-policy priority)
};
const EmbeddingRequest = z.object({
  ...common,
  input: nullish(Input),
  // vLLM's chat form: one input, the messages through the chat template (no generation prompt unless asked)
  messages: nullish(MessagesSchema), add_generation_prompt: nullish(z.boolean()), chat_template_kwargs: TemplateKwargs,
  encoding_format: nullish(z.enum(["float", "base64"])),
  dimensions: nullish(z.int().min(1)),
  user: nullish(z.string().max(256)),
  normalize: nullish(z.boolean()),                // vLLM's
}).refine((b) => (b.input == null) !== (b.messages == null), { message: "give exactly one of input or messages", path: ["input"] });
const LlamaEmbeddingRequest = z.object({ ...common, content: nullish(Input), input: nullish(Input) })
  .refine((b) => (b.content == null) !== (b.input == null), { message: "give exactly one of content or input", path: ["content"] });
const base64Of = (v: Float32Array) => Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64"); // (little-endian hosts)

type Embedded = { ok: true; out: { v: Float32Array; tokens: number }[] } | { ok: false; res: Response };

/** Every input's embedding, in order (each a prompt in the queue, the first leading the others); a failure (or more
 *  than `limit` values in all) names `field` (or `field.i` when `many`) and abandons the rest. An input's values (one
 *  vector, or under pooling none one a prompt token) are counted when it is queued, before its prefill: one 128k-token
 *  input at GLM-5's width is 3.2 GB of rows, which were made and copied before a count at its end refused them. */
async function embedAll(req: Request, engine: EngineClient, o: RouteOptions, inputs: PromptSpec[], norm: number,
  b: { truncate_prompt_tokens?: number | null; priority?: number | null }, field: string, many: boolean, limit = Infinity): Promise<Embedded> {
  const embed = { pooling: o.defaults.pooling ?? "last" as Pooling, norm };
  const gens: GenRequest[] = inputs.map((prompt, i) => ({
    prompt, slot: "auto", max_tokens: 0, temperature: 0, top_p: 1, min_p: 0, top_k: 0, stop: [], embed,
    ...(i > 0 ? { joined: true } : {}), ...(b.truncate_prompt_tokens ? { truncate: b.truncate_prompt_tokens } : {}),
    ...(b.priority ? { priority: b.priority } : {}),
  }));
  const rs = gens.map((g) => run(engine, g, req.signal));
  const abandon = () => { for (const x of rs) x.abandon(); };
  const out: { v: Float32Array; tokens: number }[] = [], D = engine.info!.hidden;
  // each input's first event (queued, or its refusal) before any is read further: the values they will hold
  const first: ReqEvent[] = [];
  let values = 0;
  for (const [i, x] of rs.entries()) {
    const e = (first[i] = await x.q.next());
    if (e.t === "queued" && (values += (embed.pooling === "none" ? e.prompt_tokens : 1) * D) > limit) {
      abandon();
      return { ok: false, res: errorResponse(apiError(400, `${many ? `${field}.${i}` : field}: past ${limit} values of token vectors in one response (pooling none): send fewer or shorter inputs`, field, "invalid_value")) };
    }
  }
  for (const [i, x] of rs.entries()) {
    let v: Float32Array | null = null;
    for (let e: ReqEvent = first[i]; ; e = await x.q.next()) {
      if (e.t === "embedding") v = e.data;
      else if (e.t === "error") { abandon(); return { ok: false, res: errorResponse(fromWorker(e.code, e.detail, many ? `${field}.${i}` : field)) }; }
      else if (e.t === "done") {
        if (!v) { abandon(); return { ok: false, res: errorResponse(apiError(500, `internal error: input ${i} ended without an embedding`, null, "internal_error")) }; }
        out.push({ v, tokens: e.prompt_tokens });
        break;
      }
    }
  }
  return { ok: true, out };
}

const isMany = (x: string | string[] | number[] | number[][]) => typeof x !== "string" && typeof x[0] !== "number";

export async function embeddings(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const r = await readRequest(req, o, EmbeddingRequest, engine);
  if (!r.ok) return errorResponse(r.error);
  const b = r.data, D = engine.info!.hidden, refused = priorityRefused(b, o);
  if (refused) return errorResponse(refused);
  if (o.defaults.pooling === "none")
    return errorResponse(apiError(400, "this server pools with none (serve --pooling none): one vector per token, which OpenAI's embeddings cannot carry; use POST /embedding", null, "invalid_value"));
  if (b.dimensions != null && b.dimensions !== D)
    return errorResponse(apiError(400, `dimensions: this model's embeddings have ${D} dimensions (no shortening: it was not trained for it)`, "dimensions", "invalid_value"));
  const inputs: PromptSpec[] = b.input != null ? promptsOf(b.input) : [{ kind: "chat", messages: templateMessages(b.messages!),
    ...templateOf(b.chat_template_kwargs, o.defaults.templateKwargs), generationPrompt: b.add_generation_prompt ?? false }];
  const norm = b.embd_normalize ?? (b.normalize === false ? -1 : 2);
  const e = await embedAll(req, engine, o, inputs, norm, b, b.input != null ? "input" : "messages", b.input != null && isMany(b.input));
  if (!e.ok) return e.res;
  const tokens = e.out.reduce((a, x) => a + x.tokens, 0), usage = { prompt_tokens: tokens, total_tokens: tokens };
  // (in pieces, a vector each: 256 inputs at GLM-5's width are 1.6M values)
  return jsonPieces(req, (function* () {
    yield `{"object":"list","model":${JSON.stringify(engine.info!.model)},"data":[`;
    for (const [index, x] of e.out.entries())
      yield (index ? "," : "") + JSON.stringify({ object: "embedding", index, embedding: b.encoding_format === "base64" ? base64Of(x.v) : Array.from(x.v) });
    yield `],"usage":${JSON.stringify(usage)}}`;
  })());
}

/** llama-server's POST /embedding: [{index, embedding: [[…]]}] — the pooled vector, or every token's (pooling none). */
export async function llamaEmbedding(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const r = await readRequest(req, o, LlamaEmbeddingRequest, engine);
  if (!r.ok) return errorResponse(r.error);
  const b = r.data, refused = priorityRefused(b, o);
  if (refused) return errorResponse(refused);
  const field = b.content != null ? "content" : "input", x = (b.content ?? b.input)!, D = engine.info!.hidden;
  const e = await embedAll(req, engine, o, promptsOf(x), b.embd_normalize ?? 2, b, field, isMany(x), o.http.maxRowValues ?? MAX_ROW_VALUES);
  if (!e.ok) return e.res;
  return jsonPieces(req, rowsJson(e.out, D));
}

/** `[{index, embedding: [[…], …]}, …]` as JSON, about ROWS_TEXT characters a piece: under pooling none up to
 *  MAX_ROW_VALUES values, ~1.3 GB of text, which was one string built on the HTTP thread (and every row a JS array
 *  first) */
const ROWS_TEXT = 1 << 16;
function* rowsJson(out: { v: Float32Array }[], D: number): Generator<string> {
  const step = Math.max(1, Math.floor(ROWS_TEXT / (20 * D))); // rows a piece (a value prints in ≤ ~20 characters)
  yield "[";
  for (const [index, { v }] of out.entries()) {
    yield `${index ? "," : ""}{"index":${index},"embedding":[`;
    for (let t = 0; t * D < v.length; t += step) {
      const rows = Array.from({ length: Math.min(step, v.length / D - t) }, (_, k) => Array.from(v.subarray((t + k) * D, (t + k + 1) * D)));
      yield (t ? "," : "") + JSON.stringify(rows).slice(1, -1);
    }
    yield "]}";
  }
  yield "]";
}
