// Pure pieces of the serving layer: stop strings across deltas, the think split, logprobs (masked
// logits too), the mux frame encoders, the worker's detokenizer (marks, token bytes) on the glm-tiny
// tokenizer and on a generated one, TextCodec.tokenBytes, and the worker's grammar cache.
import { describe, expect, test } from "bun:test";
import { StopMatcher } from "../src/engine/stop-text.ts";
import { ThinkSplit } from "../src/server/think.ts";
import { logprobsOf } from "../src/engine/serving/prepare.ts";
import { dataFrame, doneFrame, errorFrame, readyFrame } from "../src/server/mux-frames.ts";
import { Detok, thinkIds } from "../src/engine/serving/detok.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { GrammarCache } from "../src/engine/serving/grammar-cache.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { genModel } from "./helpers/models.ts";

const utf8 = new TextEncoder();
const cat = (parts: Uint8Array[]) => Buffer.concat(parts.map((p) => Buffer.from(p)));

describe("StopMatcher", () => {
  test("a stop string split across deltas is never emitted; text before it is", () => {
    const m = new StopMatcher(["END", "xyz"]);
    const out = ["abc E", "N", "D tail"].map((d) => m.push(d));
    expect(out.join("")).toBe("abc ");
    expect(m.stopped).toBe(true);
    expect(m.push("more")).toBe("");
  });
  test("a held partial match is released when it turns out not to match, or at the end", () => {
    const m = new StopMatcher(["END"]);
    expect(m.push("aE")).toBe("a");
    expect(m.push("Nx")).toBe("ENx");
    expect(m.push("EN")).toBe("");
    expect(m.flush()).toBe("EN");
  });
  test("the earliest of several matches wins; no stops passes everything through", () => {
    const m = new StopMatcher(["bc", "ab"]);
    expect(m.push("xabc")).toBe("x");
    expect(new StopMatcher([]).push("anything")).toBe("anything");
  });
  test("agrees with a direct search of held text + delta on random streams (overlapping, self-similar stops)", () => {
    // the reference: the whole held text searched again on every delta (the matcher's first form)
    class Direct {
      held = ""; stopped = false; matched: string | null = null;
      constructor(readonly stops: string[]) {}
      push(d: string): string {
        if (this.stopped) return "";
        const s = this.held + d;
        let cut = -1;
        for (const st of this.stops) { const at = s.indexOf(st); if (at >= 0 && (cut < 0 || at < cut)) { cut = at; this.matched = st; } }
        if (cut >= 0) { this.stopped = true; this.held = ""; return s.slice(0, cut); }
        let keep = 0;
        for (const st of this.stops) for (let k = Math.min(st.length - 1, s.length); k > keep; k--) if (s.endsWith(st.slice(0, k))) { keep = k; break; }
        this.held = s.slice(s.length - keep);
        return s.slice(0, s.length - keep);
      }
      flush() { const h = this.held; this.held = ""; return this.stopped ? "" : h; }
    }
    let seed = 11;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) % n;
    const word = (n: number) => Array.from({ length: n }, () => "ab😀"[rnd(3)]).join("");
    let stoppedRuns = 0;
    for (let run = 0; run < 400; run++) {
      const stops = Array.from({ length: 1 + rnd(3) }, () => word(1 + rnd(6)));
      const a = new StopMatcher(stops), b = new Direct(stops);
      for (let k = 0; k < 30; k++) {
        const d = word(rnd(5));
        expect(a.push(d)).toBe(b.push(d));
      }
      expect(a.flush()).toBe(b.flush());
      expect([a.stopped, a.matched]).toEqual([b.stopped, b.matched]);
      if (a.stopped) stoppedRuns++;
    }
    expect(stoppedRuns).toBeGreaterThan(100); // (both outcomes were exercised)
    expect(stoppedRuns).toBeLessThan(400);
  });
  test("hostile: a held run of 512K characters broken by one delta is answered at once, held text released", () => {
    // (searching the held text again on every delta took O(held²): 117 ms at 65,536 held characters, seconds here)
    const L = 1 << 19, n = 511, m = new StopMatcher(["a".repeat(L)]); // n × 1024 a's: L − 1024
    let out = "";
    for (let i = 0; i < n; i++) out += m.push("a".repeat(1024));
    expect(out).toBe("");
    expect(m.push("c")).toHaveLength(n * 1024 + 1);
    expect(m.stopped).toBe(false);
  }, 5000);
});

describe("ThinkSplit", () => {
  test("enabled: text inside <think>..</think> is reasoning, after it content", () => {
    const t = new ThinkSplit(true, false);
    expect(t.take("", "think")).toEqual({});
    expect(t.take("hmm")).toEqual({ reasoning_content: "hmm" });
    expect(t.take(" ok", "/think")).toEqual({ reasoning_content: " ok" });
    expect(t.take("answer")).toEqual({ content: "answer" });
  });
  test("a prompt ending in <think> starts in reasoning; disabled thinking is all content", () => {
    expect(new ThinkSplit(true, true).take("r")).toEqual({ reasoning_content: "r" });
    const off = new ThinkSplit(false, true);
    off.take("", "think");
    expect(off.take("x")).toEqual({ content: "x" });
  });
});

