// Continuous batching over N KV slots, inside the engine worker. Owns the slots (each a Session: KV cache + the token
// history its rows hold, tokens.length === kv.len), the queue of waiting jobs (by priority, then arrival), the running
// jobs and one RunState. `step()` admits waiting jobs into free slots (prefix reuse, the prompt cache, preemption),
// then runs ONE forward over a ragged batch — a 1-row segment per decoding job (+ its drafts) and up to `chunk`
// prefill rows — and samples each job's rows through its pipeline (pipeline.ts). The rules: Scheduler's doc comment.
import { forward, type ForwardOpts } from "../forward.ts";
import { lcp, Session } from "../session.ts";
import { newKV, type Model } from "../model.ts";
import type { Draft } from "../speculative.ts";
import { GrammarError } from "../grammar/index.ts";
import { RunState } from "../state.ts";
import { PromptCache } from "../prompt-cache.ts";
import { Pooler } from "../pooling.ts";
import { kvRows } from "../experts/budget.ts";
import type { Segment } from "../batch.ts";
import type { KvDtype } from "../../native/hb.ts";
import type { TextCodec } from "../../model/tokenizer.ts";
import type { ThinkIds } from "./detok.ts";
import { logprobsOf, promptIds, type Prepared } from "./prepare.ts";
import { Drafter, type DraftOptions, NO_DRAFT } from "./drafter.ts";
import { type Job, JobMaker, promptLpK, type Slot, toFeed } from "./job.ts";
import type { FinishReason, FromWorker, GenRequest, SlotInfo, Stats } from "./protocol.ts";
import type { SchedulingPolicy } from "./config.ts";

/** Rows a step may hold: the prefill chunk, and each slot's pending token with its drafts. */
export const stepRows = (o: { chunk: number; slots: number; draft?: DraftOptions }) => o.chunk + o.slots * (1 + (o.draft?.len ?? 0));

export interface SchedOptions {
  slots: number; ctx: number; queue: number; chunk: number; attn?: "auto" | "naive" | "absorbed";
  draft?: DraftOptions;
  forward?: ForwardOpts; // exact mode, the device chain as layer executor
  kvDtype?: KvDtype;     // the slots' MLA caches: f32 (default), IEEE halves or int8 blocks
  thinkBudget?: number;  // the thinking budget of requests that name none (−1 / absent: none)
  budgetMessage?: string; // text forced before </think> when a budget is spent (llama-server's --reasoning-budget-message)
  cacheRam?: number;     // bytes of the host-memory prompt cache (0 / absent: none)
  schedulingPolicy?: SchedulingPolicy; // priority: a more urgent waiting job takes the slot of the least urgent running one (see above)
  maxTokens?: number;    // max tokens of requests that name none (absent: the rest of the context)
  holdGraceMs?: number;  // how long a held job keeps its slot while others wait (default HOLD_GRACE_MS)
  seed?: number;         // requests without a seed: seed + rid (absent: random)
}

const PREALLOC = 8192;
/** ms a job whose client is not reading keeps its slot while another job waits for one: such a client costs at most
 *  one prefill of its history again a second, what sending a new request a second costs */
export const HOLD_GRACE_MS = 1000;
/** prompt tokens another slot must hold beyond this slot's own prefix for its rows to be copied (under this, the
 *  MTP head's rebuild of the copied rows could cost more than prefilling them) */
const COPY_MIN = 16;
const utf8 = new TextEncoder();
/** entries (a prompt token's logprob or one of its alternatives) an echoed prompt's logprobs or vLLM's prompt_logprobs
 *  may hold: all are made in the engine's worker, copied to the HTTP side and sent in one JSON body, ~1 KB of the
 *  server's memory each at their peak (a 28k-token prompt with 20 alternatives: RSS +593 MiB); past it the request is
 *  refused before its prefill. 2^17: at 20 alternatives 6,241 prompt tokens, at 5 21,845, at 0 a 128k context's. */
export const MAX_PROMPT_LOGPROB_ENTRIES = 1 << 17;

