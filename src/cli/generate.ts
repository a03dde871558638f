// `hummingbird generate`: prefill a prompt and decode (greedy at temperature 0, speculative with
// --draft), every token through the server's per-token pipeline (engine/serving/pipeline.ts: penalties, grammar,
// min_tokens, the thinking budget, the sampler, the detokenizer and its stop strings); streams text, or prints JSON
// ids + timing + stats with --json. With --state DIR the
// conversation lives in DIR/slot-N.kv: its cached prefix is reused and the history saved after.
import { mkdirSync, readFileSync } from "node:fs";
import { schemaToGbnf } from "../engine/grammar/index.ts";
import { type Command, defaultModel, parseCli, required, intOption, choice, numOption, UsageError, threadsAndTemplate, KV_HELP, kvOption, QUALITY_HELP, qualityFlags, qualityOptions } from "./common.ts";
import { hb } from "../native/hb.ts";
import { promptIds } from "./ids.ts";
import { loadModel, newKV } from "../engine/model.ts";
import { Session } from "../engine/session.ts";
import { generate, type DraftKind } from "../engine/generate.ts";
import { KvFile, slotPath } from "../engine/kvfile.ts";
import { loadTokenizer } from "../model/tokenizer.ts";
import { PipelineMaker } from "../engine/serving/pipeline.ts";
import type { GenRequest, GrammarSpec } from "../engine/serving/protocol.ts";
import { DEVICE_HELP, deviceFlags, openDeviceFor } from "./device.ts";
import { attachExperts, EXPERT_HELP, expertFlags, expertOptions } from "../engine/experts/index.ts";
import { applyLaunch, CLI_LAUNCH_HELP, cliLaunchFlags, launchOptions, rewriteLaunchArgs } from "./launch-compat.ts";

const help = `usage: hummingbird generate [--model DIR] (--ids 1,2,3 | --prompt TEXT [--chat [--chat-template FILE]]) --max-tokens N
       [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--typical-p P] [--xtc P[,THRESHOLD]] [--top-n-sigma N]
       [--dynatemp-range R [--dynatemp-exp E]] [--mirostat 1|2 [--mirostat-ent TAU] [--mirostat-lr ETA]] [--seed N] [--json] [--exact]
       [--presence-penalty X] [--frequency-penalty X] [--repetition-penalty R] [--logit-bias ID:B,...]
       [--draft auto|mtp|ngram|off] [--draft-len K] [--state DIR [--slot N]]
       [--grammar FILE.gbnf | --json-schema FILE.json] [--stop STR]... [--min-tokens N]
       [--reasoning-budget N [--reasoning-budget-message TEXT]] [--threads N] [--kv-cache-dtype f32|f16|q8]

Without --model (or -m): the embedded demo model, as serve and chat.
-m, -p, -n, -t: --model, --prompt, --max-tokens, --threads (llama-cli's short flags).
${CLI_LAUNCH_HELP}
Greedy at --temperature 0 (the default). Without --json, streams the decoded text; with --json prints
{"prompt_ids", "gen_ids", "finish_reason", "cached_tokens", "timing": {"prefill_tok_s", "decode_tok_s"},
 "stats": {"tokens_per_forward", "draft_acceptance", ...}}.
--draft: speculative decoding, lossless (greedy output is token-identical; sampled output has the same
  distribution). auto (default) = mtp if the model has an MTP layer whose drafts can pay for themselves at
  60% kept (by the weight bytes a round reads: a many-layer model), else ngram (prompt lookup).
  --draft-len: tokens per draft (default 3 for mtp, 4 for ngram). Drafting pauses itself while the
  fraction of drafts kept is below what a round costs in plain steps.
--grammar / --json-schema: constrain the output (llama.cpp GBNF, or a JSON schema converted to GBNF);
  the bytes the grammar forces are drafted speculatively.
--typical-p P: locally typical sampling (llama.cpp's; after top-k / top-p / min-p); --xtc P[,T]: XTC (llama.cpp's
  "exclude top choices": with probability P the tokens over threshold T, default 0.1, but the least probable go);
  --top-n-sigma N: only the logits within N standard deviations of the top; --dynatemp-range R (--dynatemp-exp E):
  the temperature within ±R from the distribution's entropy; --mirostat 1|2 (--mirostat-ent TAU, default 5;
  --mirostat-lr ETA, default 0.1): mirostat in place of top-k and the rest (not drafted).
--presence-penalty / --frequency-penalty (-2..2, over the output, as OpenAI), --repetition-penalty (> 0,
  over prompt and output, as vLLM), --logit-bias ID:BIAS,... (added to those tokens' logits, -100..100).
--exact: f32 activations in every matmul (default: fast mode, activations quantized to int8 per row
  for quantized weights; float weights are exact either way).
--stop STR: end the output before this text (repeatable); eos ids of config.json, generation_config.json
  and the tokenizer always stop. --min-tokens N: no end id and no stop string before N tokens (vLLM's min_tokens).
--reasoning-budget N: tokens allowed inside <think> before the budget message (--reasoning-budget-message) and
  </think> are forced (as serve's). Every token goes through the same rules as serve's requests.
--chat-template FILE: a Jinja chat template instead of the model's. --threads N: compute threads (default:
  HB_THREADS, else the physical cores).
--state DIR: keep the conversation in DIR/slot-N.kv (N = --slot, default 0): the prompt's common
  prefix with the saved history is not prefilled again, and the history is saved afterwards.
${KV_HELP}
${QUALITY_HELP}
${EXPERT_HELP}
${DEVICE_HELP}`;

