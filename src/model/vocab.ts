// TokenVocab: each token id -> the bytes it decodes to, made once per tokenizer, plus a byte trie
// over all of them (preorder, with subtree ends, so a walk can skip a rejected prefix's subtree).
// Byte-level BPE (GPT-2 ByteLevel alphabet) and SentencePiece-style vocabularies (Metaspace `▁`,
// `<0xHH>` byte fallback) are understood. Special added tokens have no bytes: the grammar never
// allows them, except the end ids (`eosIds`) once the grammar is complete. Holds the decoded
// bytes and the lazily built trie.
import { join } from "node:path";
import { z } from "zod";
import { ModelError, fromZod, readJsonObject } from "./errors.ts";

export interface Trie {
  n: number; // nodes; node 0 is the root (empty prefix), nodes 1..n-1 in preorder
  byte: Uint8Array; // incoming byte of each node
  depth: Int32Array; // prefix length of each node
  end: Int32Array; // one past the last node of each node's subtree
  tokStart: Int32Array; // ids[tokStart[v] .. tokEnd[v]) are the tokens whose bytes equal v's prefix
  tokEnd: Int32Array;
  ids: Int32Array;
  maxDepth: number;
}

/** GPT-2 ByteLevel alphabet, inverted: code point -> byte. */
function unicodeToByte(): Map<number, number> {
  const m = new Map<number, number>();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    const keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    m.set(keep ? b : 256 + n++, b);
  }
  return m;
}

/** token ids past this are refused (the largest vocabularies known hold ~256K tokens) */
export const MAX_TOKEN_ID = 2 ** 24;
const Id = z.number().int().nonnegative().max(MAX_TOKEN_ID - 1);
const Part = z.looseObject({ type: z.string() }).nullish(); // (a component's own fields: the library's to check)
/** The shapes of tokenizer.json that @huggingface/tokenizers reads without checking them (a wrong one was a
 *  TypeError naming nothing) and that TokenVocab reads. */
const TokenizerJson = z.looseObject({
  added_tokens: z.array(z.looseObject({ id: Id, content: z.string(), special: z.boolean().optional(), lstrip: z.boolean().optional(),
    rstrip: z.boolean().optional(), normalized: z.boolean().optional(), single_word: z.boolean().optional() })).optional(),
  normalizer: Part, pre_tokenizer: Part, decoder: Part, post_processor: Part,
  model: z.looseObject({
    type: z.enum(["BPE", "WordPiece", "Unigram"]).optional(), // (absent: the library infers it from the vocab)
    vocab: z.union([z.record(z.string(), Id), z.array(z.tuple([z.string(), z.number()])).max(MAX_TOKEN_ID)]),
    merges: z.array(z.union([z.string(), z.tuple([z.string(), z.string()])])).optional(),
    byte_fallback: z.boolean().nullish(),
  }),
});

type TokenizerShape = z.infer<typeof TokenizerJson>;
const shaped = new WeakSet<object>(); // the parsed files already checked (loadTokenizer's, then TokenVocab's reading)
/** json checked against TokenizerJson once per parsed object (~0.3 s at GLM-5's vocabulary): a ModelError naming the field */
export function tokenizerShape(json: unknown, file: string): TokenizerShape {
  if (typeof json === "object" && json !== null && shaped.has(json)) return json as TokenizerShape;
  const r = TokenizerJson.safeParse(json);
  if (!r.success) throw fromZod(r.error, { file });
  shaped.add(json as object);
  return json as TokenizerShape; // (the schema has no defaults or transforms: the file's object is its value)
}

export class TokenVocab {
  readonly size: number;
  readonly eosIds: Int32Array;
  readonly nSpecial: number; // ids without bytes (special, unmappable or empty), eos included
  private trieCache: Trie | null = null;

  /** `bytes[id]` = the token's bytes, or null for tokens the grammar never produces. */
  constructor(readonly bytes: readonly (Uint8Array | null)[], eosIds: readonly number[] = []) {
    this.size = bytes.length;
    for (const e of eosIds) if (!Number.isInteger(e) || e < 0) throw new ModelError(`eos id ${e} is not a token id`, { field: "eosIds" });
    this.eosIds = Int32Array.from(new Set(eosIds));
    this.nSpecial = bytes.filter((b) => b === null || b.length === 0).length;
  }

