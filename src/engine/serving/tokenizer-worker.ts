// The tokenizer's own worker, started by the engine worker: large prompts are rendered (chat template) and encoded
// here, and /tokenize, /detokenize and /apply-template calls answered, so the engine's thread keeps stepping the
// other streams meanwhile (a prompt of ctx × maxTokenBytes bytes — 2.3 MB at a 128k context — took seconds of the
// engine's thread). The same functions as the engine worker's own (prepare.ts, tokenize-call.ts): the same ids,
// errors and replies. Runs niced (src/native/nice.ts). State: the tokenizer.
import { loadTokenizer, type TextCodec } from "../../model/tokenizer.ts";
import type { Call, PromptSpec } from "./protocol.ts";
import { promptIds, type Prepared } from "./prepare.ts";
import { tokenizeCall } from "./tokenize-call.ts";
import { niceThread } from "../../native/nice.ts";

declare const self: Worker;

/** To this worker: load the tokenizer; a prompt's ids; a call's reply. */
export type ToTokenizer =
  | { t: "init"; dir: string; chatTemplate?: string; vocab: number; ctx: number }
  | { t: "prompt"; rid: number; prompt: PromptSpec; truncate?: number }
  | { t: "call"; rid: number; call: Exclude<Call, { op: "slot" }> };
export type FromTokenizer =
  | { t: "ready" }
  | { t: "failed"; message: string }
  | { t: "prompt"; rid: number; p: Prepared }
  | { t: "reply"; rid: number; ok: true; value: unknown }
  | { t: "reply"; rid: number; ok: false; detail: string };

let codec: TextCodec | null = null, vocab = 0, ctx = 0;
const post = (m: FromTokenizer) => self.postMessage(m);
/** the helpers' nice value: their work waits on the decoding threads (docs/security.md "Tokenize floods") */
const TOKENIZER_NICE = 10;
niceThread(TOKENIZER_NICE);

self.onmessage = (e: MessageEvent<ToTokenizer>) => {
  const m = e.data;
  if (m.t === "init") {
    try {
      codec = loadTokenizer(m.dir, m.chatTemplate, false); // (the engine worker that starts this one has checked it)
      vocab = m.vocab; ctx = m.ctx;
      post({ t: "ready" });
    } catch (err) { post({ t: "failed", message: (err as Error).message }); }
  } else if (m.t === "prompt") post({ t: "prompt", rid: m.rid, p: promptIds(m.prompt, codec!, vocab, ctx, m.truncate) });
  else {
    try { post({ t: "reply", rid: m.rid, ok: true, value: tokenizeCall(m.call, codec!) }); }
    catch (err) { post({ t: "reply", rid: m.rid, ok: false, detail: (err as Error).message }); }
  }
};