/**
 * The rules of a step, in the order they apply:
 * - Prefix reuse: a job admitted to a slot truncates it past the common prefix and prefills only the suffix. The
 *   prompt cache (engine/prompt-cache.ts, --cache-ram) parks a history about to be overwritten in host memory, and a
 *   prompt that starts with it takes its rows back when that beats every slot's prefix.
 * - Sampling: each job's logits go through its TokenPipeline (penalties, grammar, min_tokens, the thinking budget,
 *   the sampler, stops). A grammar that allows nothing, or is done, finishes the job with "stop"; logprobs describe the
 *   processed distribution (prepare.ts logprobsOf). A job with a grammar that may think first is constrained from the
 *   token after </think>, as vLLM's reasoning parsers and llama.cpp do.
 * - Echo: a job asking for its prompt gets a `prompt` event when its prefill ends; with logprobs its prefill chunks get
 *   logits on every row (no prefix reuse), and max_tokens 0 ends it there.
 * - Speculative decoding (drafter.ts): a decoding job may append drafts; its segment gets logits on every row, sampled
 *   in order as if decoded one by one, each draft kept while the sampled token equals it (greedy: the argmax; sampled:
 *   engine/speculative.ts's rejection rule); KV rows past the kept ones are dropped. With MTP drafts the slot's MTP
 *   cache absorbs the main model's hidden rows after every prefill chunk and at each draft.
 * - Embeddings (engine/pooling.ts): a job with `embed` pools its prompt rows' final hidden states chunk by chunk (mean
 *   and cls need every row: no prefix reuse) and ends after its prefill with an `embedding` event.
 * - Preemption (schedulingPolicy "priority", vLLM's): with every slot busy, a waiting job of strictly lower `priority`
 *   than the least urgent running one (the latest admitted among equals) takes its slot; that job goes back to the
 *   queue ahead of its class. One in its prefill starts again; one decoding keeps its state and on readmission
 *   prefills its history again, then goes on with its pending token: the same tokens as if never preempted.
 * - Holds (server/out-flow.ts: a client not taking its stream's output): a held job is not decoded (its prefill goes
 *   on); held for holdGraceMs while another job waits and no slot is free, it is preempted as above (whatever the
 *   policy), and waits in the queue until it is let go on. Its output is the same as if never held.
 */
export class Scheduler {
  readonly slots: Slot[];
  private queue: Job[] = [];
  private running: Job[] = [];       // in admission order
  private jobs = new Map<number, Job>();
  private st: RunState;
  private maker: JobMaker;
  private think: ThinkIds;
  private clock = 0;
  private preemptions = 0;
  readonly drafter: Drafter | null = null; // speculative decoding (null: off)
  readonly cache: PromptCache | null;       // parked histories (null: --cache-ram off)
  private winStart = performance.now();
  private winTokens = 0;
  private tokS = 0;
  constructor(private m: Model, private codec: TextCodec, private o: SchedOptions, private emit: (ev: FromWorker) => void) {
    // each slot's cache sized up front for the whole context (the RAM plan reserves it; the OS commits the pages
    // as rows are written), so no conversation ever stalls the batch while every layer of its cache is copied
    // into a larger one — at GLM-5's width a doubling past 8192 rows copies ~1.5 GB. Where the address space
    // cannot be had at once, slots start at PREALLOC rows and grow. The step scratch grows on demand (no copy).
    const pre = Math.min(kvRows(o.ctx), PREALLOC);
    this.st = new RunState(m.cfg, stepRows(o), pre);
    // MTP forwards of a slot run with the server's fixed attention form, so its drafts do not depend on the batch
    const sessOpts = { ...o.forward, attn: o.attn ?? "absorbed" };
    const slot = (id: number): Slot => {
      try {
        const sess = new Session(m, sessOpts, { st: this.st, kv: newKV(m, kvRows(o.ctx), o.kvDtype) });
        sess.mtpKV?.reserve(kvRows(o.ctx)); // its MTP layer's cache too (one layer: drafting with --draft mtp)
        return { id, sess, job: null, used: 0, embedded: false };
      } catch { return { id, sess: new Session(m, sessOpts, { st: this.st, kv: newKV(m, pre, o.kvDtype) }), job: null, used: 0, embedded: false }; }
    };
    this.slots = Array.from({ length: o.slots }, (_, id) => slot(id));
    this.cache = o.cacheRam ? new PromptCache(o.cacheRam) : null;
    if (o.draft && o.draft.len > 0) this.drafter = new Drafter(m, o.draft, (t) => codec.encode(t));
    this.maker = new JobMaker(m, codec, o, this.drafter);
    this.think = this.maker.think;
  }