  /** From a parsed HF `tokenizer.json`. `eosIds`: the model's stop ids (allowed once the grammar is complete). */
  static fromTokenizerJson(json: unknown, opts: { eosIds?: readonly number[]; file?: string } = {}): TokenVocab {
    const file = opts.file ?? "tokenizer.json", t = tokenizerShape(json, file);
    const entries: [string, number][] = Array.isArray(t.model.vocab) ? t.model.vocab.map(([s], i) => [s, i]) : Object.entries(t.model.vocab);
    const kinds = JSON.stringify([t.pre_tokenizer ?? null, t.decoder ?? null]);
    const byteLevel = kinds.includes('"ByteLevel"');
    const spm = !byteLevel && (kinds.includes('"Metaspace"') || kinds.includes("▁") || t.model.byte_fallback === true);
    if (!byteLevel && !spm) throw new ModelError("unsupported tokenizer: neither ByteLevel nor Metaspace/byte_fallback", { file, field: "decoder" });
    let size = 0;
    for (const [, id] of entries) size = Math.max(size, id + 1);
    for (const a of t.added_tokens ?? []) size = Math.max(size, a.id + 1);
    const bytes: (Uint8Array | null)[] = new Array(size).fill(null);
    const u2b = unicodeToByte(), enc = new TextEncoder();
    for (const [s, id] of entries) {
      if (byteLevel) {
        const out = new Uint8Array(s.length);
        let n = 0, ok = true;
        for (const ch of s) { const b = u2b.get(ch.codePointAt(0)!); if (b === undefined) { ok = false; break; } out[n++] = b; }
        bytes[id] = ok ? out.slice(0, n) : null;
      } else {
        const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(s);
        bytes[id] = m ? Uint8Array.of(parseInt(m[1], 16)) : enc.encode(s.replaceAll("▁", " "));
      }
    }
    for (const a of t.added_tokens ?? []) bytes[a.id] = a.special === false ? enc.encode(a.content) : null;
    for (const e of opts.eosIds ?? []) if (e < size) bytes[e] = null;
    return new TokenVocab(bytes, opts.eosIds ?? []);
  }

  /** The bytes-to-trie index, built on first use (~0.2 s for 150k tokens). */
  get trie(): Trie {
    return (this.trieCache ??= buildTrie(this.bytes));
  }
}

/** tokenizer.json and tokenizer_config.json are read whole: at most this many bytes (the largest known are ~35 MB) */
export const MAX_TOKENIZER_FILE = 256 << 20;

/** `loadTokenVocab(modelDir, cfg.stop_ids)`: reads `<dir>/tokenizer.json`. */
export function loadTokenVocab(dir: string, eosIds: readonly number[]): TokenVocab {
  const file = join(dir, "tokenizer.json");
  return TokenVocab.fromTokenizerJson(readJsonObject(file, MAX_TOKENIZER_FILE), { eosIds, file });
}

function cmp(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

function buildTrie(bytes: readonly (Uint8Array | null)[]): Trie {
  const order: number[] = [];
  let total = 1, maxDepth = 0;
  for (let id = 0; id < bytes.length; id++) { const b = bytes[id]; if (b && b.length) { order.push(id); total += b.length; } }
  order.sort((x, y) => cmp(bytes[x]!, bytes[y]!) || x - y);
  const byte = new Uint8Array(total), depth = new Int32Array(total), end = new Int32Array(total);
  const tokStart = new Int32Array(total), tokEnd = new Int32Array(total);
  const path: number[] = [0];
  let n = 1, prev: Uint8Array = new Uint8Array(0);
  order.forEach((id, k) => {
    const t = bytes[id]!;
    let l = 0;
    while (l < prev.length && l < t.length && prev[l] === t[l]) l++;
    for (let d = prev.length; d > l; d--) end[path[d]] = n;
    for (let d = l + 1; d <= t.length; d++) { byte[n] = t[d - 1]; depth[n] = d; path[d] = n++; }
    const v = path[t.length];
    if (tokEnd[v] === tokStart[v]) tokStart[v] = k;
    tokEnd[v] = k + 1;
    maxDepth = Math.max(maxDepth, t.length);
    prev = t;
  });
  for (let d = prev.length; d > 0; d--) end[path[d]] = n;
  end[0] = n;
  return { n, byte: byte.slice(0, n), depth: depth.slice(0, n), end: end.slice(0, n), tokStart: tokStart.slice(0, n), tokEnd: tokEnd.slice(0, n), ids: Int32Array.from(order), maxDepth };
}
