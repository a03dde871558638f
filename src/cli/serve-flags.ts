// The serve command's option parsers: each turns flag text into a checked value or a UsageError naming the flag
// (and the file, for the flags that name one). No state.
import { mkdirSync, readFileSync } from "node:fs";
import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import { join, resolve } from "node:path";
import { z } from "zod";
import { totalmem } from "node:os";
import { intOption, UsageError } from "./common.ts";
import { loadConfig, type SamplingDefaults } from "../model/config.ts";

/** --chat-template-kwargs (or vLLM's --default-chat-template-kwargs): a JSON object; enable_thinking a boolean */
export function templateKwargsOption(a: string | undefined, b: string | undefined, help: string): Record<string, unknown> | undefined {
  if (a !== undefined && b !== undefined) throw new UsageError("give --chat-template-kwargs or --default-chat-template-kwargs, not both", help);
  const s = a ?? b;
  if (s === undefined) return undefined;
  let v: unknown;
  try { v = JSON.parse(s); } catch (e) { throw new UsageError(`--chat-template-kwargs: not JSON: ${(e as Error).message}`, help); }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new UsageError("--chat-template-kwargs must be a JSON object", help);
  const t = (v as Record<string, unknown>).enable_thinking;
  if (t !== undefined && typeof t !== "boolean") throw new UsageError("--chat-template-kwargs: enable_thinking must be true or false", help);
  return v as Record<string, unknown>;
}

/** --cors: "*" or comma-separated origins (scheme://host[:port], as browsers send them) */
export function corsOption(s: string | undefined, help: string): string[] | undefined {
  if (s === undefined) return undefined;
  const list = s.split(",").map((x) => x.trim()).filter(Boolean);
  if (list.length === 0) throw new UsageError("--cors needs at least one origin (or *)", help);
  for (const o of list) {
    let ok = o === "*";
    try { ok ||= new URL(o).origin === o; } catch { /* not a URL */ }
    if (!ok) throw new UsageError(`--cors: ${JSON.stringify(o)} is not an origin (scheme://host[:port], no path) or *`, help);
  }
  return list;
}

/** --ssl-keyfile / --ssl-certfile (vLLM's; llama-server's --ssl-key-file / --ssl-cert-file): both or neither, each a
 *  PEM file that parses, the key the certificate's */
export function tlsOption(v: Record<string, string | boolean | undefined>, help: string): { key: string; cert: string } | undefined {
  const pick = (ours: string, theirs: string) => {
    if (v[ours] !== undefined && v[theirs] !== undefined) throw new UsageError(`give --${ours} or --${theirs}, not both`, help);
    const path = (v[ours] ?? v[theirs]) as string | undefined;
    if (path === undefined) return undefined;
    try { return { flag: v[ours] !== undefined ? ours : theirs, path, text: readFileSync(path, "utf8") }; }
    catch (e) { throw new UsageError(`--${v[ours] !== undefined ? ours : theirs} ${path}: ${(e as Error).message}`, help); }
  };
  const key = pick("ssl-keyfile", "ssl-key-file"), cert = pick("ssl-certfile", "ssl-cert-file");
  if (!key && !cert) return undefined;
  if (!key || !cert) throw new UsageError(`--${key ? "ssl-keyfile" : "ssl-certfile"} needs --${key ? "ssl-certfile" : "ssl-keyfile"} too`, help);
  let k: KeyObject, x: X509Certificate;
  try { k = createPrivateKey(key.text); } catch (e) { throw new UsageError(`--${key.flag} ${key.path}: not a PEM private key (${(e as Error).message})`, help); }
  try { x = new X509Certificate(cert.text); } catch (e) { throw new UsageError(`--${cert.flag} ${cert.path}: not a PEM certificate (${(e as Error).message})`, help); }
  if (!x.checkPrivateKey(k)) throw new UsageError(`--${key.flag} ${key.path} is not the key of the certificate in --${cert.flag} ${cert.path}`, help);
  return { key: key.text, cert: cert.text };
}

/** The API keys (comma-separated, as the app takes them): --api-key K1,K2, or --api-key-file F (llama-server's: one key
 *  a line, blank lines skipped; keeps keys out of the process list), or the HB_API_KEY environment variable. */
