// Tool calling on the chat routes, GLM's way: tools and earlier calls go to the chat template; on tool_choice "auto"
// the output is scanned for GLM's <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call> (V is JSON
// unless the schema says string); "required" / a named function constrain the output to the arguments (as vLLM);
// "none" renders no tools; parallel_tool_calls false keeps one call. An unterminated call stays content; a call cut by
// the token limit is an incomplete call (finish_reason "length"), never content.
// State: ToolCallStream holds one response's held-back text and whether a call is open.
import { z } from "zod";
import { jsonObject } from "./bounded.ts";

const nullish = <T extends z.ZodType>(t: T) => t.nullable().optional();

export const ToolSchema = z.object({
  type: z.literal("function", { message: "only function tools are supported" }),
  function: z.object({
    name: z.string().regex(/^[a-zA-Z0-9_.-]{1,64}$/, "must be 1-64 letters, digits, _ . -"),
    description: nullish(z.string()),
    parameters: nullish(jsonObject),
    strict: nullish(z.boolean()),
  }),
});
export type Tool = z.infer<typeof ToolSchema>;

export const ToolChoiceSchema = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function"), function: z.object({ name: z.string() }) }),
], { message: 'must be "none", "auto", "required" or {type: "function", function: {name}}' });
export type ToolChoice = z.infer<typeof ToolChoiceSchema>;

export const ToolCallSchema = z.object({
  id: z.string().max(256),
  type: z.literal("function"),
  function: z.object({ name: z.string().max(256), arguments: z.string() }),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

/** A call's arguments for the template: the JSON object when the string holds one, else the string. */
export function templateArguments(args: string): unknown {
  try {
    const v = JSON.parse(args);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? v : args;
  } catch {
    return args;
  }
}

let calls = 0;
export const callId = () => `call_${Date.now().toString(36)}${(calls = (calls + 1) % 1e9).toString(36)}${Math.floor(Math.random() * 1e8).toString(36)}`;

/** The JSON schema that a forced tool_choice constrains the output to (null: "auto" / "none"); single: one call at most
 *  (parallel_tool_calls false). */
export function forcedSchema(tools: Tool[], choice: ToolChoice, single = false): object | null {
  const params = (t: Tool) => t.function.parameters ?? { type: "object" };
  if (typeof choice === "object") return params(tools.find((t) => t.function.name === choice.function.name)!);
  if (choice !== "required") return null;
  return {
    type: "array", minItems: 1, ...(single ? { maxItems: 1 } : {}),
    items: { anyOf: tools.map((t) => ({ type: "object", properties: { name: { const: t.function.name }, parameters: params(t) }, required: ["name", "parameters"], additionalProperties: false })) },
  };
}

/** The calls of a forced generation's output (its text is JSON made under forcedSchema's grammar). */
export function forcedCalls(text: string, choice: ToolChoice): ToolCall[] {
  const call = (name: string, args: unknown): ToolCall => ({ id: callId(), type: "function", function: { name, arguments: JSON.stringify(args) } });
  if (typeof choice === "object") return [call(choice.function.name, JSON.parse(text))];
  return (JSON.parse(text) as { name: string; parameters: unknown }[]).map((c) => call(c.name, c.parameters));
}

/** The calls of a forced output cut before its JSON closed (named: one call, its arguments the text so far; required:
 *  the array's whole elements, then the open one, its name read off the text or the only tool's). incomplete: the last
 *  call is cut. */
export function cutCalls(text: string, choice: ToolChoice, tools: Tool[]): { calls: ToolCall[]; incomplete: boolean } {
  const call = (name: string, args: string): ToolCall => ({ id: callId(), type: "function", function: { name, arguments: args } });
  if (typeof choice === "object") return { calls: [call(choice.function.name, text.trimStart())], incomplete: true };
  const calls: ToolCall[] = [];
  let depth = 0, str = false, esc = false, from = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (str) { if (esc) esc = false; else if (c === "\\") esc = true; else if (c === '"') str = false; continue; }
    if (c === '"') str = true;
    else if (c === "{" || c === "[") { if (depth++ === 1) from = i; }
    else if ((c === "}" || c === "]") && --depth === 1 && from >= 0) {
      const el = JSON.parse(text.slice(from, i + 1)) as { name: string; parameters: unknown };
      calls.push(call(el.name, JSON.stringify(el.parameters)));
      from = -1;
    }
  }
  if (from < 0) return { calls, incomplete: false };
  const rest = text.slice(from), name = /"name"\s*:\s*"((?:[^"\\]|\\.)*)"/.exec(rest)?.[1] ?? (tools.length === 1 ? tools[0].function.name : null);
  if (name === null) return { calls, incomplete: false };
  const at = /"parameters"\s*:\s*/.exec(rest);
  calls.push(call(JSON.parse(`"${name}"`), at ? rest.slice(at.index + at[0].length) : ""));
  return { calls, incomplete: true };
}

