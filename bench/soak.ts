// Soak: a `serve` child process (the embedded demo model unless --model) under mixed normal and hostile traffic on
// loopback for --seconds (default 600). Normal clients loop short chat completions (half streamed) and record their
// latency; one hostile client cycles through the attacks of issue 29 (ambiguous grammars, huge and deep schemas, a
// 7 MiB prompt, idle and slow sockets, idle mux sessions filling the connection cap, streams whose clients never read,
// cross-site content types, foreign Host headers, bad mux frames, slot-file escapes, oversized Responses tools,
// truncated bodies, bodies of millions of values, SUBMIT floods). Reports requests served, normal p50/p99 latency, the
// attacks' status counts, the server's peak RSS (VmHWM), its RSS after the first minute and at the end, and whether it
// still answers. Bounded: every request has a deadline and the run stops itself. State: counters of this run only.
// Usage: bun bench/soak.ts [--seconds 600] [--normal 2] [--model DIR]
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:net";
import { parseArgs } from "node:util";
import { spawnServe } from "../test/server.helpers.ts";

const { values } = parseArgs({ options: { seconds: { type: "string" }, normal: { type: "string" }, model: { type: "string" } } });
const seconds = Number(values.seconds ?? 600), clients = Number(values.normal ?? 2);
const saves = mkdtempSync(join(tmpdir(), "hb-soak-"));
const outside = join(mkdtempSync(join(tmpdir(), "hb-soak-outside-")), "victim");
writeFileSync(outside, "precious\n");
symlinkSync(outside, join(saves, "planted")); // a save must not write through it
const MAX_CONNECTIONS = 64; // (small, so that idle_mux fills it)
const srv = await spawnServe([...(values.model ? ["--model", values.model] : []), "--slots", "4", "--slot-save-path", saves, "--quiet",
  "--max-connections", String(MAX_CONNECTIONS)]);
const url = srv.url, port = Number(new URL(url).port), end = Date.now() + seconds * 1000;
const cpu = (await Bun.file("/proc/cpuinfo").text()).match(/model name\s*:\s*(.*)/)?.[1] ?? "unknown CPU";

const status = async (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(await Bun.file(`/proc/${srv.p.pid}/status`).text())?.[1] ?? 0) / 1024;
const peakRss = () => status("VmHWM");
const json = { "content-type": "application/json" };
const post = (path: string, body: unknown, headers: Record<string, string> = json, ms = 30000) =>
  fetch(url + path, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body), signal: AbortSignal.timeout(ms) });

// ---- normal traffic: short chats, latency recorded
const lat: number[] = [];
const failedHow = new Map<string, number>(); // status or error name → count
const failed = (how: string) => void failedHow.set(how, (failedHow.get(how) ?? 0) + 1);
async function normalClient(k: number): Promise<void> {
  for (let i = 0; Date.now() < end; i++) {
    const stream = i % 2 === 1, t0 = performance.now();
    try {
      const r = await post("/v1/chat/completions", { messages: [{ role: "user", content: `Tell me about the sea, part ${k}.${i}` }],
        max_tokens: 8, temperature: 0, stream });
      const text = await r.text();
      if (r.ok) lat.push(performance.now() - t0); else failed(`${r.status} ${/"code":"(\w+)"/.exec(text)?.[1] ?? ""}`.trim());
    } catch (e) { failed((e as Error).name); }
  }
}

