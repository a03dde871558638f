// Mux protocol conformance (shared/spec/mux.md) over POST /v1/mux and `serve --stdio`, on glm-tiny:
// READY first, ACCEPT/DATA/DONE, every error code but INTERNAL, drained payloads, interleaving,
// STOP, CANCEL, disconnect freeing the slot, prefix reuse, logprobs, ids=1, chat=1.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { startServer, type Server } from "../src/server/server.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { FrameReader, MuxClient, muxOnce, post, startTiny, submit } from "./server.helpers.ts";

if (!hasTiny) console.warn("[skip] mux suite: the glm-tiny fixture is absent");

const LONG = 3000; // max_tokens of generations that must still be running when the test acts

describe.skipIf(!hasTiny)("mux over HTTP", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 2, queue: 1, ctx: 4096 }); });
  afterAll(() => s.stop());

  async function idle(): Promise<void> {
    for (let i = 0; i < 200; i++) {
      const j = await (await fetch(`${s.url}/slots`)).json() as any;
      if (j.busy === 0 && j.queue === 0) return;
      await Bun.sleep(25);
    }
    throw new Error("slots did not become idle");
  }

  test("finite body: READY first, ACCEPT, one DATA per token, DONE; the response ends after the last DONE", async () => {
    const f = await muxOnce(s.url, submit(1, "Hello mux", 5) + submit(2, "Second one", 3, "seed=7", "auto", "0.8", "0.9"));
    expect(f[0].head).toBe(`READY glm-tiny 2 4096`);
    for (const id of ["1", "2"]) {
      const mine = f.filter((x) => x.words[1] === id);
      expect(mine[0].words[0]).toBe("ACCEPT");
      const done = mine.at(-1)!;
      expect(done.words.slice(0, 3)).toEqual(["DONE", id, "length"]);
      const emitted = Number(done.words[3]);
      expect(emitted).toBe(id === "1" ? 5 : 3);
      expect(mine.filter((x) => x.words[0] === "DATA").length).toBeGreaterThanOrEqual(emitted);
      expect(done.words[4]).toBe(mine[0].words[3]); // prompt_tokens as in ACCEPT
      expect(Number(done.words[6])).toBeGreaterThanOrEqual(0);
    }
    expect(f.at(-1)!.words[0]).toBe("DONE");
  });

  test("mux text at temperature 0 equals /v1/completions for the same prompt", async () => {
    const f = await muxOnce(s.url, submit(3, "The same prompt", 8));
    const r = new FrameReader();
    const text = Buffer.concat(f.filter((x) => x.words[0] === "DATA").map((x) => x.data!)).toString();
    const c = await (await post(s.url, "/v1/completions", { prompt: "The same prompt", max_tokens: 8, temperature: 0 })).json() as any;
    expect(text).toBe(c.choices[0].text);
    expect(r.rest).toBe(0);
  });

  test("prefix reuse on a pinned slot: ACCEPT reports prompt_tokens - 1 cached", async () => {
    await idle();
    const a = await muxOnce(s.url, submit(4, "prefix reuse text", 2, "", 1));
    const b = await muxOnce(s.url, submit(5, "prefix reuse text", 2, "", 1));
    const acc = (f: typeof a) => f.find((x) => x.words[0] === "ACCEPT")!.words;
    expect(acc(a)[2]).toBe("1");
    expect(Number(acc(b)[4])).toBe(Number(acc(b)[3]) - 1);
  });

  test("logprobs=k DATA frames, ids=1 and chat=1 payloads", async () => {
    const f = await muxOnce(s.url, submit(6, "abc", 3, "logprobs=2") + submit(7, "20,21,22", 2, "ids=1")
      + submit(8, JSON.stringify([{ role: "user", content: "hi" }]), 2, "chat=1"));
    const d = f.find((x) => x.words[0] === "DATA" && x.words[1] === "6")!;
    expect(d.head).toMatch(/^DATA 6 \d+ lp=-?[\d.e-]+ top=\d+:-?[\d.e-]+,\d+:-?[\d.e-]+$/);
    expect(f.find((x) => x.words[0] === "ACCEPT" && x.words[1] === "7")!.words[3]).toBe("3");
    expect(f.find((x) => x.words[0] === "DONE" && x.words[1] === "8")).toBeDefined();
  });

  test("error codes: BAD_REQUEST <field>, DUPLICATE_ID, EMPTY_PROMPT, CONTEXT_EXCEEDED, NOT_FOUND; payloads of rejects are drained", async () => {
    const sneaky = "STOP 1\nSUBMIT 99 auto 1 1 0 1\nx\n"; // frame-like bytes inside a rejected payload
    const long = Array.from({ length: 4200 }, (_, i) => 20 + (i % 300)).join(",");
    const f = await muxOnce(s.url,
      submit(10, sneaky, 1, "", "auto", "9")           // temperature out of range
      + submit(11, "x", 1, "bogus=1")                   // unknown key
      + submit(12, "x", 1, "", 7)                       // slot out of range
      + submit(13, "", 1)                               // empty prompt
      + submit(14, long, 1, "ids=1")                    // context exceeded
      + submit(15, "1,x", 1, "ids=1")                   // bad ids payload
      + "STOP 404\nCANCEL 405\n"
      + submit(16, "dup", LONG) + submit(16, "dup", 1)  // duplicate live id
      + "CANCEL 16\n");
    const err = (id: number) => f.find((x) => x.words[0] === "ERROR" && x.words[1] === String(id))?.words.slice(2, 4);
    expect(err(10)).toEqual(["BAD_REQUEST", "temperature"]);
    expect(err(11)).toEqual(["BAD_REQUEST", "bogus"]);
    expect(err(12)).toEqual(["BAD_REQUEST", "slot"]);
    expect(err(13)).toEqual(["EMPTY_PROMPT"]);
    expect(f.find((x) => x.words[1] === "14")!.head).toBe("ERROR 14 CONTEXT_EXCEEDED 4200 4096");
    expect(err(15)).toEqual(["BAD_REQUEST", "payload"]);
    expect(err(404)).toEqual(["NOT_FOUND"]);
    expect(err(405)).toEqual(["NOT_FOUND"]);
    expect(f.filter((x) => x.words[1] === "16" && x.words[0] === "ERROR").map((x) => x.words[2])).toEqual(["DUPLICATE_ID", "CANCELLED"]);
    expect(f.some((x) => x.words[1] === "99" || x.words[1] === "1")).toBe(false); // nothing parsed from the drained payload
  });

  test("BAD_FRAME closes the stream after the frame; its live ids are cancelled", async () => {
    const c = new MuxClient(s.url);
    c.send(submit(20, "running", LONG));
    await c.waitFor((f) => f.words[0] === "DATA" && f.words[1] === "20");
    c.send("HELLO\n");
    await c.done;
    expect(c.frames.at(-1)!.head).toMatch(/^ERROR 0 BAD_FRAME/);
    await idle();
  });

  test("SLOT_BUSY, OVERLOADED, interleaving of two ids, STOP and CANCEL", async () => {
    await idle();
    const c = new MuxClient(s.url);
    c.send(submit(30, "first", LONG, "", 0) + submit(31, "second", LONG, "", 1));
    const first31 = c.frames.indexOf(await c.waitFor((f) => f.words[0] === "DATA" && f.words[1] === "31"));
    // a DATA of 30 after 31's first (not one from before it: then STOP could land before 30 decodes again)
    await c.waitFor((f) => f.words[0] === "DATA" && f.words[1] === "30" && c.frames.indexOf(f) > first31);
    c.send(submit(32, "busy", 1, "", 0) + submit(33, "waits", LONG) + submit(34, "refused", 1));
    expect((await c.end(32)).words[2]).toBe("SLOT_BUSY");
    expect((await c.end(34)).words[2]).toBe("OVERLOADED");
    c.send("STOP 30\n");
    const done = await c.end(30);
    expect(done.words[2]).toBe("stopped");
    expect(Number(done.words[3])).toBeLessThan(LONG);
    await c.waitFor((f) => f.words[0] === "ACCEPT" && f.words[1] === "33"); // the freed slot admits the waiting id
    c.send("CANCEL 31\nCANCEL 33\n");
    expect((await c.end(31)).words.slice(2)).toEqual(["CANCELLED"]);
    expect((await c.end(33)).words.slice(2)).toEqual(["CANCELLED"]);
    // DATA of the two first ids interleave: the second started before the first stopped
    const data = c.frames.map((f, i) => [f, i] as const).filter(([f]) => f.words[0] === "DATA");
    const firstOf31 = data.find(([f]) => f.words[1] === "31")![1];
    const lastOf30 = data.filter(([f]) => f.words[1] === "30").at(-1)![1];
    expect(firstOf31).toBeLessThan(lastOf30);
    c.endInput();
    await c.done;
    expect(c.ended).toBe(true);
  });

  test("a flood of SUBMITs past what the server takes is refused in the stream, not each on the engine's thread", async () => {
    await idle();
    const total = async () => Number(/^hummingbird_requests_total (\d+)/m.exec(await (await fetch(`${s.url}/metrics`)).text())![1]);
    const before = await total(), n = 5000;
    const f = await muxOnce(s.url, Array.from({ length: n }, (_, i) => submit(1000 + i, "hi", 1)).join(""));
    const ends = f.filter((x) => x.words[0] === "DONE" || x.words[0] === "ERROR");
    expect(new Set(ends.map((x) => x.words[1])).size).toBe(n); // every id answered once
    expect(ends.filter((x) => x.words[2] === "OVERLOADED").length).toBeGreaterThan(n / 2);
    expect(await total() - before).toBeLessThan(n / 4); // (every one went to the engine before: 200k took its thread 7.9 s)
  });

  test("a STOP or CANCEL repeated for one id is asked of the engine once", async () => {
    await idle();
    const e = s.engine as unknown as { send(m: { t: string }): void }, send = e.send.bind(e), asked: string[] = [];
    e.send = (m) => { if (m.t === "stop" || m.t === "cancel") asked.push(m.t); send(m); };
    try {
      const f = await muxOnce(s.url, submit(900, "hello", LONG) + "STOP 900\n".repeat(1000) + "CANCEL 900\n".repeat(1000));
      expect(f.some((x) => x.words[1] === "900" && (x.words[0] === "DONE" || x.words[0] === "ERROR"))).toBe(true);
    } finally { e.send = send; }
    expect(asked).toEqual(["stop", "cancel"]); // (before: one message a frame until the id's end came back)
  });

  test("a client disconnect cancels its ids and frees the slot within a step", async () => {
    await idle();
    const c = new MuxClient(s.url);
    c.send(submit(40, "to be abandoned", LONG, "", 0));
    await c.waitFor((f) => f.words[0] === "DATA" && f.words[1] === "40");
    c.ac.abort();
    await idle();
    const f = await muxOnce(s.url, submit(41, "slot 0 again", 1, "", 0));
    expect(f.find((x) => x.words[1] === "41")!.words[0]).toBe("ACCEPT");
    const m = await (await fetch(`${s.url}/metrics`)).text();
    expect(Number(/^hummingbird_requests_failed_total (\d+)/m.exec(m)![1])).toBeGreaterThan(0);
  });
});

