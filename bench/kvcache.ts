// The KV cache dtypes (f32, f16, q8) against each other, end to end on the bench model: a 2048-token prompt
// (teacher-forced in chunks of 128), then 64 greedy decode steps, each dtype in turn over several rounds (same
// process). Prints the decode and prefill tok/s of each and the caches' bytes. Holds no state.
// Usage: bun bench/kvcache.ts [--rounds 3] [--prompt 2048]
import { parseArgs } from "node:util";
import { benchModelDir } from "../src/model/bench-model.ts";
import { loadModel, newKV } from "../src/engine/model.ts";
import { Session, argmax } from "../src/engine/session.ts";
import { KV_DTYPES, type KvDtype } from "../src/native/hb.ts";

const { values } = parseArgs({ options: { rounds: { type: "string" }, prompt: { type: "string" } } });
const rounds = Number(values.rounds ?? 3), P = Number(values.prompt ?? 2048);
const m = loadModel(benchModelDir());
const ids = Array.from({ length: P }, (_, i) => ((i * 7919) % (m.cfg.vocab_size - 200)) + 100);
const run = (t: KvDtype) => {
  const s = new Session(m, { attn: "absorbed" }, { kv: newKV(m, P + 128, t) });
  const t0 = performance.now();
  let l = s.feed(ids.slice(0, 128));
  for (let p = 128; p < P; p += 128) l = s.feed(ids.slice(p, p + 128));
  const t1 = performance.now();
  for (let i = 0; i < 64; i++) l = s.feed([argmax(l)]);
  const t2 = performance.now();
  return { prefill: (P / (t1 - t0)) * 1000, decode: (64 / (t2 - t1)) * 1000, bytes: s.kv.kv.reduce((a, x) => a + x.byteLength, 0) };
};
for (const t of KV_DTYPES) run(t); // warm-up
for (let k = 0; k < rounds; k++)
  for (const t of KV_DTYPES) {
    const r = run(t);
    console.log(`${t} KV cache (${(r.bytes / 2 ** 20).toFixed(1)} MiB): prefill ${r.prefill.toFixed(1)} tok/s, decode ${r.decode.toFixed(1)} tok/s at ${P}-${P + 64}`);
  }