  /** whether a step would run anything or admit anyone (held jobs wait for their clients) */
  hasWork(): boolean {
    return this.running.some((j) => !j.held || j.state !== "decode") || this.queue.some((j) => !j.held);
  }

  /** Pause (on) or resume (off) decoding rid: its client is not taking its output (see the class comment). */
  hold(rid: number, on: boolean): void {
    const j = this.jobs.get(rid);
    if (j && on !== (j.held > 0)) j.held = on ? performance.now() : 0;
  }

  /** Encode req's prompt and submit it; returns its ids, or the refusal (a full queue: before they were made) */
  submit(rid: number, req: GenRequest): Prepared {
    const full = this.overloaded(req); // (before the prompt is encoded on this thread: a full queue refuses at once)
    if (full) {
      this.emit({ t: "error", rid, code: "OVERLOADED", detail: full });
      return { ok: false, code: "OVERLOADED", detail: full };
    }
    const p = promptIds(req.prompt, this.codec, this.m.cfg.vocab_size, this.o.ctx, req.truncate);
    this.submitPrepared(rid, req, p);
    return p;
  }

  /** Why the queue has no room for req (OVERLOADED's detail; `coming`: requests about to join it), or null. */
  overloaded(req: GenRequest, coming = 0): string | null {
    if (req.slot !== "auto" || req.joined) return null;
    const waiting = this.queue.length + coming;
    return waiting >= this.o.queue + this.slots.filter((s) => !s.job).length ? `all ${this.slots.length} slots busy and ${waiting} requests waiting` : null;
  }

  /** submit with the prompt's ids already made (prepare.ts promptIds: large prompts, by the tokenizer's worker) */
  submitPrepared(rid: number, req: GenRequest, p: Prepared): void {
    if (!p.ok) return this.emit({ t: "error", rid, code: p.code, detail: p.detail });
    if (req.max_tokens_field && (req.max_tokens ?? 0) > this.o.ctx - p.ids.length) // (vLLM's 400: the prompt and max_tokens pass the context)
      return this.emit({ t: "error", rid, code: "MAX_TOKENS_EXCEEDED", detail: `${p.ids.length} ${this.o.ctx} ${req.max_tokens} ${req.max_tokens_field}` });
    const k = promptLpK(req), plp = k === null ? 0 : p.ids.length * (1 + k);
    if (plp > MAX_PROMPT_LOGPROB_ENTRIES) {
      const field = req.prompt_logprobs !== undefined ? "prompt_logprobs" : "logprobs";
      return this.emit({ t: "error", rid, code: "BAD_REQUEST", detail: `${field} ${p.ids.length} prompt tokens with ${k} alternatives `
        + `each are ${plp} entries, past the ${MAX_PROMPT_LOGPROB_ENTRIES} one reply may hold: ask for fewer alternatives or a shorter prompt` });
    }
    if (req.slot !== "auto") {
      const s = this.slots[req.slot];
      if (!s) return this.emit({ t: "error", rid, code: "BAD_REQUEST", detail: `slot ${req.slot} is outside [0, ${this.slots.length})` });
      if (s.job) return this.emit({ t: "error", rid, code: "SLOT_BUSY", detail: `slot ${req.slot} is busy` });
    } else {
      const full = this.overloaded(req);
      if (full) return this.emit({ t: "error", rid, code: "OVERLOADED", detail: full });
    }
    const j = this.maker.make(rid, req, p.ids);
    if ("detail" in j) return this.emit({ t: "error", rid, code: "BAD_REQUEST", detail: j.detail });
    this.jobs.set(rid, j);
    this.emit({ t: "queued", rid, prompt_tokens: p.ids.length, ...(req.return_ids ? { ids: p.ids } : {}) });
    if (req.slot !== "auto") this.admit(j, this.slots[req.slot]);
    else this.enqueue(j, false);
  }

  /** Into the queue after every waiting job of a lower (more urgent) priority value, and after (or, `ahead`: before)
   *  those of its own. */
  private enqueue(j: Job, ahead: boolean): void {
    const p = j.req.priority ?? 0, at = this.queue.findIndex((q) => (q.req.priority ?? 0) > p || (ahead && (q.req.priority ?? 0) === p));
    this.queue.splice(at < 0 ? this.queue.length : at, 0, j);
  }

