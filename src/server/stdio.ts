// `serve --stdio`: the mux protocol on stdin/stdout (frames only on stdout; logs go to stderr).
// Resolves when the session ends: stdin closed and every id finished, or a BAD_FRAME. State: per run.
import type { EngineClient } from "./engine-client.ts";
import { MuxParser } from "./mux-parse.ts";
import { MuxSession } from "./mux-session.ts";

export async function runStdio(engine: EngineClient, input: ReadableStream<Uint8Array>, output: (b: Uint8Array) => void): Promise<void> {
  let done!: () => void;
  const finished = new Promise<void>((res) => { done = res; });
  const session = new MuxSession(engine, output, () => done());
  const parser = new MuxParser();
  const r = input.getReader();
  void (async () => {
    try {
      for (;;) {
        const { value, done: eof } = await r.read();
        if (eof) break;
        session.onFrames(parser.push(value));
        if (parser.dead || session.closed) return;
      }
      session.onFrames(parser.end());
      session.endInput();
    } catch (e) {
      process.stderr.write(`hummingbird serve: stdin: ${(e as Error).message}\n`);
      session.abort();
      done();
    }
  })();
  await finished;
  r.cancel().catch(() => {});
}
