// `hummingbird score`: lm-eval loglikelihood requests, teacher-forced and batched. Reads lines
// `<ctxlen> <contlen> <id0> ... <id_{T-1}>` (FILE or - for stdin) and prints, per request in order,
// `<sum logprob of the continuation> <contlen> <greedy 0|1>`. No state.
import { readFileSync } from "node:fs";
import { type Command, parseCli, required, intOption, UsageError } from "./common.ts";
import { loadModel } from "../engine/model.ts";
import { parseScoreRequests, score, ScoreInputError } from "../engine/score.ts";

const help = `usage: hummingbird score --model DIR --requests FILE [--batch-rows N] [--exact]

Each line of FILE (or stdin with --requests -): <ctxlen> <contlen> <id0> ... <id_{T-1}>, T = ctxlen +
contlen. The continuation ids[ctxlen..T) is scored teacher-forced (token i by the logits at i-1).
Prints one line per request: <sum logprob> <contlen> <greedy: 1 if every continuation token is the
argmax, else 0>. Requests are packed as separate segments into forwards of up to --batch-rows rows
(default 512). Blank lines are skipped. --exact: f32 activations (default: fast mode, int8
activations for quantized weights).`;

export const command: Command = {
  summary: "lm-eval loglikelihood scores of (context, continuation) token requests",
  help,
  run(argv) {
    const s = { type: "string" } as const;
    const r = parseCli(argv, { model: s, requests: s, "batch-rows": s, exact: { type: "boolean" } }, help);
    if (!r) return (console.log(help), 0);
    const v = r.values;
    const dir = required(v, "model", help), file = required(v, "requests", help);
    const maxRows = v["batch-rows"] === undefined ? 512 : intOption(v["batch-rows"], "batch-rows", help);
    if (maxRows < 1) throw new UsageError("--batch-rows must be ≥ 1", help);
    const text = file === "-" ? readFileSync(0, "utf8") : readFileSync(file, "utf8");
    const m = loadModel(dir);
    let reqs;
    try {
      reqs = parseScoreRequests(text, m.cfg.vocab_size, m.cfg.max_position_embeddings, file === "-" ? "stdin" : file);
    } catch (e) {
      if (e instanceof ScoreInputError) throw new UsageError(e.message);
      throw e;
    }
    const out = score(m, reqs, { maxRows, forward: { exact: !!v.exact } });
    process.stdout.write(out.map((x) => `${x.logprob} ${x.contlen} ${x.greedy ? 1 : 0}\n`).join(""));
    return 0;
  },
};