export function apiKeyOption(flag: string | undefined, file: string | undefined, help: string): string | undefined {
  if (flag !== undefined && file !== undefined) throw new UsageError("give --api-key or --api-key-file, not both", help);
  if (flag !== undefined) {
    if (flag.split(",").some((k) => k === "")) throw new UsageError("--api-key must not be empty (nor hold an empty key)", help);
    return flag;
  }
  if (file === undefined) return process.env.HB_API_KEY || undefined;
  let text: string;
  try { text = readFileSync(file, "utf8"); } catch (e) { throw new UsageError(`--api-key-file ${file}: ${(e as Error).message}`, help); }
  const keys = text.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
  if (keys.length === 0) throw new UsageError(`--api-key-file ${file} holds no key`, help);
  const bad = keys.findIndex((k) => k.includes(","));
  if (bad >= 0) throw new UsageError(`--api-key-file ${file}: key ${bad + 1} holds a comma`, help);
  return keys.join(",");
}

/** --slot-save-path DIR: an absolute folder, created if missing */
export function slotSavePath(dir: string | undefined, help: string): string | undefined {
  if (dir === undefined) return undefined;
  if (dir === "") throw new UsageError("--slot-save-path must not be empty", help);
  const abs = resolve(dir);
  try { mkdirSync(abs, { recursive: true }); } catch (e) { throw new UsageError(`--slot-save-path ${abs}: ${(e as Error).message}`, help); }
  return abs;
}


const Sampling = z.strictObject({
  temperature: z.number().min(0).max(100), top_p: z.number().gt(0).max(1), top_k: z.int().min(0),
  min_p: z.number().min(0).max(1), repetition_penalty: z.number().gt(0).max(100),
}).partial();
/** flag → the sampling parameter it sets (llama-server's names; --temperature too) */
const SAMPLING_FLAGS = { temp: "temperature", temperature: "temperature", "top-p": "top_p", "top-k": "top_k", "min-p": "min_p",
  "repeat-penalty": "repetition_penalty" } as const;
export const samplingFlags = Object.fromEntries([...Object.keys(SAMPLING_FLAGS), "override-generation-config"].map((k) => [k, { type: "string" } as const]));

/** The server's sampling defaults for requests that name none, above the model's generation_config.json: llama-server's
 *  --temp / --top-p / --top-k / --min-p / --repeat-penalty, or vLLM's --override-generation-config JSON (the same five
 *  keys, generation_config's names); a parameter set both ways is refused. */
export function samplingOption(v: Record<string, string | boolean | undefined>, help: string): SamplingDefaults | undefined {
  const out: Record<string, number> = {};
  const json = v["override-generation-config"];
  if (typeof json === "string") {
    let o: unknown;
    try { o = JSON.parse(json); } catch (e) { throw new UsageError(`--override-generation-config: not JSON: ${(e as Error).message}`, help); }
    const p = Sampling.safeParse(o);
    if (!p.success) {
      const i = p.error.issues[0];
      throw new UsageError(`--override-generation-config: ${i.path.join(".") || (i as { keys?: string[] }).keys?.join(", ") || "value"}: ${i.message}`, help);
    }
    Object.assign(out, p.data);
  }
  for (const [flag, key] of Object.entries(SAMPLING_FLAGS)) {
    const s = v[flag];
    if (typeof s !== "string") continue;
    if (key in out) throw new UsageError(`--${flag}: ${key} is already set (by --override-generation-config or another flag)`, help);
    const x = s.trim() === "" ? NaN : Number(s), p = Sampling.shape[key].safeParse(x);
    if (!Number.isFinite(x)) throw new UsageError(`--${flag}: a number is needed (got ${JSON.stringify(s)})`, help);
    if (!p.success) throw new UsageError(`--${flag}: ${p.error.issues[0].message} (got ${s})`, help);
    out[key] = p.data!;
  }
  return Object.keys(out).length ? out : undefined;
}

