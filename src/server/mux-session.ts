// One mux stream (HTTP /v1/mux or stdio): turns parsed client frames into engine requests and engine
// events into server frames. DATA frames carry each token's raw bytes (a multi-byte character may be
// split across frames); a `grammar=<bytes>` block constrains the output (BAD_REQUEST grammar when it
// is not UTF-8 or does not compile). State: the live ids of this stream and their engine handles,
// whether the input has ended, whether the client is reading (held: out-flow.ts), when its last id ended, and frames
// that arrived before READY could be sent (the model was loading).
import type { EngineClient, Handle } from "./engine-client.ts";
import { acceptFrame, dataFrame, doneFrame, errorFrame, readyFrame } from "./mux-frames.ts";
import { parseIdList, type MuxEvent, type SubmitFrame } from "./mux-parse.ts";
import type { GenRequest, PromptSpec, ReqEvent } from "../engine/serving/protocol.ts";
import { contentText, MessagesSchema } from "./schemas.ts";
import { jsonBoundsError } from "./json-bounds.ts";

/** live ids of one stream past the server's slots and queue, for those whose refusal or end is on its way back */
const MUX_IN_FLIGHT = 64;

export class MuxSession {
  private live = new Map<string, Handle>();
  private early: MuxEvent[] | null = [];   // null once READY was written
  private inputEnded = false;
  private held = false;   // the client is not taking the output: every live id's decoding paused
  private freeSince = performance.now(); // when its last live id ended (or it began)
  closed = false;

  /** when its work last ended; null before READY, while it has live ids, or once closed: a session idle for a while
   *  may be closed to make room for another connection (conn-bounds.ts) */
  get idleSince(): number | null {
    return this.closed || this.early !== null || this.live.size > 0 ? null : this.freeSince;
  }

  constructor(private engine: EngineClient, private write: (b: Uint8Array) => void, private close: () => void) {
    engine.ready.then(
      (info) => {
        if (this.closed) return;
        this.write(readyFrame(info.model, info.slots, info.ctx));
        const early = this.early!;
        this.early = null;
        for (const ev of early) this.handle(ev);
        if (this.inputEnded) this.maybeEnd();
      },
      (e: Error) => {
        if (this.closed) return;
        this.write(errorFrame("0", "INTERNAL", `the model failed to load: ${e.message}`));
        this.shutdown();
      },
    );
  }

  /** Frames parsed from the client. */
  onFrames(evs: MuxEvent[]): void {
    for (const ev of evs) {
      if (this.closed) return;
      if (this.early) this.early.push(ev);
      else this.handle(ev);
    }
  }

  /** The client's input ended: the stream closes after the last live id ends. */
  endInput(): void {
    this.inputEnded = true;
    if (!this.early) this.maybeEnd();
  }

  /** The client is not taking the stream's output (on) or takes it again (off): every live id, and those submitted
   *  meanwhile, held or let go on. */
  hold(on: boolean): void {
    this.held = on;
    for (const h of this.live.values()) h.hold(on);
  }

  /** The client went away: cancel everything, write nothing more. */
  abort(): void {
    if (this.closed) return;
    this.closed = true;
    for (const h of this.live.values()) this.engine.abandon(h);
    this.live.clear();
  }

  private shutdown(): void {
    this.abort();
    this.close();
  }

  private maybeEnd(): void {
    if (!this.closed && this.inputEnded && this.live.size === 0) {
      this.closed = true;
      this.close();
    }
  }

  private handle(ev: MuxEvent): void {
    switch (ev.kind) {
      case "bad_frame":
        this.write(errorFrame("0", "BAD_FRAME", ev.detail));
        return this.shutdown();
      case "busy":
        this.write(errorFrame("0", "OVERLOADED", ev.detail));
        return this.shutdown();
      case "reject":
        return this.write(errorFrame(ev.id, "BAD_REQUEST", `${ev.field} ${ev.detail}`.trim()));
      case "stop":
      case "cancel": {
        const h = this.live.get(ev.id);
        if (!h) return this.write(errorFrame(ev.id, "NOT_FOUND"));
        return ev.kind === "stop" ? h.stop() : h.cancel();
      }
      case "submit":
        return this.submit(ev);
    }
  }

