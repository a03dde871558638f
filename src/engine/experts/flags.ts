// The expert-streaming command-line flags shared by generate, logits (and bench / serve): their
// util.parseArgs options, help lines and the mapping to ExpertOptions; serve's and chat's --warmup / --no-warmup.
// Stateless.
import { choice, intOption, UsageError } from "../options.ts";
import type { ExpertOptions } from "./attach.ts";

export const expertFlags = {
  "expert-cache": { type: "string" },
  direct: { type: "boolean" },
  mmap: { type: "boolean" },
  "ram-gb": { type: "string" },
  "expert-policy": { type: "string" },
  "expert-prefetch": { type: "string" },
} as const;

export const EXPERT_HELP = `Routed experts stream from disk through a per-layer cache sized from a RAM budget (plan on stderr):
  --expert-cache N   cache slots per MoE layer (0 = automatic from the budget, the default)
  --ram-gb N         the RAM budget (default: MemAvailable, or hw.memsize on macOS)
  --direct           O_DIRECT reads into aligned slabs (buffered, with a warning, where unsupported)
  --mmap             experts as views into mapped files (pages touched before compute)
  --expert-policy P  lru (default) | lfru
  --expert-prefetch on|off|auto|pilot  speculative reads of the previous token's experts (auto, the default:
                     only while they would have covered at least half of the recent misses); pilot: of the
                     experts a layer's router picks on its input, read under that layer's attention`;

type Values = Record<string, string | string[] | boolean | undefined>;

export function expertOptions(v: Values, help: string): ExpertOptions {
  const o: ExpertOptions = {};
  if (typeof v["expert-cache"] === "string") o.slots = intOption(v["expert-cache"], "expert-cache", help);
  if (typeof v["ram-gb"] === "string") {
    const x = Number(v["ram-gb"]);
    if (!Number.isFinite(x) || x <= 0 || x > 1 << 20) throw new UsageError(`--ram-gb must be a positive number of GiB, got ${JSON.stringify(v["ram-gb"])}`, help);
    o.ramGb = x;
  }
  if (v.direct && v.mmap) throw new UsageError("--direct and --mmap exclude each other", help);
  if (v.direct) o.direct = true;
  if (v.mmap) o.mmap = true;
  if (typeof v["expert-policy"] === "string") o.policy = choice(v["expert-policy"], "expert-policy", ["lru", "lfru"] as const, help);
  if (typeof v["expert-prefetch"] === "string") o.prefetch = choice(v["expert-prefetch"], "expert-prefetch", ["on", "off", "auto", "pilot"] as const, help);
  return o;
}

/** serve's and chat's --warmup (--no-warmup is llama-server's, parsed with its launch flags) */
export const warmupFlags = { warmup: { type: "boolean" } } as const;
export const WARMUP_HELP = `  --warmup / --no-warmup  read the experts the cache will hold before the model is ready (the hottest of the usage
                     history first; a progress line), so the first requests read none of them from disk; a line says
                     how much was read at start and how much is left to read on first use. Default: on where the
                     cache fits the RAM budget`;

/** --warmup → true, --no-warmup → false, neither → undefined (the default: on where the cache fits the budget) */
export function warmupOption(v: Values, help: string): boolean | undefined {
  if (v.warmup && v["no-warmup"]) throw new UsageError("give --warmup or --no-warmup, not both", help);
  return v.warmup ? true : v["no-warmup"] ? false : undefined;
}
