// Per-request detokenizer in the worker: token ids -> UTF-8-safe text deltas (TextCodec.stream,
// special tokens skipped) with stop strings applied; <think>/</think> tokens become marks so the chat
// route can split reasoning_content. State: the stream decoder and the stop matcher of one request.
import type { TextCodec } from "../model/tokenizer.ts";
import { StopMatcher } from "./stop-text.ts";

export interface ThinkIds { open: number; close: number }

/** The ids of <think> and </think> when each is one token (else -1). */
export function thinkIds(codec: TextCodec): ThinkIds {
  const one = (s: string) => {
    try {
      const ids = codec.encode(s);
      return ids.length === 1 ? ids[0] : -1;
    } catch {
      return -1;
    }
  };
  return { open: one("<think>"), close: one("</think>") };
}

export class Detok {
  private dec: { push(id: number): string; flush(): string };
  private stop: StopMatcher;

  constructor(codec: TextCodec, stops: string[], private readonly think: ThinkIds) {
    this.dec = codec.stream(true);
    this.stop = new StopMatcher(stops);
  }

  get stopped(): boolean {
    return this.stop.stopped;
  }

  /** One generated token: its text delta (possibly empty) and its mark when it is a think tag. */
  push(id: number): { text: string; mark?: "think" | "/think" } {
    if (id === this.think.open || id === this.think.close) {
      // a tag ends the text before it: flush the decoder and the stop matcher's held text
      const text = this.stop.push(this.dec.flush()) + (this.stop.stopped ? "" : this.stop.flush());
      return { text, mark: id === this.think.open ? "think" : "/think" };
    }
    return { text: this.stop.push(this.dec.push(id)) };
  }

  /** End of generation: whatever the decoder and the matcher still hold. */
  finish(): string {
    if (this.stop.stopped) return "";
    const t = this.stop.push(this.dec.flush());
    return t + this.stop.flush();
  }
}
