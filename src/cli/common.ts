// Shared CLI plumbing: the Command shape every subcommand module implements, UsageError (bad
// arguments → exit 2 with a hint, the help only on --help) and a strict `util.parseArgs` wrapper. No state.
import { resolve } from "node:path";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { readChatTemplate } from "../model/tokenizer.ts";
import { demoBanner, demoModelDir } from "../model/demo.ts";
import { KV_DTYPES, type KvDtype } from "../native/hb.ts";
import { flagHint } from "./suggest.ts";
import { choice, intOption, UsageError } from "../engine/options.ts";
import { loadConfig } from "../model/config.ts";
import { policyError, policyWarnings, type QualityPolicy } from "../engine/quality.ts";

export { choice, intOption, UsageError } from "../engine/options.ts";
export { fmtBytes } from "../progress.ts";

/** What a subcommand module (`src/cli/<name>.ts`) exports as its `command`. */
export interface Command {
  /** one line for the overall help */
  summary: string;
  /** full help text: usage line, options, examples */
  help: string;
  /** runs with the arguments after the subcommand name; resolves to the exit code */
  run(argv: string[]): Promise<number> | number;
}

/** The embedded demo model, announced loudly (`what`: "serving", "chatting with", "generating with"; each banner line
 *  through `say`): it is tiny, and no --model was given. serve's, chat's and generate's. */
export function defaultModel(what: string, say: (line: string) => void, help: string): string {
  let dir: string;
  try { dir = demoModelDir(); } catch (e) { throw new UsageError(`no --model DIR given: ${(e as Error).message}`, help); }
  for (const l of demoBanner(what)) say(l);
  return dir;
}

type Options = NonNullable<ParseArgsConfig["options"]>;

/**
 * util.parseArgs, strict, with `--help`/`-h` added. Its errors become UsageError (with `help`).
 * Returns `null` when help was asked for (the caller prints `help` and exits 0).
 */
export function parseCli<O extends Options>(argv: string[], options: O, help: string, allowPositionals = false) {
  let r;
  try {
    r = parseArgs({ args: argv, options: { ...options, help: { type: "boolean", short: "h" } }, strict: true, allowPositionals });
  } catch (e) {
    const err = e as Error & { code?: string }, flag = /^Unknown option '([^']+)'/.exec(err.message)?.[1];
    if (err.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && flag) throw new UsageError(`unknown option ${flag}`, help, flagHint(flag, Object.keys(options)));
    const [first, ...more] = err.message.split("\n"); // one line; parseArgs' advice as the hint
    throw new UsageError(first, help, more.join(" ").trim() || undefined);
  }
  if ((r.values as Record<string, unknown>).help) return null;
  return r;
}

/** A required string option. */
export function required(values: Record<string, unknown>, name: string, help: string): string {
  const v = values[name];
  if (typeof v !== "string" || v === "") throw new UsageError(`missing required option --${name}`, help);
  return v;
}

/** Parse a number option in [lo, hi] (undefined when absent). */
export function numOption(v: string | undefined, name: string, lo: number, hi: number, help: string): number | undefined {
  if (v === undefined) return undefined;
  const x = Number(v);
  if (!Number.isFinite(x) || x < lo || x > hi) throw new UsageError(`--${name} must be a number in [${lo}, ${hi}], got ${JSON.stringify(v)}`, help);
  return x;
}

/** --threads N and --chat-template FILE as engine options (serve, chat, generate) */
/** --kv-cache-dtype f32|f16|q8 (vLLM's flag name): the MLA caches in IEEE halves or int8 blocks — half or ~3.6x less
 *  memory, fast mode on the CPU path (serve's, chat's and generate's) */
export const KV_HELP = `  --kv-cache-dtype T  f32 (default) | f16 | q8: the KV cache in IEEE halves (half its memory) or int8 in blocks of
                   32 with a scale each (~3.6x less), on the CPU path in fast mode (the absorbed attention form;
                   not with --exact or a device chain)`;
export function kvOption(v: { "kv-cache-dtype"?: string; exact?: boolean }, help: string): { kvDtype?: KvDtype } {
  const t = v["kv-cache-dtype"] === undefined ? "f32" : choice(v["kv-cache-dtype"], "kv-cache-dtype", KV_DTYPES, help);
  if (t !== "f32" && v.exact) throw new UsageError(`--kv-cache-dtype ${t} is a fast-mode option: not with --exact`, help);
  return t !== "f32" ? { kvDtype: t } : {};
}

