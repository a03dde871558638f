// Scale-out on loopback: 3 `serve` replicas of the glm-tiny fixture behind a real HAProxy (started here, killed at
// the end). Affinity (consistent hashing on X-Session-Id) against round robin on 200 three-turn conversations, the
// prefix-cache hits read from each replica's /metrics; kill -9 of a replica mid-load (only its in-flight requests may
// fail, it rejoins once restarted); SIGTERM of a replica mid-stream (its streams finish, new requests go elsewhere).
// Skipped, saying so, without haproxy or the fixture.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { hasTiny } from "./helpers/fixture.ts";
import { chat, haproxyBin, metric, startHaproxy, startReplica, type Replica, type Turn } from "./cluster.helpers.ts";

if (!haproxyBin) console.warn("[skip] haproxy is not installed: the cluster suite is skipped (apt-get install haproxy)");
const CONVERSATIONS = 200, TURNS = 3, WORKERS = 12;

/** run `jobs` with `n` at a time */
async function pool<T>(jobs: (() => Promise<T>)[], n: number): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => { while (next < jobs.length) { const i = next++; out[i] = await jobs[i](); } }));
  return out;
}

describe.skipIf(!haproxyBin || !hasTiny)("cluster: 3 replicas behind HAProxy", () => {
  let replicas: Replica[] = [];
  const fronts: { url: string; stop(): Promise<void> }[] = [];
  const byServer = new Map<string, string[]>(); // replica name (r1..r3) → session keys affinity sent there

  beforeAll(async () => { replicas = await Promise.all([0, 0, 0].map(() => startReplica())); }, 120000); // (libhb may be built first)
  afterAll(async () => {
    for (const f of fronts) await f.stop();
    for (const r of replicas) r.p.kill("SIGKILL");
  });

  /** 200 conversations of 3 turns (a turn waits for the one before), `WORKERS` conversations at a time; per turn ≥ 2:
   *  whether its prompt came from the prefix cache (cached ≥ the previous turn's prompt but its last few tokens; a
   *  conversation sent to another replica gets only the few tokens all conversations share) */
  async function conversations(front: string, tag: string): Promise<{ turns: Turn[][]; hits: number; later: number; cachedSum: number }> {
    const turns = await pool(Array.from({ length: CONVERSATIONS }, (_, c) => async () => {
      const id = `${tag}-${c}`, messages = [{ role: "user", content: `conversation ${id}: what do the cookies say about ${c}?` }], out: Turn[] = [];
      for (let t = 0; t < TURNS; t++) {
        const r = await chat(front, id, messages, 2);
        out.push(r);
        messages.push({ role: "assistant", content: r.text }, { role: "user", content: `and turn ${t + 2}?` });
      }
      return out;
    }), WORKERS);
    let hits = 0, later = 0, cachedSum = 0;
    for (const conv of turns) conv.forEach((t, i) => {
      expect(t.ok).toBe(true);
      cachedSum += t.cached;
      if (i === 0) return;
      later++;
      if (t.cached >= conv[i - 1].prompt - 4) hits++; // (all but the generation prompt's tail, rendered otherwise once a reply follows)
    });
    return { turns, hits, later, cachedSum };
  }

  test("affinity keeps ≥ 90% of later turns on the prefix cache; round robin does not", async () => {
    const t0 = performance.now();
    const [aff, rr] = await Promise.all([startHaproxy(replicas, "affinity"), startHaproxy(replicas, "roundrobin")]);
    fronts.push(aff, rr);
    const hitsOf = async () => (await Promise.all(replicas.map((r) => metric(r, "vllm:prefix_cache_hits_total")))).reduce((a, b) => a + b, 0);
    const h0 = await hitsOf();
    const a = await conversations(aff.url, "aff");
    const h1 = await hitsOf();
    const b = await conversations(rr.url, "rr");
    const h2 = await hitsOf();
    // the replicas' own count of cached prompt tokens is the one the responses reported
    expect(h1 - h0).toBe(a.cachedSum);
    expect(h2 - h1).toBe(b.cachedSum);
    for (const conv of a.turns) {
      expect(new Set(conv.map((t) => t.server)).size).toBe(1); // a conversation stays on its replica
      byServer.set(conv[0].server, [...(byServer.get(conv[0].server) ?? []), `aff-${a.turns.indexOf(conv)}`]);
    }
    expect(byServer.size).toBe(3); // (and every replica got some)
    const pa = (100 * a.hits) / a.later, pb = (100 * b.hits) / b.later;
    console.log(`cluster: ${CONVERSATIONS} conversations × ${TURNS} turns: later turns from the prefix cache: affinity ${pa.toFixed(1)}%, ` +
      `round robin ${pb.toFixed(1)}%; cached prompt tokens (/metrics) ${h1 - h0} vs ${h2 - h1}; ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    expect(pa).toBeGreaterThanOrEqual(90);
    expect(pb).toBeLessThan(pa - 30);
  }, 90000);

  test("kill -9 of a replica mid-load: only its in-flight requests fail; restarted, it rejoins", async () => {
    const front = fronts[0].url, victim = 1, name = `r${victim + 1}`;
    const state: { started: number; ended: number; server: string; ok?: boolean }[] = [];
    let killedAt = 0;
    const kill = () => { killedAt = performance.now(); replicas[victim].p.kill("SIGKILL"); };
    const jobs = Array.from({ length: 60 }, (_, i) => async () => {
      const s = { started: performance.now(), ended: 0, server: "" };
      state[i] = s;
      const r = await chat(front, `load-${i}`, [{ role: "user", content: `load ${i}` }], 120, true, (srv) => {
        s.server = srv;
        if (!killedAt && i >= 9 && srv === name) kill(); // once the load is going, while a stream runs on the victim
      });
      Object.assign(s, { ended: performance.now(), ok: r.ok && r.completion === 120 });
    });
    await pool(jobs, 9);
    expect(killedAt).toBeGreaterThan(0);
    const failed = state.filter((s) => !s.ok);
    const inFlight = state.filter((s) => s.started <= killedAt && (s.ended >= killedAt || s.ended === 0));
    console.log(`cluster: kill -9 of ${name} with ${inFlight.length} requests in flight (${inFlight.filter((s) => s.server === name).length} on it): ${failed.length} of 60 failed`);
    for (const f of failed) expect(inFlight).toContain(f); // nothing that started after the kill, or ended before it, failed
    for (const f of failed) expect([name, ""]).toContain(f.server);
    const later = state.filter((s) => s.started > killedAt);
    expect(later.length).toBeGreaterThan(10); // (requests sent after the kill, some hashed to the victim: all answered)
    for (const s of later) expect(s.ok).toBe(true);
    // restarted on its port, it takes its conversations back once the health check sees it
    replicas[victim] = await startReplica(replicas[victim].port);
    const key = byServer.get(name)![0];
    let back = "";
    for (const t0 = Date.now(); Date.now() - t0 < 10000 && back !== name; await Bun.sleep(100)) back = (await chat(front, key, [{ role: "user", content: "back?" }], 1)).server;
    expect(back).toBe(name);
  }, 60000);

  test("SIGTERM of a replica mid-stream: its streams finish, new requests go elsewhere, nothing is lost", async () => {
    const front = fronts[0].url, victim = 2, name = `r${victim + 1}`, keys = byServer.get(name)!.slice(0, 3);
    let headers = 0;
    const streams = keys.map((k) => chat(front, k, [{ role: "user", content: `a long one for ${k}` }], 1500, true, () => { headers++; }));
    while (headers < keys.length) await Bun.sleep(10);
    await Bun.sleep(100);
    replicas[victim].p.kill("SIGTERM");
    await Bun.sleep(50);
    const after = await pool(byServer.get(name)!.slice(3, 23).map((k) => () => chat(front, k, [{ role: "user", content: "while it drains" }], 2)), 4);
    for (const r of after) { expect(r.ok).toBe(true); expect(r.server).not.toBe(name); }
    for (const s of await Promise.all(streams)) {
      expect(s.ok).toBe(true);
      expect(s.server).toBe(name);
      expect([s.completion, s.finish]).toEqual([1500, "length"]);
    }
    expect(await replicas[victim].p.exited).toBe(0);
  }, 60000);
});
