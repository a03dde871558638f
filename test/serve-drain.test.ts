// serve's graceful drain (a `serve` child process on the glm-tiny fixture): the first SIGTERM refuses new requests
// (503 + Retry-After), answers /health 503 "draining", lets a running stream finish and exits 0; a second SIGTERM
// exits at once. The session key mirrored into X-Session-Id (in-process server). `cluster --balancer none`, and
// `--balancer haproxy` (when installed) removing its configuration's folder when it stops.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { Server } from "../src/server/server.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { post, spawnServe, startTiny } from "./server.helpers.ts";

const long = { messages: [{ role: "user", content: "tell me everything" }], max_tokens: 3000, ignore_eos: true, temperature: 0, stream: true };

describe.skipIf(!hasTiny)("serve: drain on SIGTERM", () => {
  test("new requests 503 with Retry-After, /health draining, the running stream finishes, exit 0", async () => {
    const s = await spawnServe(["--model", TINY, "--slots", "2", "--threads", "1"]);
    const r = await post(s.url, "/v1/chat/completions", long);
    const rd = r.body!.getReader();
    await rd.read(); // (the stream runs)
    s.p.kill("SIGTERM");
    await Bun.sleep(100);
    const h = await fetch(`${s.url}/health`);
    expect([h.status, await h.json()]).toEqual([503, { status: "draining" }]);
    const n = await post(s.url, "/v1/chat/completions", { ...long, stream: false, max_tokens: 1 });
    expect([n.status, n.headers.get("retry-after"), ((await n.json()) as any).error.code]).toEqual([503, "1", "server_draining"]);
    let text = "";
    for (;;) { const { value, done } = await rd.read(); if (done) break; text += new TextDecoder().decode(value); }
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(text).toContain('"finish_reason":"length"');
    expect(await s.p.exited).toBe(0);
    expect(s.log()).toContain("drained; shutting down");
  }, 30000);

  test("a second SIGTERM exits at once, cutting the stream", async () => {
    const s = await spawnServe(["--model", TINY, "--slots", "2", "--threads", "1", "--drain-timeout", "60"]);
    const r = await post(s.url, "/v1/chat/completions", { ...long, max_tokens: 4000 });
    const rd = r.body!.getReader();
    await rd.read();
    s.p.kill("SIGTERM");
    await Bun.sleep(50);
    const t0 = performance.now();
    s.p.kill("SIGTERM");
    expect(await s.p.exited).toBe(1);
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(s.log()).toContain("second signal (SIGTERM): exiting now");
  }, 30000);
});

describe.skipIf(!hasTiny)("serve: the session key mirrored for balancers", () => {
  let s: Server;
  beforeAll(async () => { s = await startTiny({ slots: 2 }); }, 60000);
  afterAll(async () => { await s.stop(); });
  const ask = async (body: object, headers: Record<string, string> = {}) =>
    (await post(s.url, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 1, ...body }, headers)).headers.get("x-session-id");

  test("X-Session-Id header, else prompt_cache_key, else user; unusable values are not echoed", async () => {
    expect(await ask({ user: "u1", prompt_cache_key: "k1" }, { "x-session-id": "h1" })).toBe("h1");
    expect(await ask({ user: "u1", prompt_cache_key: "k1" })).toBe("k1");
    expect(await ask({ user: "u1" })).toBe("u1");
    expect(await ask({ stream: true, user: "u2" })).toBe("u2");
    expect(await ask({})).toBeNull();
    expect(await ask({ user: "has space" })).toBeNull();
    expect(await ask({ user: "x".repeat(256) })).toBeNull();
  });
});

/** `cluster` (1 replica of the fixture) on a free port with `args`, once /health answers 200 on port + `at`; then SIGTERM'd:
 *  its exit code and output */
async function clusterRun(args: string[], at: number) {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } }), port = l.port;
  l.stop(true);
  const p = Bun.spawn(["bun", "src/cli.ts", "cluster", "--replicas", "1", "--model", TINY, ...args, "--port", String(port), "--", "--slots", "1"],
    { cwd: resolve(import.meta.dir, ".."), stdout: "pipe", stderr: "pipe" });
  let up = false;
  for (const t0 = Date.now(); !up && Date.now() - t0 < 20000; await Bun.sleep(100))
    up = (await fetch(`http://127.0.0.1:${port + at}/health`).catch(() => null))?.status === 200;
  p.kill("SIGTERM");
  const code = await p.exited;
  return { up, code, port, stdout: await new Response(p.stdout).text(), stderr: await new Response(p.stderr).text() };
}

describe.skipIf(!hasTiny)("cluster --balancer none", () => {
  test("starts the replicas, prints their HAProxy configuration, drains them on SIGTERM", async () => {
    const r = await clusterRun(["--balancer", "none"], 1);
    expect([r.up, r.code]).toEqual([true, 0]);
    expect(r.stdout).toContain(`bind 127.0.0.1:${r.port}`);
    expect(r.stdout).toContain(`server r1 127.0.0.1:${r.port + 1}`);
    expect(r.stdout).toContain("balance hdr(X-Session-Id)");
  }, 30000);
});

describe.skipIf(!hasTiny || !Bun.which("haproxy"))("cluster --balancer haproxy", () => {
  test("answers through HAProxy; on SIGTERM drains, exits 0 and removes its configuration's folder", async () => {
    const r = await clusterRun(["--host", "127.0.0.1"], 0), file = /configuration: (\S+)\)/.exec(r.stderr)?.[1];
    expect([r.up, r.code]).toEqual([true, 0]);
    expect(file).toBeDefined();
    expect(existsSync(dirname(file!))).toBe(false);
  }, 30000);
});
