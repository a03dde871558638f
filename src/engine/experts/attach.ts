// attachExperts: put a loaded model's routed experts behind an ExpertStore (the MoE then gets them
// through it), sized by the RAM budget: detect the budget, plan it (budget.ts), print the plan to
// stderr, load the usage history and pin the hottest experts. Stateless; the store holds the state.
import type { Model } from "../model.ts";
import type { KvDtype } from "../../native/hb.ts";
import { fmtBytes } from "../../progress.ts";
import { kvBytesPerToken, kvRows, planBudget, runStateBytes, STAGE_BYTES } from "./budget.ts";
import { Learner } from "./learn.ts";
import { detectRam } from "./memory.ts";
import type { Policy } from "./slots.ts";
import { ExpertStore, type PrefetchMode } from "./store.ts";
import { usagePath } from "./usage.ts";

export interface ExpertOptions {
  /** cache slots per MoE layer (--expert-cache N); 0 / undefined = automatic from the budget */
  slots?: number;
  /** O_DIRECT reads with aligned slabs (buffered, with a warning, where unsupported) */
  direct?: boolean;
  /** experts as views into mapped files, pages touched by the I/O pool before compute */
  mmap?: boolean;
  /** the RAM budget in GiB (else MemAvailable + this process, or sysctl hw.memsize) */
  ramGb?: number;
  policy?: Policy;
  /** speculative prefetch: the next layer's previous routing, true/"on", false/"off", or "auto" (the default: on
   *  only while it would have covered ≥ half the misses); "pilot": a layer's router on its input, before its attention */
  prefetch?: boolean | PrefetchMode;
  /** the usage history: read at start (pins), written by save()/close() (default true) */
  learn?: boolean;
  /** where the usage lives (default: usage.ts usagePath) */
  usagePath?: string;
  /** max context per session, rows per batch and sessions: the KV and activation reserve */
  ctx?: number;
  rows?: number;
  sessions?: number;
  /** the sessions' MLA cache dtype (f16 / q8: a smaller reserve) */
  kvDtype?: KvDtype;
  /** whether sessions keep the main residual's rows (MTP drafting; default true: reserved) */
  hiddenRows?: boolean;
  /** more bytes reserved beside the sessions' KV (a server's host-memory prompt cache, --cache-ram; its tokenizer helpers) */
  extraBytes?: number;
  /** streaming buffers shared by the layers (default min(8, max(2, top-k))) */
  workingSlabs?: number;
  /** where the plan and warnings go (default stderr); quiet: no plan line */
  log?: (line: string) => void;
  quiet?: boolean;
}

const EXPERT = /^model\.layers\.\d+\.mlp\.experts\.\d+\./;

/** Bytes the eagerly loaded weights take in RAM (everything but routed experts; vectors, routers, FP8 as f32). */
export function residentBytes(m: Model): number {
  let n = 0;
  for (const name of m.store.names()) {
    if (EXPERT.test(name) || name.endsWith("_scale_inv")) continue;
    const t = m.store.get(name);
    n += t.shape.length === 1 || name.endsWith("mlp.gate.weight") || t.dtype === "F8_E4M3" ? 4 * t.numel : t.nbytes;
  }
  return n;
}

export function attachExperts(m: Model, o: ExpertOptions = {}): ExpertStore {
  const log = o.log ?? ((s: string) => process.stderr.write(s + "\n"));
  const K = m.cfg.num_experts_per_tok;
  const W = o.workingSlabs ?? Math.min(8, Math.max(2, K));
  const store = new ExpertStore(m, {
    slots: m.cfg.n_routed_experts, workingSlabs: W, direct: !!o.direct, mmap: !!o.mmap,
    policy: o.policy ?? "lru", prefetch: o.prefetch === true ? "on" : o.prefetch === false ? "off" : o.prefetch ?? "auto", log,
  });
  try {
    const learn = o.learn ?? true;
    const path = learn ? (o.usagePath ?? usagePath(m.dir)) : null;
    const fp = `E${m.cfg.n_routed_experts}:L${store.layers.map((L) => L.layer).join(",")}:B${store.maxDataBytes()}`;
    const learner = learn ? Learner.open(store, path, fp, log) : null;
    const ram = detectRam(o.ramGb);
    const ctx = Math.max(1, o.ctx ?? m.cfg.max_position_embeddings), rows = Math.max(1, o.rows ?? Math.min(ctx, 512));
    const sessions = Math.max(1, o.sessions ?? 1);
    const plan = planBudget({
      ram: ram.bytes, residentBytes: residentBytes(m), expertBytes: store.maxSlotBytes(),
      moeLayers: store.layers.length, slotRowBytes: store.layers.reduce((a, L) => a + L.slotBytes, 0), experts: m.cfg.n_routed_experts,
      kvBytes: sessions * kvRows(ctx) * kvBytesPerToken(m.cfg, o.kvDtype, o.hiddenRows ?? true) + (o.extraBytes ?? 0),
      activationBytes: runStateBytes(m.cfg, rows, kvRows(ctx)) /* RunState grows T by doubling */ + Math.min(STAGE_BYTES, rows * K * m.cfg.hidden_size * 4),
      workingSlabs: store.mmap ? 0 : W, slots: o.slots, historyTokens: learner?.tokens() ?? 0,
    });
    store.setSlots(plan.slots);
    store.plan = plan;
    store.learner = learner;
    const mode = store.mmap ? "mmap" : store.direct ? "O_DIRECT" : "buffered";
    if (!o.quiet) {
      log(`experts: RAM ${fmtBytes(plan.ram)} (${ram.source}), ${mode} reads, ${store.layers.length} MoE layers × ${m.cfg.n_routed_experts} experts of ${fmtBytes(store.maxSlotBytes())}`);
      log(`experts: resident ${fmtBytes(plan.residentBytes)}, pinned ${fmtBytes(plan.pinnedBytes)} (${plan.pinned}/layer), cache ${plan.slots} slots per layer${plan.auto ? " (auto)" : ""} = ${fmtBytes(plan.cacheBytes)}, working ${fmtBytes(plan.workingBytes)}, headroom ${fmtBytes(plan.headroom)}; projected peak ${fmtBytes(plan.peak)}`);
    }
    for (const w of plan.warnings) log(`experts: warning: ${w}`);
    if (learner && plan.pinned > 0) learner.pinAtStart(plan.pinned);
    return store;
  } catch (e) {
    store.close();
    throw e;
  }
}
