// Turns a GenRequest's prompt into token ids in the worker (encode text, render the chat template, check ids) and
// the checks every prompt passes: not empty, shorter than the slot context. A text is judged by its bytes first
// (leastTokens), so a prompt that cannot fit is refused without the tokenizer's cost and at most ctx × maxTokenBytes
// bytes of one prompt are ever tokenized. Also the logprob report of one sampled token. Pure functions.
import type { TextCodec } from "../../model/tokenizer.ts";
import type { ErrorCode, PromptSpec, TopLogprob } from "./protocol.ts";

export type Prepared = { ok: true; ids: number[] } | { ok: false; code: ErrorCode; detail: string };

/** A chat prompt's text: the template's, ending with the generation prompt (unless asked not to), or, continuing the
 *  final (assistant) message (vLLM's continue_final_message), cut right after that message's text. */
function chatText(p: Extract<PromptSpec, { kind: "chat" }>, codec: TextCodec): string {
  const text = codec.chat(p.messages, { enableThinking: p.enableThinking, tools: p.tools, addGenerationPrompt: !p.continueFinal && p.generationPrompt !== false, kwargs: p.kwargs });
  if (!p.continueFinal) return text;
  const last = p.messages[p.messages.length - 1].content, at = last ? text.lastIndexOf(last) : -1;
  if (at < 0) throw new Error("continue_final_message: the rendered template does not hold the final message's text to continue");
  return text.slice(0, at + last.length);
}

/** The prompt as the tokenizer sees it: ids and texts in turn (a chat: the text its template renders). */
export function promptParts(p: PromptSpec, codec: TextCodec): readonly (number | string)[] {
  return p.kind === "ids" ? p.ids : p.kind === "parts" ? p.parts : [p.kind === "text" ? p.text : chatText(p, codec)];
}

/** The fewest tokens `parts` can encode to, from their lengths alone: one per id, ceil(bytes / maxTokenBytes) per text
 *  (model/token-bound.ts). A prompt refused by it is CONTEXT_EXCEEDED `<least> <ctx> <bytes> <maxTokenBytes>` (the last
 *  two words mark it a lower bound). */
export function leastTokens(parts: readonly (number | string)[], codec: TextCodec): { tokens: number; bytes: number } {
  let tokens = 0, bytes = 0;
  for (const t of parts) {
    if (typeof t === "number") { tokens++; continue; }
    tokens += codec.minTokens(t);
    bytes += Buffer.byteLength(t, "utf8");
  }
  return { tokens, bytes };
}

/** The token ids of `parts` (texts through the tokenizer; ids are not checked here). */
export function encodeParts(parts: readonly (number | string)[], codec: TextCodec): number[] {
  return parts.length === 1 && typeof parts[0] === "string" ? codec.encode(parts[0]) : parts.flatMap((t) => (typeof t === "number" ? [t] : codec.encode(t)));
}

export function promptIds(p: PromptSpec, codec: TextCodec, vocab: number, ctx: number, truncate = 0): Prepared {
  let ids: number[];
  const field = p.kind === "chat" ? "messages" : "prompt";
  try {
    const given = p.kind === "ids" ? p.ids : p.kind === "parts" ? p.parts : [];
    const bad = given.findIndex((t) => typeof t === "number" && (!Number.isInteger(t) || t < 0 || t >= vocab));
    if (bad >= 0) return { ok: false, code: "BAD_REQUEST", detail: `prompt token ${bad} (${given[bad]}) is outside [0, ${vocab})` };
    if (p.kind === "ids") ids = p.ids;
    else {
      const parts = promptParts(p, codec), least = leastTokens(parts, codec), most = codec.maxTokenBytes;
      if (most !== null && truncate === 0 && least.tokens >= ctx)
        return { ok: false, code: "CONTEXT_EXCEEDED", detail: `${least.tokens} ${ctx} ${least.bytes} ${most}` };
      if (most !== null && truncate > 0 && least.tokens > ctx)
        return { ok: false, code: "BAD_REQUEST", detail: `${field} has ${least.bytes} bytes (at least ${least.tokens} tokens, ${most} bytes a token at most): `
          + `with truncate_prompt_tokens a prompt of at most ${ctx} × ${most} = ${ctx * most} bytes is tokenized` };
      ids = encodeParts(parts, codec);
    }
  } catch (e) {
    return { ok: false, code: "BAD_REQUEST", detail: `${field} could not be tokenized: ${(e as Error).message}` };
  }
  if (truncate > 0 && ids.length > truncate) ids = ids.slice(ids.length - truncate); // its last `truncate` tokens
  if (ids.length === 0) return { ok: false, code: "EMPTY_PROMPT", detail: "the prompt has no tokens" };
  if (ids.length >= ctx) return { ok: false, code: "CONTEXT_EXCEEDED", detail: `${ids.length} ${ctx}` };
  return { ok: true, ids };
}

/**
 * log softmax of the logits at `id`, its rank, and the k most likely ids (ties: lower id first). Logits of
 * −Infinity (tokens a grammar masked out) have probability 0 and are never listed, so under a
 * grammar the report is the constrained distribution and `top` may hold fewer than k entries.
 */
export function logprobsOf(logits: Float32Array, id: number, k: number, text: (id: number) => string): { lp: number; tt: string; top: TopLogprob[]; rank: number } {
  let max = -Infinity, above = 0;
  for (let i = 0; i < logits.length; i++) { if (logits[i] > max) max = logits[i]; if (logits[i] > logits[id]) above++; }
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  const lse = max + Math.log(sum);
  const best: number[] = [];
  for (let i = 0; i < logits.length && k > 0; i++) {
    if (!(logits[i] > -Infinity)) continue;
    if (best.length === k && logits[i] <= logits[best[k - 1]]) continue;
    let j = best.length < k ? best.length : k - 1;
    while (j > 0 && logits[best[j - 1]] < logits[i]) { best[j] = best[j - 1]; j--; }
    best[j] = i;
  }
  return {
    lp: logits[id] - lse,
    tt: text(id),
    top: best.map((t) => ({ id: t, lp: logits[t] - lse, text: text(t) })),
    rank: above + 1, // (vLLM's: 1 + the ids more likely than this one)
  };
}