const num = (v: string | undefined, name: string, lo: number, hi: number) => numOption(v, name, lo, hi, help);

const DRAFTS = ["auto", "mtp", "ngram", "off"] as const;

/** --grammar FILE (GBNF) or --json-schema FILE -> the grammar's GBNF text (compiled over the model's vocabulary by the pipeline). */
function grammarOption(v: { grammar?: string; "json-schema"?: string }): GrammarSpec | undefined {
  if (v.grammar !== undefined && v["json-schema"] !== undefined) throw new UsageError("give --grammar or --json-schema, not both", help);
  const file = v.grammar ?? v["json-schema"];
  if (file === undefined) return undefined;
  const text = readFileSync(file, "utf8");
  let gbnf = text;
  if (v["json-schema"] !== undefined) {
    let schema: unknown;
    try { schema = JSON.parse(text); } catch (e) { throw new UsageError(`--json-schema ${file}: ${(e as Error).message}`, help); }
    gbnf = schemaToGbnf(schema as object, { whitespace: "compact" });
  }
  return { gbnf, field: `${file}:` };
}

/** --logit-bias "ID:BIAS,ID:BIAS" -> pairs (ids checked against the vocabulary by the caller's model) */
function logitBias(v: unknown): [number, number][] | undefined {
  if (v === undefined) return undefined;
  return String(v).split(",").map((kv) => {
    const m = /^\s*(\d{1,9})\s*:\s*(-?[\d.]+(?:e-?\d+)?)\s*$/.exec(kv);
    const b = m ? Number(m[2]) : NaN;
    if (!m || !(b >= -100 && b <= 100)) throw new UsageError(`--logit-bias: ${JSON.stringify(kv)} is not ID:BIAS with BIAS in [-100, 100]`, help);
    return [Number(m[1]), b];
  });
}