  private submit(f: SubmitFrame): void {
    if (this.live.has(f.id)) return this.write(errorFrame(f.id, "DUPLICATE_ID"));
    const { slots, queue } = this.engine.info!;
    // (more live ids than the server runs and queues at once, and MUX_IN_FLIGHT more whose answers may be on the way:
    // the engine would refuse it too, after a trip to its thread; 200k tiny SUBMITs in one body held a decoding
    // stream 3.3 s)
    if (this.live.size >= slots + queue + MUX_IN_FLIGHT)
      return this.write(errorFrame(f.id, "OVERLOADED", `this stream has ${this.live.size} requests live, past what the server takes at once (${slots} slots, ${queue} queued)`));
    if (f.slot !== "auto" && f.slot >= slots) return this.write(errorFrame(f.id, "BAD_REQUEST", `slot ${f.slot} is outside [0, ${slots})`));
    if (f.payload.length === 0) return this.write(errorFrame(f.id, "EMPTY_PROMPT"));
    const prompt = payloadPrompt(f);
    if (typeof prompt === "string") return this.write(errorFrame(f.id, "BAD_REQUEST", `payload ${prompt}`));
    let gbnf: string | undefined;
    if (f.grammar) {
      try {
        gbnf = new TextDecoder("utf-8", { fatal: true }).decode(f.grammar);
      } catch {
        return this.write(errorFrame(f.id, "BAD_REQUEST", "grammar is not valid UTF-8"));
      }
    }
    const req: GenRequest = {
      prompt, slot: f.slot, max_tokens: f.max_tokens, temperature: f.temperature, top_p: f.top_p,
      min_p: f.min_p ?? 0, top_k: 0, seed: f.seed, logprobs: f.logprobs, stop: [],
      ...(gbnf !== undefined ? { grammar: { gbnf, field: "grammar" } } : {}),
    };
    const h = this.engine.submit(req, (e) => this.onEvent(f.id, e));
    this.live.set(f.id, h);
    if (this.held) h.hold(true);
  }

  private onEvent(id: string, e: ReqEvent): void {
    if (this.closed) return;
    switch (e.t) {
      case "accept": return this.write(acceptFrame(id, e.slot, e.prompt_tokens, e.cached_tokens));
      case "tok": return this.write(dataFrame(id, e.bytes, e.lp === undefined ? undefined : { lp: e.lp, top: e.top ?? [] }));
      case "done":
        if (e.bytes.length > 0) this.write(dataFrame(id, e.bytes));
        this.write(doneFrame(id, e.reason, e.emitted, e.prompt_tokens, e.cached_tokens, e.decode_tok_s));
        break;
      case "error": {
        const detail = e.code === "CANCELLED" ? "" : e.detail;
        const named = /^(slot|grammar) /.test(detail); // details that already start with their field
        this.write(errorFrame(id, e.code, e.code === "BAD_REQUEST" && !named ? `payload ${detail}` : detail));
        break;
      }
      default: return;
    }
    this.live.delete(id);
    if (this.live.size === 0) this.freeSince = performance.now();
    this.maybeEnd();
  }
}

/** The prompt of a SUBMIT payload, or a reason it is invalid. */
function payloadPrompt(f: SubmitFrame): PromptSpec | string {
  if (f.ids) {
    const ids = parseIdList(f.payload);
    return typeof ids === "string" ? ids : { kind: "ids", ids };
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(f.payload);
  } catch {
    return "not valid UTF-8";
  }
  if (f.chat) {
    const shape = jsonBoundsError(text);
    if (shape) return `chat=1 messages: ${shape.message}`;
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      return "chat=1 expects a JSON messages array";
    }
    const p = MessagesSchema.safeParse(v);
    if (!p.success) return `chat=1 messages: ${p.error.issues[0]?.message ?? "invalid"}`;
    return { kind: "chat", enableThinking: false, messages: p.data.map((m) => ({ role: m.role === "developer" ? "system" : m.role, content: contentText(m.content) })) };
  }
  return { kind: "text", text };
}
