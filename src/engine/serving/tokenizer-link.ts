// The engine worker's handle on the tokenizer's worker (tokenizer-worker.ts): prompts of more than ASYNC_PROMPT_BYTES
// and every tokenize / detokenize / template call go there, answered by callback; smaller prompts stay on the engine's
// thread (no message round trip for them). Until the helper is up, or if it cannot start, `usable` is false and the
// caller does the work itself. State: the helper, whether it is up, the callbacks waiting on it.
import type { Call, GenRequest } from "./protocol.ts";
import type { Prepared } from "./prepare.ts";
import type { FromTokenizer, ToTokenizer } from "./tokenizer-worker.ts";
import { workerSpec } from "./worker-spec.ts";

/** prompts (their JSON) above this many bytes are tokenized off the engine's thread: 4 KiB costs it ~1-3 ms of
 *  encoding (64 KiB, the bound before: ~50-100 ms, every stream stalled meanwhile) */
export const ASYNC_PROMPT_BYTES = 4 * 1024;

export type CallReply = { ok: true; value: unknown } | { ok: false; detail: string };

export class TokenizerLink {
  private readonly w: Worker;
  private up = false;
  private dead = false;
  private readonly prompts = new Map<number, (p: Prepared | null) => void>();
  private readonly calls = new Map<number, (r: CallReply | null) => void>();

  constructor(init: Omit<Extract<ToTokenizer, { t: "init" }>, "t">, private readonly log: (s: string) => void) {
    this.w = new Worker(workerSpec("tokenizer-worker.ts"));
    this.w.onmessage = (e: MessageEvent<FromTokenizer>) => this.onMessage(e.data);
    this.w.onerror = (e) => this.fail(e.message);
    this.w.postMessage({ t: "init", ...init } satisfies ToTokenizer);
  }

  /** whether work may be handed to the helper now */
  get usable(): boolean { return this.up && !this.dead; }

  /** Whether this request's prompt is tokenized by the helper (large text, helper up). */
  wants(req: GenRequest): boolean {
    return this.usable && req.prompt.kind !== "ids" && JSON.stringify(req.prompt).length > ASYNC_PROMPT_BYTES;
  }

  /** the prompt's ids (null: the helper died first; the caller does it itself) */
  prompt(rid: number, req: GenRequest, done: (p: Prepared | null) => void): void {
    this.prompts.set(rid, done);
    this.w.postMessage({ t: "prompt", rid, prompt: req.prompt, truncate: req.truncate } satisfies ToTokenizer);
  }

  /** a tokenize / detokenize / template call's reply (null: the helper died first) */
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

  /** the helper is gone: what waits on it is handed back (null), later work stays on the engine's thread */
  private fail(why: string): void {
    if (this.dead) return;
    this.dead = true;
    this.log(`tokenizer worker: ${why}; tokenizing on the engine's thread`);
    for (const f of this.prompts.values()) f(null);
    for (const f of this.calls.values()) f(null);
    this.prompts.clear(); this.calls.clear();
    this.w.terminate();
  }
}
