// Hostile HTTP clients (issue 29, items 4, 5 and 9): idle kept-alive sockets are closed after --timeout and the
// server still answers; requests beyond --max-connections get a clear 503; a stream that is quiet longer than the
// timeout but makes progress is not cut; cross-site form posts (text/plain, no type) get 415; Host headers naming
// another site get 403 (DNS rebinding); `bearer` in any case; a model not served is a 404; /apply-template shows tools;
// stalled uploads hold at most the server's body budget (503, Retry-After, the connection closed past it); past the
// connection cap an idle mux session makes room; a body trickled a byte at a time is cut.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect, type Socket } from "node:net";
import { bodyRead, connectionBounds, idleStream } from "../src/server/conn-bounds.ts";
import type { EngineClient } from "../src/server/engine-client.ts";
import { MuxSession } from "../src/server/mux-session.ts";
import type { ReqEvent } from "../src/engine/serving/protocol.ts";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { MuxClient, post, startTiny, submit, TOOL_TURNS_TEMPLATE } from "./server.helpers.ts";

/** one raw HTTP/1.1 request on a new socket; resolves with the socket and the response head once it has come */
function rawRequest(port: number, head: string): Promise<{ sock: Socket; text: () => string; closed: Promise<void> }> {
  return new Promise((res, rej) => {
    const sock = connect(port, "127.0.0.1");
    let text = "", answered = false;
    const closed = new Promise<void>((r) => sock.once("close", () => r()));
    sock.on("error", () => {});
    sock.on("data", (d) => { text += d.toString(); if (!answered && text.includes("\r\n\r\n")) { answered = true; res({ sock, text: () => text, closed }); } });
    sock.once("connect", () => sock.write(head));
    sock.once("close", () => { if (!answered) rej(new Error(`closed before an answer: ${text}`)); });
  });
}
const status = (t: string) => Number(/^HTTP\/1\.1 (\d+)/.exec(t)?.[1]);

