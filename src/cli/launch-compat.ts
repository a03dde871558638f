// llama-server's and vLLM's launch lines taken as their users write them. Node's parseArgs reads a single-dash option
// one letter at a time, so llama-server's multi-letter short flags (-ngl, -np, -fa, -ctk, -ctv, -cb) are rewritten to
// their long forms first (and --flash-attn's optional value joined to it); then `launchFlags` map onto this server's
// own options, or name what it always does (why each is harmless: on launchFlags and in LAUNCH_HELP). No state.
import { choice, intOption, UsageError } from "./common.ts";
import type { KvDtype } from "../native/hb.ts";

const SHORT: Record<string, string> = { "-ngl": "--n-gpu-layers", "-np": "--parallel", "-fa": "--flash-attn", "-ctk": "--cache-type-k",
  "-ctv": "--cache-type-v", "-cb": "--cont-batching", "-tp": "--tensor-parallel-size" };
const FA_VALUES = ["on", "off", "auto"];

const NUMERIC = new Set(["-n", "--n-predict", "--n-gpu-layers", "--gpu-layers", "--seed"]);

/** argv with llama-server's multi-letter short flags spelled long, `--flash-attn [on|off|auto]` as one argument, and
 *  (numeric: serve's launch line) a negative number after a numeric flag joined to it (`-n -1`: parseArgs would take -1
 *  for an option). `generate` / `chat` (llama-cli's flags) rewrite without numeric: their -n is --max-tokens. */
export function rewriteLaunchArgs(argv: string[], numeric = true): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--") { out.push(...argv.slice(i)); break; }
    const a = SHORT[argv[i]] ?? argv[i];
    if (a === "--flash-attn") out.push(`--flash-attn=${FA_VALUES.includes(argv[i + 1]) ? argv[++i] : "on"}`);
    else if (numeric && NUMERIC.has(a) && /^-\d+$/.test(argv[i + 1] ?? "")) out.push(`${a === "-n" ? "--n-predict" : a}=${argv[++i]}`);
    else out.push(a);
  }
  return out;
}

const s = { type: "string" } as const, b = { type: "boolean" } as const;
/** Flags that name what this server always does: llama-server's --jinja (the chat template is always Jinja),
 *  --metrics (/metrics is always served), --cont-batching, --no-webui (= --no-ui); vLLM's --enable-auto-tool-choice,
 *  --tool-call-parser and --reasoning-parser (GLM's tool calls and <think> blocks are always parsed; only GLM's
 *  parsers are accepted), --trust-remote-code (no code is ever loaded from a model); the others: LAUNCH_HELP. */
export const launchFlags = {
  jinja: b, metrics: b, "cont-batching": b, "no-webui": b, "enable-auto-tool-choice": b, "tool-call-parser": s, "reasoning-parser": s,
  "trust-remote-code": b,
  "n-gpu-layers": s, "gpu-layers": s, "flash-attn": s, "cache-type-k": s, "cache-type-v": s, "no-mmap": b, "no-warmup": b,
  "n-predict": { type: "string", short: "n" }, "enable-prefix-caching": b, "enable-chunked-prefill": b, "disable-log-requests": b,
  "enable-log-requests": b, seed: s, dtype: s, "tensor-parallel-size": s,
} as const;

export const LAUNCH_HELP = `  --jinja, --metrics, --cont-batching (llama-server's), --enable-auto-tool-choice, --tool-call-parser glm45|glm47,
  --reasoning-parser glm45, --trust-remote-code (vLLM's): taken so that their launch lines for GLM run unchanged;
                   each names what this server always does
  llama-server's and vLLM's launch flags, mapped: -ngl / --n-gpu-layers N (= --device-layers N; 0 = --device cpu),
  -ctk / -ctv / --cache-type-k / --cache-type-v f32|f16|q8_0 (= --kv-cache-dtype: keys and values share the MLA
  cache), -n / --n-predict N (max tokens of requests that name none — /v1/completions keeps OpenAI's 16; -1: the
  rest of the context), --seed N (requests without a seed get N + their number: a fresh server answers the same
  requests alike), --disable-log-requests (no line per request), --no-warmup (no expert warmup at start: below); and
  taken as what this server always does: -fa / --flash-attn (one exact attention kernel), --no-mmap (buffered reads
  unless --mmap), --enable-prefix-caching, --enable-chunked-prefill, --enable-log-requests, --dtype auto|bfloat16 (weights as
  stored; activations f32 with --exact, else int8), --tensor-parallel-size 1 / -tp 1 (one process)`;

