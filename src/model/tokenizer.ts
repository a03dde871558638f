// Text <-> ids for a model directory: tokenizer.json through @huggingface/tokenizers, the chat
// template (chat-template.ts finds it) through @huggingface/jinja, a streaming decoder that never
// emits half a UTF-8 character, and each token's raw bytes (through the grammar engine's TokenVocab).
// Holds the parsed tokenizer, the compiled templates and the TokenVocabs built from it.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";
import { MAX_TOKENIZER_FILE, tokenizerShape, TokenVocab } from "./vocab.ts";
import { ModelError, readJsonObject } from "./errors.ts";
import { renderBudgeted } from "./template-budget.ts";
import { maxTokenBytes } from "./token-bound.ts";
import { auditRegexes, findRegexes, type Components } from "./tokenizer-audit.ts";
import { modelTemplates, pickTemplates, type ChatTemplates } from "./chat-template.ts";

const utf8 = new TextEncoder();

/** A chat message for the template: OpenAI's fields (tool_calls' arguments as objects where they parse). */
export interface ChatMessage {
  role: string; content: string;
  tool_calls?: { id: string; type: "function"; function: { name: string; arguments: unknown } }[];
  tool_call_id?: string; name?: string;
  reasoning_content?: string; // an assistant turn's reasoning (GLM's templates render it for the current turn's tool chain)
}

export class TextCodec {
  private tok: Tokenizer;
  private template: Template | null;
  private toolTemplate: Template | null; // for requests with tools (a "tool_use" named template; null: the template)
  /** the chat template's source (null: none) */
  readonly templateText: string | null;
  /** the id of tokenizer_config.json's eos_token, when it names a token */
  readonly eosId: number | null;
  private vocabs = new Map<string, TokenVocab>();
  private byteVocab: TokenVocab | null | undefined; // undefined: not tried yet; null: unsupported tokenizer

  /** chatTemplate: the text of a Jinja chat template used instead of the model's (`--chat-template FILE`), or the
   *  model's as modelTemplates found them; absent: tokenizer_config.json's (configFile: where it came from). A
   *  template that does not parse is a ModelError naming its file. */
  constructor(private readonly tokenizerJson: unknown, tokenizerConfig: Record<string, unknown>, chatTemplate?: string | ChatTemplates,
    configFile = "tokenizer_config.json") {
    this.tok = new Tokenizer(tokenizerJson as object, tokenizerConfig as object);
    const t = typeof chatTemplate === "string" ? { text: chatTemplate, toolUse: null, file: "--chat-template" }
      : chatTemplate ?? pickTemplates(tokenizerConfig.chat_template, configFile);
    this.templateText = t.text;
    const compile = (text: string | null) => {
      try { return text === null ? null : new Template(text); } catch (e) {
        throw new ModelError(`does not parse: ${(e as Error).message}`, { file: t.file, field: "chat_template" });
      }
    };
    this.template = compile(t.text);
    this.toolTemplate = compile(t.toolUse);
    const eos = tokenizerConfig.eos_token;
    const name = typeof eos === "string" ? eos : typeof (eos as { content?: unknown })?.content === "string" ? (eos as { content: string }).content : null;
    this.eosId = name === null ? null : this.tok.token_to_id(name) ?? null;
  }

  /** Stop ids: the model's (config.json + generation_config.json) plus the tokenizer's eos token. */
  stopIds(modelStopIds: number[]): number[] {
    return this.eosId === null || modelStopIds.includes(this.eosId) ? modelStopIds : [...modelStopIds, this.eosId];
  }

  private mostBytes: number | null | undefined; // undefined: not computed yet

  /** The most UTF-8 input bytes one token stands for (token-bound.ts), computed once; null: not provable for this tokenizer. */
  get maxTokenBytes(): number | null {
    if (this.mostBytes === undefined) this.mostBytes = maxTokenBytes(this.tokenizerJson);
    return this.mostBytes;
  }

  /** A lower bound on encode(text).length without encoding: ceil(UTF-8 bytes / maxTokenBytes) (0 when there is no bound). */
  minTokens(text: string): number {
    const most = this.maxTokenBytes;
    return most === null ? 0 : Math.ceil(Buffer.byteLength(text, "utf8") / most);
  }

  /** the tokenizer's normalizer, pre-tokenizer and decoder (tokenizer-audit.ts times them) */
  get components(): Components {
    const t = this.tok as unknown as Components;
    return { normalizer: t.normalizer ?? null, pre_tokenizer: t.pre_tokenizer ?? null, decoder: t.decoder ?? null };
  }

  encode(text: string): number[] {
    return this.tok.encode(text, { add_special_tokens: false }).ids;
  }

  /** the vocabulary's string for `id` (the tokenizer's own spelling, e.g. "Ġword"; "" when it has none) */
  tokenStr(id: number): string {
    return this.tok.id_to_token(id) ?? "";
  }

  decode(ids: number[], skipSpecial = false): string {
    if (ids.length === 0) return "";
    return this.tok.decode(ids, { skip_special_tokens: skipSpecial });
  }