describe.skipIf(!hasTiny)("mux while the model loads", () => {
  test("frames sent before the model is ready are answered after READY", async () => {
    const s = startServer({ dir: TINY, slots: 1, port: 0, loadDelayMs: 300 });
    try {
      const f = await muxOnce(s.url, submit(1, "early bird", 2) + "STOP 2\n");
      expect(f.map((x) => x.words[0])).toEqual(["READY", "ERROR", "ACCEPT", "DATA", "DATA", "DONE"]);
    } finally {
      await s.stop();
    }
  });
});

describe.skipIf(!hasTiny)("mux over stdio", () => {
  test("serve --stdio: frames on stdout only, logs on stderr, exits after stdin closes", async () => {
    const p = Bun.spawn(["bun", join(import.meta.dir, "../src/cli.ts"), "serve", "--stdio", "--model", TINY, "--slots", "2"], {
      stdin: "pipe", stdout: "pipe", stderr: "pipe",
    });
    p.stdin.write(submit(1, "stdio prompt", 4) + submit(2, "x", 1, "nope=1") + "CANCEL 9\n");
    p.stdin.end();
    const timer = setTimeout(() => p.kill(), 30000);
    const [out, err, code] = await Promise.all([new Response(p.stdout).arrayBuffer(), new Response(p.stderr).text(), p.exited]);
    clearTimeout(timer);
    expect(code).toBe(0);
    const r = new FrameReader();
    r.push(new Uint8Array(out));
    expect(r.rest).toBe(0);
    const heads = r.frames.map((f) => f.head);
    expect(heads[0]).toBe("READY glm-tiny 2 4096");
    expect(heads).toContain("ERROR 2 BAD_REQUEST nope is an unknown key");
    expect(heads).toContain("ERROR 9 NOT_FOUND");
    expect(heads.find((h) => h.startsWith("DONE 1 length 4 "))).toBeDefined();
    expect(err).toContain("SERVING MODEL");
  });
});
