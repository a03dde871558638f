// `hummingbird chat`: a conversation in the terminal (llama-cli -cnv, ollama run): each line read from stdin is a
// user turn; the whole conversation goes through the chat template and the reply streams to stdout. One
// Session holds the KV cache, so a turn prefills only what the previous turns did not (the rendered history's
// common prefix with the cache is reused). /reset clears the history, /exit (or end of input) quits. Replies are
// decoded as the server's are (server/detok.ts: stop strings, <think> marks; server/think.ts splits reasoning off).
// State: the messages so far and the Session.
import { choice, type Command, intOption, parseCli, UsageError } from "./common.ts";
import { DRAFTS } from "./generate.ts";
import { loadModel } from "../engine/model.ts";
import { type DraftKind, generate } from "../engine/generate.ts";
import { Session } from "../engine/session.ts";
import { loadTokenizer, type ChatMessage } from "../model/tokenizer.ts";
import { demoBanner, demoModelDir } from "../model/demo.ts";
import { Detok, thinkIds } from "../server/detok.ts";
import { ThinkSplit } from "../server/think.ts";
import { attachExperts, EXPERT_HELP, expertFlags, expertOptions } from "../engine/experts/index.ts";

const help = `usage: hummingbird chat [--model DIR] [--system TEXT] [--max-tokens N] [--ctx N] [--temperature T]
       [--top-p P] [--seed N] [--draft auto|mtp|ngram|off] [--stop STR]... [--think] [--exact] [--timings]

Talk to a model in the terminal: every line of stdin is a user message; the reply streams to stdout. The
conversation goes through the model's chat template, and its KV cache is kept between turns (a turn
prefills only its new tokens). Commands: /reset (forget the conversation), /exit (or end of input;
Ctrl-C quits at once).
Without --model: the embedded demo model.
--max-tokens: the longest reply (default 512); --ctx: the conversation's token limit (default 4096,
  at most the model's); a turn that would pass it is refused (/reset to start over).
--temperature (default 0.8; 0 = greedy), --top-p (default 0.95), --seed: sampling.
--draft: speculative decoding as in \`generate\` (lossless; default auto).
--stop STR: end a reply before this text (repeatable; the template's end-of-turn ids always stop).
--think: let a thinking model think first (GLM: enable_thinking; default off); its reasoning is shown
  dimmed on a terminal and left out of the history.
--exact: f32 activations in every matmul. --timings: each turn's token counts and speed on stderr.
${EXPERT_HELP}`;

function num(v: string | undefined, name: string, lo: number, hi: number, d: number): number {
  if (v === undefined) return d;
  const x = Number(v);
  if (!Number.isFinite(x) || x < lo || x > hi) throw new UsageError(`--${name} must be a number in [${lo}, ${hi}], got ${JSON.stringify(v)}`, help);
  return x;
}

export const command: Command = {
  summary: "chat with a model in the terminal (the KV cache kept between turns)",
  help,
  async run(argv) {
    const s = { type: "string" } as const, b = { type: "boolean" } as const;
    const r = parseCli(argv, { model: s, system: s, "max-tokens": s, ctx: s, temperature: s, "top-p": s, seed: s, draft: s, stop: { type: "string", multiple: true },
      think: b, exact: b, timings: b, ...expertFlags }, help);
    if (!r) return (console.log(help), 0);
    const v = r.values;
    const maxTokens = v["max-tokens"] === undefined ? 512 : intOption(v["max-tokens"], "max-tokens", help);
    const sampling = { temperature: num(v.temperature, "temperature", 0, 100, 0.8), top_p: num(v["top-p"], "top-p", 0, 1, 0.95),
      seed: v.seed === undefined ? undefined : intOption(v.seed, "seed", help) };
    const draft: DraftKind = v.draft === undefined ? "auto" : choice(v.draft, "draft", DRAFTS, help);
    const xo = expertOptions(v, help);
    let dir = v.model;
    if (dir === undefined) {
      try { dir = demoModelDir(); } catch (e) { throw new UsageError(`no --model DIR given: ${(e as Error).message}`, help); }
      for (const l of demoBanner("chatting with")) process.stderr.write(`hummingbird chat: ${l}\n`);
    }
    const m = loadModel(dir), codec = loadTokenizer(dir);
    if (draft === "mtp" && !m.w.mtp) throw new UsageError("--draft mtp: this model has no MTP layer", help);
    const ctx = Math.min(v.ctx === undefined ? 4096 : intOption(v.ctx, "ctx", help), m.cfg.max_position_embeddings);
    const experts = attachExperts(m, { ...xo, ctx, rows: ctx, quiet: true });
    const session = new Session(m, { exact: !!v.exact });
    const stopIds = codec.stopIds(m.cfg.stop_ids), think = thinkIds(codec);
    const system: ChatMessage[] = v.system ? [{ role: "system", content: v.system }] : [];
    let messages = [...system];
    const tty = process.stdin.isTTY;
    const ask = () => { if (tty) process.stdout.write("> "); };
    try {
      ask();
      for await (const raw of console) {
        const line = raw.trim();
        if (line === "/exit" || line === "/quit") break;
        if (line === "/reset") { messages = [...system]; process.stderr.write("(conversation cleared)\n"); ask(); continue; }
        if (line === "") { ask(); continue; }
        const turn = [...messages, { role: "user", content: line }];
        const ids = codec.encode(codec.chat(turn, { enableThinking: !!v.think }));
        if (ids.length + maxTokens > ctx) {
          process.stderr.write(`hummingbird chat: the conversation would pass --ctx ${ctx} tokens (${ids.length} + a reply of up to ${maxTokens}); /reset to start over\n`);
          ask();
          continue;
        }
        const detok = new Detok(codec, v.stop ?? [], think), split = new ThinkSplit(!!v.think, ids[ids.length - 1] === think.open);
        let reply = "";
        const show = (text: string, mark?: "think" | "/think") => {
          const d = split.take(text, mark);
          if (d.reasoning_content) process.stdout.write(tty ? `\x1b[2m${d.reasoning_content}\x1b[0m` : d.reasoning_content);
          if (d.content) { reply += d.content; process.stdout.write(d.content); }
        };
        const res = generate(m, ids, { maxTokens, ...sampling, draft, session, stopIds, forward: { exact: !!v.exact },
          onToken: (id) => {
            if (stopIds.includes(id)) return;
            const p = detok.push(id);
            show(p.text, p.mark);
            return !detok.stopped;
          } });
        show(detok.finish().text);
        process.stdout.write("\n" + (tty ? "\n" : ""));
        messages = [...turn, { role: "assistant", content: reply.trim() }];
        if (v.timings) {
          const t = res.timing;
          process.stderr.write(`turn ${(messages.length - system.length) / 2}: ${ids.length} prompt tokens (${res.cached_tokens} cached), ${res.gen_ids.length} generated (${res.finish_reason}); prefill ${t.prefill_tok_s.toFixed(1)} tok/s, decode ${t.decode_tok_s.toFixed(1)} tok/s\n`);
        }
        ask();
      }
    } finally {
      experts.close();
    }
    return 0;
  },
};
