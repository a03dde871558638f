// The messages between the HTTP side (EngineClient) and the engine worker (worker.ts): what a
// generation request is, and every event the worker reports. Plain data only (structured clone). No state.
import type { ChatMessage } from "../../model/tokenizer.ts";
import type { PenaltyParams } from "../penalties.ts";
import type { SamplingDefaults } from "../../model/config.ts";
import type { Pooling } from "../pooling.ts";
import type { QualityPolicy } from "../quality.ts";
import type { WorkerConfig } from "./config.ts";

export type PromptSpec =
  | { kind: "text"; text: string }
  | { kind: "ids"; ids: number[] }
  | { kind: "parts"; parts: (number | string)[] } // llama-server's mixed prompt: token ids and texts (tokenized) in turn
  // enableThinking absent: the template decides (its enable_thinking left undefined; on unless it closes <think></think>)
  | { kind: "chat"; messages: ChatMessage[]; enableThinking?: boolean; tools?: unknown[]; generationPrompt?: boolean; continueFinal?: boolean;
      kwargs?: Record<string, unknown> }; // more chat template variables (chat_template_kwargs but enable_thinking)

export interface GenRequest {
  prompt: PromptSpec;
  slot: number | "auto";
  max_tokens?: number;     // default: the rest of the context
  max_tokens_field?: string; // the request field that named max_tokens (OpenAI's routes): past the context it is refused
                           // (MAX_TOKENS_EXCEEDED, vLLM's 400) rather than cut to what is left; absent: cut
  temperature: number;     // 0 = greedy
  top_p: number;
  min_p: number;
  top_k: number;           // 0 = off
  typical_p?: number;      // locally typical sampling (llama-server's; absent: off)
  xtc_probability?: number; xtc_threshold?: number; // XTC (llama-server's; absent: off)
  mirostat?: number; mirostat_tau?: number; mirostat_eta?: number; // mirostat 1 / 2 (llama-server's; absent: off)
  temperature_last?: boolean; // the filters read the T = 1 distribution, temperature last (llama.cpp's chain: /completion)
  top_n_sigma?: number; dynatemp_range?: number; dynatemp_exponent?: number; // llama-server's (absent: off)
  seed?: number;
  logprobs?: number;       // top-k alternatives to report (0 = only the chosen token's); absent = off
  echo?: boolean;          // send the prompt back first (a `prompt` event; with logprobs, each prompt token's too)
  stop: string[];          // stop strings (matched on the decoded text; never emitted)
  grammar?: GrammarSpec;   // constrained output: every sampled token must continue this grammar
  penalties?: PenaltyParams; // presence / frequency / repetition penalties and logit_bias (engine/penalties.ts)
  keepSpecial?: boolean;   // special tokens stay in the text (tool calls: GLM's <tool_call> tags are special)
  joined?: boolean;        // a later choice of a request whose first one was accepted: queued even past the queue limit
  share?: number;          // the rid of the submission just before, a choice of the same prompt (n > 1): its prompt ids
                           // are used, not made again (worker.ts)
  ignore_eos?: boolean;    // the model's end ids do not end the output (they are generated like any token)
  stop_ids?: number[];     // more token ids that end it (not emitted)
  min_tokens?: number;     // end and stop ids are banned until this many tokens are out
  allowed_ids?: number[];  // only these ids may be sampled (vLLM's allowed_token_ids)
  bad_words?: string[];    // the last token of each word's tokens banned where the output ends with the rest (vLLM's)
  include_stop?: boolean;  // a matched stop string ends the text instead of being cut (vLLM's include_stop_str_in_output)
  truncate?: number;       // only the prompt's last this many tokens are used (vLLM's truncate_prompt_tokens)
  token_ids_as_text?: boolean; // logprobs name tokens `token_id:ID` (vLLM's return_tokens_as_token_ids)
  prompt_logprobs?: number; // each prompt token's logprob, rank and this many alternatives (vLLM's prompt_logprobs)
  think_budget?: number;   // tokens allowed inside <think> before </think> is forced (−1: none; absent: the server's --reasoning-budget)
  embed?: { pooling: Pooling; norm: number }; // an embedding of the prompt (an `embedding` event after its prefill; max_tokens 0); norm: llama-server's embd_normalize
  priority?: number;       // queue order: lower first, then arrival (vLLM's; 0 when absent)
  return_ids?: boolean;    // the prompt's token ids in the `queued` event (vLLM's return_token_ids)
}

/** A GBNF grammar (start rule `root`) and the request field it came from (named in errors). */
export interface GrammarSpec { gbnf: string; field: string }

/** Worker error codes (mux names; the HTTP side maps them to statuses). */
export type ErrorCode = "BAD_REQUEST" | "SLOT_BUSY" | "EMPTY_PROMPT" | "CONTEXT_EXCEEDED" | "MAX_TOKENS_EXCEEDED" | "NOT_FOUND" | "CANCELLED" | "OVERLOADED"
  | "INTERNAL"; // (MAX_TOKENS_EXCEEDED: `<prompt tokens> <ctx> <max_tokens> <field>`, only for requests with max_tokens_field)
