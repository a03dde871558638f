// The byte bound on token counts: the most UTF-8 input bytes one token of a tokenizer.json can stand for, so that a
// text of B bytes has at least ceil(B / maxTokenBytes) tokens and a prompt can be refused by its length without
// tokenizing it. Proved only for the pipelines where no input byte is dropped or shrunk on its way to a token (the
// conditions: on maxTokenBytes); anything else: null (no bound; the text is tokenized). Pure; no state.

const utf8 = new TextEncoder();

type Json = Record<string, unknown> | null | undefined;

/** The GPT-2 ByteLevel alphabet: the character standing for each byte. */
function byteLevelChars(): string[] {
  const out: string[] = [];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    out.push(String.fromCodePoint(printable ? b : 256 + n++));
  }
  return out;
}

/** Whether a normalizer keeps every input byte (null, Prepend, Sequences of them). */
function keepsBytes(n: Json): boolean {
  if (n == null) return true;
  if (n.type === "Prepend") return true;
  return n.type === "Sequence" && Array.isArray(n.normalizers) && n.normalizers.every((x) => keepsBytes(x as Json));
}

/** The pre-tokenizer's kinds when it keeps every input character ("ByteLevel" among them when bytes are mapped), else null. */
function preKinds(p: Json): string[] | null {
  if (p == null) return [];
  if (p.type === "Sequence") {
    if (!Array.isArray(p.pretokenizers)) return null;
    const all: string[] = [];
    for (const x of p.pretokenizers) { const k = preKinds(x as Json); if (!k) return null; all.push(...k); }
    return all;
  }
  if (p.type === "ByteLevel" || p.type === "Metaspace") return [p.type];
  if (p.type === "Split" && p.invert !== true && String(p.behavior ?? "").toLowerCase() !== "removed" && p.pattern != null) return ["Split"];
  return null;
}

/** The most input bytes one token of this tokenizer.json stands for, or null when that cannot be proved.
 *  Proved for: no normalizer (or Prepend), pre-tokenizers ByteLevel / Split (kept, not inverted) / Metaspace, a BPE
 *  model whose every input byte has a token (the 256 ByteLevel characters, or the 256 <0xNN> byte-fallback tokens)
 *  and whose merges all make vocabulary tokens, added tokens that strip no neighbouring whitespace. */
export function maxTokenBytes(json: unknown): number | null {
  const t = json as Record<string, unknown>, model = t?.model as Record<string, unknown> | undefined;
  if (!model || model.type !== "BPE" || !keepsBytes(t.normalizer as Json)) return null;
  const kinds = preKinds(t.pre_tokenizer as Json);
  if (!kinds) return null;
  const vocab = new Map<string, number>(Array.isArray(model.vocab) ? (model.vocab as [string, number][]).map(([s], i) => [s, i])
    : Object.entries((model.vocab ?? {}) as Record<string, number>));
  const byteLevel = kinds.includes("ByteLevel");
  const bytesCovered = byteLevel ? byteLevelChars().every((c) => vocab.has(c))
    : model.byte_fallback === true && Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`).every((s) => vocab.has(s));
  if (!bytesCovered) return null;
  for (const m of (model.merges ?? []) as (string | [string, string])[]) {
    const [a, b] = typeof m === "string" ? m.split(" ") : m;
    if (a === undefined || b === undefined || !vocab.has(a + b)) return null; // a merge whose result has no id: its text would be lost
  }
  // ByteLevel: one input byte per alphabet character (others: their UTF-8 bytes); otherwise the token's own UTF-8
  // bytes (an input "▁" is 3 bytes, a space 1: never fewer input bytes than that)
  const alphabet = new Set(byteLevel ? byteLevelChars() : []);
  let most = 1;
  for (const s of vocab.keys()) {
    let n = 0;
    for (const c of s) n += alphabet.has(c) ? 1 : utf8.encode(c).length;
    most = Math.max(most, n);
  }
  for (const a of (t.added_tokens ?? []) as { content: string; lstrip?: boolean; rstrip?: boolean }[]) {
    if (a.lstrip || a.rstrip) return null; // it swallows the whitespace beside it, however long
    most = Math.max(most, utf8.encode(a.content).length);
  }
  return most;
}
