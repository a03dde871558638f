// The exact f32 forward against the independent float64 reference (../shared/fixtures/glm-tiny/ref).
import { describe, expect, test } from "bun:test";
import { expectSelections, hasTiny, readRef, recordSelections, relRms, TINY } from "./helpers/fixture.ts";
import { loadModel, newMtpKV } from "../src/engine/model.ts";
import { mtpForward } from "../src/engine/mtp.ts";
import { argmax, Session } from "../src/engine/session.ts";

const TOL = 1e-4;
const names = ["short", "long", "long-dense"] as const;

describe.skipIf(!hasTiny)("glm-tiny fixture (exact f32)", () => {
  const m = hasTiny ? loadModel(TINY) : (null as never);
  for (const name of names) {
    const ref = readRef(name);
    const dense = name === "long-dense";
    const model = dense ? { ...m, cfg: { ...m.cfg, has_dsa: false } } : m;

    test(`${name}: teacher-forced logits within ${TOL} relative RMS at every position`, () => {
      const s = new Session(model);
      const V = m.cfg.vocab_size;
      const logits = s.feed(ref.full_ids, true);
      let worst = 0;
      for (let p = 0; p < ref.full_ids.length; p++) worst = Math.max(worst, relRms(logits.subarray(p * V, (p + 1) * V), ref.tf_logits[p]));
      expect(worst).toBeLessThan(TOL);
    });

    test(`${name}: greedy continuation is identical`, () => {
      const s = new Session(model);
      let l = s.feed(ref.prompt_ids);
      const gen: number[] = [];
      for (let i = 0; i < ref.gen_ids.length; i++) {
        const t = argmax(l);
        gen.push(t);
        l = s.feed([t]);
      }
      expect(gen).toEqual(ref.gen_ids);
    });

    if (!dense) test(`${name}: DSA selections of full layers equal the reference`, () => {
      const rec = recordSelections();
      const s = new Session(model, { onSelect: rec.onSelect });
      s.feed(ref.full_ids, true);
      expectSelections(ref, rec.got);
    });

    test(`${name}: MTP logits (teacher-forced) and the chained drafts`, () => {
      const s = new Session(model);
      const V = m.cfg.vocab_size, T = ref.full_ids.length;
      s.feed(ref.full_ids, true);
      // MTP over positions 0..T-2, fed ids[p+1] and h_p
      mtpForward(model, s.st, newMtpKV(model), 0, ref.full_ids.slice(1), s.hidden, false, { logits: "all" });
      let worst = 0;
      for (let p = 0; p < T - 1; p++) worst = Math.max(worst, relRms(s.st.logits.subarray(p * V, (p + 1) * V), ref.mtp_logits[p]));
      expect(worst).toBeLessThan(TOL);
      // chained drafts after the prompt
      const s2 = new Session(model);
      const next = argmax(s2.feed(ref.prompt_ids));
      expect(next).toBe(ref.mtp_draft.next_token);
      const { drafts, logits } = s2.mtpDrafts(next, ref.mtp_draft.drafts.length);
      expect(drafts).toEqual(ref.mtp_draft.drafts);
      logits.forEach((l, i) => expect(relRms(l, ref.mtp_draft_logits[i])).toBeLessThan(TOL));
    });
  }
});