export type FinishReason = "stop" | "length" | "stopped";

export interface ReadyInfo { model: string; dir: string; slots: number; queue: number; ctx: number; vocab: number; hidden: number; threads: number; chatTemplate: string | null;
  sampling: SamplingDefaults; // (the model's generation_config.json)
  quality: QualityPolicy | null } // the opt-in router policies it runs with (null: the model as trained)

export interface TopLogprob { id: number; lp: number; text: string }
/** One prompt token of an echo: its logprob given the tokens before it (null for the first). */
export interface PromptTok { id: number; tt: string; lp: number | null; top: TopLogprob[] | null; rank?: number }

export interface SlotInfo {
  id: number;
  state: "idle" | "prefill" | "decode";
  tokens: number;          // rows in the slot's KV cache (its history)
  rid?: number;
  prompt_tokens?: number;
  cached_tokens?: number;
  emitted?: number;
}

/** The expert store's figures for /metrics (engine/experts ExpertStats, abridged). */
export interface ExpertFigures { hitRate: number; hits: number; misses: number; bytesRead: number; readGBs: number; waitMsPerToken: number;
  prefetchHits: number; pilotHitRate: number }

export interface Stats {
  experts?: ExpertFigures;
  busy: number;
  queue: number;
  decode_tok_s: number;    // generated tokens per second over the last window, all slots
  drafted: number;         // draft tokens verified (speculative decoding), since start
  accepted: number;        // of which kept
  slots: SlotInfo[];
  preemptions: number;     // running requests sent back to the queue for a more urgent one (or a waiting one while their
                           // client was not reading), since start
  held: number;            // requests paused because their client is not reading their stream (out-flow.ts)
  promptCache?: { bytes: number; budget: number; entries: number; hits: number; evicted: number }; // --cache-ram (absent: off)
}

/** A question for the worker's tokenizer (POST /tokenize, /detokenize), answered by a `reply`. */
export type Call =
  | { op: "tokenize"; prompt: PromptSpec; pieces: boolean; strs?: boolean; limit?: number } // limit: tokens at most (a longer text is refused by its length)
  | { op: "detokenize"; ids: Int32Array } // (each below the vocabulary: checked where they came in; packed, so 1M of them cross threads as one copy, not 1M values)
  | { op: "template"; prompt: Extract<PromptSpec, { kind: "chat" }>; generationPrompt: boolean }
  | { op: "slot"; action: "save" | "restore" | "erase"; id: number; filename: string | null };

export type ToWorker =
  | { t: "init"; config: WorkerConfig }
  | { t: "call"; rid: number; call: Call }
  | { t: "submit"; rid: number; req: GenRequest }
  | { t: "cancel"; rid: number }
  | { t: "stop"; rid: number }
  | { t: "hold"; rid: number; on: boolean }; // its client is not reading (on) / reads again (off): scheduler.ts hold

/** Events of one request, in order: queued?, accept, tok*, then exactly one done or error. */
export type ReqEvent =
  | { t: "queued"; rid: number; prompt_tokens: number; ids?: number[] } // ids: with return_ids
  | { t: "accept"; rid: number; slot: number; prompt_tokens: number; cached_tokens: number; think: boolean;
      thinking: boolean } // think: the prompt ends inside <think>; thinking: a chat reply's think split is on (asked, or the template's)
  | {
    t: "tok"; rid: number; id: number; text: string;
    bytes: Uint8Array;                         // this token's bytes of the literal stream (mux DATA; see detok.ts)
    mark?: "think" | "/think";                 // a <think> / </think> token (text is what came before it)
    lp?: number; tt?: string; top?: TopLogprob[]; // with logprobs: the chosen token's logprob and text
  }
  | { t: "prompt"; rid: number; text: string; toks: PromptTok[] | null; echo: boolean } // echo / prompt_logprobs: after the prefill, before any tok
  | { t: "embedding"; rid: number; data: Float32Array } // embed: the pooled vector [hidden_size] (pooling none: every prompt row's [n, hidden_size]), after the prefill, before done
  | { t: "done"; rid: number; reason: FinishReason; text: string; bytes: Uint8Array; emitted: number; prompt_tokens: number; cached_tokens: number; decode_tok_s: number; stop_text?: string /* the stop string that ended it */
      prompt_ms: number; predicted_ms: number } // admission to the first token (the prefill), first token to the last
  | { t: "error"; rid: number; code: ErrorCode; detail: string };

export type FromWorker =
  | ReqEvent
  | { t: "ready"; info: ReadyInfo }
  | { t: "fatal"; message: string }
  | { t: "stats"; stats: Stats }
  | { t: "reply"; rid: number; ok: true; value: unknown }
  | { t: "reply"; rid: number; ok: false; detail: string };