export const command: Command = {
  summary: "generate tokens from a prompt (greedy or sampled)",
  help,
  run(argv) {
    const s = { type: "string" } as const, b = { type: "boolean" } as const;
    const r = parseCli(rewriteLaunchArgs(argv, false), { model: { ...s, short: "m" }, ids: s, prompt: { ...s, short: "p" }, chat: b, "max-tokens": { ...s, short: "n" }, temperature: s, "top-p": s,
      "top-k": s, "min-p": s, "typical-p": s, xtc: s, "top-n-sigma": s, "dynatemp-range": s, "dynatemp-exp": s, mirostat: s, "mirostat-ent": s, "mirostat-lr": s, seed: s, "presence-penalty": s, "frequency-penalty": s, "repetition-penalty": s, "logit-bias": s, json: b, exact: b, draft: s, "draft-len": s, state: s, slot: s, grammar: s, "json-schema": s, stop: { type: "string", multiple: true }, "min-tokens": s, "reasoning-budget": s, "reasoning-budget-message": s, "chat-template": s, threads: { ...s, short: "t" }, "kv-cache-dtype": s, ...expertFlags, ...deviceFlags, ...qualityFlags, ...cliLaunchFlags }, help);
    if (!r) return (console.log(help), 0);
    const v = r.values;
    applyLaunch(v, launchOptions(v, help), help); // llama-cli's -ngl, -ctk / -ctv
    const maxTokens = intOption(required(v, "max-tokens", help), "max-tokens", help);
    const sampling = {
      temperature: num(v.temperature, "temperature", 0, 100) ?? 0, top_p: num(v["top-p"], "top-p", 0, 1),
      top_k: v["top-k"] === undefined ? undefined : intOption(v["top-k"], "top-k", help),
      min_p: num(v["min-p"], "min-p", 0, 1), seed: v.seed === undefined ? undefined : intOption(v.seed, "seed", help),
      typical_p: num(v["typical-p"], "typical-p", 1e-9, 1), top_n_sigma: num(v["top-n-sigma"], "top-n-sigma", 0, 1000),
      dynatemp_range: num(v["dynatemp-range"], "dynatemp-range", 0, 10), dynatemp_exponent: num(v["dynatemp-exp"], "dynatemp-exp", 0, 100),
      mirostat: v.mirostat === undefined ? undefined : Number(choice(v.mirostat, "mirostat", ["0", "1", "2"] as const, help)),
      mirostat_tau: num(v["mirostat-ent"], "mirostat-ent", 0, 100), mirostat_eta: num(v["mirostat-lr"], "mirostat-lr", 0, 1),
      ...(v.xtc === undefined ? {} : { xtc_probability: num(v.xtc.split(",")[0], "xtc", 0, 1), xtc_threshold: num(v.xtc.split(",")[1], "xtc", 0, 1) }),
    };
    const penalties = {
      presence: num(v["presence-penalty"], "presence-penalty", -2, 2), frequency: num(v["frequency-penalty"], "frequency-penalty", -2, 2),
      repetition: num(v["repetition-penalty"], "repetition-penalty", 1e-6, 10), bias: logitBias(v["logit-bias"]),
    };
    const minTokens = v["min-tokens"] === undefined ? undefined : intOption(v["min-tokens"], "min-tokens", help);
    const thinkBudget = v["reasoning-budget"] === undefined ? undefined : intOption(v["reasoning-budget"], "reasoning-budget", help);
    if (v["reasoning-budget-message"] !== undefined && thinkBudget === undefined) throw new UsageError("--reasoning-budget-message needs --reasoning-budget", help);
    const draftArg: DraftKind = v.draft === undefined ? "auto" : choice(v.draft, "draft", DRAFTS, help);
    const draftLen = v["draft-len"] === undefined ? undefined : intOption(v["draft-len"], "draft-len", help);
    if (v.slot !== undefined && v.state === undefined) throw new UsageError("--slot needs --state DIR", help);
    const slot = v.slot === undefined ? 0 : intOption(v.slot, "slot", help);
    const xo = expertOptions(v, help), { threads, chatTemplate } = threadsAndTemplate(v, help), { kvDtype } = kvOption(v, help);
    if (kvDtype && (v.device === "vulkan" || v.device === "webgpu")) throw new UsageError(`--kv-cache-dtype ${kvDtype} runs on the CPU path only (--device cpu or auto)`, help);
    const dir = v.model ?? defaultModel("generating with", (l) => process.stderr.write(`hummingbird generate: ${l}\n`), help);
    const { quality } = qualityOptions(v, dir, help, (l) => process.stderr.write(`hummingbird generate: ${l}\n`));
    if (threads !== undefined) hb().hb_init(threads);
    const m = loadModel(dir);
    if (draftArg === "mtp" && !m.w.mtp) throw new UsageError("--draft mtp: this model has no MTP layer", help);
    const far = penalties.bias?.find(([t]) => t >= m.cfg.vocab_size);
    if (far) throw new UsageError(`--logit-bias: token id ${far[0]} is outside the vocabulary [0, ${m.cfg.vocab_size})`, help);
    const prompt = promptIds(dir, v, m.cfg.vocab_size, help, chatTemplate);
    const experts = attachExperts(m, { ...xo, ctx: prompt.length + maxTokens + 64, rows: prompt.length, kvDtype });
    const dev = openDeviceFor(m, kvDtype ? { ...v, device: "cpu" } : v, help);
    let kvf: KvFile | null = null;
    if (v.state !== undefined) {
      mkdirSync(v.state, { recursive: true });
      kvf = KvFile.open(slotPath(v.state, slot), m, { dtype: kvDtype });
    }
    try {
      const exact = !!v.exact;
      const fwd = { exact, ...(quality ? { quality } : {}), ...dev.forward };
      const session = kvf?.load(fwd) ?? (kvDtype ? new Session(m, fwd, { kv: newKV(m, 64, kvDtype) }) : undefined);
      const codec = loadTokenizer(dir), text = !v.json;
      // the request as serve would get it, through the same per-token pipeline
      const req: GenRequest = {
        prompt: v.chat && v.prompt !== undefined ? { kind: "chat", messages: [{ role: "user", content: v.prompt }] } : { kind: "ids", ids: prompt },
        slot: "auto", max_tokens: maxTokens, ...sampling, top_p: sampling.top_p ?? 1, min_p: sampling.min_p ?? 0, top_k: sampling.top_k ?? 0,
        stop: v.stop ?? [], penalties, grammar: grammarOption(v), min_tokens: minTokens, think_budget: thinkBudget,
      };
      const pipe = new PipelineMaker(m, codec, { ctx: prompt.length + maxTokens, budgetMessage: v["reasoning-budget-message"], lazyVocab: true }).make(0, req, prompt);
      if ("detail" in pipe) throw new UsageError(pipe.detail, help);
      const res = generate(m, prompt, {
        maxTokens, draft: draftArg, draftLen, session, forward: fwd, encode: (t) => codec.encode(t),
        rules: { sampler: pipe.sampler, rules: {
          get inForce() { return pipe.inForce; }, grammar: pipe.grammar,
          next(logits, draft, q) {
            const r = pipe.next(logits, draft, q);
            if (text && r.piece) process.stdout.write(r.piece.text + (r.piece.mark ? `<${r.piece.mark}>` : ""));
            return r;
          },
        } },
      });
      if (kvf && session) kvf.persist(session);
      const pays = res.stats.draft_pays_at;
      if (pays !== undefined && pays >= 1)
        process.stderr.write(`hummingbird generate: --draft ${res.stats.draft}: a round of drafts costs more than the tokens it can yield on this model (see engine/draft-cost.ts), so drafting stayed off\n`);
      if (text) process.stdout.write((res.gen_ids.length ? pipe.detok.finish().text : "") + "\n");
      else process.stdout.write(JSON.stringify(res) + "\n");
    } finally {
      kvf?.close();
      experts.close();
      if (dev.summary()) process.stderr.write(dev.summary() + "\n");
      dev.close();
    }
    return 0;
  },
};
