// Splits a chat generation into `content` and `reasoning_content` (GLM thinking). With thinking
// enabled, text after a <think> mark (or from the start when the prompt ended in <think>) up to the
// </think> mark is reasoning; with thinking disabled the marks are dropped and everything is content.
// State: whether the stream is inside a think block.

/** Routes token text to content or reasoning_content. */
export class ThinkSplit {
  inThink: boolean;
  constructor(readonly enabled: boolean, promptEndsInThink: boolean) {
    this.inThink = enabled && promptEndsInThink;
  }
  /** The delta for text that came before `mark`, then applies the mark. */
  take(text: string, mark?: "think" | "/think"): { content?: string; reasoning_content?: string } {
    const d = text === "" ? {} : this.inThink ? { reasoning_content: text } : { content: text };
    if (mark === "think") this.inThink = this.enabled;
    if (mark === "/think") this.inThink = false;
    return d;
  }
}
