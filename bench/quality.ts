// The quality policies (src/engine/quality.ts: --experts-per-token K, --router-top-p P) measured: what each costs in
// teacher-forced perplexity on the demo model (fast mode, as served; the 476-token English text of
// test/fast-mode.test.ts, proverbs the fortunes corpus need not hold) with the routed experts kept per token, and what
// each gains in greedy decode tok/s on the bench preset (or --model DIR), default and policies alternated in one
// process over --rounds rounds (bench's timeModel: warm-up runs, then the best of --reps). Holds no state.
// Usage: bun bench/quality.ts [--rounds 3] [--reps 2] [--model DIR] [--k 6,4,2] [--p 0.9,0.8,0.6] [--skip-ppl] [--gen 64]
import { parseArgs } from "node:util";
import { benchModelDir } from "../src/model/bench-model.ts";
import { demoModelDir } from "../src/model/demo.ts";
import { loadModel } from "../src/engine/model.ts";
import { Session } from "../src/engine/session.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { attachExperts } from "../src/engine/experts/index.ts";
import { policyCount, type QualityPolicy } from "../src/engine/quality.ts";
import { timeModel } from "../src/cli/bench.ts";
import { hb } from "../src/native/hb.ts";
import { LONG_TEXT as TEXT } from "../test/helpers/texts.ts";

const { values: v } = parseArgs({ options: { rounds: { type: "string" }, reps: { type: "string" }, model: { type: "string" }, k: { type: "string" },
  p: { type: "string" }, "skip-ppl": { type: "boolean" }, gen: { type: "string" }, "prompt-tokens": { type: "string" }, warmup: { type: "string" } } });
const name = (q: QualityPolicy | null) => !q ? "default" : [q.expertsPerToken !== undefined ? `K=${q.expertsPerToken}` : "", q.routerTopP !== undefined ? `P=${q.routerTopP}` : ""].filter(Boolean).join(" ");
const list = (s: string | undefined) => s === undefined ? null : s.split(",").filter(Boolean).map(Number);

console.log(`CPU: ${hb().hb_nthreads()} thread(s), ${String(hb().hb_simd_name())}`);
if (!v["skip-ppl"]) {
  const dir = demoModelDir(), m = loadModel(dir), V = m.cfg.vocab_size, K = m.cfg.num_experts_per_tok;
  const ids = [1, ...loadTokenizer(dir).encode(TEXT)];
  const ppl = (q: QualityPolicy | null) => {
    policyCount.rows = 0; policyCount.experts = 0;
    const l = new Session(m, { quality: q }).feed(ids, true);
    let nll = 0;
    for (let p = 0; p < ids.length - 1; p++) {
      const row = l.subarray(p * V, (p + 1) * V);
      let mx = -Infinity, z = 0;
      for (let i = 0; i < V; i++) mx = Math.max(mx, row[i]);
      for (let i = 0; i < V; i++) z += Math.exp(row[i] - mx);
      nll -= row[ids[p + 1]] - mx - Math.log(z);
    }
    return { ppl: Math.exp(nll / (ids.length - 1)), kept: q ? policyCount.experts / policyCount.rows : K };
  };
  const ks = list(v.k) ?? [K - 1, K / 2, 1].filter((x, i, a) => Number.isInteger(x) && x >= 1 && a.indexOf(x) === i);
  const policies: (QualityPolicy | null)[] = [null, ...ks.map((k) => ({ expertsPerToken: k })), ...(list(v.p) ?? [0.9, 0.8, 0.6]).map((p) => ({ routerTopP: p }))];
  const base = ppl(null).ppl;
  console.log(`demo model ${dir}: ${ids.length} tokens, top-${K} of ${m.cfg.n_routed_experts} experts, fast mode`);
  for (const q of policies) {
    const r = ppl(q);
    console.log(`  ${name(q).padEnd(10)} perplexity ${r.ppl.toFixed(3)} (${r.ppl >= base ? "+" : ""}${(100 * (r.ppl / base - 1)).toFixed(2)}%), ${r.kept.toFixed(2)} experts/token`);
  }
}

const dir = v.model ?? benchModelDir(), m = loadModel(dir), K = m.cfg.num_experts_per_tok;
const o = { promptTokens: Number(v["prompt-tokens"] ?? 128), gen: Number(v.gen ?? 64), reps: Number(v.reps ?? 2), exact: false, warmup: Number(v.warmup ?? 4) };
const experts = attachExperts(m, { ctx: o.promptTokens + o.gen + 64, rows: o.promptTokens });
const ks = list(v.k) ?? [6, 4, 2].filter((k) => k < K);
const policies: (QualityPolicy | null)[] = [null, ...ks.map((k) => ({ expertsPerToken: k })), ...(list(v.p) ?? [0.9, 0.8, 0.6]).map((p) => ({ routerTopP: p }))];
console.log(`decode on ${dir}: top-${K} of ${m.cfg.n_routed_experts} experts, ${o.promptTokens}-token prompt, ${o.gen} greedy steps, best of ${o.reps}`);
const rounds = Number(v.rounds ?? 3);
const got = new Map<string, number[]>();
for (let r = 0; r < rounds; r++)
  for (const q of policies) {
    policyCount.rows = 0; policyCount.experts = 0;
    const t = timeModel(m, { ...o, ...(q ? { quality: q } : {}) });
    const kept = q ? policyCount.experts / Math.max(1, policyCount.rows) : K;
    (got.get(name(q)) ?? got.set(name(q), []).get(name(q))!).push(t.decode_tok_s);
    console.log(`  round ${r + 1} ${name(q).padEnd(10)} decode ${t.decode_tok_s.toFixed(1)} tok/s, prefill ${t.prefill_tok_s.toFixed(1)} tok/s, ${kept.toFixed(2)} experts/token`);
  }
const base = Math.max(...got.get("default")!);
for (const [k, xs] of got) console.log(`  ${k.padEnd(10)} decode best ${Math.max(...xs).toFixed(1)} tok/s (${(100 * (Math.max(...xs) / base - 1)).toFixed(1)}%), all ${xs.map((x) => x.toFixed(1)).join(" / ")}`);
experts.close();
