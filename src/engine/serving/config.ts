// The engine worker's options, typed once: what `hummingbird serve` hands the worker (WorkerConfig: `engine`, `scheduler`,
// `defaults`) by the same names the flags parse into (src/server/config.ts adds `http`: ServeConfig). Types and pure
// helpers only. No state.
import type { ExpertOptions } from "../experts/index.ts";
import type { Pooling } from "../pooling.ts";
import type { SamplingDefaults } from "../../model/config.ts";
import type { KvDtype } from "../../native/hb.ts";
import type { DeviceMode } from "../../device/device.ts";
import type { DraftOptions } from "./drafter.ts";
import type { QualityPolicy } from "../quality.ts";

/** Prompt tokens prefilled per scheduler step (beside the decode rows of running streams). 128 rather than 64:
 *  a 1024-token prompt prefilled ~13% faster on the bench model (1659-1778 vs 1458-1528 tok/s, three rounds of
 *  chunks 64 / 128 / 256 / 512 in turn; 256 gained ~3% more) at the price of longer steps for the streams
 *  decoding meanwhile. */
export const PREFILL_CHUNK = 128;

/** The model and how it runs: loaded by the worker. */
export interface EngineConfig {
  dir: string;             // the model directory
  alias?: string;          // the model id the API reports and accepts (default: the directory's name)
  chatTemplate?: string;   // a Jinja chat template replacing the model's (the text of --chat-template FILE)
  threads?: number;        // libhb pool threads (default: HB_THREADS, else the physical cores)
  exact?: boolean;         // f32 activations (default: the fast int8-activation mode)
  quality?: QualityPolicy; // opt-in router policies: fewer experts per token (quality.ts; absent: the model as trained)
  attn?: "auto" | "naive" | "absorbed"; // attention form (forward.ts; default absorbed): a fixed form makes results independent of prefill chunking and prefix reuse
  kvDtype?: KvDtype;       // the slots' MLA caches (--kv-cache-dtype f16 / q8: half / ~3.6x less memory; CPU, fast mode)
  experts?: ExpertOptions; // expert streaming: cache slots, RAM budget, O_DIRECT / mmap (engine/experts)
  warmup?: boolean;        // read the experts the cache will hold before `ready` (absent: where the cache fits the budget)
  device?: DeviceMode;     // where the dense layers run (src/device/device.ts); default auto
  deviceLayers?: number;   // a partial chain: layers [0, N) on the device
  kvBudgetRows?: number;   // KV rows per layer per conversation kept on the device; past it the cache splits (--kv-budget)
  loadDelayMs?: number;    // wait before loading (tests observe the 503 "loading" window)
}

/** The KV slots and the scheduler over them (scheduler.ts). */
export interface SchedulerConfig {
  slots: number;
  ctx?: number;            // per-slot context limit (default min(4096, max_position_embeddings))
  longCtx?: boolean;       // ctx may pass max_position_embeddings (HB_ALLOW_LONG_MAX_MODEL_LEN; else it is cut to it)
  queue?: number;          // waiting requests beyond the slots before OVERLOADED (default max(16, 4·slots))
  chunk?: number;          // prefill tokens per scheduler step (default PREFILL_CHUNK)
  draft?: DraftOptions;    // speculative decoding: draft tokens per decode step (absent: off)
  schedulingPolicy?: SchedulingPolicy; // priority: requests may name one (lower first in the queue), and preempt
  cacheRam?: number;       // bytes of the host-memory prompt cache (--cache-ram; absent: none)
  slotSavePath?: string;   // folder of the slots' KV files (POST /slots/{id}?action=save|restore); absent: off
}
export type SchedulingPolicy = "fcfs" | "priority";

/** What a request that names none gets. */
export interface RequestDefaults {
  sampling?: SamplingDefaults; // the server's sampling defaults, over generation_config.json (--temp, --override-generation-config, ...)
  generationConfig?: "auto" | "vllm"; // sampling defaults: the model's generation_config.json (default) or the API's
  templateKwargs?: Record<string, unknown>; // chat template variables (--chat-template-kwargs)
  thinkBudget?: number;    // the thinking budget (−1 / absent: none; --reasoning-budget)
  budgetMessage?: string;  // text forced before </think> when a budget is spent (--reasoning-budget-message)
  maxTokens?: number;      // tokens a request may generate (absent: the rest of its context)
  seed?: number;           // requests sample with seed + their request number (absent: random)
  pooling?: Pooling;       // how /v1/embeddings pools a prompt's hidden states (--pooling; default last)
}

/** What the engine worker is started with (structured-cloned: plain data): ServeConfig less its `http`. */
export interface WorkerConfig { engine: EngineConfig; scheduler: SchedulerConfig; defaults: RequestDefaults }

/** The waiting requests allowed beyond the slots, and the prefill chunk, with their defaults filled in. */
export const queueOf = (s: SchedulerConfig) => s.queue ?? Math.max(16, 4 * s.slots);
export const chunkOf = (s: SchedulerConfig) => s.chunk ?? PREFILL_CHUNK;
