// The engine worker (a Bun Worker): loads the model and tokenizer (and warms the expert cache), owns the Scheduler (KV slots,
// queue) and runs its steps off the HTTP thread. Messages (protocol.ts) are handled between steps,
// so a cancel frees its slot within one step. Posts `ready` (or `fatal`), request events and stats.
// Grammars of constrained requests are compiled here (Scheduler → GrammarCache, an LRU by text); slot files
// (POST /slots/{id}) are saved and restored here too, on idle slots. Large prompts and tokenize calls go to the
// tokenizer's worker (tokenizer-link.ts) while the steps go on; a request's n choices of one prompt share one encoding.
import { basename } from "node:path";
import { loadModel, type Model } from "../model.ts";
import { loadTokenizer } from "../../model/tokenizer.ts";
import type { FromWorker, GenRequest, ToWorker } from "./protocol.ts";
import { chunkOf, queueOf, type WorkerConfig } from "./config.ts";
import { Scheduler, stepRows } from "./scheduler.ts";
import { promptIds, type Prepared } from "./prepare.ts";
import { tokenizeCall } from "./tokenize-call.ts";
import { helpersBytes, TokenizerLink } from "./tokenizer-link.ts";
import { slotCall } from "./slot-call.ts";
import type { TextCodec } from "../../model/tokenizer.ts";
import { attachExperts, warmExperts, type ExpertStore } from "../experts/index.ts";
import { openDevice } from "../../device/device.ts";
import { hb } from "../../native/hb.ts";
import { activePolicy, policyError } from "../quality.ts";

declare const self: Worker;

const STATS_MS = 250;
let sched: Scheduler | null = null;
let codec: TextCodec | null = null;
let vocab = 0;
let model: Model | null = null;
let slotSavePath: string | undefined;
let slotCtx = 0; // the slots' context: a restored file holds at most this many records
let store: ExpertStore | null = null;
let running = false;
let lastStats = 0;
let tok: TokenizerLink | null = null;
const tokenizing = new Map<number, { req: GenRequest; stop: boolean; held: boolean }>(); // submitted, their ids still being made

function post(ev: FromWorker): void {
  self.postMessage(ev);
}

function postStats(force: boolean): void {
  const now = performance.now();
  if (!sched || (!force && now - lastStats < STATS_MS)) return;
  lastStats = now;
  const x = store?.stats();
  const experts = x && { hitRate: x.hitRate, hits: x.hits, misses: x.misses, bytesRead: x.bytesRead, readGBs: x.readGBs, waitMsPerToken: x.waitMsPerToken,
    prefetchHits: x.prefetchHits, pilotHitRate: x.pilotHitRate };
  post({ t: "stats", stats: { ...sched.stats(), experts } });
}

/**
 * Run scheduler steps while there is work, yielding to the event loop after each one (a promise on
 * setImmediate: messages are delivered between steps; a callback chain of setImmediate starves them). A step that ran
 * nothing (every running job held by its client, a waiting one not yet let in: scheduler.ts) waits 20 ms instead.
 */
async function loop(): Promise<void> {
  if (running || !sched) return;
  running = true;
  try {
    while (sched.hasWork()) {
      const ran = sched.step();
      postStats(!sched.hasWork());
      await new Promise<void>((res) => (ran ? setImmediate(res) : setTimeout(res, 20)));
    }
  } finally {
    running = false;
  }
  // between requests: move pins towards the recent heat, and persist the usage history
  try { store?.repin(); store?.save(); } catch (e) { console.error(`experts: ${(e as Error).message}`); }
}

