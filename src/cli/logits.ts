// `hummingbird logits`: teacher-forced full-vocab logits of every position as JSON (and, with
// --mtp, the MTP head's logits fed ids[p+1] and the main hidden state at p).
import { type Command, parseCli, required, UsageError } from "./common.ts";
import { parseIds } from "./ids.ts";
import { loadModel, newMtpKV } from "../engine/model.ts";
import { Session } from "../engine/session.ts";
import { mtpForward } from "../engine/mtp.ts";
import { DEVICE_HELP, deviceFlags, openDeviceFor } from "./device.ts";
import { attachExperts, EXPERT_HELP, expertFlags, expertOptions } from "../engine/experts/index.ts";

const help = `usage: hummingbird logits --model DIR --ids 1,2,3 [--mtp] [--exact]

Prints {"logits": number[][]} (logits[i] = teacher-forced logits at position i); with --mtp also
"mtp_logits" for p = 0..T-2. --exact: f32 activations (default: fast mode, int8 activations for quantized weights).
${EXPERT_HELP}
${DEVICE_HELP}`;

const rows = (a: Float32Array, n: number, V: number) => Array.from({ length: n }, (_, i) => Array.from(a.subarray(i * V, (i + 1) * V)));

export const command: Command = {
  summary: "teacher-forced logits of a token sequence as JSON",
  help,
  run(argv) {
    const r = parseCli(argv, { model: { type: "string" }, ids: { type: "string" }, mtp: { type: "boolean" }, exact: { type: "boolean" }, ...expertFlags, ...deviceFlags }, help);
    if (!r) return (console.log(help), 0);
    const xo = expertOptions(r.values, help);
    const m = loadModel(required(r.values, "model", help));
    const ids = parseIds(required(r.values, "ids", help), m.cfg.vocab_size, help);
    const experts = attachExperts(m, { ...xo, ctx: ids.length, rows: ids.length });
    const V = m.cfg.vocab_size, T = ids.length;
    const exact = !!r.values.exact, dev = openDeviceFor(m, r.values, help);
    const s = new Session(m, { exact, ...dev.forward });
    const out: Record<string, number[][]> = { logits: rows(s.feed(ids, true), T, V) };
    if (r.values.mtp) {
      if (!m.w.mtp) throw new UsageError("--mtp: this model has no MTP layer", help);
      const n = mtpForward(m, s.st, newMtpKV(m, T), 0, ids.slice(1), s.hidden, false, { logits: "all", exact });
      out.mtp_logits = rows(s.st.logits, n, V);
    }
    experts.close();
    dev.close();
    process.stdout.write(JSON.stringify(out) + "\n");
    return 0;
  },
};