/** --cache-ram MIB (the host-memory prompt cache) in bytes: at most the machine's memory (it would only end in an OOM kill) */
export function cacheRamOption(s: string, help: string): number {
  const mib = intOption(s, "cache-ram", help), mem = totalmem();
  if (mib * 2 ** 20 > mem) throw new UsageError(`--cache-ram ${mib} MiB is more than this machine's ${Math.floor(mem / 2 ** 20)} MiB of memory`, help);
  return mib * 2 ** 20;
}

/** --drain-timeout S: seconds a SIGTERM'd server lets running requests finish before it exits (default 30; 0: none) */
export function drainTimeoutOption(s: string | undefined, help: string): number {
  if (s === undefined) return 30;
  const n = intOption(s, "drain-timeout", help);
  if (n > 3600) throw new UsageError("--drain-timeout must be ≤ 3600 seconds", help);
  return n;
}

/** the flags of connectionOptions */
export const connectionFlags = { timeout: { type: "string" }, "max-connections": { type: "string" }, "allowed-hosts": { type: "string" },
  "accept-any-model": { type: "boolean" } } as const;
/** --timeout S (≥ 1; idle connections: at most 255 s, Bun's limit), --max-connections N (≥ 1), --allowed-hosts NAME,…|*
 *  (host names or addresses, no scheme or port) and --accept-any-model, as startServer's options */
export function connectionOptions(v: Record<string, string | boolean | undefined>, help: string):
  { timeout?: number; maxConnections?: number; allowedHosts?: string[]; acceptAnyModel?: boolean } {
  const out: { timeout?: number; maxConnections?: number; allowedHosts?: string[]; acceptAnyModel?: boolean } = {};
  if (typeof v.timeout === "string") {
    out.timeout = intOption(v.timeout, "timeout", help);
    if (out.timeout < 1) throw new UsageError("--timeout must be ≥ 1 second", help);
  }
  if (typeof v["max-connections"] === "string") {
    out.maxConnections = intOption(v["max-connections"], "max-connections", help);
    if (out.maxConnections < 1) throw new UsageError("--max-connections must be ≥ 1", help);
  }
  if (typeof v["allowed-hosts"] === "string") {
    const list = v["allowed-hosts"].split(",").map((x) => x.trim().toLowerCase()).filter(Boolean);
    if (list.length === 0) throw new UsageError("--allowed-hosts needs at least one host name (or *)", help);
    const bad = list.find((h) => h !== "*" && !/^(\[[0-9a-f:.]+\]|[0-9a-f:]*:[0-9a-f:.]*|[a-z0-9_.-]+)$/.test(h));
    if (bad !== undefined) throw new UsageError(`--allowed-hosts: ${JSON.stringify(bad)} is not a host name or address (no scheme, no port)`, help);
    out.allowedHosts = list;
  }
  if (v["accept-any-model"]) out.acceptAnyModel = true;
  return out;
}

/** Whether the environment allows a context past the model's limit (vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN, or ours). */
const allowLong = () => ["HB_ALLOW_LONG_MAX_MODEL_LEN", "VLLM_ALLOW_LONG_MAX_MODEL_LEN"].some((k) => ["1", "true"].includes((process.env[k] ?? "").toLowerCase()));

/** A context per slot asked for on the command line (`given`: the flag and its value, as typed) above the model's
 *  max_position_embeddings is refused, as vLLM refuses it, unless HB_ALLOW_LONG_MAX_MODEL_LEN=1 (or vLLM's
 *  VLLM_ALLOW_LONG_MAX_MODEL_LEN=1): then `warn` says so and the context stands (positions the model was not trained
 *  on: the output may degrade). Returns whether it passes the limit. A config that does not load is left to the loader. */
export function ctxPastLimit(dir: string, ctx: number, given: string, help: string, warn: (line: string) => void): boolean {
  let limit: number;
  try { limit = loadConfig(dir).max_position_embeddings; } catch { return false; }
  if (ctx <= limit) return false;
  const what = `${given} is above the model's limit of ${limit} tokens (max_position_embeddings in ${join(dir, "config.json")})`;
  if (!allowLong()) throw new UsageError(`${what}; set HB_ALLOW_LONG_MAX_MODEL_LEN=1 to run past it anyway (the output may degrade)`, help);
  warn(`WARNING: ${what}; running past it as HB_ALLOW_LONG_MAX_MODEL_LEN asks: the output may degrade`);
  return true;
}