const OPEN = "<tool_call>", CLOSE = "</tool_call>";
const K0 = "<arg_key>", K1 = "</arg_key>", V0 = "<arg_value>", V1 = "</arg_value>";

/**
 * A call body's (key, value) pairs: the matches of /<arg_key>(.*?)<\/arg_key>\s*<arg_value>(.*?)<\/arg_value>/gs, found
 * in linear time. (That regex backtracked through every later </arg_key> from every <arg_key>: a body of 1,000 unclosed
 * arguments, 32,001 characters, took 6.3 s of the HTTP thread, 4,000 took 205 s.) A key ends at the first </arg_key>
 * that whitespace and <arg_value> follow; its value at the next </arg_value>; with none left, no later key has one.
 */
export function glmArgs(body: string): [string, string][] {
  const close: number[] = [], vstart: number[] = []; // each </arg_key> followed by \s*<arg_value>; where its value starts
  for (let p = body.indexOf(K1); p >= 0; p = body.indexOf(K1, p + 1)) {
    let q = p + K1.length;
    while (q < body.length && /\s/.test(body[q])) q++;
    if (body.startsWith(V0, q)) { close.push(p); vstart.push(q + V0.length); }
  }
  const out: [string, string][] = [];
  for (let a = body.indexOf(K0), g = 0; a >= 0;) {
    const k = a + K0.length;
    while (g < close.length && close[g] < k) g++;
    if (g === close.length) break;
    const e = body.indexOf(V1, vstart[g]);
    if (e < 0) break;
    out.push([body.slice(k, close[g]), body.slice(vstart[g], e)]);
    a = body.indexOf(K0, e + V1.length);
  }
  return out;
}

/** One GLM call body (between the tags) -> a ToolCall; string-typed parameters keep their raw text. */
export function parseGlmCall(body: string, tools: Tool[]): ToolCall {
  const at = body.indexOf(K0);
  const name = (at < 0 ? body : body.slice(0, at)).trim();
  const props = (tools.find((t) => t.function.name === name)?.function.parameters?.properties ?? {}) as Record<string, { type?: unknown }>;
  const args: Record<string, unknown> = {};
  for (const [k, v] of glmArgs(body)) {
    const key = k.trim();
    if (props[key]?.type === "string") { args[key] = v; continue; }
    try { args[key] = JSON.parse(v); } catch { args[key] = v; }
  }
  return { id: callId(), type: "function", function: { name, arguments: JSON.stringify(args) } };
}

/** Longest suffix of s that is a proper prefix of `tag`. */
function partial(s: string, tag: string): number {
  for (let k = Math.min(s.length, tag.length - 1); k > 0; k--) if (s.endsWith(tag.slice(0, k))) return k;
  return 0;
}

/** Splits streamed content into text and complete GLM tool calls. */
export class ToolCallStream {
  private held = "";      // text that may be the start of <tool_call>, or an open call's body
  private inCall = false;

