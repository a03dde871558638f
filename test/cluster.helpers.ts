// Helpers of the cluster suite: `serve` replicas of the glm-tiny fixture as child processes, a real HAProxy in front
// of them (haproxy-config.ts, on a free loopback port; killed by stop()), one chat turn through it (which replica
// answered, the prompt-cache figures, whether a stream ended whole) and a replica's /metrics figures. Not a test file.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { haproxyConfig } from "../src/cli/haproxy-config.ts";
import { spawnServe } from "./server.helpers.ts";
import { TINY } from "./helpers/fixture.ts";

export const haproxyBin = Bun.which("haproxy");

export interface Replica { p: Subprocess; url: string; port: number }

/** a replica on `port` (0: any free one); 4 slots and a host-memory prompt cache, so parked conversations come back */
export async function startReplica(port = 0, extra: string[] = []): Promise<Replica> {
  const s = await spawnServe(["--model", TINY, "--slots", "4", "--cache-ram", "64", "--threads", "1", "--quiet", ...(port ? ["--port", String(port)] : []), ...extra]);
  return { p: s.p, url: s.url, port: Number(new URL(s.url).port) };
}

function freePort(): number {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = l.port;
  l.stop(true);
  return port;
}

/** HAProxy (affinity or round robin) in front of the replicas, once it answers; health checks every 200 ms */
export async function startHaproxy(replicas: Replica[], balance: "affinity" | "roundrobin"): Promise<{ url: string; stop(): Promise<void> }> {
  const port = freePort(), file = join(mkdtempSync(join(tmpdir(), "hb-cluster-test-")), "haproxy.cfg");
  writeFileSync(file, haproxyConfig({ bind: `127.0.0.1:${port}`, balance, checkMs: 200, replicas: replicas.map((r) => ({ host: "127.0.0.1", port: r.port })) }));
  const p = Bun.spawn([haproxyBin!, "-db", "-f", file], { stdin: "ignore", stdout: "ignore", stderr: "pipe" });
  const url = `http://127.0.0.1:${port}`;
  for (let t0 = Date.now(); ; await Bun.sleep(50)) {
    if (p.exitCode !== null) throw new Error(`haproxy exited: ${await new Response(p.stderr).text()}`);
    if (Date.now() - t0 > 10000) throw new Error("haproxy did not answer in 10 s");
    if ((await fetch(`${url}/health`).catch(() => null))?.status === 200) break;
  }
  return { url, stop: async () => { p.kill("SIGKILL"); await p.exited; } };
}

export interface Turn { ok: boolean; status: number; server: string; text: string; prompt: number; cached: number; completion: number; finish: string }

/** One chat request through `front` with X-Session-Id `session`: streamed (SSE, usage included) or not. */
export async function chat(front: string, session: string, messages: { role: string; content: string }[], maxTokens: number,
  stream = false, onHeaders?: (server: string) => void): Promise<Turn> {
  const bad = (status: number, server = ""): Turn => ({ ok: false, status, server, text: "", prompt: 0, cached: 0, completion: 0, finish: "" });
  let r: Response;
  try {
    r = await fetch(`${front}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-session-id": session },
      body: JSON.stringify({ messages, max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) }) });
  } catch { return bad(0); }
  const server = r.headers.get("x-served-by") ?? "";
  onHeaders?.(server);
  let body: string;
  try { body = await r.text(); } catch { return bad(r.status, server); }
  if (r.status !== 200) return bad(r.status, server);
  let j: any;
  if (stream) {
    const events = body.split("\n\n").filter((b) => b.startsWith("data: ")).map((b) => b.slice(6));
    if (events.at(-1) !== "[DONE]") return bad(r.status, server); // (cut mid-stream)
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    const text = chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("");
    j = { choices: [{ message: { content: text }, finish_reason: chunks.findLast((c) => c.choices?.[0]?.finish_reason)?.choices[0].finish_reason }], usage: chunks.at(-1).usage };
  } else j = JSON.parse(body);
  const u = j.usage;
  return { ok: true, status: r.status, server, text: j.choices[0].message.content ?? "", prompt: u.prompt_tokens, cached: u.prompt_tokens_details?.cached_tokens ?? 0,
    completion: u.completion_tokens, finish: j.choices[0].finish_reason };
}

/** a replica's vllm:* counter (0 when absent) */
export async function metric(r: Replica, name: string): Promise<number> {
  const m = await (await fetch(`${r.url}/metrics`)).text();
  return Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m").exec(m)?.[1] ?? 0);
}