  /**
   * The grammar engine's TokenVocab of this tokenizer (token id -> bytes, `eosIds` allowed once a
   * grammar is complete), built once per eos set. Throws ModelError for tokenizers it does not
   * understand (neither ByteLevel nor Metaspace/byte_fallback).
   */
  tokenVocab(eosIds: readonly number[] = []): TokenVocab {
    const key = [...new Set(eosIds)].sort((a, b) => a - b).join(",");
    let v = this.vocabs.get(key);
    if (!v) {
      v = TokenVocab.fromTokenizerJson(this.tokenizerJson, { eosIds });
      this.vocabs.set(key, v);
    }
    this.byteVocab ??= v;
    return v;
  }

  /**
   * The raw bytes of one token (byte-level BPE: the ByteLevel alphabet mapped back to bytes, so a
   * multi-byte character may be split across tokens). Special tokens (and ids without bytes in the
   * vocabulary): their UTF-8 text, empty when `skipSpecial`.
   */
  tokenBytes(id: number, skipSpecial = true): Uint8Array {
    if (this.byteVocab === undefined) {
      try { this.tokenVocab(); } catch { this.byteVocab = null; }
    }
    const b = this.byteVocab && Number.isInteger(id) && id >= 0 && id < this.byteVocab.size ? this.byteVocab.bytes[id] : null;
    if (b && b.length > 0) return b; // shared with the vocabulary: do not modify
    try { return utf8.encode(this.decode([id], skipSpecial)); } catch { return new Uint8Array(0); }
  }

  /** Render the chat template (GLM: `enable_thinking: false` adds `<think></think>`; left undefined unless given, so the
   *  template's own default holds; `tools` as OpenAI sends them;
   *  `kwargs`: more template variables, as chat_template_kwargs gives them). */
  chat(messages: ChatMessage[], opts: { enableThinking?: boolean; addGenerationPrompt?: boolean; tools?: unknown[]; kwargs?: Record<string, unknown> } = {}): string {
    if (!this.template) throw new ModelError("no chat template (none in chat_template.jinja, chat_template.json or tokenizer_config.json)", { field: "chat_template" });
    const items = {
      ...opts.kwargs, messages, add_generation_prompt: opts.addGenerationPrompt ?? true,
      ...(opts.enableThinking !== undefined ? { enable_thinking: opts.enableThinking } : {}),
      ...(opts.tools?.length ? { tools: opts.tools } : {}),
    };
    const template = (opts.tools?.length && this.toolTemplate) || this.template;
    return renderBudgeted(template, items, JSON.stringify(items).length); // (a looping template is stopped: template-budget.ts)
  }

  /**
   * A streaming decoder: push ids, get text deltas; incomplete UTF-8 is held until complete. Each push decodes
   * only the ids since the last emitted delta plus the ones before it as context (prefix / read offsets, as
   * vLLM's incremental detokenizer), not the whole history: ~1-2 short decodes per token.
   */
  stream(skipSpecial = true): { push(id: number): string; flush(): string } {
    const ids: number[] = [];
    let prefix = 0, read = 0; // ids[prefix, read): context already emitted; ids[read, ...): not yet emitted
    const delta = (final: boolean): string => {
      const before = this.decode(ids.slice(prefix, read), skipSpecial), text = this.decode(ids.slice(prefix), skipSpecial);
      if (!final && (text.length <= before.length || text.endsWith("\uFFFD"))) return ""; // a character still incomplete
      prefix = read; read = ids.length;
      if (prefix > 64) { ids.splice(0, prefix); read -= prefix; prefix = 0; } // bound the history kept
      return text.slice(before.length);
    };
    return {
      push: (id: number) => { ids.push(id); return delta(false); },
      flush: () => { const d = delta(true); ids.length = 0; prefix = read = 0; return d; },
    };
  }
}

/** The codec of model directory `dir`; `chatTemplate` (the text of a template) replaces its own chat template.
 *  check: tokenizer.json's shapes and its regexes (tokenizer-audit.ts; HB_TOKENIZER_AUDIT=0 skips the timing: a
 *  tokenizer one trusts that the audit refuses); false only where this process's parent has just checked them. */
export function loadTokenizer(dir: string, chatTemplate?: string, check = true): TextCodec {
  if (!existsSync(join(dir, "tokenizer.json"))) throw new ModelError("missing", { file: join(dir, "tokenizer.json") });
  const config = join(dir, "tokenizer_config.json"), cfg = existsSync(config) ? readJsonObject(config, MAX_TOKENIZER_FILE) : {};
  const file = join(dir, "tokenizer.json"), json = readJsonObject(file, MAX_TOKENIZER_FILE);
  if (check) tokenizerShape(json, file);
  const found = check ? findRegexes(json, file) : null;
  let codec: TextCodec;
  try { codec = new TextCodec(json, cfg, chatTemplate ?? modelTemplates(dir, cfg)); } catch (e) {
    throw e instanceof ModelError ? e : new ModelError(`does not load: ${(e as Error).message}`, { file }, { cause: e });
  }
  if (found && process.env.HB_TOKENIZER_AUDIT !== "0") auditRegexes(codec.components, found, file);
  return codec;
}

/** The text of a chat template file, parsed once so that a syntax error names the file (a ModelError). */
export function readChatTemplate(file: string): string {
  let text: string;
  try { text = readFileSync(file, "utf8"); } catch (e) { throw new ModelError((e as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (e as Error).message, { file }); }
  try { new Template(text); } catch (e) { throw new ModelError(`not a valid Jinja chat template: ${(e as Error).message}`, { file }); }
  return text;
}
