// Score mode (lm-eval `loglikelihood` semantics): for a request (ctxlen, contlen, ids[0..T)), the
// continuation is ids[ctxlen, ctxlen+contlen); token ids[i] is scored by log-softmax of the logits at
// position i-1 (teacher-forced). Returns Σ logprob and whether every continuation token is the
// argmax. Requests are packed into forwards as separate segments (one KVCache each), up to a row
// budget; the last id is never fed (it is only a target). Stateless (one RunState per call).
import { forward, type ForwardOpts } from "./forward.ts";
import { newKV, type Model } from "./model.ts";
import { RunState } from "./state.ts";
import type { Segment } from "./batch.ts";

export interface ScoreRequest { ctxlen: number; contlen: number; ids: number[] }
export interface ScoreResult { logprob: number; contlen: number; greedy: boolean }

/** Bad request input: `where` is e.g. `requests.txt line 3`. */
export class ScoreInputError extends Error {
  constructor(readonly where: string, detail: string) {
    super(`${where}: ${detail}`);
    this.name = "ScoreInputError";
  }
}

/**
 * Parse request lines `<ctxlen> <contlen> <id0> ... <id_{T-1}>` with T = ctxlen + contlen,
 * ctxlen ≥ 1, contlen ≥ 1, ids in [0, vocab), T ≤ maxLen. Blank lines are skipped.
 */
export function parseScoreRequests(text: string, vocab: number, maxLen: number, file = "requests"): ScoreRequest[] {
  const out: ScoreRequest[] = [];
  const lines = text.split("\n");
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === "") return;
    const where = `${file} line ${i + 1}`;
    const f = line.split(/\s+/);
    const bad = f.findIndex((x) => !/^\d+$/.test(x) || !Number.isSafeInteger(Number(x)));
    if (bad >= 0) throw new ScoreInputError(where, `field ${bad + 1} (${JSON.stringify(f[bad].slice(0, 32))}) is not a non-negative integer`);
    if (f.length < 4) throw new ScoreInputError(where, `expected "<ctxlen> <contlen> <id0> ... <id_{T-1}>", got ${f.length} fields`);
    const [ctxlen, contlen, ...rest] = f.map(Number);
    const ids = rest;
    if (ctxlen < 1) throw new ScoreInputError(where, "ctxlen must be ≥ 1 (the first continuation token is scored by the token before it)");
    if (contlen < 1) throw new ScoreInputError(where, "contlen must be ≥ 1");
    if (ids.length !== ctxlen + contlen) throw new ScoreInputError(where, `ctxlen ${ctxlen} + contlen ${contlen} = ${ctxlen + contlen} but the line has ${ids.length} ids`);
    if (ids.length > maxLen) throw new ScoreInputError(where, `${ids.length} ids exceed the model's context of ${maxLen}`);
    const oob = ids.findIndex((t) => t >= vocab);
    if (oob >= 0) throw new ScoreInputError(where, `id ${oob} (${ids[oob]}) is outside the vocabulary [0, ${vocab})`);
    out.push({ ctxlen, contlen, ids });
  });
  return out;
}

/** log-softmax(row)[t] in float64, and whether t is the argmax (first index on ties). */
export function logprobOf(row: Float32Array, t: number): { lp: number; top: boolean } {
  let max = -Infinity, best = 0;
  for (let i = 0; i < row.length; i++) if (row[i] > max) { max = row[i]; best = i; }
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i] - max);
  return { lp: row[t] - max - Math.log(sum), top: best === t };
}

export interface ScoreOpts { /** batch rows per forward (requests longer than this run alone) */ maxRows?: number; forward?: ForwardOpts }

export function score(m: Model, reqs: ScoreRequest[], o: ScoreOpts = {}): ScoreResult[] {
  const maxRows = o.maxRows ?? 512, V = m.cfg.vocab_size;
  const st = new RunState(m.cfg);
  const out: ScoreResult[] = new Array(reqs.length);
  let i = 0;
  while (i < reqs.length) {
    // pack requests [i, j) into one forward
    const segs: Segment[] = [], ids: number[] = [], who: number[] = [];
    let j = i;
    while (j < reqs.length) {
      const n = reqs[j].ids.length - 1;
      if (segs.length > 0 && ids.length + n > maxRows) break;
      segs.push({ kv: newKV(m, n), r0: ids.length, n, pos0: 0 });
      for (let p = 0; p < n; p++) ids.push(reqs[j].ids[p]);
      who.push(j++);
    }
    forward(m, st, segs, ids, { ...o.forward, logits: "all" });
    segs.forEach((g, k) => {
      const r = reqs[who[k]];
      let lp = 0, greedy = true;
      for (let p = r.ctxlen; p < r.ctxlen + r.contlen; p++) {
        const row = g.r0 + p - 1, x = logprobOf(st.logits.subarray(row * V, (row + 1) * V), r.ids[p]);
        lp += x.lp;
        greedy &&= x.top;
      }
      out[who[k]] = { logprob: lp, contlen: r.contlen, greedy };
    });
    i = j;
  }
  return out;
}