  cancel(rid: number): void {
    const j = this.jobs.get(rid);
    if (!j) return;
    this.release(j);
    this.emit({ t: "error", rid, code: "CANCELLED", detail: "" });
  }

  stop(rid: number): void {
    const j = this.jobs.get(rid);
    if (j) this.finish(j, "stopped");
  }

  /** Admit what fits, then one forward over the ragged batch and one sampling round; false when there was nothing to
   *  run (every running job held, a waiting one not yet let in). */
  step(): boolean {
    this.admitQueued();
    const segs: Segment[] = [], ids: number[] = [], who: Job[] = [], drafts: Draft[] = [];
    for (const j of this.running) {
      if (j.state !== "decode" || j.held) continue;
      const kv = j.slot!.sess.kv, d = j.drafts ? this.drafter!.propose(j.drafts, j.slot!.sess, j.next, j.p.inForce, j.p.limit - j.p.emitted - 1) : NO_DRAFT;
      segs.push({ kv, r0: ids.length, n: 1 + d.tokens.length, pos0: kv.len, allLogits: d.tokens.length > 0 });
      ids.push(j.next, ...d.tokens);
      who.push(j);
      drafts.push(d);
    }
    let budget = this.o.chunk;
    for (const j of this.running) {
      if (j.state !== "prefill" || budget <= 0) continue;
      const src = toFeed(j), n = Math.min(budget, src.length - j.fed), sampled = !j.resume && j.fed + n === src.length && j.p.limit > 0;
      // logits: every row's for prompt logprobs, else only the last chunk's last row, and only if it is sampled (a
      // resumed history samples nothing: its next token is pending)
      const plp = j.plp !== null && !j.resume;
      segs.push({ kv: j.slot!.sess.kv, r0: ids.length, n, pos0: j.slot!.sess.kv.len, allLogits: plp, noLogits: !plp && !sampled });
      for (let i = 0; i < n; i++) ids.push(src[j.fed + i]);
      who.push(j);
      drafts.push(NO_DRAFT);
      budget -= n;
    }
    if (segs.length === 0) return false;
    const V = this.m.cfg.vocab_size, D = this.m.cfg.hidden_size, mtp = this.o.draft?.kind === "mtp";
    try { // every row's hidden state for the MTP head and pooling, else the last layer's FFN only where sampled
      forward(this.m, this.st, segs, ids, { ...this.o.forward, logits: "last", hidden: mtp || who.some((j) => j.pool), attn: this.o.attn ?? "absorbed" });
    } catch (e) {
      for (const j of who) this.fail(j, e);
      return true;
    }
    if (mtp) segs.forEach((g, k) => who[k].slot!.sess.record(this.st.x.subarray(g.r0 * D), g.pos0, g.n)); // MTP input
    const absorb: Job[] = [];
    let row = 0; // logits row of the segment's first logits
    who.forEach((j, k) => {
      const g = segs[k], d = drafts[k].tokens, at = row, sess = j.slot!.sess;
      row += g.noLogits ? 0 : g.allLogits ? g.n : 1;
      let first = at; // the row sampled first
      if (j.state === "prefill") {
        if (j.plp && !j.resume) this.promptLogprobs(j, at, g.n);
        j.pool?.add(this.st.x.subarray(g.r0 * D, (g.r0 + g.n) * D), g.pos0, g.n);
        for (let r = 0; r < g.n; r++) sess.tokens.push(ids[g.r0 + r]);
        j.fed += g.n;
        if (mtp) absorb.push(j);
        if (j.fed < toFeed(j).length) return;
        if (j.resume) { j.resume = null; j.state = "decode"; return; } // back where it was: its pending token next
        j.state = "decode";
        j.tFirst = performance.now();
        first = at + (g.allLogits ? g.n - 1 : 0);
        if (j.req.echo || j.req.prompt_logprobs !== undefined) this.echo(j);
        if (j.pool) this.emit({ t: "embedding", rid: j.rid, data: j.pool.result(j.req.embed!.norm) });
        if (j.p.limit <= 0) return this.finish(j, "length");
      } else sess.tokens.push(j.next); // row 0: the pending token
      let kept = 0;
      try {
        // row i follows the pending token and drafts 0..i-1: sampled in turn while the drafts hold
        while (this.sample(j, this.st.logits.subarray((first + kept) * V, (first + kept + 1) * V), kept < d.length ? d[kept] : -1, drafts[k].q?.[kept] ?? null))
          sess.tokens.push(d[kept++]);
      } catch (e) {
        this.fail(j, e); // this request only: the others in the batch go on
        return;
      }
      if (d.length > 0) {
        sess.kv.truncate(g.pos0 + 1 + kept); // the rows of rejected drafts go (their MTP rows at the next sync)
        this.drafter!.verified(j.drafts!, kept, d.length);
      }
    });
    // after every row is sampled (MTP forwards reuse the step's RunState): the prompt rows' MTP pairs
    for (const j of absorb) {
      try { j.slot?.sess.mtpAbsorb(); } catch (e) { this.fail(j, e); }
    }
    return true;
  }

