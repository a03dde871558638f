// `hummingbird chat`: a conversation in the terminal (llama-cli -cnv, ollama run): each line read from stdin is a user
// turn, sent through the chat template to the server's engine worker (one KV slot: a turn prefills only what the
// slot does not hold yet, by prefix reuse), and the reply streams back, reasoning shown dimmed. The engine runs off
// this thread, so Ctrl-C stops a reply (the partial reply is kept) and Ctrl-C at the prompt quits (exit 0). /help lists
// the commands, /reset clears the history, /exit (or the end of input) quits; an empty reply says so (dim). State: the messages so far and the engine.
import { existsSync } from "node:fs";
import { type Command, defaultModel, threadsAndTemplate, intOption, KV_HELP, kvOption, numOption, QUALITY_HELP, qualityFlags, qualityOptions, parseCli, REASONING_HELP, reasoningFlags, reasoningOptions, UsageError } from "./common.ts";
import { EngineClient } from "../server/engine-client.ts";
import { ThinkSplit } from "../server/think.ts";
import { PREFILL_CHUNK } from "../engine/serving/config.ts";
import { draftOption } from "./serve.ts";
import { ctxPastLimit } from "./serve-flags.ts";
import type { ReqEvent } from "../engine/serving/protocol.ts";
import type { ChatMessage } from "../model/tokenizer.ts";
import { EXPERT_HELP, expertFlags, expertOptions, WARMUP_HELP, warmupFlags, warmupOption } from "../engine/experts/index.ts";
import { DEVICE_HELP, deviceFlags, deviceOptions } from "./device.ts";
import { applyLaunch, CLI_LAUNCH_HELP, cliLaunchFlags, launchOptions, rewriteLaunchArgs } from "./launch-compat.ts";

const help = `usage: hummingbird chat [--model DIR] [--system TEXT] [--max-tokens N] [--ctx N] [--temperature T]
       [--top-p P] [--seed N] [--draft ngram|mtp|off] [--stop STR]... [--think] [--exact] [--timings]
       [--chat-template FILE] [--threads N] [--reasoning-budget N [--reasoning-budget-message TEXT]] [--kv-cache-dtype f32|f16|q8]

Talk to a model in the terminal: every line of stdin is a user message; the reply streams to stdout. The
conversation goes through the model's chat template, and its KV cache is kept between turns (a turn
prefills only its new tokens). Ctrl-C stops a reply; /help lists the commands; /reset forgets the conversation; /think [on|off] turns
thinking on or off (toggles without an argument) from the next turn; /exit, the end of
input or Ctrl-C at the prompt quits. Without --model (or -m): the embedded demo model.
--max-tokens: the longest reply (default 512); --ctx: the conversation's token limit (default 4096, at
  most the model's; more is refused, as serve's, unless HB_ALLOW_LONG_MAX_MODEL_LEN=1): a reply stops there, and a
  turn whose prompt alone passes it is refused (/reset).
--temperature (default 0.8; 0 = greedy), --top-p (default 0.95), --seed: sampling.
--draft: speculative decoding, as \`serve --draft\` (lossless; default off).
--stop STR: end a reply before this text (repeatable; the template's end-of-turn ids always stop).
--think: let a thinking model think first (GLM: enable_thinking; default off); its reasoning is shown
  dimmed on a terminal and left out of the history.
--exact: f32 activations in every matmul. --timings: each turn's token counts and speed on stderr.
--chat-template FILE: a Jinja chat template instead of the model's. --threads / -t: compute threads (as serve).
-m, -n, -c: --model, --max-tokens, --ctx (llama-cli's short flags).
${CLI_LAUNCH_HELP}
${REASONING_HELP}
${KV_HELP}
${QUALITY_HELP}
${EXPERT_HELP}
${WARMUP_HELP}
${DEVICE_HELP}`;

/** What /help prints (handled here, never sent to the model). */
export const COMMANDS_HELP = `commands (not sent to the model):
  /help          this list
  /reset         forget the conversation
  /think [on|off]  thinking on or off from the next turn (toggles without an argument)
  /exit, /quit   quit (also Ctrl-D, or Ctrl-C at the prompt; Ctrl-C during a reply stops it)
`;

