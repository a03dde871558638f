// The pure mux frame parser (src/server/mux-parse.ts): every frame kind, byte-at-a-time feeding,
// payload draining after a rejected header, fatal framing errors, and a deterministic fuzz.
import { describe, expect, test } from "bun:test";
import { MAX_HEADER, MuxParser, type MuxEvent } from "../src/server/mux-parse.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function parseAll(s: string | Uint8Array, chunk = Infinity): MuxEvent[] {
  const bytes = typeof s === "string" ? enc.encode(s) : s;
  const p = new MuxParser();
  const out: MuxEvent[] = [];
  const step = Number.isFinite(chunk) ? chunk : bytes.length || 1;
  for (let i = 0; i < bytes.length; i += step) out.push(...p.push(bytes.subarray(i, i + step)));
  out.push(...p.end());
  return out;
}

const payloadText = (e: MuxEvent) => (e.kind === "submit" ? dec.decode(e.payload) : null);

describe("mux-parse", () => {
  test("SUBMIT with keys, raw payload containing newlines, STOP, CANCEL", () => {
    const s = "SUBMIT 7 auto 11 16 0.7 0.9 logprobs=3 seed=42 min_p=0.05\nhello\nworld\nSTOP 7\nCANCEL 18446744073709551615\n";
    for (const chunk of [Infinity, 1, 2, 5]) {
      const ev = parseAll(s, chunk);
      expect(ev.map((e) => e.kind)).toEqual(["submit", "stop", "cancel"]);
      const sub = ev[0];
      if (sub.kind !== "submit") throw new Error("not a submit");
      expect(payloadText(sub)).toBe("hello\nworld");
      expect([sub.id, sub.slot, sub.max_tokens, sub.temperature, sub.top_p, sub.logprobs, sub.seed, sub.min_p]).toEqual(["7", "auto", 16, 0.7, 0.9, 3, 42, 0.05]);
      expect(ev[2]).toEqual({ kind: "cancel", id: "18446744073709551615" });
    }
  });

  test("ids=1 / chat=1 flags, numbered slot, empty payload", () => {
    const ev = parseAll("SUBMIT 1 3 5 1 0 1 ids=1\n1,2,3\nSUBMIT 2 auto 0 1 2 1 chat=1\n\n");
    expect(ev.map((e) => e.kind)).toEqual(["submit", "submit"]);
    const [a, b] = ev as Extract<MuxEvent, { kind: "submit" }>[];
    expect([a.slot, a.ids, a.chat, payloadText(a)]).toEqual([3, true, false, "1,2,3"]);
    expect([b.chat, b.payload.length]).toEqual([true, 0]);
  });

  test("grammar=<bytes>: the GBNF block follows the payload, raw bytes (newlines too), any chunking", () => {
    const g = 'root ::= "é" [a-z]\n';
    const gb = enc.encode(g);
    const s = `SUBMIT 4 auto 5 8 0 1 seed=1 grammar=${gb.length}\nhi\nyo\n${g}\nSTOP 4\n`;
    for (const chunk of [Infinity, 1, 2, 7]) {
      const ev = parseAll(s, chunk);
      expect(ev.map((e) => e.kind)).toEqual(["submit", "stop"]);
      const sub = ev[0];
      if (sub.kind !== "submit") throw new Error("not a submit");
      expect(payloadText(sub)).toBe("hi\nyo");
      expect(dec.decode(sub.grammar!)).toBe(g);
      expect(sub.seed).toBe(1);
    }
    const empty = parseAll("SUBMIT 1 auto 1 1 0 1 grammar=0\nx\n\n");
    expect(empty).toHaveLength(1);
    expect((empty[0] as Extract<MuxEvent, { kind: "submit" }>).grammar).toEqual(new Uint8Array(0));
    const none = parseAll("SUBMIT 1 auto 1 1 0 1\nx\n")[0] as Extract<MuxEvent, { kind: "submit" }>;
    expect(none.grammar).toBeUndefined();
  });

  const rejects: [string, string, string][] = [
    ["SUBMIT 0 auto 3 1 0 1\nabc\n", "0", "id"],
    ["SUBMIT 01 auto 3 1 0 1\nabc\n", "0", "id"],
    ["SUBMIT 18446744073709551616 auto 3 1 0 1\nabc\n", "0", "id"],
    ["SUBMIT 5 x 3 1 0 1\nabc\n", "5", "slot"],
    ["SUBMIT 5 auto 3 0 0 1\nabc\n", "5", "max_tokens"],
    ["SUBMIT 5 auto 3 1 2.5 1\nabc\n", "5", "temperature"],
    ["SUBMIT 5 auto 3 1 -1 1\nabc\n", "5", "temperature"],
    ["SUBMIT 5 auto 3 1 0 0\nabc\n", "5", "top_p"],
    ["SUBMIT 5 auto 3 1 0 1.5\nabc\n", "5", "top_p"],
    ["SUBMIT 5 auto 3 1 0 1 foo=1\nabc\n", "5", "foo"],
    ["SUBMIT 5 auto 3 1 0 1 logprobs=21\nabc\n", "5", "logprobs"],
    ["SUBMIT 5 auto 3 1 0 1 min_p=2\nabc\n", "5", "min_p"],
    ["SUBMIT 5 auto 3 1 0 1 seed=-1\nabc\n", "5", "seed"],
    ["SUBMIT 5 auto 3 1 0 1 ids=1 chat=1\nabc\n", "5", "chat"],
    ["SUBMIT 5 auto 3 1 0 1 seed=1 seed=2\nabc\n", "5", "seed"],
    ["SUBMIT 5 auto 3 1 9 1 grammar=4\nabc\nroot\n", "5", "temperature"], // both blocks drained
    ["SUBMIT 5 auto 3 1 0 1 grammar=4 grammar=4\nabc\nroot\n", "5", "grammar"], // one block; the key twice
    ["STOP x\n", "0", "id"],
  ];
  for (const [frame, id, field] of rejects) {
    test(`reject ${field}: ${JSON.stringify(frame.split("\n")[0])} — payload drained, stream stays in sync`, () => {
      for (const chunk of [Infinity, 1, 3]) {
        const ev = parseAll(frame + "STOP 9\n", chunk);
        expect(ev).toHaveLength(2);
        expect(ev[0]).toMatchObject({ kind: "reject", id, field });
        expect(ev[1]).toEqual({ kind: "stop", id: "9" });
      }
    });
  }

  const fatal: [string, string][] = [
    ["HELLO 1\n", "unknown command"],
    ["\n", "empty header"],
    ["SUBMIT 1 auto\n", "too few fields"],
    ["SUBMIT 1 auto x 1 0 1\nabc\n", "bytes not a number"],
    ["SUBMIT 1 auto 16777217 1 0 1\n", "bytes over 16 MiB"],
    ["SUBMIT 1 auto 3 1 0 1\nabcX", "no newline after payload"],
    ["SUBMIT 1 auto 3 1 0 1 grammar=x\nabc\n", "grammar size unreadable"],
    ["STOP\n", "STOP without id"],
    ["CANCEL 1 2\n", "CANCEL with two ids"],
    ["SUBMIT 1 auto 3 1 0 1\nab", "stream ends inside payload"],
    ["STOP 1", "stream ends inside header"],
    ["X".repeat(MAX_HEADER + 10), "header too long"],
  ];
  for (const [frame, what] of fatal) {
    test(`BAD_FRAME: ${what}; nothing parsed after it`, () => {
      const ev = parseAll(frame + "STOP 9\n");
      const i = ev.findIndex((e) => e.kind === "bad_frame");
      expect(i).toBeGreaterThanOrEqual(0);
      expect(ev.slice(i + 1)).toEqual([]);
    });
  }

  test("a 1 MiB payload arrives intact in small chunks", () => {
    const body = new Uint8Array(1 << 20).map((_, i) => (i * 7) & 255);
    const head = enc.encode(`SUBMIT 3 auto ${body.length} 1 0 1\n`);
    const all = new Uint8Array(head.length + body.length + 1);
    all.set(head); all.set(body, head.length); all[all.length - 1] = 10;
    const ev = parseAll(all, 4093);
    expect(ev).toHaveLength(1);
    const e = ev[0];
    if (e.kind !== "submit") throw new Error(e.kind);
    expect(Buffer.compare(Buffer.from(e.payload), Buffer.from(body))).toBe(0);
  });

  test("fuzz: 3000 random frame streams never throw; events are well-formed; nothing after a BAD_FRAME", () => {
    let seed = 12345;
    const rnd = (n: number) => { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; return (seed >>> 8) % n; };
    const atoms = ["SUBMIT", "STOP", "CANCEL", " ", "\n", "auto", "1", "0", "3", "0.5", "-1", "ids=1", "chat=1", "logprobs=2", "grammar=2", "x", "abc", "\u00ff", "99999999999999999999999"];
    for (let k = 0; k < 3000; k++) {
      let s = "";
      const n = 1 + rnd(20);
      for (let i = 0; i < n; i++) s += atoms[rnd(atoms.length)];
      const ev = parseAll(s, 1 + rnd(7));
      const bad = ev.findIndex((e) => e.kind === "bad_frame");
      if (bad >= 0) expect(bad).toBe(ev.length - 1);
      for (const e of ev) {
        if (e.kind === "submit") expect(e.id).toMatch(/^[1-9][0-9]*$/);
        if (e.kind === "reject") expect(e.field.length).toBeGreaterThan(0);
      }
    }
  });
});
