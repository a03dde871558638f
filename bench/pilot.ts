// Router-piloted cross-layer prefetch (src/engine/pilot.ts, issue #31 item 5). First its hit rate on the trained demo
// model (teacher-forced English text; chance is K/E). Then, on --model, against no prefetch and the previous token's
// union, alternated in one process: each run drops the page cache, prefills, then decodes teacher-forced pseudo-random
// ids with the expert cache below the working set (bench-cold.ts oneRun). Prints decode tok/s, the pilot's hit rate
// (experts used that it had predicted), prefetches issued / used and bytes read per token. Holds no state.
// Usage: bun bench/pilot.ts --model DIR [--expert-cache 32] [--rounds 3] [--tokens 16] [--prompt 8] [--modes off,on,pilot]
import { parseArgs } from "node:util";
import { loadModel } from "../src/engine/model.ts";
import { oneRun } from "../src/engine/experts/bench-cold.ts";
import type { PrefetchMode } from "../src/engine/experts/store.ts";
import * as io from "../src/engine/experts/io.ts";
import { hb } from "../src/native/hb.ts";
import { cpus } from "node:os";
import { demoModelDir } from "../src/model/demo.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { Session } from "../src/engine/session.ts";
import { attachExperts } from "../src/engine/experts/index.ts";
import { LONG_TEXT } from "../test/helpers/texts.ts";

const { values: v } = parseArgs({ options: { model: { type: "string" }, "expert-cache": { type: "string" }, rounds: { type: "string" },
  tokens: { type: "string" }, prompt: { type: "string" }, modes: { type: "string" }, buffered: { type: "boolean" } } });
if (!v.model) { console.error("usage: bun bench/pilot.ts --model DIR [--expert-cache N] [--rounds N] [--tokens N] [--prompt N] [--modes off,on,pilot] [--buffered]"); process.exit(2); }
{
  const dir = demoModelDir(), d = loadModel(dir), store = attachExperts(d, { prefetch: "pilot", learn: false, quiet: true });
  const ids = [1, ...loadTokenizer(dir).encode(LONG_TEXT)], s = new Session(d);
  for (const id of ids) s.feed([id]); // one row a step, as decode
  const K = d.cfg.num_experts_per_tok, E = d.cfg.n_routed_experts;
  console.log(`demo model (trained, ${E} experts top-${K}): the pilot predicted ${(100 * store.stats().pilotHitRate).toFixed(1)}% of the experts used over ${ids.length} tokens (chance ${(100 * K / E).toFixed(1)}%)`);
  store.close(); d.store.close();
}
const m = loadModel(v.model), slots = Number(v["expert-cache"] ?? 32), rounds = Number(v.rounds ?? 3);
const modes = (v.modes ?? "off,on,pilot").split(",") as PrefetchMode[];
io.startPool();
console.log(`${cpus()[0]?.model ?? "CPU"}, ${hb().hb_nthreads()} thread(s); ${v.model}: ${slots} of ${m.cfg.n_routed_experts} experts cached per layer, ${v.buffered ? "buffered" : "O_DIRECT"} reads`);
const rows: Record<string, number[]> = {};
for (let r = 0; r < rounds; r++)
  for (const mode of modes) {
    const x = oneRun(m, slots, { dir: v.model, tokens: Number(v.tokens ?? 16), promptLen: Number(v.prompt ?? 8), inputs: "random", direct: !v.buffered, prefetch: mode });
    const d = x.decode;
    (rows[mode] ??= []).push(x.decodeTokS);
    console.log(`round ${r + 1} ${mode.padEnd(5)} decode ${x.decodeTokS.toFixed(3)} tok/s, hit rate ${(100 * d.hitRate).toFixed(1)}%, ` +
      `read ${(d.bytesRead / Math.max(1, d.tokens) / 1e6).toFixed(0)} MB/token at ${d.readGBs.toFixed(2)} GB/s, wait ${d.waitMsPerToken.toFixed(0)} ms/token, ` +
      `prefetched ${d.prefetchIssued} (used ${d.prefetchHits}, wasted ${d.prefetchWasted})` + (mode === "pilot" ? `, pilot predicted ${(100 * d.pilotHitRate).toFixed(1)}%` : ""));
  }
const med = (a: number[]) => [...a].sort((p, q) => p - q)[a.length >> 1];
for (const mode of modes) console.log(`${mode.padEnd(5)} median ${med(rows[mode]).toFixed(3)} tok/s` + (mode !== modes[0] ? ` (${(med(rows[mode]) / med(rows[modes[0]])).toFixed(3)}× ${modes[0]})` : ""));
m.store.close();
