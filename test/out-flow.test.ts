// The flow of a streamed response (src/server/out-flow.ts) on its own: its requests are held once more than HOLD_BYTES
// wait for the client and let go once the connection takes them; a client that takes nothing for the stall time is
// dropped (its requests abandoned, the stream errored); one that reads slowly but steadily gets every byte; a closed
// flow ends once its waiting bytes are taken. A JSON reply written in pieces (jsonPieces) through it.
import { expect, test } from "bun:test";
import { HOLD_BYTES, OutFlow } from "../src/server/out-flow.ts";
import { jsonPieces } from "../src/server/gen-stream.ts";

function owner() {
  const o = { holds: [] as boolean[], abandoned: 0, hold: (on: boolean) => void o.holds.push(on), abandon: () => void o.abandoned++ };
  return o;
}
const chunk = (n: number, v = 1) => new Uint8Array(n).fill(v);

test("held past HOLD_BYTES waiting, let go once the connection takes them; the bytes come in order", async () => {
  const o = owner(), f = new OutFlow(o, 60_000), r = f.stream.getReader();
  for (let i = 0; i < 9; i++) f.write(chunk(64 * 1024, i)); // 576 KiB, nobody reading
  expect(f.waiting).toBe(9 * 64 * 1024);
  expect(o.holds).toEqual([true]);
  const { value } = await r.read(); // everything waiting, in one chunk
  expect(value!.length).toBe(9 * 64 * 1024);
  expect(Array.from({ length: 9 }, (_, i) => value![i * 64 * 1024])).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
  expect(o.holds).toEqual([true, false]);
  expect(f.waiting).toBe(0);
  f.write(chunk(HOLD_BYTES)); // exactly HOLD_BYTES: not past it
  expect(o.holds).toEqual([true, false]);
  f.close();
  expect((await r.read()).value!.length).toBe(HOLD_BYTES);
  expect((await r.read()).done).toBe(true);
  expect(o.abandoned).toBe(0);
});

test("a client that takes nothing for the stall time is dropped: its requests abandoned, the stream errored", async () => {
  const o = owner(), f = new OutFlow(o, 200), r = f.stream.getReader();
  f.write(chunk(1000));
  await r.read(); // took the first bytes, then stops reading
  f.write(chunk(1000));
  const t0 = performance.now();
  while (o.abandoned === 0 && performance.now() - t0 < 3000) await Bun.sleep(20);
  expect(o.abandoned).toBe(1);
  expect(performance.now() - t0).toBeGreaterThan(150);
  expect(f.closed).toBe(true);
  f.write(chunk(10)); // ignored
  expect(f.waiting).toBe(0);
  await expect(r.read()).rejects.toThrow(/took none of 1000 bytes/);
});

test("the stall clock also runs after close(), until the waiting bytes are taken", async () => {
  const o = owner(), f = new OutFlow(o, 150);
  f.write(chunk(10));
  f.close(); // its requests are over: nothing to abandon any more, but the connection still goes
  await Bun.sleep(600);
  expect(o.abandoned).toBe(0);
  await expect(f.stream.getReader().read()).rejects.toThrow(/took none of 10 bytes/);
});

test("a slow but steady reader is held and let go, never dropped, and gets every byte", async () => {
  const o = owner(), f = new OutFlow(o, 300), r = f.stream.getReader();
  let got = 0, sum = 0;
  const reading = (async () => {
    for (;;) {
      const { value, done } = await r.read();
      if (done) return;
      got += value.length;
      for (const b of value) sum += b;
      await Bun.sleep(100); // slower than the writer, faster than the stall time
    }
  })();
  let want = 0;
  for (let i = 0; i < 80;) { // a writer that pauses while held, as the engine does
    if (o.holds.at(-1)) { await Bun.sleep(2); continue; }
    const c = chunk(64 * 1024, i % 7);
    f.write(c);
    want += c.length * (i++ % 7);
    await Bun.sleep(1);
  }
  f.close();
  await reading;
  expect(o.abandoned).toBe(0);
  expect(got).toBe(80 * 64 * 1024);
  expect(sum).toBe(want);
  expect(o.holds.length).toBeGreaterThanOrEqual(2);
  expect(o.holds.length % 2).toBe(0); // every hold let go
});

test("the client going away abandons the requests", async () => {
  const o = owner(), f = new OutFlow(o, 60_000);
  f.write(chunk(10));
  await f.stream.cancel();
  expect(o.abandoned).toBe(1);
  expect(f.closed).toBe(true);
});

test("a JSON reply in pieces: none made while the client leaves HOLD_BYTES unread; the thread gets turns; the text whole", async () => {
  let made = 0, turns = 0;
  const piece = 64 * 1024;
  function* pieces() {
    yield "[";
    for (let i = 0; i < 40; i++) { made++; yield (i ? "," : "") + JSON.stringify("x".repeat(piece - 4)); }
    yield "]";
  }
  const res = jsonPieces(new Request("http://localhost/"), pieces());
  await Bun.sleep(300); // nobody reading
  expect(made).toBe(HOLD_BYTES / piece + 1); // (the piece that went past HOLD_BYTES)
  let reading = true;
  const other = () => { turns++; if (reading) setImmediate(other); }; // other work waiting its turn, one step at a time
  setImmediate(other);
  const text = await res.text();
  reading = false;
  expect(res.headers.get("content-type")).toBe("application/json;charset=utf-8");
  expect((JSON.parse(text) as string[]).map((x) => x.length)).toEqual(Array(40).fill(piece - 4));
  expect(made).toBe(40);
  expect(turns).toBeGreaterThan(20); // (the other work's steps between the 40 pieces, not only before or after them)
  function* broken() { yield "[1"; throw new Error("a bug"); }
  expect(await jsonPieces(new Request("http://localhost/"), broken()).text()).toBe("[1"); // (cut short, not hung)
});
