// POST /v1/mux: the mux protocol over one streamed request body and one streamed response body
// (full duplex). Reads the body incrementally into the frame parser; a disconnect (the request
// aborts or the response stream is cancelled) cancels all of the stream's ids; the frame being read holds its bytes
// against the server's body budget (past it: ERROR 0 OVERLOADED, the stream closed). State: per stream.
import type { EngineClient } from "./engine-client.ts";
import { bodyDone, bodyHold } from "./conn-bounds.ts";
import { MuxParser } from "./mux-parse.ts";
import { MuxSession } from "./mux-session.ts";

export function muxHttp(req: Request, engine: EngineClient): Response {
  let ctl!: ReadableStreamDefaultController<Uint8Array>;
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    try { ctl.close(); } catch { /* already closed */ }
  };
  const out = new ReadableStream<Uint8Array>({
    start(c) { ctl = c; },
    cancel() { ended = true; session.abort(); },
  });
  const write = (b: Uint8Array) => { if (!ended) ctl.enqueue(b); };
  const session = new MuxSession(engine, write, end);
  req.signal.addEventListener("abort", () => { session.abort(); end(); }, { once: true });
  void pump(req, session);
  return new Response(out, { headers: { "content-type": "application/octet-stream", "cache-control": "no-cache" } });
}

async function pump(req: Request, session: MuxSession): Promise<void> {
  const parser = new MuxParser();
  if (!req.body) return session.endInput();
  const r = req.body.getReader();
  try {
    for (;;) {
      const { value, done } = await r.read();
      if (done) break;
      session.onFrames(parser.push(value));
      // the frame being read counts against the server's budget of body bytes (conn-bounds.ts)
      const busy = parser.dead ? null : bodyHold(req, parser.held);
      if (busy) session.onFrames([{ kind: "busy", detail: busy.message }]);
      if (parser.dead || session.closed || busy) { r.cancel().catch(() => {}); return; }
    }
  } catch {
    session.abort(); // the client went away mid-body
    return;
  } finally {
    bodyDone(req);
  }
  session.onFrames(parser.end());
  session.endInput();
}
