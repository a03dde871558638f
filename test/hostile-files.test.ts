// Hostile model directories, chat templates and the Responses store (issue 29 items 7, 8): a FIFO where a file should
// be is refused at once by inspect and by serve's loader; a header too long is refused before it is read (time and
// memory bounded); inspect refuses every directory serve's load refuses; a template that does not parse names its
// file, one that loops is stopped by its render budget (also as a 400 over HTTP); the store stays under its byte cap.
import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { loadModel } from "../src/engine/model.ts";
import { inspectModel } from "../src/model/inspect.ts";
import { writeSafetensors } from "../src/model/safetensors.ts";
import { loadTokenizer, TextCodec } from "../src/model/tokenizer.ts";
import { ResponseStore } from "../src/server/responses-store.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

const REPO = resolve(import.meta.dir, "..");
const root = mkdtempSync(join(tmpdir(), "hb-hostile-files-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"];
/** a copy of the fixture with `change` applied */
function broken(name: string, change: (d: string) => void): string {
  const d = join(root, name);
  mkdirSync(d);
  for (const f of FILES) copyFileSync(join(TINY, f), join(d, f));
  change(d);
  return d;
}
const fifo = (p: string) => { rmSync(p); expect(Bun.spawnSync(["mkfifo", p]).exitCode).toBe(0); };
/** run `code` in a child bun (a hang there cannot hang the suite): its stdout, whether it finished within ms */
function child(code: string, ms: number): { out: string; done: boolean } {
  const r = Bun.spawnSync(["bun", "-e", code], { cwd: REPO, timeout: ms, stdout: "pipe", stderr: "pipe" });
  return { out: r.stdout.toString() + r.stderr.toString(), done: r.exitCode !== null && !r.signalCode };
}

describe.skipIf(!hasTiny)("hostile model directories", () => {
  test("a FIFO model.safetensors or tokenizer.json is refused within 1 s by inspect and by serve's loader", () => {
    for (const f of ["model.safetensors", "tokenizer.json"]) {
      const d = broken(`fifo-${f}`, (d) => fifo(join(d, f)));
      for (const call of [`require("./src/model/inspect.ts").inspectModel(${JSON.stringify(d)})`,
        `require("./src/engine/model.ts").loadModel(${JSON.stringify(d)}); require("./src/model/tokenizer.ts").loadTokenizer(${JSON.stringify(d)})`]) {
        const r = child(`const t0 = performance.now(); try { ${call}; console.log("LOADED") } catch (e) { console.log("REFUSED " + e.message) }
          console.log("MS " + (performance.now() - t0))`, 5000);
        expect(r.done).toBe(true); // (the old code hung in open(2) until killed)
        expect(r.out).toContain("REFUSED");
        expect(r.out).toContain("not a regular file");
        expect(Number(/MS ([\d.]+)/.exec(r.out)![1])).toBeLessThan(1000);
      }
    }
  });

  test("a header longer than the cap is refused before it is read: fast, no memory spent on it", () => {
    const p = join(root, "huge-header.safetensors"), entries: string[] = [];
    for (let i = 0; entries.length * 60 < 20 << 20; i++) entries.push(`"t${i}":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`);
    const json = new TextEncoder().encode(`{${entries.join(",")}}`), head = new Uint8Array(8);
    new DataView(head.buffer).setBigUint64(0, BigInt(json.length), true);
    writeFileSync(p, Buffer.concat([head, json]));
    // VmHWM, the peak of this process's own memory (getrusage's maxRSS keeps the peak of the big test runner it forked from)
    const r = child(`const hwm = () => +require("fs").readFileSync("/proc/self/status", "utf8").match(/VmHWM:\\s+(\\d+)/)[1] / 1024;
      const { openSafetensors } = require("./src/model/safetensors.ts"), t0 = performance.now(); let m = "LOADED";
      try { openSafetensors(${JSON.stringify(p)}) } catch (e) { m = "REFUSED " + e.message }
      console.log(JSON.stringify({ m, ms: performance.now() - t0, rss: hwm() }))`, 10000);
    expect(r.done).toBe(true); // (the old code parsed it for seconds)
    const got = JSON.parse(r.out.trim().split("\n").pop()!);
    expect(got.m).toContain("limit");
    expect(got.ms).toBeLessThan(100);
    expect(got.rss).toBeLessThan(200); // MB, the whole child
  }, 15_000);

  test("inspect refuses every directory serve's load refuses, and the template's file is named", () => {
    const tiny = readFileSync(join(TINY, "config.json"), "utf8"), cfg = JSON.parse(tiny);
    const dirs = [
      broken("no-tokenizer", (d) => rmSync(join(d, "tokenizer.json"))),
      broken("bad-template", (d) => {
        const t = JSON.parse(readFileSync(join(d, "tokenizer_config.json"), "utf8"));
        writeFileSync(join(d, "tokenizer_config.json"), JSON.stringify({ ...t, chat_template: "{% for m in messages %}{{ m.content " }));
      }),
      broken("missing-tensor", (d) => writeSafetensors(join(d, "model.safetensors"),
        [{ name: "model.norm.weight", dtype: "F32", shape: [cfg.hidden_size], data: new Float32Array(cfg.hidden_size) }], { format: "pt" })),
      broken("wrong-shape", (d) => writeFileSync(join(d, "config.json"), JSON.stringify({ ...cfg, vocab_size: cfg.vocab_size + 8 }))),
      broken("bad-config", (d) => writeFileSync(join(d, "config.json"), JSON.stringify({ ...cfg, hidden_size: -1 }))),
      broken("bad-tokenizer", (d) => writeFileSync(join(d, "tokenizer.json"), "{ not json")),
      broken("backtracking-regex", (d) => {
        const t = JSON.parse(readFileSync(join(d, "tokenizer.json"), "utf8"));
        t.pre_tokenizer.pretokenizers[0].pattern.Regex = `(a+)+$|${t.pre_tokenizer.pretokenizers[0].pattern.Regex}`;
        writeFileSync(join(d, "tokenizer.json"), JSON.stringify(t));
      }),
    ];
    for (const d of dirs) {
      let served: unknown = null, inspected: unknown = null;
      try { loadModel(d); loadTokenizer(d); } catch (e) { served = e; }
      try { inspectModel(d); } catch (e) { inspected = e; }
      expect([d, !!served]).toEqual([d, true]);
      expect([d, !!inspected]).toEqual([d, true]);
      if (d.endsWith("bad-template")) expect((inspected as Error).message).toContain(join(d, "tokenizer_config.json"));
      if (d.endsWith("backtracking-regex")) expect((inspected as Error).message).toContain(`${join(d, "tokenizer.json")}: pre_tokenizer`);
    }
    expect(() => inspectModel(TINY)).not.toThrow();
  });
});

describe.skipIf(!hasTiny)("chat template render budget", () => {
  const tok = JSON.parse(readFileSync(join(TINY, "tokenizer.json"), "utf8"));
  const codec = (template: string) => new TextCodec(tok, {}, template);
  const msgs = [{ role: "user", content: "hi" }];

  test("loops, long ranges and doubling strings stop within ~0.5 s and tens of MB, naming chat_template", () => {
    for (const t of ["{% for i in range(3000000) %}x{% endfor %}",
      "{% for i in range(1500) %}{% for j in range(1500) %}{{ i }}{% endfor %}{% endfor %}",
      "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"]) {
      Bun.gc(true);
      const t0 = performance.now(), rss0 = process.memoryUsage().rss;
      let err = "(rendered)";
      try { codec(t).chat(msgs); } catch (e) { err = (e as Error).message.slice(0, 200); }
      expect(err).toMatch(/chat_template: rendering stopped by its budget/);
      expect(performance.now() - t0).toBeLessThan(800);
      expect(process.memoryUsage().rss - rss0).toBeLessThan(96 << 20);
    }
    expect(codec("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}").chat([{ role: "user", content: "x".repeat(20 << 20) }]).length)
      .toBe(20 * 2 ** 20 + 6); // a long legitimate prompt still renders
  });

  test("over HTTP: a looping template is a 400 naming chat_template, and the server keeps answering", async () => {
    const s = await startTiny({ slots: 1, chatTemplate: "{% for i in range(1500) %}{% for j in range(1500) %}{{ i }}{% endfor %}{% endfor %}" });
    try {
      const t0 = performance.now();
      const r = await post(s.url, "/v1/chat/completions", { messages: msgs, max_tokens: 2 });
      expect(r.status).toBe(400);
      expect(((await r.json()) as any).error.message).toContain("chat_template");
      expect(performance.now() - t0).toBeLessThan(1500);
      expect((await fetch(`${s.url}/health`)).status).toBe(200);
    } finally { await s.stop(); }
  });
});

describe("Responses store byte cap", () => {
  test("entries count toward a byte cap (64 MiB by default), the oldest go first, one too large is not kept", () => {
    const small = new ResponseStore({ maxBytes: 1 << 20 }), big = "x".repeat(100_000);
    for (let i = 0; i < 50; i++) small.put(`r${i}`, { turns: [], response: { tools: big + i } });
    expect(small.bytes).toBeLessThanOrEqual(1 << 20);
    expect(small.get("r49")).toBeDefined();
    expect(small.get("r0")).toBeUndefined();
    expect(small.put("huge", { turns: [], response: { t: "y".repeat(2 << 20) } })).toBe(false);
    expect(small.get("huge")).toBeUndefined();
    expect(new ResponseStore().maxBytes).toBe(64 << 20);
  });

  test("200 responses echoing 1 MiB of tools each: the default store holds ≤ 64 MiB and the heap stays bounded", () => {
    const store = new ResponseStore();
    Bun.gc(true);
    const heap0 = process.memoryUsage().heapUsed;
    for (let i = 0; i < 200; i++) store.put(`r${i}`, { turns: [], response: { tools: [{ description: String(i).padEnd(1 << 20, "t") }] } });
    Bun.gc(true);
    expect(store.bytes).toBeLessThanOrEqual(64 << 20);
    expect(process.memoryUsage().heapUsed - heap0).toBeLessThan(110 << 20); // (the old store kept all 200: ~200 MiB)
  });
});
