// The engine worker's handle on the tokenizer's workers (tokenizer-worker.ts): prompts of more than ASYNC_PROMPT_BYTES
// and every tokenize / detokenize / template call go there, answered by callback; smaller prompts stay on the engine's
// thread (no message round trip for them). Two helpers: one for what is at most LARGE_PROMPT_BYTES, one for what is
// larger, so that a prompt of megabytes (seconds of encoding) never holds the smaller ones queued behind it. Until a
// helper is up, or if it cannot start, its work goes to the other, or (neither up) the caller does it itself. State:
// the helpers, whether each is up, the callbacks waiting on each.
import type { Call, GenRequest } from "./protocol.ts";
import type { Prepared } from "./prepare.ts";
import type { FromTokenizer, ToTokenizer } from "./tokenizer-worker.ts";
import { workerSpec } from "./worker-spec.ts";
import { statSync } from "node:fs";
import { join } from "node:path";
import { MiB } from "../experts/budget.ts";

/** prompts (their JSON) above this many bytes are tokenized off the engine's thread: 4 KiB costs it ~1-3 ms of
 *  encoding (64 KiB, the bound before: ~50-100 ms, every stream stalled meanwhile) */
export const ASYNC_PROMPT_BYTES = 4 * 1024;
/** prompts and calls above this many bytes go to the second helper (up to 2.3 MB at a 128k context: ~2 s) */
export const LARGE_PROMPT_BYTES = 64 * 1024;

/** RAM the two helpers take, for the expert cache's plan (made before they start): each a Bun Worker and its copy of the
 *  tokenizer. RSS measured 0.5 s after both were up and had encoded a prompt (their JSON parse's garbage not yet
 *  collected: the peak; test/tokenizer-helpers.test.ts): +50-52 MiB for a tiny preset's 24 KB tokenizer.json, +131-134
 *  MiB for a 4.2 MiB one (65,536 tokens), +213 MiB for a 10.2 MiB one (154,880 tokens; 131 a second later). Reserved:
 *  40 MiB and 16 bytes a byte of tokenizer.json each, 1.5-1.9× those peaks. */
export function helpersBytes(dir: string): number {
  let json = 0;
  try { json = statSync(join(dir, "tokenizer.json")).size; } catch { /* loading the tokenizer names what is wrong */ }
  return 2 * (40 * MiB + 16 * json);
}

export type CallReply = { ok: true; value: unknown } | { ok: false; detail: string };
type Init = Omit<Extract<ToTokenizer, { t: "init" }>, "t">;

/** one tokenizer worker and the callbacks waiting on it */
class Helper {
  private readonly w: Worker;
  private up = false;
  private dead = false;
  private readonly prompts = new Map<number, (p: Prepared | null) => void>();
  private readonly calls = new Map<number, (r: CallReply | null) => void>();

  constructor(init: Init, private readonly log: (s: string) => void) {
    this.w = new Worker(workerSpec("tokenizer-worker.ts"));
    this.w.onmessage = (e: MessageEvent<FromTokenizer>) => this.onMessage(e.data);
    this.w.onerror = (e) => this.fail(e.message);
    this.w.postMessage({ t: "init", ...init } satisfies ToTokenizer);
  }

  get usable(): boolean { return this.up && !this.dead; }

  prompt(rid: number, req: GenRequest, done: (p: Prepared | null) => void): void {
    this.prompts.set(rid, done);
    this.w.postMessage({ t: "prompt", rid, prompt: req.prompt, truncate: req.truncate } satisfies ToTokenizer);
  }

  call(rid: number, call: Exclude<Call, { op: "slot" }>, done: (r: CallReply | null) => void): void {
    this.calls.set(rid, done);
    this.w.postMessage({ t: "call", rid, call } satisfies ToTokenizer);
  }

  private onMessage(m: FromTokenizer): void {
    if (m.t === "ready") { this.up = true; return; }
    if (m.t === "failed") return this.fail(m.message);
    if (m.t === "prompt") { const f = this.prompts.get(m.rid); this.prompts.delete(m.rid); f?.(m.p); return; }
    const f = this.calls.get(m.rid);
    this.calls.delete(m.rid);
    f?.(m.ok ? { ok: true, value: m.value } : { ok: false, detail: m.detail });
  }

  close(): void { this.dead = true; this.w.terminate(); }

  /** the helper is gone: what waits on it is handed back (null: the caller does it itself) */
  private fail(why: string): void {
    if (this.dead) return;
    this.dead = true;
    this.log(`tokenizer worker: ${why}; its work goes to the other one, or to the engine's thread`);
    for (const f of this.prompts.values()) f(null);
    for (const f of this.calls.values()) f(null);
    this.prompts.clear(); this.calls.clear();
    this.w.terminate();
  }
}

export class TokenizerLink {
  private readonly lanes: [Helper, Helper]; // up to LARGE_PROMPT_BYTES, larger
  private readonly bytes = new WeakMap<GenRequest, number>(); // each prompt's JSON length, measured once

  constructor(init: Init, log: (s: string) => void) {
    this.lanes = [new Helper(init, log), new Helper(init, log)];
  }

  /** whether work may be handed to a helper now */
  get usable(): boolean { return this.lanes[0].usable || this.lanes[1].usable; }
  /** how many helpers are up (tests) */
  get up(): number { return this.lanes.filter((h) => h.usable).length; }

  /** the helper for work of n bytes (its own lane's, else the other one; null: neither is up) */
  private lane(n: number): Helper | null {
    const [small, large] = n > LARGE_PROMPT_BYTES ? [this.lanes[1], this.lanes[0]] : this.lanes;
    return small.usable ? small : large.usable ? large : null;
  }

  private size(req: GenRequest): number {
    let n = this.bytes.get(req);
    if (n === undefined) this.bytes.set(req, n = JSON.stringify(req.prompt).length);
    return n;
  }

  /** Whether this request's prompt is tokenized by a helper (large text, a helper up). */
  wants(req: GenRequest): boolean {
    return this.usable && req.prompt.kind !== "ids" && this.size(req) > ASYNC_PROMPT_BYTES;
  }

  /** the prompt's ids (null: the helpers died first; the caller does it itself) */
  prompt(rid: number, req: GenRequest, done: (p: Prepared | null) => void): void {
    const h = this.lane(this.size(req));
    if (h) h.prompt(rid, req, done);
    else done(null);
  }

  /** a tokenize / detokenize / template call's reply (null: the helpers died first) */
  call(rid: number, call: Exclude<Call, { op: "slot" }>, done: (r: CallReply | null) => void): void {
    const h = this.lane(call.op === "detokenize" ? 8 * call.ids.length : JSON.stringify(call).length); // (JSON of a typed array: a key a value)
    if (h) h.call(rid, call, done);
    else done(null);
  }

  close(): void { for (const h of this.lanes) h.close(); }
}