// ---- hostile traffic: one attack at a time, round robin; each answered (any status) or timed out
const a = (await (await post("/tokenize", { content: "a" })).json() as { tokens: number[] }).tokens[0];
// bodies whose validation took zod many times their parse (json-bounds.ts, bounded.ts), made once; the worst status
const wide = [
  ["/v1/chat/completions", `{"messages":[${"{},".repeat(2_700_000)}{}],"max_tokens":1}`],
  ["/v1/chat/completions", `{"messages":[${"{},".repeat(60_000)}{}],"max_tokens":1}`],
  ["/v1/completions", `{"prompt":[${"-1,".repeat(1_000_000)}-1]}`],
  ["/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logit_bias":{${Array.from({ length: 600_000 }, (_, i) => `"${i}":1`).join(",")}}}`],
];
const floodFrames = Array.from({ length: 50_000 }, (_, i) => `SUBMIT ${i + 1} auto 2 1 0 1\nhi\n`).join("");
const attacks: Record<string, () => Promise<number>> = {
  mux_flood: async () => { // 50k tiny SUBMITs in one body: past slots + queue + 64 live ids the stream refuses them itself
    const r = await post("/v1/mux", floodFrames, { "content-type": "application/octet-stream" }, 60000);
    await r.arrayBuffer();
    return r.status;
  },
  wide_bodies: async () => { let worst = 0; for (const [path, body] of wide) worst = Math.max(worst, (await post(path, body)).status); return worst; },
  ambiguous_grammar: async () => (await post("/v1/completions", { prompt: "x", max_tokens: 64, logit_bias: { [a]: 100 },
    grammar: 'root ::= e\ne ::= "a" e "b" | "a" e "c" | "d"' })).status,
  wide_schema: async () => (await post("/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 4,
    response_format: { type: "json_schema", json_schema: { name: "w", schema: { type: "object",
      properties: Object.fromEntries(Array.from({ length: 10000 }, (_, i) => [`p${i}`, { type: "string" }])) } } } })).status,
  deep_schema: async () => {
    let s: object = { type: "string" };
    for (let i = 0; i < 10000; i++) s = { type: "object", properties: { x: s } };
    return (await post("/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 4,
      response_format: { type: "json_schema", json_schema: { name: "d", schema: s } } })).status;
  },
  deep_kwargs: async () => (await post("/v1/chat/completions",
    `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"chat_template_kwargs":{"k":${"[".repeat(100000)}${"]".repeat(100000)}}}`)).status,
  prompt_7mib: async () => (await post("/v1/completions", { prompt: "the sea ".repeat(7 << 17), max_tokens: 4 })).status, // (under the 8 MiB body cap)
  tokenize_8mib: async () => (await post("/tokenize", { content: "wave ".repeat(1600000) })).status,
  text_plain: async () => (await post("/v1/completions", { prompt: "hi", max_tokens: 4 }, { "content-type": "text/plain" })).status,
  foreign_host: async () => (await fetch(url + "/v1/models", { headers: { host: "evil.example" }, signal: AbortSignal.timeout(5000) })).status,
  slot_escape: async () => (await post("/slots/0?action=save", { filename: "planted" })).status,
  slot_traversal: async () => (await post("/slots/0?action=save", { filename: "../../tmp/x" })).status,
  big_tools: async () => (await post("/v1/responses", { input: "hi", max_output_tokens: 2, tools: [{ type: "function", name: "f",
    description: "d".repeat(7 << 20), parameters: { type: "object", properties: {} } }] })).status,
  truncated_body: async () => (await post("/v1/chat/completions", '{"messages":[{"role":"user","content":"hi"')).status,
  bad_mux: async () => (await post("/v1/mux", "SUBMIT 1 ids=1,2,x\nDATA 1 99999999999\n", { "content-type": "application/octet-stream" })).status,
  idle_sockets: async () => { // 300 sockets opened and left silent
    const socks = await Promise.all(Array.from({ length: 300 }, () =>
      Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {}, error() {} } }).catch(() => null)));
    await Bun.sleep(3000);
    for (const s of socks) s?.end();
    return socks.filter(Boolean).length;
  },
  non_readers: async () => { // 8 long streams whose clients stop reading: held, then reset 10 s (the timeout) after their
    // buffers filled (a client that reads again before is not dropped: hence 25 s)
    const body = JSON.stringify({ messages: [{ role: "user", content: "Tell me a long story." }], max_tokens: 4000, logprobs: true,
      top_logprobs: 20, ignore_eos: true, stream: true });
    const socks = Array.from({ length: 8 }, () => {
      const s = connect(port, "127.0.0.1");
      s.on("error", () => {});
      s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      s.pause();
      return s;
    });
    await Bun.sleep(25000);
    const reset = await Promise.all(socks.map((s) => new Promise<boolean>((res) => { // resumed: reset, or still open after 3 s
      let r = false;
      s.on("error", () => { r = true; });
      s.once("close", () => res(r));
      s.resume();
      setTimeout(() => s.destroy(), 3000);
    })));
    return reset.filter(Boolean).length; // connections the server reset
  },
  idle_mux: async () => { // mux sessions left without work, as many as the connection cap: the server closes the ones
    // idle longest to serve newcomers (the normal clients) — how many it closed within 5 s
    const socks = await Promise.all(Array.from({ length: MAX_CONNECTIONS }, async () => {
      const got = { text: "" };
      const s = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data(_, d) { got.text += d.toString(); }, error() {} } }).catch(() => null);
      s?.write("POST /v1/mux HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/octet-stream\r\ntransfer-encoding: chunked\r\n\r\n");
      return { s, got };
    }));
    await Bun.sleep(5000);
    for (const x of socks) x.s?.end();
    return socks.filter((x) => x.got.text.includes("ERROR 0 OVERLOADED")).length;
  },
  slow_headers: async () => { // a request whose headers trickle in, one byte every 100 ms for 5 s
    const s = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {}, error() {} } });
    const req = `GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ${"z".repeat(40)}`;
    for (let i = 0; i < 50 && Date.now() < end; i++) { s.write(req[i % req.length]); await Bun.sleep(100); }
    s.end();
    return 0;
  },
};
const outcomes = new Map<string, Map<string, number>>();
async function hostileClient(): Promise<void> {
  const names = Object.keys(attacks);
  for (let i = 0; Date.now() < end; i++) {
    const name = names[i % names.length];
    let o: string;
    try { o = String(await attacks[name]()); } catch (e) { o = (e as Error).name; }
    const m = outcomes.get(name) ?? new Map<string, number>();
    m.set(o, (m.get(o) ?? 0) + 1);
    outcomes.set(name, m);
  }
}

const t0 = Date.now();
// the server's RSS after the first minute and once every client is done: what a long run keeps (a leak grows it)
let rssWarm = 0;
const warmAt = Math.min(60, seconds / 2);
setTimeout(async () => { rssWarm = await status("VmRSS"); }, warmAt * 1000).unref();
await Promise.all([...Array.from({ length: clients }, (_, k) => normalClient(k)), hostileClient()]);
const health = await fetch(url + "/health", { signal: AbortSignal.timeout(5000) }).then((r) => r.status, () => 0);
const after = await post("/v1/chat/completions", { messages: [{ role: "user", content: "still there?" }], max_tokens: 4 }).then((r) => r.status, () => 0);
const intact = readFileSync(outside, "utf8") === "precious\n";
const rss = await peakRss(), rssEnd = await status("VmRSS");
srv.p.kill("SIGTERM");
lat.sort((x, y) => x - y);
const q = (p: number) => lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))].toFixed(0) : "-";
const attacksSent = [...outcomes.values()].reduce((s, m) => s + [...m.values()].reduce((x, y) => x + y, 0), 0);
const normalFailed = [...failedHow.values()].reduce((x, y) => x + y, 0);
console.log(`soak on ${cpu}: ${((Date.now() - t0) / 1000).toFixed(0)} s, ${clients} normal clients + 1 hostile`);
console.log(`normal requests served ${lat.length}, failed ${normalFailed}${normalFailed ? ` (${[...failedHow].map(([k, v]) => `${k}×${v}`).join(" ")})` : ""}; latency p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${q(1)} ms`);
console.log(`hostile requests ${attacksSent}; server peak RSS ${rss.toFixed(0)} MiB, RSS ${rssWarm.toFixed(0)} MiB after ${warmAt} s and ${rssEnd.toFixed(0)} at the end; after: /health ${health}, chat ${after}; file behind the planted link intact: ${intact}`);
for (const [name, m] of outcomes) console.log(`  ${name.padEnd(18)} ${[...m].map(([k, v]) => `${k}×${v}`).join(" ")}`);
process.exit(health === 200 && after === 200 && intact ? 0 : 1);
