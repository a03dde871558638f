// One chat reply as it streams, split into reasoning (GLM thinking, think.ts), content and tool calls (tools.ts:
// GLM's native calls scanned on "auto", the forced JSON collected): what the chat, Anthropic and Responses routes
// each turn into their own deltas and blocks. State: the think split and the tool output of one reply.
import type { ReqEvent } from "./protocol.ts";
import { ThinkSplit } from "./think.ts";
import { ToolOutput, type Tool, type ToolCall, type ToolChoice } from "./tools.ts";

export interface ReplyParts { reasoning: string; content: string; calls: ToolCall[] }

export class ReplySplit {
  private think: ThinkSplit;
  private readonly tools: ToolOutput;
  /** single: one tool call at most (parallel_tool_calls false) */
  constructor(readonly thinking: boolean, tools: Tool[], choice: ToolChoice, single = false) {
    this.think = new ThinkSplit(thinking, false);
    this.tools = new ToolOutput(tools, choice, single);
  }
  /** the request was accepted: its prompt may end inside a think block */
  accept(e: Extract<ReqEvent, { t: "accept" }>): void { this.think = new ThinkSplit(this.thinking, e.think); }
  /** one token's text (before its think mark, if any), or the last text at the end: its parts and the calls it completed */
  take(text: string, mark: "think" | "/think" | undefined, end: boolean): ReplyParts {
    const d = this.think.take(text, mark);
    const out = d.content !== undefined ? this.tools.push(d.content) : { content: "", calls: [] as ToolCall[] };
    if (end) { const f = this.tools.finish(); out.content += f.content; out.calls.push(...f.calls); }
    return { reasoning: d.reasoning_content ?? "", content: out.content, calls: out.calls };
  }
}
