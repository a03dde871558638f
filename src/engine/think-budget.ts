// The thinking budget (llama-server's reasoning budget, vLLM's thinking_token_budget, Anthropic's
// thinking.budget_tokens): counts the tokens generated inside a <think> block and, once `budget` of them are out,
// forces `forced` (a budget message's tokens, then </think>) one token at a time, every other logit −∞. A multi-byte
// character the budget cut into is finished first (valid UTF-8); a </think> the model writes itself ends the block.
// State: the phase (llama.cpp's: idle → counting → waiting for UTF-8 → forcing → done; nothing counted after the
// block), the tokens left, the position in `forced`, the UTF-8 continuation bytes still due.

export interface ThinkBudgetSpec {
  budget: number;       // tokens allowed inside the block (0: </think> right after <think>)
  open: number;         // <think>
  close: number;        // </think>
  forced: number[];     // forced when the budget is spent: the message's tokens, then close (last)
  bytes: (id: number) => Uint8Array; // a token's bytes (UTF-8 completion)
}

type Phase = "idle" | "counting" | "utf8" | "forcing" | "done";

/** continuation bytes still due after `b`, given `due` before it */
function utf8Due(due: number, b: number): number {
  if ((b & 0xc0) === 0x80) return due > 0 ? due - 1 : 0; // continuation (a stray one ends nothing)
  if ((b & 0xe0) === 0xc0) return 1;
  if ((b & 0xf0) === 0xe0) return 2;
  if ((b & 0xf8) === 0xf0) return 3;
  return 0; // ASCII, or a byte no UTF-8 starts with
}

export class ThinkBudget {
  private phase: Phase;
  private left = 0;
  private pos = 0;
  private due = 0;

  /** inside: the prompt left a <think> block open (generation starts counting) */
  constructor(private readonly s: ThinkBudgetSpec, inside: boolean) {
    if (!(s.forced.length > 0 && s.forced[s.forced.length - 1] === s.close)) throw new Error("ThinkBudget: forced must end with the close id");
    this.phase = "idle";
    if (inside) this.enter();
  }

  /** the id the next token must be, or −1 (free) */
  next(): number {
    return this.phase === "forcing" ? this.s.forced[this.pos] : -1;
  }

  /** One emitted token. */
  accept(id: number): void {
    switch (this.phase) {
      case "idle":
        if (id === this.s.open) this.enter();
        return;
      case "counting":
      case "utf8":
        if (id === this.s.close) { this.phase = "done"; return; }
        for (const b of this.s.bytes(id)) this.due = utf8Due(this.due, b);
        if (this.phase === "counting") this.left--;
        this.afterCount();
        return;
      case "forcing":
        if (id === this.s.close) { this.phase = "done"; return; } // (another rule may have let only the close through)
        if (id === this.s.forced[this.pos]) this.pos++;
        return;
      case "done":
        return;
    }
  }

  private enter(): void {
    this.phase = "counting";
    this.left = this.s.budget;
    this.due = 0;
    this.afterCount();
  }

  private afterCount(): void {
    if (this.left > 0) return;
    this.phase = this.due > 0 ? "utf8" : "forcing";
  }

  /** Masks `logits` to the forced token, if one is due; false when that token was already banned (−∞). */
  mask(logits: Float32Array): boolean {
    const f = this.next();
    if (f < 0) return true;
    const v = f < logits.length ? logits[f] : -Infinity;
    logits.fill(-Infinity);
    if (v === -Infinity) return false;
    logits[f] = v;
    return true;
  }
}