  constructor(private readonly tools: Tool[]) {}

  /** Add content; returns the text safe to show and the calls completed by it. */
  push(text: string): { content: string; calls: ToolCall[] } {
    let s = this.held + text, content = "";
    const done: ToolCall[] = [];
    for (;;) {
      if (!this.inCall) {
        const at = s.indexOf(OPEN);
        if (at < 0) {
          const keep = partial(s, OPEN);
          content += s.slice(0, s.length - keep);
          this.held = s.slice(s.length - keep);
          break;
        }
        content += s.slice(0, at);
        s = s.slice(at + OPEN.length);
        this.inCall = true;
      }
      const end = s.indexOf(CLOSE);
      if (end < 0) { this.held = s; break; }
      done.push(parseGlmCall(s.slice(0, end), this.tools));
      s = s.slice(end + CLOSE.length);
      this.inCall = false;
    }
    return { content, calls: done };
  }

  /** A "length" end inside a call: that call, incomplete (its name and whole arguments so far); null outside one. */
  cutCall(): ToolCall | null {
    if (!this.inCall) return null;
    // without its unfinished tag (from the first "<" that no ">" follows; /<[^>]*$/ took O(n²) on runs of "<": 5 s at 80,000)
    const h = this.held, lt = h.indexOf("<", h.lastIndexOf(">") + 1), body = lt < 0 ? h : h.slice(0, lt);
    this.held = "";
    this.inCall = false;
    return parseGlmCall(body, this.tools);
  }

  /** The end: an unfinished call (or a held partial tag) is returned as text. */
  finish(): string {
    const s = (this.inCall ? OPEN : "") + this.held;
    this.held = "";
    this.inCall = false;
    return s;
  }
}

/** Is the output scanned for GLM's native calls (tools given, tool_choice auto)? Then GLM's special tags must stay in the text. */
export const scansForCalls = (tools: Tool[], choice: ToolChoice): boolean => tools.length > 0 && choice === "auto";

/** A chat response's content under its tool_choice: passed through, scanned for GLM calls, or (forced) collected as JSON. */
export class ToolOutput {
  private readonly scan: ToolCallStream | null;
  private readonly forced: ToolChoice | null;
  private text = "";      // forced: the output so far
  private made = 0;       // calls returned so far

  /** single: one call at most (parallel_tool_calls false; "auto": the model's later calls are dropped) */
  constructor(private readonly tools: Tool[], choice: ToolChoice, private readonly single = false) {
    const on = tools.length > 0 && choice !== "none";
    this.forced = on && choice !== "auto" ? choice : null;
    this.scan = scansForCalls(tools, choice) ? new ToolCallStream(tools) : null;
  }

  push(content: string): { content: string; calls: ToolCall[] } {
    if (this.forced) { this.text += content; return { content: "", calls: [] }; }
    if (!this.scan) return { content, calls: [] };
    const out = this.scan.push(content);
    if (this.single) out.calls = out.calls.slice(0, Math.max(0, 1 - this.made));
    this.made += out.calls.length;
    return out;
  }

  /** The end of the output (cut: by the token limit): what is left as content, and the calls it completes (forced: all
   *  of them); incomplete: the last call was cut. */
  finish(cut = false): { content: string; calls: ToolCall[]; incomplete: boolean } {
    if (!this.forced) {
      const open = cut ? this.scan?.cutCall() ?? null : null;
      if (open && (!this.single || this.made === 0)) return { content: "", calls: [open], incomplete: true };
      return { content: this.scan?.finish() ?? "", calls: [], incomplete: false };
    }
    try {
      return { content: "", calls: forcedCalls(this.text, this.forced), incomplete: false };
    } catch {
      return { content: "", ...cutCalls(this.text, this.forced, this.tools) }; // cut short (max_tokens) before the JSON closed
    }
  }
}
