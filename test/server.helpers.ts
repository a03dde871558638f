// Helpers of the server/mux suites: start an in-process server on the glm-tiny fixture (127.0.0.1,
// ephemeral port) or a `serve` child process, a streaming mux client over fetch (full duplex) that parses server
// frames, and SSE reading. Not a test file itself.
import { resolve } from "node:path";
import type { Subprocess } from "bun";
import { startServer, type ServeOptions, type Server } from "../src/server/server.ts";
import { TINY } from "./helpers/fixture.ts";

/** `bun src/cli.ts serve --port 0 ...args` as a child process, once it says it is ready: its URL (http or https) and its
 *  stderr so far (read on in the background); `env` added to this process's. */
export async function spawnServe(args: string[], env: Record<string, string> = {}): Promise<{ p: Subprocess<"ignore", "pipe", "pipe">; url: string; log(): string }> {
  const p = Bun.spawn(["bun", "src/cli.ts", "serve", "--port", "0", ...args],
    { cwd: resolve(import.meta.dir, ".."), stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  let log = "", ended = false;
  (async () => {
    const rd = p.stderr.getReader(), dec = new TextDecoder();
    for (;;) { const { value, done } = await rd.read(); if (done) { ended = true; return; } log += dec.decode(value); }
  })();
  while (!/ready on /.test(log)) {
    if (ended) throw new Error(`serve exited early:\n${log}`);
    await Bun.sleep(20);
  }
  return { p, url: /listening on (\S+)/.exec(log)![1], log: () => log };
}

/** a chat template that shows tools, assistant tool calls and tool results (the fixture's own ignores them): for
 *  checking that other routes' tool turns render as the chat route's */
export const TOOL_TURNS_TEMPLATE = "{%- for t in tools or [] -%}[tool {{ t.function.name }}]{%- endfor -%}{%- for m in messages -%}<{{ m.role }}>{{ m.content }}"
  + "{%- for c in m.tool_calls or [] -%}(call {{ c.function.name }} city={{ c.function.arguments.city }}){%- endfor -%}"
  + "{%- if m.tool_call_id -%}(for {{ m.tool_call_id }}){%- endif -%}{%- endfor -%}<assistant>";

export async function startTiny(o: Partial<ServeOptions> = {}): Promise<Server> {
  // (any model name: the suites name models freely; serve's default refusal is hostile-http's)
  const s = startServer({ dir: TINY, slots: 4, port: 0, host: "127.0.0.1", acceptAnyModel: true, ...o });
  await s.engine.ready;
  return s;
}

export interface Frame { head: string; words: string[]; data?: Uint8Array }

const enc = new TextEncoder();

/** Incremental parser of server frames (the client side of mux.md). */
export class FrameReader {
  private buf = new Uint8Array(0);
  frames: Frame[] = [];

  push(b: Uint8Array): void {
    const n = new Uint8Array(this.buf.length + b.length);
    n.set(this.buf); n.set(b, this.buf.length);
    this.buf = n;
    for (;;) {
      const nl = this.buf.indexOf(10);
      if (nl < 0) return;
      const head = new TextDecoder().decode(this.buf.subarray(0, nl));
      const words = head.split(" ");
      if (words[0] === "DATA") {
        const len = Number(words[2]);
        if (this.buf.length < nl + 1 + len + 1) return;
        if (this.buf[nl + 1 + len] !== 10) throw new Error(`DATA frame not terminated by \\n: ${head}`);
        this.frames.push({ head, words, data: this.buf.slice(nl + 1, nl + 1 + len) });
        this.buf = this.buf.slice(nl + 2 + len);
      } else {
        this.frames.push({ head, words });
        this.buf = this.buf.slice(nl + 1);
      }
    }
  }
  get rest(): number { return this.buf.length; }
}

/** One /v1/mux stream: write client frames while reading server frames. */
export class MuxClient {
  private ctl!: ReadableStreamDefaultController<Uint8Array>;
  readonly reader = new FrameReader();
  readonly ac = new AbortController();
  ended = false;
  private waiters: (() => void)[] = [];
  readonly done: Promise<void>;

  constructor(url: string, headers: Record<string, string> = {}) {
    const body = new ReadableStream<Uint8Array>({ start: (c) => { this.ctl = c; } });
    const res = fetch(`${url}/v1/mux`, { method: "POST", body, headers: { "content-type": "application/octet-stream", ...headers }, signal: this.ac.signal, duplex: "half" } as RequestInit);
    this.done = (async () => {
      try {
        const r = await res;
        const rd = r.body!.getReader();
        for (;;) {
          const { value, done } = await rd.read();
          if (done) break;
          this.reader.push(value);
          this.wake();
        }
      } catch { /* aborted */ }
      this.ended = true;
      this.wake();
    })();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  send(s: string | Uint8Array): void {
    this.ctl.enqueue(typeof s === "string" ? enc.encode(s) : s);
  }

  endInput(): void {
    this.ctl.close();
  }

  get frames(): Frame[] { return this.reader.frames; }

  /** Resolves when a frame satisfies `pred` (or rejects when the stream ends / times out). */
  async waitFor(pred: (f: Frame) => boolean, ms = 20000): Promise<Frame> {
    const t0 = Date.now();
    for (;;) {
      const f = this.frames.find(pred);
      if (f) return f;
      if (this.ended) throw new Error(`stream ended without the frame; got:\n${this.frames.map((x) => x.head).join("\n")}`);
      if (Date.now() - t0 > ms) throw new Error(`timed out; got:\n${this.frames.map((x) => x.head).join("\n")}`);
      await new Promise<void>((res) => { this.waiters.push(res); setTimeout(res, 50); });
    }
  }

  /** The final frame (DONE or ERROR) of `id`. */
  end(id: string | number): Promise<Frame> {
    return this.waitFor((f) => (f.words[0] === "DONE" || f.words[0] === "ERROR") && f.words[1] === String(id));
  }

  /** Concatenated DATA bytes of `id` as text. */
  text(id: string | number): string {
    const parts = this.frames.filter((f) => f.words[0] === "DATA" && f.words[1] === String(id)).map((f) => f.data!);
    return Buffer.concat(parts).toString("utf8");
  }
}

/** POST a finite body of frames; returns all server frames once the response ends. */
export async function muxOnce(url: string, body: string | Uint8Array): Promise<Frame[]> {
  const res = await fetch(`${url}/v1/mux`, { method: "POST", body, headers: { "content-type": "application/octet-stream" } });
  const r = new FrameReader();
  r.push(new Uint8Array(await res.arrayBuffer()));
  if (r.rest !== 0) throw new Error("response ended inside a frame");
  return r.frames;
}

export function submit(id: number | string, prompt: string, maxTokens: number, extra = "", slot: number | "auto" = "auto", temp = "0", topP = "1"): string {
  const b = enc.encode(prompt);
  return `SUBMIT ${id} ${slot} ${b.length} ${maxTokens} ${temp} ${topP}${extra ? " " + extra : ""}\n${prompt}\n`;
}

/** The `data:` payloads of an SSE body. */
export function sseData(text: string): string[] {
  return text.split("\n\n").filter((b) => b.startsWith("data: ")).map((b) => b.slice(6));
}

/** GET /health every 5 ms until `stop` is called; stop() gives the slowest answer's milliseconds */
export function pollHealth(url: string): { stop(): Promise<number> } {
  let worst = 0, done = false;
  const poll = (async () => {
    while (!done) {
      const t = performance.now();
      await fetch(`${url}/health`);
      worst = Math.max(worst, performance.now() - t);
      await Bun.sleep(5);
    }
  })();
  return { stop: async () => { done = true; await poll; return worst; } };
}

export async function post(url: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url + path, { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body), headers: { "content-type": "application/json", ...headers } });
}