/** --experts-per-token K and --router-top-p P: the opt-in quality policies (src/engine/quality.ts) of serve, chat,
 *  generate and bench. Off by default (the model as trained); each prints a loud warning when on. */
export const QUALITY_HELP = `  --experts-per-token K  run only the top K (1..num_experts_per_tok) of each token's routed experts, their gates
                   normalized over the K: faster, LOWER QUALITY (not the model as trained; default: off)
  --router-top-p P  of each token's chosen experts keep the fewest, by routing weight, whose weights reach P
                   (0 < P ≤ 1), renormalized: faster, LOWER QUALITY (default: off)`;
export const qualityFlags = { "experts-per-token": { type: "string" }, "router-top-p": { type: "string" } } as const;
export function qualityOptions(v: { "experts-per-token"?: string; "router-top-p"?: string }, dir: string | undefined, help: string,
  warn: (line: string) => void): { quality?: QualityPolicy } {
  const q: QualityPolicy = {};
  const k = v["experts-per-token"], p = v["router-top-p"];
  if (k !== undefined) {
    q.expertsPerToken = intOption(k, "experts-per-token", help);
    if (q.expertsPerToken < 1) throw new UsageError(`--experts-per-token must be ≥ 1, got ${JSON.stringify(k)}`, help);
  }
  if (p !== undefined) {
    const x = Number(p);
    if (p.trim() === "" || !Number.isFinite(x) || x <= 0 || x > 1) throw new UsageError(`--router-top-p must be a number in (0, 1], got ${JSON.stringify(p)}`, help);
    q.routerTopP = x;
  }
  if (k === undefined && p === undefined) return {};
  let topk: number | undefined;
  try { if (dir !== undefined) topk = loadConfig(dir).num_experts_per_tok; } catch { /* a config that does not load: left to the loader */ }
  const why = topk === undefined ? null : policyError(q, topk);
  if (why) throw new UsageError(why, help);
  for (const l of policyWarnings(q, topk)) warn(l);
  return { quality: q };
}

/** --reasoning-budget N (−1: none, llama-server's default; 0: </think> at once) and --reasoning-budget-message TEXT, as
 *  the request defaults thinkBudget and budgetMessage (serve's and chat's) */
export const REASONING_HELP = `  --reasoning-budget N  tokens a thinking model may spend inside <think> before </think> is forced (−1: no
                   limit, the default; 0: none at all); requests may set their own (thinking_token_budget,
                   reasoning_budget_tokens, Anthropic's thinking.budget_tokens)
  --reasoning-budget-message TEXT  text forced before </think> when a budget is spent (llama-server's flag)`;
export const reasoningFlags = { "reasoning-budget": { type: "string" }, "reasoning-budget-message": { type: "string" } } as const;
export function reasoningOptions(v: { "reasoning-budget"?: string; "reasoning-budget-message"?: string }, help: string):
  { thinkBudget?: number; budgetMessage?: string } {
  const b = v["reasoning-budget"];
  if (b !== undefined && !(/^(-1|\d+)$/.test(b) && Number.isSafeInteger(Number(b))))
    throw new UsageError(`--reasoning-budget must be -1 or a non-negative integer, got ${JSON.stringify(b)}`, help);
  const m = v["reasoning-budget-message"];
  if (m !== undefined && b === undefined) throw new UsageError("--reasoning-budget-message needs --reasoning-budget", help);
  return { ...(b !== undefined ? { thinkBudget: Number(b) } : {}), ...(m ? { budgetMessage: m } : {}) };
}

export function threadsAndTemplate(v: { threads?: string; "chat-template"?: string }, help: string): { threads?: number; chatTemplate?: string } {
  const threads = v.threads === undefined ? undefined : intOption(v.threads, "threads", help);
  if (threads !== undefined && (threads < 1 || threads > 256)) throw new UsageError("--threads must be in [1, 256]", help);
  return { threads, chatTemplate: v["chat-template"] === undefined ? undefined : readChatTemplate(resolve(v["chat-template"])) };
}