async function init({ engine: e, scheduler: sc, defaults: d }: WorkerConfig): Promise<void> {
  try {
    if (e.loadDelayMs) await Bun.sleep(e.loadDelayMs);
    const threads = e.threads ? hb().hb_init(e.threads) : hb().hb_nthreads();
    const m = loadModel(e.dir);
    model = m;
    slotSavePath = sc.slotSavePath;
    codec = loadTokenizer(e.dir, e.chatTemplate);
    vocab = m.cfg.vocab_size;
    const ctx = Math.max(2, sc.longCtx && sc.ctx ? sc.ctx : Math.min(sc.ctx ?? 4096, m.cfg.max_position_embeddings));
    slotCtx = ctx;
    const log = (s: string) => void process.stderr.write(s + "\n"); // plain: a worker's console.error is red on a TTY
    const small = (e.kvDtype ?? "f32") !== "f32";
    const queue = queueOf(sc), chunk = chunkOf(sc);
    const quality = activePolicy(e.quality), why = quality && policyError(quality, m.cfg.num_experts_per_tok); // (--experts-per-token, --router-top-p)
    if (why) throw new Error(why);
    store = attachExperts(m, { ...e.experts, ctx, rows: stepRows({ chunk, slots: sc.slots, draft: sc.draft }), sessions: sc.slots, kvDtype: e.kvDtype,
      hiddenRows: sc.draft?.kind === "mtp", extraBytes: (sc.cacheRam ?? 0) + helpersBytes(e.dir), log }); // (the slots record hidden rows only to draft with the MTP head; the tokenizer's helpers start after the plan)
    // an f16 / q8 cache runs on the CPU path only: the device chain's attention reads f32 rows
    if (small && (e.device === "vulkan" || e.device === "webgpu")) throw new Error(`--kv-cache-dtype ${e.kvDtype} runs on the CPU path only (--device cpu or auto)`);
    const dev = openDevice(m, small ? "cpu" : e.device ?? "auto", { layers: e.deviceLayers, kvBudgetRows: e.kvBudgetRows });
    log(`device: ${dev.chain?.api ?? "cpu"} (${dev.why})`);
    const forwardOpts = { exact: !!e.exact, ...(quality ? { quality } : {}), ...(dev.chain ? { executor: dev.chain } : {}) };
    sched = new Scheduler(m, codec, { slots: sc.slots, ctx, queue, chunk, attn: e.attn, draft: sc.draft, forward: forwardOpts,
      kvDtype: e.kvDtype, thinkBudget: d.thinkBudget, budgetMessage: d.budgetMessage, cacheRam: sc.cacheRam, schedulingPolicy: sc.schedulingPolicy,
      maxTokens: d.maxTokens, seed: d.seed }, post);
    if (sched.drafter) log(sched.drafter.describe());
    tok = new TokenizerLink({ dir: e.dir, chatTemplate: e.chatTemplate, vocab: m.cfg.vocab_size, ctx }, log);
    // before `ready` (/health 503 "loading" meanwhile): the experts the cache will hold, so the first requests read none
    const fits = store.plan?.fits ?? false;
    warmExperts(store, { warm: e.warmup ?? fits, why: e.warmup === false ? "--no-warmup" : "the cache does not fit the RAM budget", log });
    post({ t: "ready", info: { model: e.alias ?? (basename(e.dir.replace(/\/+$/, "")) || "model"), dir: e.dir, slots: sc.slots, queue, ctx, vocab: m.cfg.vocab_size, hidden: m.cfg.hidden_size, threads, chatTemplate: codec.templateText, sampling: m.cfg.sampling, quality } });
    postStats(true);
  } catch (e) {
    post({ t: "fatal", message: e instanceof Error ? e.message : String(e) });
  }
}