describe.skipIf(!hasTiny)("hostile HTTP clients", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 2, timeout: 1, maxConnections: 40, acceptAnyModel: false, chatTemplate: TOOL_TURNS_TEMPLATE }); });
  afterAll(async () => { await s.stop(); });

  test("200 idle kept-alive sockets are closed after the idle timeout; the server still answers", async () => {
    const t0 = performance.now();
    const socks = await Promise.all(Array.from({ length: 200 }, () => rawRequest(s.port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")));
    expect(socks.every((x) => status(x.text()) === 200)).toBe(true);
    const all = Promise.all(socks.map((x) => x.closed)).then(() => "closed");
    const r = await Promise.race([all, Bun.sleep(7000).then(() => "open")]);
    for (const x of socks) x.sock.destroy();
    expect(r).toBe("closed"); // (the timeout's granularity is ~4 s; before: idleTimeout 0 kept them all open for ever)
    expect(performance.now() - t0).toBeLessThan(7500);
    expect((await fetch(`${s.url}/health`)).status).toBe(200);
  }, 15000);

  test("requests beyond --max-connections get 503 too_many_connections, the connection closed; then served again", async () => {
    // 40 requests whose bodies never finish hold their connections (the cap counts requests in progress)
    const held = await Promise.all(Array.from({ length: 40 }, async () => {
      const sock = connect(s.port, "127.0.0.1");
      sock.on("error", () => {});
      await new Promise((r) => sock.once("connect", r));
      sock.write("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{");
      return sock;
    }));
    await Bun.sleep(100);
    const r = await fetch(`${s.url}/health`);
    expect(r.status).toBe(503);
    expect(r.headers.get("connection")).toBe("close");
    expect(((await r.json()) as any).error).toMatchObject({ code: "too_many_connections" });
    for (const x of held) x.destroy();
    await Bun.sleep(100);
    expect((await fetch(`${s.url}/health`)).status).toBe(200);
  });

  test("past --max-connections the mux session idle longest is closed (ERROR 0 OVERLOADED) and the newcomer served", async () => {
    // 40 mux sessions without live ids hold every connection; one of them generates first (its id ends: idle again)
    const ms = Array.from({ length: 40 }, () => new MuxClient(s.url));
    await Promise.all(ms.map((m) => m.waitFor((f) => f.words[0] === "READY")));
    ms[7].send(submit(1, "Once upon", 2));
    await ms[7].end(1);
    const r = await fetch(`${s.url}/health`);
    expect(r.status).toBe(200); // before: 503 too_many_connections for as long as the sessions stayed
    const hit = (m: MuxClient) => m.frames.some((f) => f.words[0] === "ERROR" && f.words[2] === "OVERLOADED");
    for (let i = 0; i < 100 && !ms.some(hit); i++) await Bun.sleep(20); // (the frame comes on its own connection)
    await Bun.sleep(100);
    const closed = ms.filter(hit);
    expect(closed.length).toBe(1);
    expect(closed[0]).not.toBe(ms[7]); // (idle since its id ended, later than the others)
    const err = closed[0].frames.find((f) => f.words[0] === "ERROR")!;
    expect(err.words[1]).toBe("0");
    expect(err.head).toContain("--max-connections");
    await closed[0].done; // its stream ended
    expect((await (await fetch(`${s.url}/metrics`)).text())).toMatch(/hummingbird_idle_sessions_closed_total [1-9]/);
    for (const m of ms) m.ac.abort();
    await Promise.all(ms.map((m) => m.done));
  }, 20000);

  test("a request body trickled a byte at a time is cut after the timeout (Bun's ~16 KiB/s rule); the server answers", async () => {
    const sock = connect(s.port, "127.0.0.1");
    sock.on("error", () => {});
    const t0 = performance.now(), closed = new Promise<number>((r) => sock.once("close", () => r(performance.now() - t0)));
    await new Promise((r) => sock.once("connect", r));
    sock.write("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{");
    const drip = setInterval(() => sock.write(" "), 300); // never silent for the 1 s timeout
    const at = await Promise.race([closed, Bun.sleep(9000).then(() => Infinity)]);
    clearInterval(drip);
    sock.destroy();
    expect(at).toBeLessThan(9000); // (the timeout at its ~4 s granularity)
    expect((await fetch(`${s.url}/health`)).status).toBe(200);
  }, 15000);

  test("a mux stream quiet for longer than the timeout is not cut and then generates", async () => {
    const m = new MuxClient(s.url, { "content-type": "application/octet-stream" });
    await Bun.sleep(5500); // (> the 1 s timeout at its ~4 s granularity)
    expect(m.ended).toBe(false);
    m.send(submit(1, "Once upon", 4));
    const end = await m.end(1);
    expect(end.words[0]).toBe("DONE");
    m.endInput();
    await m.done;
  }, 15000);

  test("cross-site simple requests: text/plain, form and no content type get 415; the mux needs a non-form type", async () => {
    const body = JSON.stringify({ prompt: "Once", max_tokens: 1 });
    for (const ct of ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const r = await fetch(`${s.url}/v1/completions`, { method: "POST", body, headers: { "content-type": ct } });
      expect(r.status).toBe(415);
      expect(((await r.json()) as any).error.message).toContain("application/json");
    }
    const none = await fetch(`${s.url}/slots/0?action=save`, { method: "POST", body: new Uint8Array(Buffer.from('{"filename":"x.bin"}')) });
    expect(none.status).toBe(415);
    expect((await post(s.url, "/v1/completions", { prompt: "Once", max_tokens: 1 })).status).toBe(200);
    expect((await fetch(`${s.url}/v1/mux`, { method: "POST", body: submit(1, "Once", 1), headers: { "content-type": "text/plain" } })).status).toBe(415);
  });

  test("a Host naming another site is refused (DNS rebinding); localhost and 127.0.0.1 with the port pass", async () => {
    const evil = await rawRequest(s.port, "GET /v1/models HTTP/1.1\r\nHost: evil.example:8080\r\nConnection: close\r\n\r\n");
    await evil.closed;
    expect(status(evil.text())).toBe(403);
    expect(evil.text()).toContain("allowed-hosts");
    for (const h of [`localhost:${s.port}`, `127.0.0.1:${s.port}`, "LOCALHOST", `[::1]:${s.port}`]) {
      const ok = await rawRequest(s.port, `GET /v1/models HTTP/1.1\r\nHost: ${h}\r\nConnection: close\r\n\r\n`);
      await ok.closed;
      expect(status(ok.text())).toBe(200);
    }
  });

  test("a model not served is a 404 model_not_found on every generation route; the served id passes", async () => {
    const msgs = [{ role: "user", content: "Hi" }];
    for (const [path, b] of [["/v1/chat/completions", { messages: msgs, max_tokens: 1 }], ["/v1/completions", { prompt: "Hi", max_tokens: 1 }],
      ["/v1/messages", { messages: msgs, max_tokens: 1 }], ["/v1/responses", { input: "Hi", max_output_tokens: 1 }], ["/v1/embeddings", { input: "Hi" }]] as const) {
      const bad = await post(s.url, path, { ...b, model: "gpt-4o" });
      expect(bad.status).toBe(404);
      expect(JSON.stringify(await bad.json())).toContain("gpt-4o");
      expect((await post(s.url, path, { ...b, model: "glm-tiny" })).status).toBe(200);
    }
    expect((await post(s.url, "/completion", { prompt: "Hi", n_predict: 1, model: "anything" })).status).toBe(200); // (llama-server's takes none)
  });

  test("/apply-template shows the request's tools to the template, as the chat route does", async () => {
    const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: {} } } }];
    const j = (await (await post(s.url, "/apply-template", { messages: [{ role: "user", content: "Hi" }], tools })).json()) as any;
    expect(j.prompt).toContain("[tool get_weather]");
  });
});

