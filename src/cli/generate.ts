// `hummingbird generate`: prefill a prompt and decode (greedy at temperature 0); streams text, or
// prints JSON ids + timing with --json.
import { type Command, parseCli, required, intOption, UsageError } from "./common.ts";
import { promptIds } from "./ids.ts";
import { loadModel } from "../engine/model.ts";
import { generate } from "../engine/generate.ts";
import { loadTokenizer } from "../model/tokenizer.ts";

const help = `usage: hummingbird generate --model DIR (--ids 1,2,3 | --prompt TEXT [--chat]) --max-tokens N
       [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--seed N] [--json] [--exact]

Greedy at --temperature 0 (the default). Without --json, streams the decoded text; with --json prints
{"prompt_ids", "gen_ids", "finish_reason", "timing": {"prefill_tok_s", "decode_tok_s"}}.`;

function num(v: unknown, name: string, lo: number, hi: number): number | undefined {
  if (v === undefined) return undefined;
  const x = Number(v);
  if (!Number.isFinite(x) || x < lo || x > hi) throw new UsageError(`--${name} must be a number in [${lo}, ${hi}], got ${JSON.stringify(v)}`, help);
  return x;
}

export const command: Command = {
  summary: "generate tokens from a prompt (greedy or sampled)",
  help,
  run(argv) {
    const s = { type: "string" } as const, b = { type: "boolean" } as const;
    const r = parseCli(argv, { model: s, ids: s, prompt: s, chat: b, "max-tokens": s, temperature: s, "top-p": s,
      "top-k": s, "min-p": s, seed: s, json: b, exact: b }, help);
    if (!r) return (console.log(help), 0);
    const v = r.values;
    const dir = required(v, "model", help);
    const maxTokens = intOption(required(v, "max-tokens", help), "max-tokens", help);
    const sampling = {
      temperature: num(v.temperature, "temperature", 0, 100) ?? 0, top_p: num(v["top-p"], "top-p", 0, 1),
      top_k: v["top-k"] === undefined ? undefined : intOption(v["top-k"], "top-k", help),
      min_p: num(v["min-p"], "min-p", 0, 1), seed: v.seed === undefined ? undefined : intOption(v.seed, "seed", help),
    };
    const m = loadModel(dir);
    const prompt = promptIds(dir, v, m.cfg.vocab_size, help);
    const text = v.json ? null : loadTokenizer(dir).stream();
    const res = generate(m, prompt, { maxTokens, ...sampling, onToken: (id) => { if (text) process.stdout.write(text.push(id)); } });
    if (text) process.stdout.write(text.flush() + "\n");
    else process.stdout.write(JSON.stringify(res) + "\n");
    return 0;
  },
};
