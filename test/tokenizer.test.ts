// TextCodec: encode/decode round trip, the chat template, tokenizer eos in the stop ids, and the
// streaming decoder never emitting half a UTF-8 character.
import { expect, test } from "bun:test";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { genModel } from "./helpers/models.ts";

const dir = genModel({ preset: "tiny", seed: 4 });

test("round trip, chat template with the thinking switch, tokenizer eos", () => {
  const t = loadTokenizer(dir);
  const text = "Grüße, naïve café — 東京 🐦 ok";
  expect(t.decode(t.encode(text))).toBe(text);
  expect(t.decode([])).toBe("");
  const chat = t.chat([{ role: "user", content: "hi" }], { enableThinking: false });
  expect(chat).toContain("<|user|>hi");
  expect(chat.endsWith("<think></think>")).toBe(true);
  expect(t.eosId).toBe(1);
  expect(t.stopIds([2, 5])).toEqual([2, 5, 1]);
  expect(t.stopIds([1, 2])).toEqual([1, 2]);
});

test("streaming decode emits whole characters only, and their concatenation is the text", () => {
  const t = loadTokenizer(dir);
  const text = "a🐦b東京c é";
  const ids = t.encode(text);
  // byte-level tokens split multi-byte characters: make sure this prompt exercises that
  expect(ids.some((id) => t.decode([id]).includes("\uFFFD"))).toBe(true);
  const s = t.stream();
  let out = "";
  for (const id of ids) {
    const d = s.push(id);
    expect(d.includes("\uFFFD")).toBe(false);
    out += d;
  }
  out += s.flush();
  expect(out).toBe(text);
  // a long stream (its kept history is cut every ~64 ids) and one that flushes mid-way, then goes on
  const long = Array.from({ length: 40 }, (_, i) => `line ${i}: 東京🐦 é ${"ab".repeat(i % 5)}\n`).join(""), lids = t.encode(long);
  expect(lids.length).toBeGreaterThan(300);
  const l = t.stream();
  let lout = "";
  for (const [k, id] of lids.entries()) { lout += l.push(id); if (k === 150) lout += l.flush(); }
  expect(lout + l.flush()).toBe(long);
});
