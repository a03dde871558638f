// Hostile slot files (issue 29 item 6, 9a) on the shared fixture: a link planted in --slot-save-path is never written
// or truncated through, a save over a directory is a 400 without the server's path, a 4 GiB sparse file and a file
// with a NaN row are refused at once, and kill -9 at any moment of a save never loses the previous good file.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { HEADER, RECORD } from "../src/engine/kvfile-format.ts";
import type { Server } from "../src/server/server.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

const REPO = resolve(import.meta.dir, "..");

describe.skipIf(!hasTiny)("hostile slot files", () => {
  const root = mkdtempSync(join(tmpdir(), "hb-hostile-slots-")), dir = join(root, "slots"), outside = join(root, "outside");
  mkdirSync(dir); mkdirSync(outside);
  let s: Server;
  beforeAll(async () => {
    s = await startTiny({ slots: 1, slotSavePath: dir });
    await post(s.url, "/v1/completions", { prompt: "A slot worth keeping holds a prompt of some length, and then a few more words.", max_tokens: 4, temperature: 0, slot: 0 });
    expect((await act("save", "good.kv")).status).toBe(200);
  });
  afterAll(async () => { await s.stop(); rmSync(root, { recursive: true, force: true }); });
  const act = (action: string, filename: string) => post(s.url, `/slots/0?action=${action}`, { filename }, {});
  /** a restore, bounded to 3 s (the old code read a 4 GiB sparse file for 22 s) */
  const restore = async (filename: string) => {
    const t0 = performance.now();
    const r = await fetch(`${s.url}/slots/0?action=restore`, { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ filename }), signal: AbortSignal.timeout(3000) });
    return { status: r.status, body: (await r.json()) as any, ms: performance.now() - t0 };
  };

  test("a planted link: the save replaces it and writes nothing through it; a restore through a link is refused", async () => {
    const target = join(outside, "precious.txt");
    writeFileSync(target, "precious");
    symlinkSync(target, join(dir, "evil.kv"));
    expect((await act("save", "evil.kv")).status).toBe(200);
    expect(readFileSync(target, "utf8")).toBe("precious");
    expect(lstatSync(join(dir, "evil.kv")).isSymbolicLink()).toBe(false); // the link itself was replaced
    const good = join(outside, "good-copy.kv");
    copyFileSync(join(dir, "good.kv"), good);
    symlinkSync(good, join(dir, "link.kv"));
    const size = lstatSync(good).size, r = await restore("link.kv");
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe("filename");
    expect(lstatSync(good).size).toBe(size); // not truncated through the link
  });

  test("a save over a directory is a 400 naming the file, not the server's path", async () => {
    mkdirSync(join(dir, "adir.kv"));
    const r = await act("save", "adir.kv"), e = ((await r.json()) as any).error;
    expect(r.status).toBe(400);
    expect(e.message).toContain("adir.kv");
    expect(e.message).not.toContain(root);
  });

  test("a 4 GiB sparse file claiming its records is refused in < 100 ms; a NaN row is refused", async () => {
    const big = join(dir, "sparse.kv"), good = readFileSync(join(dir, "good.kv")), dv = new DataView(good.buffer, good.byteOffset);
    const R = dv.getUint32(HEADER.recordBytes, true), size = 4 * 2 ** 30;
    const head = new Uint8Array(good.subarray(0, HEADER.bytes));
    new DataView(head.buffer).setBigUint64(HEADER.count, BigInt(Math.floor((size - HEADER.bytes) / R)), true);
    writeFileSync(big, head);
    truncateSync(big, size);
    await restore("good.kv"); // (warm)
    const r = await restore("sparse.kv");
    expect(r.status).toBe(400);
    expect(r.body.error.message).toContain("context");
    expect(r.ms).toBeLessThan(100);

    const nan = new Uint8Array(good), nv = new DataView(nan.buffer);
    const rec = HEADER.bytes + 2 * R; // record 2: its first value NaN, its CRC made to match
    nv.setFloat32(rec + RECORD.payload, NaN, true);
    nv.setUint32(rec + RECORD.crc, Bun.hash.crc32(nan.subarray(rec + RECORD.payload, rec + R)), true);
    writeFileSync(join(dir, "nan.kv"), nan);
    const n = await restore("nan.kv");
    expect(n.status).toBe(400);
    expect(n.body.error.message).toContain("layer 0 kv row 2");
    expect((await restore("good.kv")).status).toBe(200);
  });

  test("kill -9 at random moments of repeated saves never loses the previous good file", async () => {
    const kdir = join(root, "kill"), script = join(root, "saver.ts");
    mkdirSync(kdir);
    writeFileSync(script, `
import { loadModel } from ${JSON.stringify(join(REPO, "src/engine/model.ts"))};
import { Session } from ${JSON.stringify(join(REPO, "src/engine/session.ts"))};
import { slotCall } from ${JSON.stringify(join(REPO, "src/engine/serving/slot-call.ts"))};
const m = loadModel(${JSON.stringify(TINY)}), sess = new Session(m);
sess.feed(Array.from({ length: 256 }, (_, i) => 20 + (i * 7) % 200));
for (let i = 0; ; i++) {
  const r = slotCall({ op: "slot", action: "save", id: 0, filename: "big.kv" } as never, m, [{ sess, busy: false }], process.argv[2], 4096);
  if (r.status !== 200) { console.log("failed", JSON.stringify(r)); process.exit(1); }
  if (i === 0) console.log("saved");
}`);
    let checked = 0;
    for (let trial = 0; trial < 8; trial++) {
      const child = Bun.spawn(["bun", script, kdir], { stdout: "pipe", stderr: "inherit" });
      const rd = child.stdout.getReader();
      let out = "";
      const t0 = performance.now();
      while (!out.includes("saved") && !out.includes("failed") && performance.now() - t0 < 15000) { const r = await rd.read(); if (r.done) break; out += new TextDecoder().decode(r.value); }
      expect(out).toContain("saved");
      await Bun.sleep(Math.random() * 40); // somewhere inside a later save
      child.kill("SIGKILL");
      await child.exited;
      // the file under the name is always a whole save: it restores all 256 records
      copyFileSync(join(kdir, "big.kv"), join(dir, "killed.kv"));
      const got = await restore("killed.kv");
      expect(got.status).toBe(200);
      expect(got.body.n_restored).toBe(256);
      checked++;
    }
    expect(checked).toBe(8);
  }, 60_000);
});
