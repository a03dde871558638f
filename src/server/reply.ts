// One chat reply as it streams, split into reasoning (GLM thinking, think.ts), content and tool calls (tools.ts:
// GLM's native calls scanned on "auto", the forced JSON collected): what the chat, Anthropic and Responses routes
// each turn into their own deltas and blocks (`drive`: a run's events into a sink). A call cut by the token limit comes
// last and `incomplete` (tools.ts), never as content. State: the think split and the tool
// output of one reply.
import type { ReqEvent } from "../engine/serving/protocol.ts";
import { ThinkSplit } from "./think.ts";
import { ToolOutput, type Tool, type ToolCall, type ToolChoice } from "./tools.ts";

/** incomplete: the last of `calls` was cut by the token limit */
export interface ReplyParts { reasoning: string; content: string; calls: ToolCall[]; incomplete: boolean }
/** where a driven reply goes: each event's reasoning and content text (maybe empty), then the calls it completed */
export interface ReplySink {
  reasoning(s: string): void;
  content(s: string): void;
  /** incomplete: cut by the token limit (the reply's last call) */
  call(c: ToolCall, incomplete: boolean): void;
  accepted?(e: Extract<ReqEvent, { t: "accept" }>): void;
}

export class ReplySplit {
  private think: ThinkSplit;
  private readonly tools: ToolOutput;
  /** thinking: as asked (undefined: the template decides; known once accepted); single: one tool call at most
   *  (parallel_tool_calls false) */
  thinking: boolean;
  constructor(thinking: boolean | undefined, tools: Tool[], choice: ToolChoice, single = false) {
    this.thinking = thinking ?? false;
    this.think = new ThinkSplit(this.thinking, false);
    this.tools = new ToolOutput(tools, choice, single);
  }
  /** the request was accepted: whether it thinks (the worker's say), and its prompt may end inside a think block */
  accept(e: Extract<ReqEvent, { t: "accept" }>): void {
    this.thinking = e.thinking;
    this.think = new ThinkSplit(this.thinking, e.think);
  }
  /** one token's text (before its think mark, if any), or the last text at the end (cut: a "length" end): its parts and
   *  the calls it completed */
  take(text: string, mark: "think" | "/think" | undefined, end: boolean, cut = false): ReplyParts {
    const d = this.think.take(text, mark);
    const out = d.content !== undefined ? this.tools.push(d.content) : { content: "", calls: [] as ToolCall[] };
    let incomplete = false;
    if (end) { const f = this.tools.finish(cut); out.content += f.content; out.calls.push(...f.calls); incomplete = f.incomplete; }
    return { reasoning: d.reasoning_content ?? "", content: out.content, calls: out.calls, incomplete };
  }
  /** every event of a run from `first` (then `next()`) split into `sink` until done or an error: that event */
  async drive(first: ReqEvent, next: () => Promise<ReqEvent>, sink: ReplySink):
    Promise<Extract<ReqEvent, { t: "done" }> | Extract<ReqEvent, { t: "error" }>> {
    for (let e = first; ; e = await next()) {
      if (e.t === "accept") { this.accept(e); sink.accepted?.(e); }
      else if (e.t === "tok" || e.t === "done") {
        const parts = this.take(e.text, e.t === "tok" ? e.mark : undefined, e.t === "done", e.t === "done" && e.reason === "length");
        sink.reasoning(parts.reasoning);
        sink.content(parts.content);
        parts.calls.forEach((c, i) => sink.call(c, parts.incomplete && i === parts.calls.length - 1));
        if (e.t === "done") return e;
      } else if (e.t === "error") return e;
    }
  }
}
