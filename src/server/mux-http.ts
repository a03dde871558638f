// POST /v1/mux: the mux protocol over one streamed request body and one streamed response body
// (full duplex). Reads the body incrementally into the frame parser; a disconnect (the request
// aborts or the response stream is cancelled) cancels all of the stream's ids; the frame being read holds its bytes
// against the server's body budget (past it: ERROR 0 OVERLOADED, the stream closed); the output's flow is bounded
// (out-flow.ts); a session with no live ids may be closed to make room for another connection (conn-bounds.ts).
// State: per stream.
import type { EngineClient } from "./engine-client.ts";
import { bodyDone, bodyHold, idleStream, stallMs } from "./conn-bounds.ts";
import { OutFlow } from "./out-flow.ts";
import { MuxParser } from "./mux-parse.ts";
import { MuxSession } from "./mux-session.ts";

/** the request body's reader (what pump uses of it) */
type BodyReader = { read(): Promise<{ value?: Uint8Array; done: boolean }>; cancel(): Promise<void> };

export function muxHttp(req: Request, engine: EngineClient): Response {
  // the session's ids are held while the client is not reading, and cancelled when it stalls (out-flow.ts)
  const flow = new OutFlow({ hold: (on) => session.hold(on), abandon: () => { listed(); session.abort(); } }, stallMs(req));
  const session = new MuxSession(engine, (b) => flow.write(b), () => { listed(); flow.close(); });
  const body = req.body?.getReader();
  // closed to make room: an ERROR 0 OVERLOADED frame, then the stream and the request body end
  const listed = idleStream(req, { since: () => session.idleSince, close: (why) => { session.onFrames([{ kind: "busy", detail: why }]); body?.cancel().catch(() => {}); } });
  req.signal.addEventListener("abort", () => { listed(); session.abort(); flow.close(); }, { once: true });
  void pump(req, body, session);
  return new Response(flow.stream, { headers: { "content-type": "application/octet-stream", "cache-control": "no-cache" } });
}

async function pump(req: Request, r: BodyReader | undefined, session: MuxSession): Promise<void> {
  const parser = new MuxParser();
  if (!r) return session.endInput();
  try {
    for (;;) {
      const { value, done } = await r.read();
      if (done || !value) break;
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