export const command: Command = {
  summary: "chat with a model in the terminal (the KV cache kept between turns)",
  help,
  async run(argv) {
    const s = { type: "string" } as const, b = { type: "boolean" } as const;
    const r = parseCli(rewriteLaunchArgs(argv, false), { model: { ...s, short: "m" }, system: s, "max-tokens": { ...s, short: "n" }, ctx: { ...s, short: "c" }, temperature: s, "top-p": s, seed: s, draft: s,
      stop: { type: "string", multiple: true }, think: b, exact: b, timings: b, "chat-template": s, threads: { ...s, short: "t" }, "kv-cache-dtype": s, ...reasoningFlags, ...expertFlags, ...warmupFlags, ...deviceFlags, ...qualityFlags, ...cliLaunchFlags }, help);
    if (!r) return (console.log(help), 0);
    const v = r.values;
    applyLaunch(v, launchOptions(v, help), help); // llama-cli's -ngl, -ctk / -ctv
    const dev = deviceOptions(v, help);
    const maxTokens = v["max-tokens"] === undefined ? 512 : intOption(v["max-tokens"], "max-tokens", help);
    const sampling = { temperature: numOption(v.temperature, "temperature", 0, 100, help) ?? 0.8, top_p: numOption(v["top-p"], "top-p", 0, 1, help) ?? 0.95,
      min_p: 0, top_k: 0, seed: v.seed === undefined ? undefined : intOption(v.seed, "seed", help) };
    const draft = draftOption(v.draft, undefined, help);
    const ctx = v.ctx === undefined ? 4096 : intOption(v.ctx, "ctx", help);
    const experts = expertOptions(v, help), warmup = warmupOption(v, help), text = threadsAndTemplate(v, help);
    if (v.model !== undefined && !existsSync(v.model)) throw new UsageError(`model directory ${v.model} does not exist`, help);
    const dir = v.model ?? defaultModel("chatting with", (l) => process.stderr.write(`hummingbird chat: ${l}\n`), help);
    const longCtx = v.ctx !== undefined && ctxPastLimit(dir, ctx, `--ctx ${v.ctx}`, help, (l) => process.stderr.write(`hummingbird chat: ${l}\n`));
    // the attention form the generate command picks (auto): one conversation, so no batch to stay independent of
    const reasoning = reasoningOptions(v, help), kv = kvOption(v, help);
    const quality = qualityOptions(v, dir, help, (l) => process.stderr.write(`hummingbird chat: ${l}\n`));
    const engine = new EngineClient({
      engine: { dir, attn: "auto", exact: !!v.exact, ...quality, experts, warmup, device: dev.mode, deviceLayers: dev.layers, kvBudgetRows: dev.kvBudgetRows, ...text, ...kv },
      scheduler: { slots: 1, ctx, longCtx, queue: 0, chunk: PREFILL_CHUNK, draft }, defaults: reasoning });
    let current: ReturnType<EngineClient["submit"]> | null = null;
    // Ctrl-C at the prompt (or while loading): a clean quit (a newline, exit 0: no "exited with code 130" from `bun run`)
    const onInt = () => { if (current) current.stop(); else { process.stdout.write("\n"); engine.close(); process.exit(0); } };
    process.on("SIGINT", onInt);
    try {
      await engine.ready;
    } catch (e) {
      process.off("SIGINT", onInt);
      engine.close();
      throw new UsageError(`${dir}: ${(e as Error).message}`, help);
    }
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
        if (line === "/think" || line === "/think on" || line === "/think off") { // thinking on or off from the next turn
          v.think = line === "/think" ? !v.think : line === "/think on";
          process.stderr.write(`(thinking ${v.think ? "on" : "off"})\n`); ask(); continue;
        }
        if (line === "/help" || line === "/?") { process.stderr.write(COMMANDS_HELP); ask(); continue; }
        if (/^\/[a-z]+$/.test(line)) { process.stderr.write(`(unknown command ${line}; /help lists them)\n`); ask(); continue; }
        if (line === "") { ask(); continue; }
        const turn: ChatMessage[] = [...messages, { role: "user", content: line }];
        let split = new ThinkSplit(!!v.think, false);
        const t0 = performance.now();
        let reply = "", tFirst = 0, cached = 0, prompt = 0;
        const show = (text: string, mark?: "think" | "/think") => {
          const d = split.take(text, mark);
          if (d.reasoning_content) process.stdout.write(tty ? `\x1b[2m${d.reasoning_content}\x1b[0m` : d.reasoning_content);
          if (d.content) { reply += d.content; process.stdout.write(d.content); }
        };
        const end = await new Promise<Extract<ReqEvent, { t: "done" | "error" }>>((res) => {
          current = engine.submit({ prompt: { kind: "chat", messages: turn, enableThinking: !!v.think }, slot: 0, max_tokens: maxTokens,
            ...sampling, stop: v.stop ?? [] }, (ev) => {
            if (ev.t === "accept") { split = new ThinkSplit(!!v.think, ev.think); prompt = ev.prompt_tokens; cached = ev.cached_tokens; }
            else if (ev.t === "tok") { if (!tFirst) tFirst = performance.now(); show(ev.text, ev.mark); }
            else if (ev.t === "done") { show(ev.text); res(ev); }
            else if (ev.t === "error") res(ev);
          });
        });
        current = null;
        if (end.t === "error") {
          const why = end.code === "CONTEXT_EXCEEDED" ? `the conversation (${end.detail.split(" ")[0]} tokens) has reached --ctx ${engine.info?.ctx ?? ctx}; /reset to start over` : end.detail;
          process.stderr.write(`hummingbird chat: ${why}\n`);
        } else {
          if (reply.trim() === "") process.stderr.write(process.stderr.isTTY ? "\x1b[2m(empty reply)\x1b[0m" : "(empty reply)\n");
          process.stdout.write("\n" + (tty ? "\n" : ""));
          messages = [...turn, { role: "assistant", content: reply.trim() }];
          if (v.timings)
            process.stderr.write(`turn ${(messages.length - system.length) / 2}: ${prompt} prompt tokens (${cached} cached), ${end.emitted} generated (${end.reason}); first token after ${((tFirst || performance.now()) - t0).toFixed(0)} ms, decode ${end.decode_tok_s.toFixed(1)} tok/s\n`);
        }
        ask();
      }
    } finally {
      process.off("SIGINT", onInt);
      engine.close();
    }
    return 0;
  },
};