  /** How j's logprobs name tokens: their text, or `token_id:ID` (vLLM's return_tokens_as_token_ids) */
  private lpText(j: Job): (t: number) => string {
    return j.req.token_ids_as_text ? (t) => `token_id:${t}` : (t) => this.codec.decode([t]);
  }

  /** Prompt logprobs of a prefill chunk of j (n rows from logits row `at`): row r predicts prompt token fed + r + 1. */
  private promptLogprobs(j: Job, at: number, n: number): void {
    const V = this.m.cfg.vocab_size, k = promptLpK(j.req) ?? 0, text = this.lpText(j);
    if (j.fed === 0) j.plp!.push({ id: j.ids[0], tt: text(j.ids[0]), lp: null, top: null });
    for (let r = 0; r < n && j.fed + r + 1 < j.ids.length; r++) {
      const id = j.ids[j.fed + r + 1], e = logprobsOf(this.st.logits.subarray((at + r) * V, (at + r + 1) * V), id, k, text);
      j.plp!.push({ id, tt: e.tt, lp: e.lp, top: e.top, rank: e.rank });
    }
  }

  /** The prompt back to the client (echo; or only its logprobs for prompt_logprobs), once its prefill is done. */
  private echo(j: Job): void {
    const p = j.req.prompt;
    this.emit({ t: "prompt", rid: j.rid, text: p.kind === "text" ? p.text : this.codec.decode(j.ids), toks: j.plp, echo: !!j.req.echo });
  }

  /** Sample j's next token from one row of logits (its pipeline: penalties, grammar, budgets, the draw, the detokenizer);
   *  with `draft` ≥ 0 the row verifies that draft token. Emits the token; true when it equals the draft and j goes on. */
  private sample(j: Job, logits: Float32Array, draft = -1, q: Float64Array | null = null): boolean {
    const r = j.p.next(logits, draft, q);
    if (!r.piece) return (this.finish(j, r.end ?? "stop"), false); // a stop id, or the rules left no token
    const id = r.id, d = r.piece;
    const lp = j.req.logprobs === undefined ? undefined : logprobsOf(logits, id, j.req.logprobs, this.lpText(j));
    j.tLast = performance.now();
    this.winTokens++;
    this.emit({ t: "tok", rid: j.rid, id, text: d.text, bytes: d.bytes, ...(d.mark ? { mark: d.mark } : {}), ...(lp ?? {}) });
    if (r.end) return (this.finish(j, r.end), false);
    j.next = id;
    return id === draft;
  }

  private admitQueued(): void {
    const later: Job[] = [];
    while (this.queue.length > 0) {
      if (this.queue[0].held) { later.push(this.queue.shift()!); continue; } // its client is not reading: it waits
      let free = this.slots.filter((s) => !s.job);
      if (free.length === 0) {
        const v = this.awaitsDonor(this.queue[0]) ? null
          : this.heldVictim() ?? (this.o.schedulingPolicy === "priority" ? this.victimFor(this.queue[0]) : null);
        if (!v) break;
        free = [v.slot!];
        const j = this.queue.shift()!; // (before its victim goes back into the queue: a held one of its class goes ahead)
        this.preempt(v);
        this.admit(j, free[0]);
        continue;
      }
      const j = this.queue.shift()!;
      if (this.awaitsDonor(j)) { later.push(j); continue; }
      // prefer the free slot sharing the longest prefix, then the least recently used
      let best = free[0], bestL = -1;
      for (const s of free) {
        const l = lcp(s.sess.tokens, toFeed(j));
        if (l > bestL || (l === bestL && s.used < best.used)) { best = s; bestL = l; }
      }
      this.admit(j, best);
    }
    this.queue.unshift(...later);
  }

