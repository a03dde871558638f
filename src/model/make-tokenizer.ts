// Tokenizer generator for random models: a byte-level BPE `tokenizer.json` (GLM special tokens at
// ids 0..15, the 256 ByteLevel byte tokens at 16..271, then merges learned deterministically from
// a small built-in English text) and a `tokenizer_config.json` with a GLM-style chat template.
// Pure functions; no state.
import { ModelError } from "./errors.ts";

/** GLM special tokens, ids 0..15 (same order as GLM-5's: eos ids 1, 2, 5 = endoftext/user/observation). */
export const SPECIAL_TOKENS = [
  "[gMASK]", "<|endoftext|>", "<|user|>", "<|assistant|>", "<|system|>", "<|observation|>", "<sop>", "<eop>",
  "<think>", "</think>", "<|begin_of_image|>", "<|end_of_image|>", "<tool_call>", "</tool_call>",
  "<tool_response>", "</tool_response>",
] as const;

export const N_SPECIAL = SPECIAL_TOKENS.length; // 16
export const N_BYTES = 256;
export const MIN_VOCAB = N_SPECIAL + N_BYTES + 1;

/** GLM-4 pre-tokenizer split pattern (Oniguruma syntax, as stored in tokenizer.json). */
const SPLIT_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/** The same pattern in JavaScript syntax (no inline (?i:), so the contractions are spelled out). */
const SPLIT_RE =
  /'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

/** Chat template in the GLM-5 style. Thinking is on unless `enable_thinking` is false. */
export const CHAT_TEMPLATE = [
  "[gMASK]<sop>",
  "{%- for m in messages -%}",
  "{%- if m.role == 'system' -%}<|system|>{{ m.content }}",
  "{%- elif m.role == 'user' -%}<|user|>{{ m.content }}",
  "{%- elif m.role == 'assistant' -%}<|assistant|><think>{{ m.reasoning_content if m.reasoning_content is defined and m.reasoning_content else '' }}</think>{{ m.content }}",
  "{%- elif m.role == 'tool' or m.role == 'observation' -%}<|observation|><tool_response>{{ m.content }}</tool_response>",
  "{%- endif -%}",
  "{%- endfor -%}",
  "{%- if add_generation_prompt -%}<|assistant|>",
  "{%- if enable_thinking is defined and not enable_thinking -%}<think></think>{%- endif -%}",
  "{%- endif -%}",
].join("");

/** Own text (not from any dataset), used only to learn merges. */
const CORPUS = `
The hummingbird is a small bird that can hover in the air by beating its wings very quickly.
It lives in the Americas, from Alaska to the southern tip of Chile, and there are more than three
hundred kinds of it. Most of them are only a few inches long, and the smallest one weighs less than
a coin. Their hearts beat more than a thousand times a minute while they fly, and they must eat
often because they burn energy so fast. They drink nectar from flowers and also eat small insects.
When a hummingbird visits a flower, it carries pollen to the next one, which helps the plants make
seeds. People who want to see them often hang a feeder with sugar water in the garden.

A language model reads a sequence of tokens and predicts the next token. Each token is a number
that stands for a piece of text: a whole word, part of a word, a space, or a single byte. The model
turns every token into a vector, passes the vectors through many layers of attention and feed
forward networks, and finally writes a score for every token in the vocabulary. The token with the
highest score is the most likely next one. In a mixture of experts model, each layer has many small
networks called experts, and a router chooses a few of them for every token, so only a small part
of the weights is used at each step. This makes a very large model much cheaper to run.

Sparse attention lets a model look at long documents without paying for every pair of positions.
A light indexer gives each earlier position a score, and the attention reads only the positions
with the highest scores. Speculative decoding goes one step further: a small head guesses the next
few tokens, and the main model checks all of the guesses at once. When the guesses are right, the
model writes several tokens for the price of one.

Once upon a time there was a little house near a river. In the morning the sun came up over the
hills, and the children ran down to the water to play. They built boats out of bark and leaves and
watched them float away. Their mother called them back for breakfast, and they came home with wet
shoes and happy faces. "What did you see today?" she asked. "We saw a heron, two frogs, and a fish
that jumped out of the water!" said the youngest one. It was 7:45 in the morning on June 12, 2024.
`;

/** GPT-2 ByteLevel alphabet: byte b → printable code point. */
export function byteToUnicode(): string[] {
  const keep: number[] = [];
  for (let b = 33; b <= 126; b++) keep.push(b);
  for (let b = 161; b <= 172; b++) keep.push(b);
  for (let b = 174; b <= 255; b++) keep.push(b);
  const map = new Array<string>(256);
  let n = 0;
  for (let b = 0; b < 256; b++) map[b] = keep.includes(b) ? String.fromCodePoint(b) : String.fromCodePoint(256 + n++);
  return map;
}

