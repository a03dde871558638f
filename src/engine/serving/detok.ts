// Per-request detokenizer in the worker: token ids -> UTF-8-safe text deltas (TextCodec.stream, special tokens skipped
// unless kept for tool calls) with stop strings applied (only after the first `minTokens`, vLLM's min_tokens);
// <think>/</think> become marks for the reasoning split. Alongside, the bytes of the literal stream for mux DATA frames
// (Detok's doc comment). State: the stream decoder, the stop matcher and the token count of one request.
import type { TextCodec } from "../../model/tokenizer.ts";
import { StopMatcher } from "../stop-text.ts";

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

const utf8 = new TextEncoder();
const NONE = new Uint8Array(0);
const TAG = { think: "<think>", "/think": "</think>" } as const;

export interface Piece { text: string; bytes: Uint8Array; mark?: "think" | "/think" }

/** The bytes beside the text: without stop strings each token's raw bytes (TextCodec.tokenBytes: a multi-byte
 *  character may split across tokens); with stop strings the UTF-8 of the emitted text, so bytes never run ahead of a
 *  stop string still being matched. Either way all pushes and finish() concatenate to the UTF-8 of the literal text
 *  (think tags written out) for valid UTF-8 output. */
export class Detok {
  private dec: { push(id: number): string; flush(): string };
  private stop: StopMatcher;
  private readonly raw: boolean;             // no stop strings: bytes are each token's own bytes
  private n = 0;                             // tokens pushed

  constructor(private readonly codec: TextCodec, stops: string[], private readonly think: ThinkIds, private readonly keepSpecial = false,
    private readonly minTokens = 0) {
    this.dec = codec.stream(!keepSpecial);
    this.stop = new StopMatcher(stops);
    this.raw = stops.length === 0;
  }

  get stopped(): boolean {
    return this.stop.stopped;
  }

  /** the stop string that ended the output, if one did */
  get stopText(): string | null {
    return this.stop.matched;
  }

  /** One generated token: its text delta (possibly empty), its bytes, and its mark when it is a think tag. */
  push(id: number): Piece {
    if (++this.n <= this.minTokens && !this.raw) { // before min_tokens: no stop string yet
      const mark = id === this.think.open ? "think" : id === this.think.close ? "/think" : undefined;
      if (mark) { const t = this.dec.flush(); return { text: t, bytes: utf8.encode(t + TAG[mark]), mark }; }
      const text = this.dec.push(id);
      return { text, bytes: text ? utf8.encode(text) : NONE };
    }
    if (id === this.think.open || id === this.think.close) {
      // a tag ends the text before it: flush the decoder and the stop matcher's held text
      const mark = id === this.think.open ? "think" : "/think";
      const text = this.stop.push(this.dec.flush()) + (this.stop.stopped ? "" : this.stop.flush());
      if (this.stop.stopped) return { text, bytes: utf8.encode(text) }; // the stop string came first: no tag
      return { text, bytes: utf8.encode(this.raw ? TAG[mark] : text + TAG[mark]), mark };
    }
    const text = this.stop.push(this.dec.push(id));
    return { text, bytes: this.raw ? this.codec.tokenBytes(id, !this.keepSpecial) : text ? utf8.encode(text) : NONE };
  }

  /** End of generation: whatever the decoder and the matcher still hold (raw mode: no bytes left). */
  finish(): { text: string; bytes: Uint8Array } {
    if (this.stop.stopped) return { text: "", bytes: NONE };
    const text = this.stop.push(this.dec.flush()) + this.stop.flush();
    return { text, bytes: this.raw || !text ? NONE : utf8.encode(text) };
  }
}
