// POST /tokenize and POST /detokenize (llama-server's and vLLM's shapes at once), POST /apply-template
// (llama-server's: a chat rendered by the template, no inference): the HTTP side. The tokenizer lives in the engine
// worker, so these ask it (EngineClient.call; its side is tokenize-call.ts) between two scheduler steps and the event
// loop never tokenizes. Text is encoded as a completion prompt is (no special tokens added); `messages` go through the
// chat template as a chat request's would (the server's --chat-template-kwargs, the request's chat_template_kwargs,
// continue_final_message). A text is counted up to max_model_len (the context). No state.
import { z } from "zod";
import type { EngineClient } from "./engine-client.ts";
import { apiError, errorResponse } from "./http-errors.ts";
import type { PromptSpec } from "../engine/serving/protocol.ts";
import { list, tokenIds } from "./bounded.ts";
import { MAX_IDS, MessagesSchema, nullish, TemplateKwargs, templateOf } from "./schemas.ts";
import { readRequest, type RouteOptions } from "./routes-common.ts";
import { templateMessages } from "./chat.ts";
import { ToolSchema } from "./tools.ts";

const TokenizeRequest = z.object({
  model: nullish(z.string().max(256)),
  content: nullish(z.string()),              // llama-server
  prompt: nullish(z.string()),               // vLLM
  messages: nullish(MessagesSchema),         // vLLM: a chat, rendered by the template
  add_generation_prompt: nullish(z.boolean()),
  continue_final_message: nullish(z.boolean()), chat_template_kwargs: TemplateKwargs, // vLLM's, with messages
  with_pieces: nullish(z.boolean()),         // llama-server: tokens as {id, piece}
  return_token_strs: nullish(z.boolean()),   // vLLM: token_strs, the vocabulary's strings
}).refine((b) => [b.content, b.prompt, b.messages].filter((x) => x != null).length === 1,
  { message: "give exactly one of content, prompt or messages", path: ["content"] });
const DetokenizeRequest = z.object({ model: nullish(z.string().max(256)), tokens: tokenIds({ max: MAX_IDS }) });
const TemplateRequest = z.object({
  model: nullish(z.string().max(256)),
  messages: MessagesSchema,
  tools: nullish(list(ToolSchema, { max: 128 })), // (shown to the template as the chat route shows them)
  add_generation_prompt: nullish(z.boolean()),
  chat_template_kwargs: TemplateKwargs,
});

async function body<T>(req: Request, o: RouteOptions, schema: z.ZodType<T>, engine: EngineClient): Promise<T | Response> {
  const r = await readRequest(req, o, schema, engine);
  return r.ok ? r.data : errorResponse(r.error);
}

export async function tokenize(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const b = await body(req, o, TokenizeRequest, engine);
  if (b instanceof Response) return b;
  const prompt: PromptSpec = b.messages ? { kind: "chat", messages: templateMessages(b.messages), ...templateOf(b.chat_template_kwargs, o.defaults.templateKwargs),
    generationPrompt: b.add_generation_prompt ?? true, continueFinal: b.continue_final_message ?? false } : { kind: "text", text: (b.content ?? b.prompt)! };
  const r = await engine.call({ op: "tokenize", prompt, pieces: !!b.with_pieces, strs: !!b.return_token_strs, limit: engine.info!.ctx });
  if (!r.ok) return errorResponse(apiError(400, r.detail, b.messages ? "messages" : b.content != null ? "content" : "prompt", "invalid_value"));
  const { ids, pieces, strs } = r.value as { ids: number[]; pieces?: string[]; strs?: string[] };
  return Response.json({ tokens: pieces ? ids.map((id, i) => ({ id, piece: pieces[i] })) : ids, count: ids.length, max_model_len: engine.info!.ctx,
    ...(strs ? { token_strs: strs } : {}) });
}

export async function detokenize(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const b = await body(req, o, DetokenizeRequest, engine);
  if (b instanceof Response) return b;
  const V = engine.info!.vocab, bad = b.tokens.findIndex((t) => t >= V);
  if (bad >= 0) return errorResponse(apiError(400, `tokens.${bad}: ${b.tokens[bad]} is outside [0, ${V})`, "tokens", "invalid_value"));
  const r = await engine.call({ op: "detokenize", ids: Int32Array.from(b.tokens) });
  if (!r.ok) return errorResponse(apiError(400, r.detail, "tokens", "invalid_value"));
  const { text } = r.value as { text: string };
  return Response.json({ content: text, prompt: text });
}

export async function applyTemplate(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const b = await body(req, o, TemplateRequest, engine);
  if (b instanceof Response) return b;
  const r = await engine.call({ op: "template", generationPrompt: b.add_generation_prompt ?? true,
    prompt: { kind: "chat", messages: templateMessages(b.messages), ...templateOf(b.chat_template_kwargs, o.defaults.templateKwargs), ...(b.tools?.length ? { tools: b.tools } : {}) } });
  if (!r.ok) return errorResponse(apiError(400, r.detail, "messages", "invalid_value"));
  return Response.json(r.value);
}