describe("logprobsOf", () => {
  test("log-softmax values and the top-k in order", () => {
    const l = new Float32Array([0, Math.log(2), Math.log(4), 0]);
    const r = logprobsOf(l, 1, 3, (id) => `t${id}`);
    expect(r.lp).toBeCloseTo(Math.log(2 / 8), 6);
    expect(r.top.map((t) => t.id)).toEqual([2, 1, 0]);
    expect(r.top[0].lp).toBeCloseTo(Math.log(4 / 8), 6);
    expect(r.tt).toBe("t1");
    expect(logprobsOf(l, 0, 0, String).top).toEqual([]);
  });
  test("masked logits (−Infinity) are a renormalised distribution; masked ids are never listed", () => {
    const l = new Float32Array([-Infinity, Math.log(1), -Infinity, Math.log(3)]);
    const r = logprobsOf(l, 1, 4, String);
    expect(r.lp).toBeCloseTo(Math.log(1 / 4), 6);
    expect(r.top.map((t) => t.id)).toEqual([3, 1]);
    expect(r.top.every((t) => Number.isFinite(t.lp))).toBe(true);
  });
});

describe("mux frame encoders", () => {
  test("headers are single lines; DATA carries exact byte counts", () => {
    expect(new TextDecoder().decode(readyFrame("my model\n", 2, 64))).toBe("READY my_model_ 2 64\n");
    expect(new TextDecoder().decode(dataFrame("5", "é\n"))).toBe("DATA 5 3\né\n\n");
    expect([...dataFrame("5", Uint8Array.of(0xc3))]).toEqual([...utf8.encode("DATA 5 1\n"), 0xc3, 10]); // half of "é" 
    expect(new TextDecoder().decode(dataFrame("5", "a", { lp: -0.5, top: [{ id: 3, lp: -0.5, text: "a" }] }))).toBe("DATA 5 1 lp=-0.5 top=3:-0.5\na\n");
    expect(new TextDecoder().decode(doneFrame("5", "stop", 3, 10, 2, 12.345))).toBe("DONE 5 stop 3 10 2 12.35\n");
    expect(new TextDecoder().decode(errorFrame("0", "BAD_FRAME", "bad\nthing"))).toBe("ERROR 0 BAD_FRAME bad thing\n");
  });
});

describe.skipIf(!hasTiny)("Detok on the glm-tiny tokenizer", () => {
  test("think tags become marks; text round-trips; stop strings apply", () => {
    const codec = loadTokenizer(TINY);
    const ids = thinkIds(codec);
    expect(ids.open).toBeGreaterThanOrEqual(0);
    expect(ids.close).toBeGreaterThanOrEqual(0);
    const text = "hello world, héllo";
    const d = new Detok(codec, [], ids);
    let out = "";
    for (const id of codec.encode(text)) out += d.push(id).text;
    expect(out + d.finish().text).toBe(text);
    expect(d.push(ids.open).mark).toBe("think");
    expect(d.push(ids.close).mark).toBe("/think");
    const s = new Detok(codec, ["world"], ids);
    let cut = "";
    for (const id of codec.encode(text)) cut += s.push(id).text;
    expect(cut + s.finish().text).toBe("hello ");
    expect(s.stopped).toBe(true);
  });
});

describe("token bytes and Detok bytes (generated byte-level tokenizer)", () => {
  const codec = loadTokenizer(genModel({ preset: "tiny", seed: 11 }));
  const text = "héllo wörld — 世界 😀 naïve";

  test("tokenBytes: concatenated raw bytes of the ids are the UTF-8 of the text; specials are their text or empty", () => {
    const ids = codec.encode(text);
    const parts = ids.map((id) => codec.tokenBytes(id));
    expect(cat(parts).equals(Buffer.from(text))).toBe(true);
    expect(parts.some((p) => { try { new TextDecoder("utf-8", { fatal: true }).decode(p); return false; } catch { return true; } })).toBe(true); // some token splits a character
    const think = thinkIds(codec).open;
    expect(codec.tokenBytes(think)).toEqual(new Uint8Array(0));
    expect(new TextDecoder().decode(codec.tokenBytes(think, false))).toBe("<think>");
  });

  test("Detok: bytes of all pushes + finish == UTF-8 of the literal text (raw per token, and with stop strings)", () => {
    const ids = codec.encode(text), th = thinkIds(codec);
    for (const stops of [[], ["zzz"], ["wörld"]]) {
      const d = new Detok(codec, stops, th);
      let lit = "";
      const bytes: Uint8Array[] = [];
      for (const id of [...ids, th.open, ...codec.encode(" ok")]) {
        if (d.stopped) break;
        const p = d.push(id);
        lit += p.text + (p.mark ? "<think>" : "");
        bytes.push(p.bytes);
      }
      const f = d.finish();
      lit += f.text;
      bytes.push(f.bytes);
      expect(cat(bytes).toString("utf8")).toBe(lit);
      expect(cat(bytes).equals(Buffer.from(lit))).toBe(true);
      if (stops[0] === "wörld") expect(lit).toBe("héllo ");
      else expect(lit).toBe(text + "<think> ok");
    }
  });
});

describe("GrammarCache", () => {
  const codec = loadTokenizer(genModel({ preset: "tiny", seed: 11 }));
  test("compiles once per text (LRU), states are independent, errors name the field", () => {
    const c = new GrammarCache(() => codec.tokenVocab([1]), 2);
    const a = c.state({ gbnf: 'root ::= "a"', field: "grammar" });
    const b = c.state({ gbnf: 'root ::= "a"', field: "grammar" });
    if (!a.ok || !b.ok) throw new Error("compile failed");
    expect(a.gs.grammar).toBe(b.gs.grammar);
    a.gs.accept(codec.encode("a")[0]);
    expect(a.gs.isComplete()).toBe(true);
    expect(b.gs.isComplete()).toBe(false);
    c.state({ gbnf: 'root ::= "b"', field: "grammar" });
    c.state({ gbnf: 'root ::= "c"', field: "grammar" });
    expect(c.cached).toBe(2);
    const bad = c.state({ gbnf: "root ::= nope", field: "grammar" });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.detail).toMatch(/^grammar .*undefined rule "nope"/);
    const empty = c.state({ gbnf: "", field: "grammar" });
    expect(empty.ok).toBe(false);
  });
});
