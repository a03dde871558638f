// KV slot files: round trip (rows equal a fresh prefill, continuation identical, MTP re-derived),
// crash tails (partial record, uncommitted record, short file, CRC damage), rewrites after a
// truncation, refusal of another model's file naming the field, and a child process appending
// records SIGKILLed at random moments.
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { genModel } from "./helpers/models.ts";
import { relRms } from "./helpers/fixture.ts";
import { loadModel, newKV, type Model } from "../src/engine/model.ts";
import { argmax, Session } from "../src/engine/session.ts";
import { KvFile, slotPath } from "../src/engine/kvfile.ts";
import { HEADER, RECORD } from "../src/engine/kvfile-format.ts";
import { Rng } from "../src/engine/sampler.ts";
import { ModelError } from "../src/model/errors.ts";

const REPO = resolve(import.meta.dir, "..");
const root = mkdtempSync(join(tmpdir(), "hb-kvfile-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const mdir = genModel({ preset: "tiny", seed: 1, mtpDrafts: true }); // has an MTP layer: hidden rows stored
const m = loadModel(mdir);
const PROMPT = [20, 31, 42, 53, 64, 75, 86, 97, 108, 119, 130, 141];
let nfile = 0;
const fresh = () => join(root, `f${nfile++}.kv`);

/** prompt + greedy decode, one token at a time (as the child writes it) */
function decode(model: Model, total: number): Session {
  const s = new Session(model);
  let l = s.feed(PROMPT);
  while (s.tokens.length < total) l = s.feed([argmax(l)]);
  return s;
}
const REF = decode(m, 200).tokens; // the greedy history every writer below follows

/** Loaded rows vs a fresh prefill of the same tokens: |Δ| ≤ 1e-6 · max(1, max|row|) per layer. */
function expectRowsMatchPrefill(s: Session): void {
  const T = s.tokens.length, f = new Session(m);
  f.feed(s.tokens);
  const worst = (a: Float32Array, b: Float32Array, n: number) => {
    let d = 0, mx = 1;
    for (let i = 0; i < n; i++) { d = Math.max(d, Math.abs(a[i] - b[i])); mx = Math.max(mx, Math.abs(b[i])); }
    return d / mx;
  };
  for (let i = 0; i < m.cfg.num_hidden_layers; i++) {
    expect(worst(s.kv.f32(i), f.kv.f32(i), T * s.kv.kvWidth)).toBeLessThan(1e-6);
    if (f.kv.ik[i]) expect(worst(s.kv.ik[i]!, f.kv.ik[i]!, T * s.kv.ikWidth)).toBeLessThan(1e-6);
  }
  expect(worst(s.hidden, f.hidden, T * m.cfg.hidden_size)).toBeLessThan(1e-6);
}

/** Resume: re-feed the last cached token (no prefill), then greedy; must follow REF. */
function expectContinuation(s: Session, n: number): void {
  const hist = s.tokens.slice();
  expect(s.reuse(hist)).toBe(hist.length - 1);
  let l = s.feed(hist.slice(-1));
  const got: number[] = [];
  for (let i = 0; i < n; i++) { const t = argmax(l); got.push(t); l = s.feed([t]); }
  expect(got).toEqual(REF.slice(hist.length, hist.length + n));
}

describe("KV slot file", () => {
  for (const dtype of ["f16", "q8"] as const)
    test(`an ${dtype} cache: the records hold its rows as they are (bit for bit back), a file of another dtype is refused`, () => {
      const src = new Session(m, { attn: "absorbed" }, { kv: newKV(m, 64, dtype) });
      let l = src.feed(PROMPT);
      for (let i = 0; i < 20; i++) l = src.feed([argmax(l)]);
      const p = fresh(), f = KvFile.open(p, m, { dtype });
      expect(f.persist(src)).toBe(src.tokens.length);
      f.close();
      const g = KvFile.open(p, m, { dtype }), s = g.load({ attn: "absorbed" });
      g.close();
      expect(s.kv.dtype).toBe(dtype);
      expect(s.tokens).toEqual(src.tokens);
      for (let i = 0; i < m.cfg.num_hidden_layers; i++)
        expect(Buffer.from(s.kv.kv[i].buffer, s.kv.kv[i].byteOffset, src.tokens.length * s.kv.rowElems * s.kv.kv[i].BYTES_PER_ELEMENT)
          .equals(Buffer.from(src.kv.kv[i].buffer, src.kv.kv[i].byteOffset, src.tokens.length * src.kv.rowElems * src.kv.kv[i].BYTES_PER_ELEMENT))).toBe(true);
      // both go on the same way
      const a = argmax(src.feed([7])), b = argmax(s.feed([7]));
      expect(b).toBe(a);
      let err: unknown;
      try { KvFile.open(p, m); } catch (e) { err = e; }
      expect(err).toBeInstanceOf(ModelError);
      expect((err as ModelError).field).toBe("kv_dtype");
    });

  test("round trip: rows equal a fresh prefill, continuation identical, MTP state re-derived", () => {
    const p = fresh(), src = decode(m, 40), f = KvFile.open(p, m);
    expect(f.persist(src)).toBe(40);
    expect(f.persist(src)).toBe(0);
    f.close();
    const g = KvFile.open(p, m), s = g.load();
    expect(s.tokens).toEqual(REF.slice(0, 40));
    expectRowsMatchPrefill(s);
    const next = REF[40], a = s.mtpSync(next), ref = src.mtpDrafts(next, 1).logits[0];
    expect(relRms(a, ref)).toBeLessThan(1e-6);
    expectContinuation(s, 8);
    g.close();
    expect(slotPath("/x", 3)).toBe("/x/slot-3.kv");
  });

  test("after a truncation the file is rewritten from the common prefix", () => {
    const p = fresh(), s = decode(m, 30), f = KvFile.open(p, m);
    f.persist(s);
    s.truncate(18);
    s.feed([400, 401, 402]);
    expect(f.persist(s)).toBe(3);
    f.close();
    const g = KvFile.open(p, m), t = g.load();
    expect(t.tokens).toEqual(s.tokens);
    for (let i = 0; i < m.cfg.num_hidden_layers; i++) expect(t.kv.kv[i].subarray(0, 21 * t.kv.kvWidth)).toEqual(s.kv.kv[i].subarray(0, 21 * s.kv.kvWidth));
    g.close();
  });

  test("crash tails: a partial record, an uncommitted record, a short file and CRC damage", () => {
    const p = fresh(), s = decode(m, 12), f = KvFile.open(p, m);
    f.persist(s);
    const R = f.recordBytes;
    f.close();
    const size = statSync(p).size;
    // half a record past the count: ignored and cut at reopen
    const fd = openSync(p, "r+");
    writeSync(fd, new Uint8Array(R >> 1).fill(7), 0, R >> 1, size);
    closeSync(fd);
    let g = KvFile.open(p, m);
    expect(g.count).toBe(12);
    expect(statSync(p).size).toBe(size);
    // a complete record written but the count not yet updated (killed between the two writes)
    s.feed([argmax(s.feed([5]))]);
    g.persist(s);
    g.close();
    const b = readFileSync(p);
    new DataView(b.buffer, b.byteOffset).setBigUint64(HEADER.count, 13n, true);
    writeFileSync(p, b);
    g = KvFile.open(p, m);
    expect(g.tokens).toEqual(s.tokens.slice(0, 13));
    g.close();
    // the count names more records than the file holds (cut externally): the complete ones load
    truncateSync(p, statSync(p).size - 3);
    g = KvFile.open(p, m);
    expect(g.count).toBe(12);
    // a damaged payload inside the committed range ends the load there
    g.close();
    const c = readFileSync(p);
    c[HEADER.bytes + 5 * R + RECORD.payload + 32] ^= 0xff;
    writeFileSync(p, c);
    g = KvFile.open(p, m);
    expect(g.load().tokens).toEqual(s.tokens.slice(0, 5));
    expect(g.count).toBe(5);
    g.close();
  });

  test("a file from another model is refused naming the field", () => {
    const p = fresh(), f = KvFile.open(p, m);
    f.persist(decode(m, 13));
    f.close();
    const other = loadModel(genModel({ preset: "tiny", seed: 1, mtpDrafts: true, set: { kv_lora_rank: 24 } }));
    expect(() => KvFile.open(p, other)).toThrow(/kv_lora_rank: written for another model: 32 in the file, 24 in/);
    const sameShape = loadModel(genModel({ preset: "tiny", seed: 2, mtpDrafts: true }));
    let err: unknown;
    try { KvFile.open(p, sameShape); } catch (e) { err = e; }
    expect(err).toBeInstanceOf(ModelError);
    expect((err as ModelError).field).toBe("weights");
    const b = readFileSync(p);
    b[4] = 9; // version
    writeFileSync(p, b);
    expect(() => KvFile.open(p, m)).toThrow(/version: version 9 is not supported/);
    writeFileSync(p, "not a kv file at all");
    expect(() => KvFile.open(p, m)).toThrow(/bad magic/);
  });
});

const CHILD = `
import { loadModel } from ${JSON.stringify(join(REPO, "src/engine/model.ts"))};
import { argmax } from ${JSON.stringify(join(REPO, "src/engine/session.ts"))};
import { KvFile } from ${JSON.stringify(join(REPO, "src/engine/kvfile.ts"))};
const [dir, path, promptCsv, maxStr] = process.argv.slice(2);
const m = loadModel(dir), f = KvFile.open(path, m), s = f.load();
const prompt = s.tokens.length > 0 ? s.tokens.slice() : promptCsv.split(",").map(Number);
let l = s.feed(prompt.slice(s.reuse(prompt)));   // resume: only the last cached token is re-fed
f.persist(s);
console.log("ready " + s.tokens.length);
const cap = Math.min(Number(maxStr), s.tokens.length + 25); // a short run per spawn
while (s.tokens.length < cap) { l = s.feed([argmax(l)]); f.persist(s); }
console.log("done");
`;

describe("kill -9 while appending", () => {
  test("every SIGKILL leaves a file that loads a prefix equal to a fresh prefill, and resumes", async () => {
    const script = join(root, "child.ts"), p = join(root, "slot-0.kv"), rng = new Rng(2024);
    writeFileSync(script, CHILD);
    let prev = 0, kills = 0;
    for (let round = 0; round < 6; round++) {
      const child = Bun.spawn(["bun", script, mdir, p, PROMPT.join(","), "180"], { stdout: "pipe", stderr: "pipe" });
      if (round === 0) {
        await Bun.sleep(rng.next() * 400); // anywhere: startup, header creation, prefill, appends
      } else {
        const rd = child.stdout.getReader();
        let out = "";
        while (!out.includes("ready")) { const r = await rd.read(); if (r.done) break; out += new TextDecoder().decode(r.value); }
        rd.releaseLock();
        await Bun.sleep(rng.next() * 25); // somewhere in its appends
      }
      child.kill("SIGKILL");
      const code = await child.exited;
      if (child.signalCode === "SIGKILL") kills++;
      else expect(code).toBe(0); // it may have finished its run first
      const f = KvFile.open(p, m); // (creates an empty slot if the kill came before the child made one)
      const s = f.load();
      expect(s.tokens).toEqual(REF.slice(0, s.tokens.length));
      expect(s.tokens.length).toBeGreaterThanOrEqual(prev);
      prev = s.tokens.length;
      if (s.tokens.length > 0) {
        expectRowsMatchPrefill(s);
        expectContinuation(s, 6);
      }
      f.close();
    }
    expect(kills).toBeGreaterThan(0);
    expect(prev).toBeGreaterThan(PROMPT.length);
  }, 60_000);
});
