// Parsing of token-id lists and prompts shared by the model-running subcommands. No state.
import { UsageError } from "./common.ts";
import { loadTokenizer } from "../model/tokenizer.ts";

/** "1,2,3" -> [1,2,3]; every id a non-negative integer below `vocab`. */
export function parseIds(s: string, vocab: number, help: string): number[] {
  const parts = s.split(",").map((p) => p.trim()).filter((p) => p !== "");
  if (parts.length === 0) throw new UsageError("--ids: empty list", help);
  return parts.map((p, i) => {
    if (!/^\d+$/.test(p)) throw new UsageError(`--ids: item ${i} (${JSON.stringify(p)}) is not a non-negative integer`, help);
    const v = Number(p);
    if (v >= vocab) throw new UsageError(`--ids: item ${i} (${v}) is outside the vocabulary [0, ${vocab})`, help);
    return v;
  });
}

/** The prompt's ids from --ids, or --prompt through the tokenizer (with --chat: the chat template, `template`'s text
 *  when given). */
export function promptIds(dir: string, v: { ids?: string; prompt?: string; chat?: boolean }, vocab: number, help: string, template?: string): number[] {
  if (v.ids !== undefined && v.prompt !== undefined) throw new UsageError("give --ids or --prompt, not both", help);
  if (v.ids !== undefined) return parseIds(v.ids, vocab, help);
  if (v.prompt === undefined) throw new UsageError("missing --ids or --prompt", help);
  if (template !== undefined && !v.chat) throw new UsageError("--chat-template needs --chat", help);
  const tok = loadTokenizer(dir, template);
  const text = v.chat ? tok.chat([{ role: "user", content: v.prompt }]) : v.prompt;
  const ids = tok.encode(text);
  if (ids.length === 0) throw new UsageError("--prompt encodes to no tokens", help);
  return ids;
}
