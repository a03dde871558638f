// `hummingbird bench serve`: aggregate decode throughput of the server with 1, 4 and 8 concurrent
// streams (continuous batching), on the bench preset unless --model is given. Reports tok/s and the
// ratio against one stream, measured in the same run (best of --reps rounds, the counts interleaved, as
// `hummingbird bench` takes the best of its reps: the machine may be shared).
import { type Command, intOption, parseCli } from "./common.ts";
import { draftOption } from "./serve.ts";
import { startServer } from "../server/server.ts";
import { benchModelDir } from "../model/bench-model.ts";

const help = `usage: hummingbird bench serve [--model DIR] [--tokens N] [--streams 1,4,8] [--reps 3] [--draft ngram|mtp|off [--draft-len K]] [--json]

Starts the server in-process (8 slots, ephemeral port), runs one untimed warm-up round, then --reps
rounds (default 3) in which each stream count in turn sends that many concurrent greedy
/v1/completions requests of N tokens (default 64). Reports, per count, the best round's aggregate
generated tokens per second, and its ratio to the single-stream figure. --draft: the server decodes
speculatively (serve --draft ngram|mtp [--draft-len K]); the default is plain decoding.`;

async function once(url: string, i: number, tokens: number): Promise<number> {
  const r = await fetch(`${url}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: `Stream ${i}: once upon a time`, max_tokens: tokens, temperature: 0, stop: [] }),
  });
  const j = (await r.json()) as { usage?: { completion_tokens: number }; error?: { message: string } };
  if (!r.ok || !j.usage) throw new Error(`bench serve: request failed: ${JSON.stringify(j.error ?? j)}`);
  return j.usage.completion_tokens;
}

export const command: Command = {
  summary: "aggregate server decode tok/s with 1, 4 and 8 concurrent streams",
  help,
  async run(argv) {
    const r = parseCli(argv, { model: { type: "string" }, tokens: { type: "string" }, streams: { type: "string" }, reps: { type: "string" }, draft: { type: "string" }, "draft-len": { type: "string" }, json: { type: "boolean" } }, help);
    if (!r) return (console.log(help), 0);
    const tokens = r.values.tokens === undefined ? 64 : intOption(r.values.tokens, "tokens", help);
    const counts = (r.values.streams ?? "1,4,8").split(",").map((s) => intOption(s, "streams", help));
    const reps = r.values.reps === undefined ? 3 : intOption(r.values.reps, "reps", help);
    const draft = draftOption(r.values.draft, r.values["draft-len"], help);
    const dir = r.values.model ?? benchModelDir();
    const s = startServer({ engine: { dir, attn: "absorbed" }, scheduler: { slots: Math.max(...counts), draft }, defaults: {}, http: { port: 0 } });
    try {
      await s.engine.ready;
      // warm-up: one untimed round at the largest count, so every configuration finds the experts it
      // touches already read and every buffer grown
      await Promise.all(Array.from({ length: Math.max(...counts) }, (_, i) => once(s.url, i, tokens)));
      const rows = counts.map((n) => ({ streams: n, tokens: 0, seconds: 0, tok_s: 0, vs_one: 0 }));
      for (let rep = 0; rep < reps; rep++)
        for (const row of rows) {
          const t0 = performance.now();
          const got = await Promise.all(Array.from({ length: row.streams }, (_, i) => once(s.url, i, tokens)));
          const sec = (performance.now() - t0) / 1000, total = got.reduce((a, b) => a + b, 0);
          if (total / sec > row.tok_s) Object.assign(row, { tokens: total, seconds: sec, tok_s: total / sec });
        }
      for (const row of rows) row.vs_one = row.tok_s / rows[0].tok_s;
      if (r.values.json) console.log(JSON.stringify({ model: dir, draft, rows }));
      else for (const row of rows) console.log(`${String(row.streams).padStart(2)} streams: ${row.tokens} tokens in ${row.seconds.toFixed(2)} s = ${row.tok_s.toFixed(1)} tok/s (${row.vs_one.toFixed(2)}× one stream)`);
      return 0;
    } finally {
      await s.stop();
    }
  },
};