/** Pre-tokenize `text` into byte-level words (arrays of single-byte symbols), with counts. */
function wordCounts(text: string, b2u: string[]): Map<string, number> {
  const enc = new TextEncoder();
  const counts = new Map<string, number>();
  for (const m of text.matchAll(SPLIT_RE)) {
    const w = Array.from(enc.encode(m[0]), (b) => b2u[b]).join("\u0000");
    counts.set(w, (counts.get(w) ?? 0) + 1);
  }
  return counts;
}

/**
 * Learn BPE merges until `nTokens` new tokens exist. Phase 1: classic BPE over the corpus words
 * (most frequent pair, ties → smallest (a, b) string order) until every word is one symbol.
 * Phase 2 (only when the corpus runs out, e.g. vocab 8192): extend learned tokens by one letter,
 * in id order, skipping strings already in the vocabulary. Both phases are deterministic.
 * A merge whose result already exists (two paths to one string) is kept but adds no token.
 */
export function learnMerges(nTokens: number, vocab: Set<string>, b2u: string[]): { merges: [string, string][]; tokens: string[] } {
  const merges: [string, string][] = [];
  const tokens: string[] = [];
  const words = [...wordCounts(CORPUS, b2u)].map(([w, c]) => ({ syms: w.split("\u0000"), c }));
  while (tokens.length < nTokens) {
    const pairs = new Map<string, number>();
    for (const { syms, c } of words)
      for (let i = 0; i + 1 < syms.length; i++) {
        const k = `${syms[i]}\u0000${syms[i + 1]}`;
        pairs.set(k, (pairs.get(k) ?? 0) + c);
      }
    let best = "";
    let bestC = 0;
    for (const [k, c] of pairs) if (c > bestC || (c === bestC && k < best)) [best, bestC] = [k, c];
    if (bestC === 0) break;
    const [a, b] = best.split("\u0000") as [string, string];
    merges.push([a, b]);
    if (!vocab.has(a + b)) {
      vocab.add(a + b);
      tokens.push(a + b);
    }
    for (const w of words) {
      const out: string[] = [];
      for (let i = 0; i < w.syms.length; i++) {
        if (i + 1 < w.syms.length && w.syms[i] === a && w.syms[i + 1] === b) {
          out.push(a + b);
          i++;
        } else out.push(w.syms[i]);
      }
      w.syms = out;
    }
  }
  const letters = "etaoinsrhldcumfpgwybvk";
  for (let base = 0; tokens.length < nTokens; base++) {
    const tok = tokens[base]; // always defined: each base adds up to 22 tokens behind it
    for (const ch of letters) {
      if (tokens.length >= nTokens) break;
      if (vocab.has(tok + ch)) continue;
      merges.push([tok, ch]);
      vocab.add(tok + ch);
      tokens.push(tok + ch);
    }
  }
  return { merges, tokens };
}

/** The HF `tokenizer.json` object for a byte-level BPE of exactly `vocabSize` ids. */
export function makeTokenizerJson(vocabSize: number, file = "config.json"): Record<string, unknown> {
  if (!Number.isInteger(vocabSize) || vocabSize < MIN_VOCAB)
    throw new ModelError(`vocab_size must be an integer >= ${MIN_VOCAB} (16 special + 256 byte tokens + 1 merge), got ${vocabSize}`, { file, field: "vocab_size" });
  const b2u = byteToUnicode();
  const vocab: Record<string, number> = {};
  SPECIAL_TOKENS.forEach((t, i) => (vocab[t] = i));
  b2u.forEach((u, b) => (vocab[u] = N_SPECIAL + b));
  const seen = new Set<string>(Object.keys(vocab));
  const { merges, tokens } = learnMerges(vocabSize - N_SPECIAL - N_BYTES, seen, b2u);
  tokens.forEach((t, i) => (vocab[t] = N_SPECIAL + N_BYTES + i));
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: SPECIAL_TOKENS.map((content, id) => ({
      id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
    })),
    normalizer: null,
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: SPLIT_PATTERN }, behavior: "Isolated", invert: false },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges,
    },
  };
}

/** The HF `tokenizer_config.json` object (GLM-style chat template, eos = <|endoftext|>). */
export function makeTokenizerConfig(maxLen: number): Record<string, unknown> {
  const added: Record<string, { content: string; special: boolean }> = {};
  SPECIAL_TOKENS.forEach((content, id) => (added[String(id)] = { content, special: true }));
  return {
    tokenizer_class: "PreTrainedTokenizerFast",
    eos_token: "<|endoftext|>",
    pad_token: "<|endoftext|>",
    clean_up_tokenization_spaces: false,
    model_max_length: maxLen,
    chat_template: CHAT_TEMPLATE,
    added_tokens_decoder: added,
  };
}
