// Shared prompt prefixes across slots, end to end on the bench model: a /v1/completions request with n = 4 choices of a
// 1024-token prompt (one prefill, the other three copying its rows) against n = 1 of a prompt as long, in the same
// server and run (prompts differ per round so that no slot already holds them). Prints wall-clock ms and the ratio
// (1.0x: the copies cost nothing; 4x: four prefills). Then the host-memory prompt cache: in a one-slot server, a
// 1024-token conversation pushed out by another and coming back with 8 more tokens, with --cache-ram 512 and without
// (ratio: with / without). Holds no state.
// Usage: bun bench/prefix.ts [--rounds 3]
import { parseArgs } from "node:util";
import { benchModelDir } from "../src/model/bench-model.ts";
import { startServer } from "../src/server/server.ts";

const { values } = parseArgs({ options: { rounds: { type: "string" } } });
const rounds = Number(values.rounds ?? 3);
const s = startServer({ dir: benchModelDir(), slots: 4, port: 0, host: "127.0.0.1" });
await s.engine.ready;
const V = s.engine.info!.vocab;
const prompt = (round: number, salt = 0) => Array.from({ length: 1024 }, (_, i) => ((i * 7919 + 131 * round + salt) % (V - 200)) + 100);
const time = async (n: number, ids: number[]) => {
  const t0 = performance.now();
  const r = await fetch(`${s.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: ids, max_tokens: 1, temperature: 0, n }) });
  if (!r.ok) throw new Error(await r.text());
  await r.json();
  return performance.now() - t0;
};
await time(1, prompt(rounds, 7)); // warm-up
for (let k = 0; k < rounds; k++) {
  const one = await time(1, prompt(k, 1)), four = await time(4, prompt(k));
  console.log(`1024-token prompt: n=1 ${one.toFixed(0)} ms, n=4 ${four.toFixed(0)} ms (${(four / one).toFixed(2)}x)`);
}
await s.stop();

// a conversation that comes back after another took the only slot, per server kind, rounds alternated between them
const returning = async (cacheRam: number, k: number) => {
  const x = startServer({ dir: benchModelDir(), slots: 1, port: 0, host: "127.0.0.1", cacheRam });
  await x.engine.ready;
  const post = async (ids: number[]) => {
    const t0 = performance.now(), r = await fetch(`${x.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: ids, max_tokens: 1, temperature: 0 }) });
    if (!r.ok) throw new Error(await r.text());
    const u = ((await r.json()) as { usage: { prompt_tokens_details: { cached_tokens: number } } }).usage;
    return { ms: performance.now() - t0, cached: u.prompt_tokens_details.cached_tokens };
  };
  await post(prompt(100 + k, 5)); // warm-up
  const a = prompt(200 + k, 3);
  await post(a);
  await post(prompt(300 + k, 9)); // (takes the slot)
  const back = await post([...a, 11, 12, 13, 14, 15, 16, 17, 18]);
  await x.stop();
  return back;
};
for (let k = 0; k < rounds; k++) {
  const on = await returning(512 * 2 ** 20, k), off = await returning(0, k);
  console.log(`returning 1024-token conversation: --cache-ram 512 ${on.ms.toFixed(0)} ms (${on.cached} cached), without ${off.ms.toFixed(0)} ms `
    + `(${off.cached} cached) (${(on.ms / off.ms).toFixed(2)}x)`);
}
