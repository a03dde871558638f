// Turns a GenRequest's prompt into token ids in the worker (encode text, render the chat template,
// check ids), and the checks every prompt must pass: not empty, shorter than the slot context.
// Also the logprob report of one sampled token. Pure functions of (request, codec, limits).
import type { TextCodec } from "../model/tokenizer.ts";
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

/** The prompt's token ids as given or as the tokenizer (and the chat template) make them; ids are not checked here. */
export function tokenIds(p: PromptSpec, codec: TextCodec): number[] {
  return p.kind === "ids" ? p.ids : p.kind === "parts" ? p.parts.flatMap((t) => (typeof t === "number" ? [t] : codec.encode(t)))
    : p.kind === "text" ? codec.encode(p.text) : codec.encode(chatText(p, codec));
}

export function promptIds(p: PromptSpec, codec: TextCodec, vocab: number, ctx: number, truncate = 0): Prepared {
  let ids: number[];
  try {
    const given = p.kind === "ids" ? p.ids : p.kind === "parts" ? p.parts : [];
    const bad = given.findIndex((t) => typeof t === "number" && (!Number.isInteger(t) || t < 0 || t >= vocab));
    if (bad >= 0) return { ok: false, code: "BAD_REQUEST", detail: `prompt token ${bad} (${given[bad]}) is outside [0, ${vocab})` };
    ids = tokenIds(p, codec);
  } catch (e) {
    const field = p.kind === "chat" ? "messages" : "prompt";
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
