// The engine worker's side of POST /tokenize, /detokenize and /apply-template (the HTTP side:
// src/server/tokenize.ts): the reply to one call, between two scheduler steps. A text is counted up to the limit
// (max_model_len): one whose byte length alone proves more tokens than that (prepare.ts leastTokens) is refused
// unread, so one call tokenizes at most ctx × maxTokenBytes bytes. No state.
import type { TextCodec } from "../../model/tokenizer.ts";
import { encodeParts, leastTokens, promptParts } from "./prepare.ts";
import type { Call } from "./protocol.ts";

/** The reply to a tokenize / detokenize / template call (an Error's message names the bad field). */
export function tokenizeCall(m: Exclude<Call, { op: "slot" }>, codec: TextCodec): unknown {
  if (m.op === "detokenize") {
    return { text: codec.decode(Array.from(m.ids)) }; // (ids in the vocabulary: src/server/tokenize.ts checked them)
  }
  if (m.op === "template")
    return { prompt: codec.chat(m.prompt.messages, { addGenerationPrompt: m.generationPrompt, enableThinking: m.prompt.enableThinking, tools: m.prompt.tools, kwargs: m.prompt.kwargs }) };
  const parts = promptParts(m.prompt, codec), least = leastTokens(parts, codec);
  if (m.limit !== undefined && least.tokens > m.limit)
    throw new Error(`the text has ${least.bytes} bytes: at least ${least.tokens} tokens (${codec.maxTokenBytes} bytes a token at most), `
      + `more than max_model_len ${m.limit}, the most /tokenize counts`);
  const ids = encodeParts(parts, codec);
  return { ids, pieces: m.pieces ? ids.map((t) => codec.decode([t])) : undefined, strs: m.strs ? ids.map((t) => codec.tokenStr(t)) : undefined };
}