/** llama-cli's launch flags that `generate` and `chat` take (a subset of launchFlags: the rest are the server's) */
export const cliLaunchFlags = {
  jinja: b, "n-gpu-layers": s, "gpu-layers": s, "flash-attn": s, "cache-type-k": s, "cache-type-v": s, "no-mmap": b, "no-warmup": b,
} as const;
export const CLI_LAUNCH_HELP = `llama-cli's launch flags, mapped: -ngl / --n-gpu-layers N (= --device-layers N; 0 = --device cpu), -ctk / -ctv /
  --cache-type-k / --cache-type-v f32|f16|q8_0 (= --kv-cache-dtype), --no-warmup (chat: no expert warmup at start;
  generate never warms up); taken as what this engine always does: -fa / --flash-attn, --jinja, --no-mmap.`;

const GLM_PARSERS = ["glm45", "glm47", "glm4_moe"];
type V = Record<string, string | string[] | boolean | undefined>;
export interface LaunchOptions { deviceLayers?: number; cpuOnly: boolean; kvDtype?: string; maxTokens?: number; seed?: number; logRequests: boolean }

/** The device and KV flags of `launch` written into the command's own (--device, --device-layers, --kv-cache-dtype), which
 *  must not contradict them; serve, generate and chat then read their own flags as usual. */
export function applyLaunch(v: V, launch: LaunchOptions, help: string): void {
  if (launch.kvDtype !== undefined) {
    if (v["kv-cache-dtype"] !== undefined && v["kv-cache-dtype"] !== launch.kvDtype) throw new UsageError("--cache-type-k / -v and --kv-cache-dtype disagree", help);
    v["kv-cache-dtype"] = launch.kvDtype;
  }
  if ((launch.deviceLayers !== undefined || launch.cpuOnly) && v["device-layers"] !== undefined) throw new UsageError("give --device-layers or -ngl / --n-gpu-layers, not both", help);
  if (launch.cpuOnly && v.device !== undefined && v.device !== "cpu") throw new UsageError(`-ngl 0 keeps every layer on the CPU: not with --device ${v.device}`, help);
  if (launch.cpuOnly) v.device = "cpu";
  if (launch.deviceLayers !== undefined) v["device-layers"] = String(launch.deviceLayers);
}

/** The mapped flags as this server's options (the caller merges them with its own, which must not contradict them). */
export function launchOptions(v: V, help: string): LaunchOptions {
  const str = (k: string) => (typeof v[k] === "string" ? (v[k] as string) : undefined);
  for (const f of ["tool-call-parser", "reasoning-parser"]) {
    const p = str(f);
    if (p !== undefined && !GLM_PARSERS.includes(p)) throw new UsageError(`--${f} ${p}: this server parses GLM's format only (${GLM_PARSERS.join(", ")}: always on)`, help);
  }
  const ngl = str("n-gpu-layers") ?? str("gpu-layers");
  const layers = ngl === undefined ? undefined : ngl === "-1" || ngl === "all" ? 1 << 30 : intOption(ngl, "n-gpu-layers", help);
  const kv = (["cache-type-k", "cache-type-v"] as const).map((k) => {
    const t = str(k);
    return t === undefined ? undefined : ({ f32: "f32", f16: "f16", q8_0: "q8" } as Record<string, KvDtype>)[choice(t, k, ["f32", "f16", "q8_0"] as const, help)];
  });
  if (kv[0] && kv[1] && kv[0] !== kv[1]) throw new UsageError("--cache-type-k and --cache-type-v must agree: one MLA cache holds the keys and the values", help);
  const n = str("n-predict");
  const maxTokens = n === undefined ? undefined : n === "-1" ? undefined : intOption(n, "n-predict", help);
  const seed = str("seed") === undefined ? undefined : intOption(str("seed")!, "seed", help);
  const fa = str("flash-attn");
  if (fa !== undefined) choice(fa, "flash-attn", FA_VALUES as readonly string[], help);
  if (str("dtype") !== undefined && !["auto", "bfloat16", "bf16"].includes(str("dtype")!))
    throw new UsageError(`--dtype ${str("dtype")}: weights are used as stored and activations are f32 (--exact) or int8; only auto / bfloat16 are taken`, help);
  const tp = str("tensor-parallel-size");
  if (tp !== undefined && intOption(tp, "tensor-parallel-size", help) !== 1) throw new UsageError(`--tensor-parallel-size ${tp}: this server runs one process (1)`, help);
  if (v["no-mmap"] && v.mmap) throw new UsageError("give --mmap or --no-mmap, not both", help);
  return { ...(layers !== undefined && layers > 0 ? { deviceLayers: layers } : {}), cpuOnly: layers === 0, kvDtype: kv[0] ?? kv[1],
    ...(maxTokens !== undefined ? { maxTokens } : {}), ...(seed !== undefined ? { seed } : {}), logRequests: !v["disable-log-requests"] };
}
