// Hostile JSON bodies against running servers: for each kind, one streaming completion's longest gap between chunks
// while the body is sent `--reps` times beside it, and the time each took to refuse (docs/security.md "Bodies that
// cost more than their bytes"). Several `--url`s are run in turn, kind by kind (two trees: alternated, same hour).
//   bun src/cli.ts serve --port 8111 &   (and an older tree on 8112)
//   bun bench/bodies.ts --url http://localhost:8111 --url http://localhost:8112
import { parseArgs } from "node:util";

const { values: a } = parseArgs({ options: { url: { type: "string", multiple: true }, reps: { type: "string", default: "3" } } });
const urls = a.url?.length ? a.url : ["http://localhost:8080"], reps = Number(a.reps);
const cpu = (await Bun.file("/proc/cpuinfo").text()).match(/model name\s*:\s*(.*)/)?.[1] ?? "unknown CPU";
const hi = '"messages":[{"role":"user","content":"hi"}],"max_tokens":2';

const kinds: Record<string, [string, string]> = { // (made once, before any clock starts)
  "8 MiB of {} as messages": ["/v1/chat/completions", `{"messages":[${"{},".repeat(2_700_000)}{}],"max_tokens":2}`],
  "3.9M token ids": ["/v1/completions", `{"prompt":[${"0,".repeat(3_900_000)}0],"max_tokens":2}`],
  "1M token ids (past the context)": ["/v1/completions", `{"prompt":[${"0,".repeat(1_000_000)}0],"max_tokens":2}`],
  "1M ids of -1": ["/v1/completions", `{"prompt":[${"-1,".repeat(1_000_000)}-1],"max_tokens":2}`],
  "600k logit_bias keys": ["/v1/chat/completions", `{${hi},"logit_bias":{${Array.from({ length: 600_000 }, (_, i) => `"${i}":1`).join(",")}}}`],
  "100k messages (template budget)": ["/v1/chat/completions", `{"messages":[${'{"role":"user","content":"a"},'.repeat(99_999)}{"role":"user","content":"a"}],"max_tokens":2}`],
  "1.1M stop strings": ["/v1/chat/completions", `{${hi},"stop":[${'"abc",'.repeat(1_100_000)}"abc"]}`],
};

/** the longest gap between a stream's chunks while `body` is sent reps times; the slowest of those answers */
async function run(url: string, path: string, body: string): Promise<{ gap: number; slowest: number; status: string }> {
  const r = await fetch(url + "/v1/completions", { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: "once upon a time", max_tokens: 3000, ignore_eos: true, stream: true }) });
  const rd = r.body!.getReader();
  let gap = 0, n = 0, last = performance.now(), done = false;
  const read = (async () => {
    while (!done) {
      const x = await rd.read();
      const t = performance.now();
      if (x.done) break;
      if (n++ > 2) gap = Math.max(gap, t - last); // (after the stream's prefill)
      last = t;
    }
  })();
  await Bun.sleep(300);
  let slowest = 0;
  const statuses = new Set<number>();
  for (let i = 0; i < reps; i++) {
    const t = performance.now();
    const res = await fetch(url + path, { method: "POST", headers: { "content-type": "application/json" }, body });
    await res.arrayBuffer();
    slowest = Math.max(slowest, performance.now() - t);
    statuses.add(res.status);
  }
  done = true;
  await rd.cancel();
  await read;
  return { gap, slowest, status: [...statuses].join("/") };
}

console.log(`hostile bodies on ${cpu}, ${reps} each beside one stream; ms`);
console.log(`| body | MB | ${urls.map((u) => `${u}: status, slowest answer, stream's longest gap`).join(" | ")} |`);
console.log(`|---|---|${urls.map(() => "---").join("|")}|`);
for (const [name, [path, body]] of Object.entries(kinds)) {
  const cells: string[] = [];
  for (const u of urls) { const r = await run(u, path, body); cells.push(`${r.status}, ${r.slowest.toFixed(0)}, ${r.gap.toFixed(0)}`); }
  console.log(`| ${name} | ${(body.length / 1e6).toFixed(1)} | ${cells.join(" | ")} |`);
}