  /** The running job j may take the slot of: the least urgent (highest priority value, then the latest admitted),
   *  if strictly less urgent than j (equals never swap: no ping-pong), on a slot of the pool (not one asked for). */
  private victimFor(j: Job): Job | null {
    let v: Job | null = null;
    for (const r of this.running)
      if (r.req.slot === "auto" && (!v || (r.req.priority ?? 0) >= (v.req.priority ?? 0))) v = r;
    return v && (v.req.priority ?? 0) > (j.req.priority ?? 0) ? v : null;
  }

  /** The decoding job held longest, if held at least holdGraceMs, on a slot of the pool (a waiting job may take it). */
  private heldVictim(): Job | null {
    const before = performance.now() - (this.o.holdGraceMs ?? HOLD_GRACE_MS);
    let v: Job | null = null;
    for (const r of this.running)
      if (r.held && r.held <= before && r.state === "decode" && r.req.slot === "auto" && (!v || r.held < v.held)) v = r;
    return v;
  }

  /** Send running job v back to the queue, ahead of its priority class (see the header); its slot is free. */
  private preempt(v: Job): void {
    const s = v.slot!;
    this.running.splice(this.running.indexOf(v), 1);
    s.job = null; s.used = ++this.clock; v.slot = null;
    if (v.state === "decode") v.resume = s.sess.tokens.slice(); // (its pending token v.next is not in it)
    else if (!v.resume) { // its prompt's prefill starts again (admit: from the prefix a slot still holds, if it may)
      if (v.plp) v.plp = [];
      if (v.pool) v.pool = new Pooler(this.m, v.pool.pooling, v.ids.length);
    }
    v.state = "queued";
    this.preemptions++;
    this.enqueue(v, true);
  }

  /** Whether a job being prefilled will hold COPY_MIN more of j's prompt than any slot holds now: j then waits for
   *  its rows (copied at admission) rather than prefilling them beside it (n choices of a prompt, a shared system
   *  prompt arriving in a burst: one prefill instead of several splitting the step's prefill budget). */
  private awaitsDonor(j: Job): boolean {
    if (this.everyRow(j)) return false;
    const src = toFeed(j), lim = src.length - 1;
    let have = 0, soon = 0;
    for (const s of this.slots) have = Math.max(have, Math.min(lcp(s.sess.tokens, src), lim));
    have = Math.max(have, this.cache?.best(src, lim)?.n ?? 0);
    for (const r of this.running) if (r.state === "prefill") soon = Math.max(soon, Math.min(lcp(toFeed(r), src), lim));
    return soon - have >= COPY_MIN;
  }

  /** Whether j needs every prompt row computed (prompt logprobs, mean / cls pooling): no prefix reuse then. */
  private everyRow(j: Job): boolean {
    return !j.resume && (j.plp !== null || !!j.pool?.needsAll);
  }

  private admit(j: Job, s: Slot): void {
    // the last prompt token is always fed (its logits start decoding, its row is last-token pooling's)
    const src = toFeed(j), lim = src.length - 1, every = this.everyRow(j);
    let reuse = every ? 0 : Math.min(lcp(s.sess.tokens, src), lim);
    // another slot (idle, or busy: its rows so far) or a parked history holding a longer prefix of the prompt: its
    // rows are copied (the same bits a prefill would write: the kernels are batch-invariant and the attention form fixed)
    let donor: Slot | null = null, parked: ReturnType<PromptCache["best"]> = null, best = reuse + COPY_MIN - 1;
    if (!every) {
      for (const d of this.slots) {
        const l = d === s ? 0 : Math.min(lcp(d.sess.tokens, src), lim);
        if (l > best) { best = l; donor = d; }
      }
      const c = this.cache?.best(src, lim) ?? null;
      if (c && c.n > best) { best = c.n; parked = c; donor = null; }
    }
    // the rows this slot loses, when there are enough of them, are parked first (that conversation may come back)
    if (this.cache && !s.embedded && s.sess.tokens.length - (donor || parked ? 0 : reuse) >= COPY_MIN) this.cache.park(s.sess);
    if (donor) { s.sess.copyPrefix(donor.sess, best); reuse = best; }
    else if (parked) { this.cache!.restore(s.sess, parked.rows, parked.n); reuse = parked.n; }
    s.sess.truncate(reuse);
    s.job = j;
    s.used = ++this.clock;
    s.embedded = j.pool !== null;
    j.slot = s;
    j.fed = reuse;
    j.state = "prefill";
    this.running.push(j);
    if (j.resume) return; // (readmitted: accepted long ago)
    j.cached = reuse;
    j.tAdmit = performance.now();
    const think = j.ids[j.ids.length - 1] === this.think.open;
    this.emit({ t: "accept", rid: j.rid, slot: s.id, prompt_tokens: j.ids.length, cached_tokens: reuse, think, thinking: j.p.thinking });
  }

