// POST /v1/embeddings (OpenAI's shape, as vLLM and llama-server serve it): each input — a string, a list of strings,
// token ids or a list of id lists, or (vLLM's chat form) `messages` through the chat template — prefilled in a KV slot like any prompt (batched with the streams decoding) and
// pooled from its final hidden states (engine/pooling.ts: the server's --pooling, last token by default), L2-normalized
// unless `normalize: false` (vLLM's). `encoding_format: "base64"` (the openai SDK's default) gives the little-endian
// f32 bytes. No state.
import { z } from "zod";
import type { EngineClient } from "./engine-client.ts";
import { run } from "./gen-stream.ts";
import { apiError, errorResponse, fromWorker } from "./http-errors.ts";
import type { GenRequest, PromptSpec, ReqEvent } from "./protocol.ts";
import { templateMessages } from "./chat.ts";
import { promptsOf } from "./completions.ts";
import { Ids, MessagesSchema, nullish, TemplateKwargs, templateOf } from "./schemas.ts";
import { priorityRefused, readRequest, type RouteOptions } from "./routes-common.ts";
import type { Pooling } from "../engine/pooling.ts";

/** inputs of one request (OpenAI allows 2048; each is a prompt in the queue) */
export const MAX_INPUTS = 256;
const EmbeddingRequest = z.object({
  model: nullish(z.string().max(256)),
  input: nullish(z.union([z.string(), z.array(z.string()).min(1).max(MAX_INPUTS), Ids, z.array(Ids).min(1).max(MAX_INPUTS)])),
  // vLLM's chat form: one input, the messages through the chat template (no generation prompt unless asked)
  messages: nullish(MessagesSchema), add_generation_prompt: nullish(z.boolean()), chat_template_kwargs: TemplateKwargs,
  encoding_format: nullish(z.enum(["float", "base64"])),
  dimensions: nullish(z.int().min(1)),
  user: nullish(z.string().max(256)),
  normalize: nullish(z.boolean()),                // vLLM's
  truncate_prompt_tokens: nullish(z.int().min(1)), // vLLM's: only the last this many tokens
  priority: nullish(z.int().min(-(2 ** 31)).max(2 ** 31 - 1)), // vLLM's: lower first (serve --scheduling-policy priority)
}).refine((b) => (b.input == null) !== (b.messages == null), { message: "give exactly one of input or messages", path: ["input"] });
const base64Of = (v: Float32Array) => Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64"); // (little-endian hosts)

export async function embeddings(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const r = await readRequest(req, o, EmbeddingRequest, engine);
  if (!r.ok) return errorResponse(r.error);
  const b = r.data, D = engine.info!.hidden, refused = priorityRefused(b, o);
  if (refused) return errorResponse(refused);
  if (b.dimensions != null && b.dimensions !== D)
    return errorResponse(apiError(400, `dimensions: this model's embeddings have ${D} dimensions (no shortening: it was not trained for it)`, "dimensions", "invalid_value"));
  const inputs: PromptSpec[] = b.input != null ? promptsOf(b.input) : [{ kind: "chat", messages: templateMessages(b.messages!),
    ...templateOf(b.chat_template_kwargs, o.templateKwargs), generationPrompt: b.add_generation_prompt ?? false }];
  const many = b.input != null && typeof b.input !== "string" && typeof b.input[0] !== "number", field = b.input != null ? "input" : "messages";
  const embed = { pooling: o.pooling ?? "last" as Pooling, normalize: b.normalize ?? true };
  const gens: GenRequest[] = inputs.map((prompt, i) => ({
    prompt, slot: "auto", max_tokens: 0, temperature: 0, top_p: 1, min_p: 0, top_k: 0, stop: [], embed,
    ...(i > 0 ? { joined: true } : {}), ...(b.truncate_prompt_tokens ? { truncate: b.truncate_prompt_tokens } : {}),
    ...(b.priority ? { priority: b.priority } : {}),
  }));
  const rs = gens.map((g) => run(engine, g, req.signal));
  const abandon = () => { for (const x of rs) x.abandon(); };
  const out: { v: Float32Array; tokens: number }[] = [];
  for (const [i, x] of rs.entries()) {
    let v: Float32Array | null = null;
    for (let e: ReqEvent = await x.q.next(); ; e = await x.q.next()) {
      if (e.t === "embedding") v = e.data;
      else if (e.t === "error") { abandon(); return errorResponse(fromWorker(e.code, e.detail, many ? `input.${i}` : field)); }
      else if (e.t === "done") {
        if (!v) { abandon(); return errorResponse(apiError(500, `internal error: input ${i} ended without an embedding`, null, "internal_error")); }
        out.push({ v, tokens: e.prompt_tokens });
        break;
      }
    }
  }
  const tokens = out.reduce((a, x) => a + x.tokens, 0);
  return Response.json({
    object: "list", model: engine.info!.model,
    data: out.map((x, index) => ({ object: "embedding", index, embedding: b.encoding_format === "base64" ? base64Of(x.v) : Array.from(x.v) })),
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  });
}