self.onmessage = (e: MessageEvent<ToWorker>) => {
  const msg = e.data;
  if (msg.t === "init") return void init(msg.config);
  if (msg.t === "call") {
    const c = msg.call, rid = msg.rid;
    /** the reply of what `value` computes, or its error */
    const answer = (value: () => unknown) => {
      try { post({ t: "reply", rid, ok: true, value: value() }); }
      catch (e) { post({ t: "reply", rid, ok: false, detail: e instanceof Error ? e.message : String(e) }); }
    };
    if (!codec || !sched || !model) return post({ t: "reply", rid, ok: false, detail: "the model is not loaded" });
    if (c.op === "slot") return answer(() => {
      const v = slotCall(c, model!, sched!.slots.map((s) => ({ sess: s.sess, busy: s.job !== null })), slotSavePath, slotCtx);
      postStats(true); // /slots shows the slot's new length by the time the reply arrives
      return v;
    });
    if (!tok?.usable) return answer(() => tokenizeCall(c, codec!));
    return tok.call(rid, c, (r) => (r ? post({ t: "reply", rid, ...r }) : answer(() => tokenizeCall(c, codec!)))); // (null: the helpers died)
  }
  if (!sched) {
    if (msg.t === "submit") post({ t: "error", rid: msg.rid, code: "INTERNAL", detail: "the model is not loaded" });
    return;
  }
  try {
    const waiting = tokenizing.get(msg.rid);
    if (msg.t === "submit") submit(msg.rid, msg.req);
    else if (msg.t === "cancel" && waiting) { tokenizing.delete(msg.rid); post({ t: "error", rid: msg.rid, code: "CANCELLED", detail: "" }); }
    else if (msg.t === "cancel") sched.cancel(msg.rid);
    else if (msg.t === "stop" && waiting) waiting.stop = true; // (stopped once queued, as a queued job is)
    else if (msg.t === "stop") sched.stop(msg.rid);
    else if (msg.t === "hold" && waiting) waiting.held = msg.on;
    else if (msg.t === "hold") sched.hold(msg.rid, msg.on);
  } catch (err) {
    if ("rid" in msg) post({ t: "error", rid: msg.rid, code: "INTERNAL", detail: err instanceof Error ? err.message : String(err) });
  }
  postStats(true);
  void loop();
};

/** The prompt ids of a prompt's choices (GenRequest.share: n choices tokenize it once, not n times; 16 choices of a
 *  2 MB prompt kept the helper busy for 16 tokenizations). `p` null while the helper makes them; `then`: the choices
 *  waiting for them. */
interface Shared { p: Prepared | null; then: ((p: Prepared) => void)[] }
let last: { rid: number; ids: Shared } | null = null; // the latest submission's

function submit(rid: number, req: GenRequest): void {
  const from = req.share !== undefined && last?.rid === req.share ? last.ids : null, ids: Shared = from ?? { p: null, then: [] };
  last = { rid, ids };
  if (from) { // a later choice of the prompt just submitted: its ids (or its refusal), now or once made
    tokenizing.set(rid, { req, stop: false, held: false });
    if (from.p) made(rid, req, from.p);
    else from.then.push((p) => made(rid, req, p));
    return;
  }
  const done = (p: Prepared) => { ids.p = p; for (const f of ids.then.splice(0)) f(p); };
  if (!tok?.wants(req)) {
    done(sched!.submit(rid, req));
    return;
  }
  // too large to tokenize between two steps: by the tokenizer's helper, then submitted with its ids. One the queue has
  // no room for (those being tokenized counted in) is refused first, so the helper's backlog stays bounded.
  const full = sched!.overloaded(req, tokenizing.size);
  if (full) {
    post({ t: "error", rid, code: "OVERLOADED", detail: full });
    done({ ok: false, code: "OVERLOADED", detail: full });
    return;
  }
  tokenizing.set(rid, { req, stop: false, held: false });
  // (the helper died: made here, as small prompts are)
  tok.prompt(rid, req, (p) => {
    done(made(rid, req, p ?? promptIds(req.prompt, codec!, vocab, slotCtx, req.truncate))); // (and the choices waiting)
    postStats(true);
    void loop();
  });
}

/** Submit rid, whose ids were made meanwhile (unless it was cancelled meanwhile); returns them. (Stats and the loop:
 *  the caller's, once for all the choices it submits.) */
function made(rid: number, req: GenRequest, p: Prepared): Prepared {
  const w = tokenizing.get(rid);
  if (!w || !sched) return p;
  tokenizing.delete(rid);
  try {
    sched.submitPrepared(rid, req, p);
    if (w.stop) sched.stop(rid);
    if (w.held) sched.hold(rid, true);
  } catch (err) { post({ t: "error", rid, code: "INTERNAL", detail: err instanceof Error ? err.message : String(err) }); }
  return p;
}