describe.skipIf(!hasTiny)("request bodies being read, all together", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 1, maxBody: 64 * 1024, bodyBudget: 256 * 1024 }); });
  afterAll(async () => { await s.stop(); });
  /** a socket that declared a 64 KiB body and sent `n` bytes of it, then stalls */
  const stall = async (n: number) => {
    const sock = connect(s.port, "127.0.0.1");
    let text = "";
    sock.on("error", () => {});
    sock.on("data", (d) => { text += d.toString(); });
    await new Promise((r) => sock.once("connect", r));
    sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${64 * 1024}\r\n\r\n`);
    sock.write(" ".repeat(n));
    return { sock, text: () => text };
  };
  const chat = () => post(s.url, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 2 });

  test("past the budget an upload gets 503 too_many_body_bytes with Retry-After, closed; below it and after, served", async () => {
    const held = await Promise.all(Array.from({ length: 4 }, () => stall(60 * 1024))); // 240 of 256 KiB held
    await Bun.sleep(200);
    expect((await chat()).status).toBe(200); // (a small body still fits)
    const over = await stall(60 * 1024);
    for (let i = 0; i < 50 && !over.text().includes("\r\n\r\n"); i++) await Bun.sleep(20);
    expect(status(over.text())).toBe(503);
    expect(over.text().toLowerCase()).toContain("retry-after: 1");
    expect(over.text().toLowerCase()).toContain("connection: close");
    expect(over.text()).toContain("too_many_body_bytes");
    for (const x of [...held, over]) x.sock.destroy();
    await Bun.sleep(200);
    const again = await Promise.all(Array.from({ length: 4 }, () => stall(60 * 1024))); // the bytes came back
    await Bun.sleep(200);
    expect(again.every((x) => x.text() === "")).toBe(true);
    for (const x of again) x.sock.destroy();
    expect((await chat()).status).toBe(200);
  }, 15000);

  test("mux: a SUBMIT frame being read holds its bytes; past the budget ERROR 0 OVERLOADED and the stream closes", async () => {
    const part = (id: number) => { // a 200 KB payload announced, 60 KiB of it sent
      const m = new MuxClient(s.url);
      m.send(`SUBMIT ${id} auto 200000 1 0 1\n`);
      m.send(new Uint8Array(60 * 1024).fill(0x61));
      return m;
    };
    const held = [1, 2, 3, 4].map(part);
    await Bun.sleep(300);
    expect(held.every((m) => !m.ended && m.frames.every((x) => x.words[0] === "READY"))).toBe(true);
    const over = part(5);
    const f = await over.waitFor((x) => x.words[0] === "ERROR");
    expect(f.words.slice(0, 3)).toEqual(["ERROR", "0", "OVERLOADED"]);
    expect(f.head).toContain("budget");
    await over.done;
    for (const m of held) m.ac.abort();
    await Promise.all(held.map((m) => m.done));
    await Bun.sleep(200);
    const whole = new MuxClient(s.url); // the held bytes came back: a 100 KB frame is read whole (then judged by the engine)
    whole.send(`SUBMIT 6 auto 100000 1 0 1\n`);
    whole.send(new Uint8Array(100000).fill(0x61));
    whole.send("\n");
    const e = await whole.end(6);
    whole.ac.abort();
    expect(e.words.slice(0, 3)).toEqual(["ERROR", "6", "CONTEXT_EXCEEDED"]); // (its own answer, not the stream's ERROR 0)
  }, 20000);
});

describe.skipIf(!hasTiny)("API key scheme", () => {
  test("`bearer` and `BEARER` are accepted as `Bearer` (RFC 7235); a wrong key is not", async () => {
    const s = await startTiny({ slots: 1, apiKey: "k1" });
    try {
      for (const a of ["bearer k1", "BEARER k1", "Bearer k1"]) expect((await fetch(`${s.url}/v1/models`, { headers: { authorization: a } })).status).toBe(200);
      expect((await fetch(`${s.url}/v1/models`, { headers: { authorization: "bearer k2" } })).status).toBe(401);
    } finally { await s.stop(); }
  });
});

test("a stream quiet for longer than the idle timeout (a slow prefill) is not cut, and the timeout returns after it", async () => {
  const b = connectionBounds(1, 10), enc = new TextEncoder();
  const srv = Bun.serve({ hostname: "127.0.0.1", port: 0, idleTimeout: b.idleTimeout, fetch: (req, sv) => b.fetch(req, sv, async (r) => {
    await r.text();
    bodyRead(r);
    await Bun.sleep(5000); // the quiet prefill (> 1 s at the timeout's ~4 s granularity)
    let i = 0;
    return new Response(new ReadableStream({ async pull(c) { if (i++ === 2) return c.close(); c.enqueue(enc.encode(`data: ${i}\n\n`)); } }),
      { headers: { "content-type": "text/event-stream" } });
  }) });
  try {
    // (a GET: Bun itself stops timing a request whose body has fully come, not one that has none)
    const r = await rawRequest(srv.port!, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    const t = performance.now();
    await r.closed; // (the server closes the kept-alive connection once the stream ended: the timeout is back)
    expect(r.text()).toContain("data: 2");
    expect(performance.now() - t).toBeLessThan(6000);
  } finally { srv.stop(true); }
}, 15000);

test("past the cap the stream idle longest is closed, one per request; none idle: 503", async () => {
  const b = connectionBounds(1, 2), now = performance.now();
  const srv = (pending: number) => ({ pendingRequests: pending, timeout() {} }) as never;
  const closed: string[] = [];
  const stream = (name: string, since: number | null) => ({ since: () => since, close: () => { closed.push(name); } });
  const streams = [stream("working", null), stream("fresh", now), stream("old", now - 5000), stream("older", now - 9000)];
  for (const x of streams) await b.fetch(new Request("http://h/v1/mux", { method: "POST" }), srv(1), (r) => { idleStream(r, x); return new Response("ok"); });
  const over = () => b.fetch(new Request("http://h/health"), srv(3), () => new Response("served"));
  expect(await (await over()).text()).toBe("served");
  expect(closed).toEqual(["older"]);
  expect(await (await over()).text()).toBe("served");
  expect(await (await over()).text()).toBe("served"); // (even one just opened: sessions reopened at once must not fill the cap)
  expect((await over()).status).toBe(503); // "working" has work
  expect(closed).toEqual(["older", "old", "fresh"]);
});

test("a mux session is idle only after READY and while it has no live ids, since its last id ended", async () => {
  let on: ((e: ReqEvent) => void) | null = null;
  const info = { model: "m", slots: 1, ctx: 64 };
  const engine = { ready: Promise.resolve(info), info, submit: (_: unknown, f: (e: ReqEvent) => void) => { on = f; return { hold() {}, stop() {}, cancel() {} }; }, abandon() {} };
  const m = new MuxSession(engine as unknown as EngineClient, () => {}, () => {});
  expect(m.idleSince).toBeNull(); // before READY
  await Bun.sleep(0);
  const t0 = m.idleSince!;
  expect(t0).toBeLessThanOrEqual(performance.now());
  m.onFrames([{ kind: "submit", id: "1", slot: "auto", payload: new TextEncoder().encode("hi"), max_tokens: 1, temperature: 0, top_p: 1 } as never]);
  expect(m.idleSince).toBeNull();
  await Bun.sleep(10);
  on!({ t: "done", bytes: new Uint8Array(0), reason: "length", emitted: 1, prompt_tokens: 1, cached_tokens: 0, decode_tok_s: 0 } as never);
  expect(m.idleSince!).toBeGreaterThan(t0);
  m.abort();
  expect(m.idleSince).toBeNull();
});