  private finish(j: Job, reason: FinishReason): void {
    const detok = j.p.detok, emitted = j.p.emitted;
    let { text, bytes } = detok.finish();
    if (j.req.include_stop && detok.stopText !== null) { // the matched stop string ends the text
      text += detok.stopText;
      bytes = Buffer.concat([bytes, utf8.encode(detok.stopText)]);
    }
    const tokS = emitted >= 2 && j.tLast > j.tFirst ? (emitted - 1) / ((j.tLast - j.tFirst) / 1000) : 0;
    const prompt_ms = j.tAdmit ? (j.tFirst || performance.now()) - j.tAdmit : 0, predicted_ms = emitted ? j.tLast - j.tFirst : 0;
    this.release(j);
    const stop_text = detok.stopText;
    this.emit({ t: "done", rid: j.rid, reason, text, bytes, emitted, prompt_tokens: j.ids.length, cached_tokens: j.cached, decode_tok_s: tokS, prompt_ms, predicted_ms,
      ...(stop_text !== null ? { stop_text } : {}) });
  }

  private fail(j: Job, e: unknown): void {
    const s = j.slot;
    this.release(j);
    if (s) { s.sess.truncate(0); s.sess.kv.truncate(0); } // its rows are in an unknown state
    // a grammar too ambiguous to follow (its stack or work bound, engine/grammar/limits.ts) is the request's own
    if (e instanceof GrammarError && j.req.grammar) return this.emit({ t: "error", rid: j.rid, code: "BAD_REQUEST", detail: `${j.req.grammar.field} ${e.message}` });
    this.emit({ t: "error", rid: j.rid, code: "INTERNAL", detail: e instanceof Error ? e.message : String(e) });
  }

  private release(j: Job): void {
    this.jobs.delete(j.rid);
    const qi = this.queue.indexOf(j);
    if (qi >= 0) this.queue.splice(qi, 1);
    const ri = this.running.indexOf(j);
    if (ri >= 0) this.running.splice(ri, 1);
    if (j.slot) { j.slot.job = null; j.slot.used = ++this.clock; j.slot = null; }
  }

  stats(): Stats {
    const now = performance.now();
    if (now - this.winStart >= 1000) {
      this.tokS = this.winTokens / ((now - this.winStart) / 1000);
      this.winStart = now;
      this.winTokens = 0;
    } else if (!this.hasWork()) this.tokS = 0;
    const slots: SlotInfo[] = this.slots.map((s) => {
      const j = s.job;
      const base: SlotInfo = { id: s.id, state: j ? (j.state === "decode" ? "decode" : "prefill") : "idle", tokens: s.sess.kv.len };
      return j ? { ...base, rid: j.rid, prompt_tokens: j.ids.length, cached_tokens: j.cached, emitted: j.p.emitted } : base;
    });
    const c = this.cache;
    const held = this.running.filter((j) => j.held).length + this.queue.filter((j) => j.held).length;
    return { busy: this.running.length, queue: this.queue.length, decode_tok_s: this.tokS, drafted: this.drafter?.drafted ?? 0, accepted: this.drafter?.accepted ?? 0, slots, preemptions: this.preemptions, held,
      ...(c ? { promptCache: { bytes: c.bytes, budget: c.budget, entries: c.size, hits: c.hits, evicted: c.evicted } } : {}) };
  }
}
