// The embedded int8 demo model: it is what our converter makes of ../shared/demo/glm-demo, and its
// quality stays that of the f32 original (perplexity on English text, top-1 agreement).
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModel, type Model } from "../src/engine/model.ts";
import { Session } from "../src/engine/session.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { demoModelDir } from "../src/model/demo.ts";
import { convert } from "../src/model/convert.ts";
import { parseFmt } from "../src/model/quant.ts";
import { DEMO, hasDemo } from "./helpers/fixture.ts";

const TEXT = `A journey of a thousand miles begins with a single step.
The best way to predict the future is to invent it.
You will be successful in your work, but not in your love life.
Never put off till tomorrow what you can do the day after tomorrow.
Don't worry about the world coming to an end today. It is already tomorrow in Australia.`;

/** perplexity of TEXT (after <|endoftext|>) and the argmax at each position */
function score(m: Model, dir: string): { ppl: number; top1: number[] } {
  const ids = [1, ...loadTokenizer(dir).encode(TEXT)], V = m.cfg.vocab_size;
  const l = new Session(m).feed(ids, true);
  let nll = 0;
  const top1: number[] = [];
  for (let p = 0; p < ids.length - 1; p++) {
    const row = l.subarray(p * V, (p + 1) * V);
    let mx = -Infinity, arg = 0, z = 0;
    for (let i = 0; i < V; i++) if (row[i] > mx) { mx = row[i]; arg = i; }
    for (let i = 0; i < V; i++) z += Math.exp(row[i] - mx);
    nll -= row[ids[p + 1]] - mx - Math.log(z);
    top1.push(arg);
  }
  return { ppl: Math.exp(nll / (ids.length - 1)), top1 };
}

describe("embedded demo model (int8)", () => {
  const dir = demoModelDir();
  const int8 = score(loadModel(dir), dir);

  test("it is a trained model: perplexity on English text far below uniform (1024)", () => {
    expect(int8.ppl).toBeLessThan(60); // measured 29.06
  });

  test.skipIf(!hasDemo)("it equals a fresh conversion of ../shared/demo/glm-demo", () => {
    const out = mkdtempSync(join(tmpdir(), "hb-demo-"));
    const q = parseFmt("int8")!;
    convert(DEMO, out, { experts: q, dense: q, mtp: q });
    expect(Bun.hash(readFileSync(join(out, "model.safetensors")))).toBe(Bun.hash(readFileSync(join(dir, "model.safetensors"))));
  });

  test.skipIf(!hasDemo)("int8 keeps the f32 quality: perplexity within 1%, top-1 agreement ≥ 95%", () => {
    const f32 = score(loadModel(DEMO), DEMO);
    expect(Math.abs(int8.ppl / f32.ppl - 1)).toBeLessThan(0.01); // measured -0.27%
    const agree = int8.top1.filter((t, i) => t === f32.top1[i]).length / f32.top1.length;
    expect(agree).toBeGreaterThanOrEqual(0.95);
  });
});
