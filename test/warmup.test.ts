// The expert warmup (engine/experts/warmup.ts): it fills the cache slots with the hottest experts of the usage history,
// then the rest by index, with a progress line; after it a request reads none of what it warmed; --no-warmup reads
// nothing at start. serve (a child process on a generated model) says, before it is ready, how many bytes it read at
// start and how many are left to read lazily, and /metrics agrees.
import { describe, expect, test } from "bun:test";
import { attachExperts, warmExperts } from "../src/engine/experts/index.ts";
import { loadModel } from "../src/engine/model.ts";
import { generate } from "../src/engine/generate.ts";
import { genModel } from "./helpers/models.ts";
import { post, spawnServe } from "./server.helpers.ts";

const prompt = [14, 51, 88, 125, 162, 199];
const lines = () => { const out: string[] = []; return { out, log: (l: string) => void out.push(l) }; };

describe("warmExperts", () => {
  test("the whole cache: every expert read once, with a progress line; a request afterwards reads nothing", () => {
    const m = loadModel(genModel({ preset: "tiny", seed: 41 })), E = m.cfg.n_routed_experts;
    const store = attachExperts(m, { learn: false, quiet: true });
    try {
      const bar: string[] = [], { out, log } = lines();
      const r = warmExperts(store, { warm: true, log, progressMin: 0, out: { write: (s: string) => bar.push(s), isTTY: false } });
      expect(r.experts).toBe(store.layers.length * E);
      expect([r.lazyBytes, r.lazyExperts]).toEqual([0, 0]);
      expect(r.startBytes).toBe(store.stats().bytesRead);
      expect(bar.join("")).toMatch(/^experts: warmup \[#+\] 100\.0%/m);
      expect(out).toEqual([expect.stringMatching(new RegExp(`^experts: warmup read \\S+ \\S+ \\(${r.experts} experts\\) in [\\d.]+ s; \\S+ \\S+ read at start, 0 B \\(0 experts\\) left to read lazily on first use$`))]);
      const before = store.stats();
      generate(m, prompt, { maxTokens: 4, temperature: 0, stopIds: [] });
      const after = store.stats();
      expect(after.misses).toBe(0);
      expect(after.hits).toBeGreaterThan(0);
      expect(after.bytesRead).toBe(before.bytesRead);
    } finally { store.close(); m.store.close(); }
  });

  test("a smaller cache: the hottest experts first, then by index; the rest left to read lazily; --no-warmup reads nothing", () => {
    const m = loadModel(genModel({ preset: "tiny", seed: 42 })), E = m.cfg.n_routed_experts;
    const store = attachExperts(m, { learn: false, quiet: true, slots: 3 });
    try {
      const off = warmExperts(store, { warm: false, log: () => {} });
      expect([off.experts, off.startBytes, off.lazyExperts]).toEqual([0, 0, store.layers.length * E]);
      const L = store.layers[0];
      L.heat[E - 1] = 5; L.heat[7] = 9; // the usage history: expert 7, then E − 1
      const { out, log } = lines();
      const r = warmExperts(store, { warm: true, log });
      expect(r.experts).toBe(store.layers.length * 3);
      expect([...L.map.keys()].sort((a, b) => a - b)).toEqual([0, 7, E - 1]);
      expect([...store.layers[1].map.keys()].sort((a, b) => a - b)).toEqual([0, 1, 2]);
      expect(r.lazyExperts).toBe(store.layers.length * (E - 3));
      expect(r.lazyBytes).toBeGreaterThan(r.bytes);
      expect(out[0]).toMatch(/ \(\d+ experts\) left to read lazily on first use$/);
      expect(store.stats().waitMs).toBe(0); // (no request waited on the warmup)
    } finally { store.close(); m.store.close(); }
  });
});

describe("serve --warmup / --no-warmup", () => {
  /** a metric of /metrics (the expert figures appear once the worker's first stats reach the HTTP thread: waited for) */
  const metric = async (url: string, name: string): Promise<number> => {
    for (let i = 0; i < 200; i++) {
      const m = new RegExp(`^hummingbird_${name} (\\S+)$`, "m").exec(await (await fetch(`${url}/metrics`)).text());
      if (m) return Number(m[1]);
      await Bun.sleep(10);
    }
    throw new Error(`no ${name} in /metrics`);
  };
  /** a request, then /metrics once the worker's stats show its expert uses (they reach the HTTP thread after the reply) */
  const ask = async (url: string) => {
    expect((await post(url, "/v1/completions", { prompt: "Once upon a time", max_tokens: 4, temperature: 0 })).status).toBe(200);
    for (let i = 0; i < 200; i++) {
      const hits = await metric(url, "expert_cache_hits_total"), misses = await metric(url, "expert_cache_misses_total");
      if (hits + misses > 0) return { hits, misses, read: await metric(url, "expert_bytes_read_total") };
      await Bun.sleep(10);
    }
    throw new Error("the stats never showed the request's expert uses");
  };
  const size = (s: string) => { const [n, u] = s.split(" "); return Number(n) * { B: 1, KiB: 1024, MiB: 2 ** 20, GiB: 2 ** 30 }[u as "B"]; };

  test("default (the cache fits) and --warmup: said before ready, /metrics agrees, the first request misses nothing", async () => {
    for (const args of [[], ["--warmup"]]) {
      const s = await spawnServe(["--model", genModel({ preset: "tiny", seed: 43 + args.length }), "--threads", "1", "--slots", "1", ...args]);
      try {
        const log = s.log(), line = /experts: warmup read (\S+ \S+) \((\d+) experts\) in [\d.]+ s; (\S+ \S+) read at start, 0 B \(0 experts\) left to read lazily on first use\n/.exec(log);
        expect(line, log).not.toBeNull();
        expect(log.indexOf(line![0])).toBeLessThan(log.indexOf("ready on "));
        const read = await metric(s.url, "expert_bytes_read_total");
        expect(Math.abs(read - size(line![3]))).toBeLessThan(0.01 * read);
        const after = await ask(s.url);
        expect(after.misses).toBe(0);
        expect(after.hits).toBeGreaterThan(0);
        expect(after.read).toBe(read);
      } finally { s.p.kill(); await s.p.exited; }
    }
  }, 60_000);

  test("--no-warmup: nothing read at start, all left for the first requests", async () => {
    const s = await spawnServe(["--model", genModel({ preset: "tiny", seed: 46 }), "--threads", "1", "--slots", "1", "--no-warmup"]);
    try {
      expect(s.log()).toMatch(/experts: no warmup \(--no-warmup\): 0 B read at start, \S+ \S+ \(\d+ experts\) left to read lazily on first use\n/);
      expect(await metric(s.url, "expert_bytes_read_total")).toBe(0);
      const after = await ask(s.url);
      expect(after.misses).toBeGreaterThan(0);
      expect(after.read).toBeGreaterThan(0);
    } finally { s.p.kill(); await s.p.exited; }
  }, 60_000);

  test("--warmup with --no-warmup is refused", async () => {
    const p = Bun.spawn(["bun", "src/cli.ts", "serve", "--warmup", "--no-warmup"], { cwd: `${import.meta.dir}/..`, stdout: "pipe", stderr: "pipe" });
    expect(await p.exited).toBe(2);
    expect(await new Response(p.stderr).text()).toContain("give --warmup or --no-warmup, not both");
  });
});
