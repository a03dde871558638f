// The opt-in quality policies (src/engine/quality.ts): --experts-per-token K and --router-top-p P. Off, the forward is
// the default path bit for bit; at K = num_experts_per_tok and P = 1 the policy path is an identity; below, the
// router's choice and gates match a scalar reference computed here from the router weights, and the MoE output is the
// gated sum of the chosen experts. The flags are validated, warn loudly, and /props and /metrics report them.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { resolve } from "node:path";
import { genModel } from "./helpers/models.ts";
import { loadModel, type Model } from "../src/engine/model.ts";
import { Session } from "../src/engine/session.ts";
import { RunState } from "../src/engine/state.ts";
import { mlp, moe } from "../src/engine/moe.ts";
import { routePolicy, type QualityPolicy } from "../src/engine/quality.ts";
import type { ForwardOpts } from "../src/engine/forward.ts";
import { startServer, type Server } from "../src/server/server.ts";
import { spawnServe } from "./server.helpers.ts";

const REPO = resolve(import.meta.dir, "..");
const dir = genModel({ preset: "tiny", seed: 5 });
const m: Model = loadModel(dir);
const cfg = m.cfg, E = cfg.n_routed_experts, K = cfg.num_experts_per_tok, D = cfg.hidden_size, V = cfg.vocab_size;

function ids(n: number, seed: number): number[] {
  let s = seed;
  return Array.from({ length: n }, () => ((s = (s * 1103515245 + 12345) >>> 0) % (V - 16)) + 16);
}
const toks = ids(24, 3);
/** every position's logits, teacher-forced */
const run = (opts: ForwardOpts) => new Session(m, opts).feed(toks, true).slice();
const same = (a: Float32Array, b: Float32Array) => a.length === b.length && a.every((x, i) => Object.is(x, b[i]));

/** The policy's choice for one row, by hand in float64: biased top-Kp (ties to the lower id), the top-p prefix by
 *  unbiased score, gates normalized over the kept (the chosen's mass kept) and scaled. */
function reference(z: ArrayLike<number>, bias: ArrayLike<number> | null, q: QualityPolicy): { experts: number[]; gates: number[] } {
  const s = Array.from(z, (v) => 1 / (1 + Math.exp(-v))), c = s.map((v, e) => v + (bias ? bias[e] : 0));
  const chosen = [...s.keys()].sort((a, b) => c[b] - c[a] || a - b).slice(0, q.expertsPerToken ?? K);
  const sum = chosen.reduce((a, e) => a + s[e], 0);
  let kept = chosen;
  if (q.routerTopP !== undefined && q.routerTopP < 1) {
    const by = [...chosen].sort((a, b) => s[b] - s[a] || chosen.indexOf(a) - chosen.indexOf(b));
    let acc = 0, n = 0;
    while (n < by.length) { acc += s[by[n]] / sum; n++; if (acc >= q.routerTopP) break; }
    if (n < by.length) kept = by.slice(0, n);
  }
  const keptSum = kept.reduce((a, e) => a + s[e], 0);
  const gates = kept.map((e) => (kept === chosen ? (cfg.norm_topk_prob ? s[e] / sum : s[e])
    : s[e] / keptSum * (cfg.norm_topk_prob ? 1 : sum)) * cfg.routed_scaling_factor);
  return { experts: kept, gates };
}

describe("quality policies: the forward", () => {
  const base = run({});

  test("off (absent, null or empty) is the default path, bit for bit", () => {
    expect(same(run({ quality: null }), base)).toBe(true);
    expect(same(run({ quality: {} }), base)).toBe(true);
    expect(same(run({}), base)).toBe(true); // deterministic
  });

  test("K = num_experts_per_tok and P = 1 are identities: the same logits", () => {
    expect(same(run({ quality: { expertsPerToken: K } }), base)).toBe(true);
    expect(same(run({ quality: { routerTopP: 1 } }), base)).toBe(true);
    expect(same(run({ quality: { expertsPerToken: K, routerTopP: 1 } }), base)).toBe(true);
  });

  test("fewer experts or a top-p below 1 change the output", () => {
    for (const q of [{ expertsPerToken: 1 }, { expertsPerToken: K - 1 }, { routerTopP: 0.5 }]) {
      const l = run({ quality: q });
      expect(same(l, base)).toBe(false);
      expect(l.every(Number.isFinite)).toBe(true);
    }
  });

  test("the exact mode is unaffected by the option's presence when off", () => {
    expect(same(run({ exact: true, quality: null }), run({ exact: true }))).toBe(true);
  });
});

describe("quality policies: the router against a scalar reference", () => {
  const layer = m.w.layers.find((l) => l.moe)!.moe!;
  const W = layer.router.data as Float32Array, bias = layer.bias;
  let seed = 17;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;

  const policies: QualityPolicy[] = [{ expertsPerToken: 1 }, { expertsPerToken: 2 }, { expertsPerToken: K - 1 },
    { routerTopP: 0.3 }, { routerTopP: 0.6 }, { routerTopP: 0.9 }, { expertsPerToken: 3, routerTopP: 0.5 }];
  for (const q of policies) {
    test(`${JSON.stringify(q)}: moe() chooses the reference's experts and gates, and sums their outputs`, () => {
      const S = 5, st = new RunState(cfg, S, 8);
      st.exact = true; st.quality = q;
      const x = Float32Array.from({ length: S * D }, rnd), y = new Float32Array(S * D);
      moe(cfg, st, layer, x, S, y);
      const Kp = q.expertsPerToken ?? K;
      let cut = 0;
      for (let r = 0; r < S; r++) {
        // the router logits from the router weights, in float64
        const z = Array.from({ length: E }, (_, e) => { let a = 0; for (let d = 0; d < D; d++) a += W[e * D + d] * x[r * D + d]; return a; });
        const ref = reference(z, bias, q);
        const n = st.mkept[r];
        if (n < Kp) cut++;
        expect(Array.from(st.mexp.subarray(r * Kp, r * Kp + n))).toEqual(ref.experts);
        const g = Array.from(st.mgate.subarray(r * Kp, r * Kp + n));
        for (let k = 0; k < n; k++) expect(Math.abs(g[k] - ref.gates[k])).toBeLessThan(1e-5 * Math.abs(ref.gates[k]) + 1e-7);
        // y = Σ gate · expert(x) + shared(x), each expert on its own
        const want = new Float64Array(D), one = new Float32Array(D), xr = x.slice(r * D, (r + 1) * D);
        const st1 = new RunState(cfg, 1, 8); st1.exact = true;
        for (let k = 0; k < n; k++) {
          mlp(st1, layer.expert(ref.experts[k]), xr, 1, one);
          for (let d = 0; d < D; d++) want[d] += ref.gates[k] * one[d];
        }
        if (layer.shared) { mlp(st1, layer.shared, xr, 1, one); for (let d = 0; d < D; d++) want[d] += one[d]; }
        let num = 0, den = 0;
        for (let d = 0; d < D; d++) { num += (y[r * D + d] - want[d]) ** 2; den += want[d] ** 2; }
        expect(Math.sqrt(num / den)).toBeLessThan(1e-5);
      }
      if (q.routerTopP !== undefined && q.routerTopP <= 0.6) expect(cut).toBeGreaterThan(0); // the cut happened somewhere
    });
  }

  test("routePolicy at K = num_experts_per_tok, P = 1 keeps every chosen expert", () => {
    const S = 3, z = Float32Array.from({ length: S * E }, rnd);
    const ex = new Int32Array(S * K), g = new Float32Array(S * K), kept = new Int32Array(S);
    expect(routePolicy(cfg, { expertsPerToken: K, routerTopP: 1 }, S, z, bias, ex, g, kept)).toBe(K);
    expect(Array.from(kept)).toEqual([K, K, K]);
  });
});

/** Run the CLI as a child process. */
async function cli(...args: string[]) {
  const p = Bun.spawn(["bun", "src/cli.ts", ...args], { cwd: REPO, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

describe("quality policies: the flags", () => {
  const T = 60_000;
  for (const cmd of ["serve", "chat", "generate"]) {
    test(`${cmd}: bad values are usage errors naming the flag`, async () => {
      const more = cmd === "generate" ? ["--max-tokens", "1"] : [];
      const rs = await Promise.all([
        cli(cmd, "--model", dir, "--experts-per-token", "0", ...more),
        cli(cmd, "--model", dir, "--experts-per-token", String(K + 1), ...more),
        cli(cmd, "--model", dir, "--experts-per-token", "1.5", ...more),
        cli(cmd, "--model", dir, "--router-top-p", "0", ...more),
        cli(cmd, "--model", dir, "--router-top-p", "1.5", ...more),
        cli(cmd, "--model", dir, "--router-top-p", "x", ...more),
      ]);
      for (const [i, r] of rs.entries()) {
        expect(r.code).toBe(2);
        expect(r.err).toContain(i < 3 ? "--experts-per-token" : "--router-top-p");
      }
      expect(rs[1].err).toContain(`[1, ${K}]`);
    }, T);
  }

  test("generate: a loud warning for each policy, and the output changes only with them", async () => {
    const args = ["generate", "--model", dir, "--ids", "20,30,40,50", "--max-tokens", "6", "--json", "--draft", "off"];
    const [plain, same, fewer] = await Promise.all([cli(...args), cli(...args, "--experts-per-token", String(K)),
      cli(...args, "--experts-per-token", "2", "--router-top-p", "0.7")]);
    for (const r of [plain, same, fewer]) expect(r.code).toBe(0);
    expect(plain.err).not.toContain("WARNING");
    expect(same.err).toContain(`WARNING: --experts-per-token ${K} runs ${K} of the model's ${K} experts per token`);
    expect(fewer.err).toContain(`WARNING: --experts-per-token 2 runs 2 of the model's ${K} experts per token: output quality drops (not the model as trained)`);
    expect(fewer.err).toContain("WARNING: --router-top-p 0.7");
    expect(JSON.parse(same.out).gen_ids).toEqual(JSON.parse(plain.out).gen_ids);
  }, T);

  test("bench passes the policy through and reports it", async () => {
    const r = await cli("bench", "--model", dir, "--prompt-tokens", "4", "--gen", "2", "--reps", "1", "--warmup", "1", "--json", "--experts-per-token", "2");
    expect(r.code).toBe(0);
    expect(r.err).toContain("WARNING: --experts-per-token 2");
    expect(JSON.parse(r.out).quality_policies).toEqual({ experts_per_token: 2, router_top_p: null });
  }, T);
});

describe("quality policies: /props and /metrics", () => {
  let on: Server, off: Server;
  beforeAll(async () => {
    on = startServer({ dir, slots: 1, port: 0, host: "127.0.0.1", quality: { expertsPerToken: 2, routerTopP: 0.8 } });
    off = startServer({ dir, slots: 1, port: 0, host: "127.0.0.1" });
    await Promise.all([on.engine.ready, off.engine.ready]);
  });
  afterAll(async () => { await Promise.all([on?.stop(), off?.stop()]); });

  test("reported when on, null / 0 when off", async () => {
    const props = async (s: Server) => ((await (await fetch(`${s.url}/props`)).json()) as { quality_policies: unknown }).quality_policies;
    expect(await props(on)).toEqual({ experts_per_token: 2, router_top_p: 0.8 });
    expect(await props(off)).toEqual({ experts_per_token: null, router_top_p: null });
    const metrics = async (s: Server) => await (await fetch(`${s.url}/metrics`)).text();
    const mOn = await metrics(on), mOff = await metrics(off);
    expect(mOn).toMatch(/^hummingbird_experts_per_token 2$/m);
    expect(mOn).toMatch(/^hummingbird_router_top_p 0\.8$/m);
    expect(mOff).toMatch(/^hummingbird_experts_per_token 0$/m);
    expect(mOff).toMatch(/^hummingbird_router_top_p 0$/m);
  });

  test("a server under a policy generates (through the expert store)", async () => {
    const r = await fetch(`${on.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt: "hello", max_tokens: 4, temperature: 0 }) });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBeGreaterThan(0);
  });

  test("serve warns on stderr at start and reports the flags", async () => {
    const s = await spawnServe(["--model", dir, "--slots", "1", "--experts-per-token", "3", "--router-top-p", "0.9"]);
    try {
      expect(s.log()).toContain(`WARNING: --experts-per-token 3 runs 3 of the model's ${K} experts per token: output quality drops (not the model as trained)`);
      expect(s.log()).toContain("WARNING: --router-top-p 0.9");
      expect(((await (await fetch(`${s.url}/props`)).json()) as { quality_policies: unknown }).quality_policies).toEqual({ experts_per_token: 3, router_top_p: 0.9 });
    } finally { s.p.kill(); await s.p.exited; }
  }, 60_000);

  test("a policy the model cannot run fails the load", async () => {
    const bad = startServer({ dir, slots: 1, port: 0, host: "127.0.0.1", quality: { expertsPerToken: K + 1 } });
    await expect(bad.engine.ready).rejects.toThrow("--experts-per-token");
    await bad.stop();
  });
});

describe("the routed experts' one path (moe.ts resident)", () => {
  test("a shared expert wider than the routed ones (n_shared_experts 2): the reference's sum; mixed widths refused", () => {
    const wide = loadModel(genModel({ preset: "tiny", seed: 6, set: { n_shared_experts: 2 } }));
    const c = wide.cfg, layer = wide.w.layers.find((l) => l.moe)!.moe!, W = layer.router.data as Float32Array, Dw = c.hidden_size;
    expect(layer.shared!.down.I).toBe(2 * c.moe_intermediate_size);
    let seed = 29;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;
    const S = 4, st = new RunState(c, S, 8);
    st.exact = true;
    const x = Float32Array.from({ length: S * Dw }, rnd), y = new Float32Array(S * Dw);
    moe(c, st, layer, x, S, y);
    const st1 = new RunState(c, 1, 8), one = new Float32Array(Dw);
    st1.exact = true;
    for (let r = 0; r < S; r++) {
      const xr = x.slice(r * Dw, (r + 1) * Dw);
      const z = Array.from({ length: c.n_routed_experts }, (_, e) => { let a = 0; for (let d = 0; d < Dw; d++) a += W[e * Dw + d] * xr[d]; return a; });
      const s = z.map((v) => 1 / (1 + Math.exp(-v))), chosen = [...s.keys()].sort((a, b) => s[b] + (layer.bias?.[b] ?? 0) - s[a] - (layer.bias?.[a] ?? 0) || a - b)
        .slice(0, c.num_experts_per_tok), sum = chosen.reduce((a, e) => a + s[e], 0);
      const want = new Float64Array(Dw);
      for (const e of chosen) {
        mlp(st1, layer.expert(e), xr, 1, one);
        const g = (c.norm_topk_prob ? s[e] / sum : s[e]) * c.routed_scaling_factor;
        for (let d = 0; d < Dw; d++) want[d] += g * one[d];
      }
      mlp(st1, layer.shared!, xr, 1, one);
      let num = 0, den = 0;
      for (let d = 0; d < Dw; d++) { want[d] += one[d]; num += (y[r * Dw + d] - want[d]) ** 2; den += want[d] ** 2; }
      expect(Math.sqrt(num / den)).toBeLessThan(1e-5);
    }
    // a layer whose experts differ in shape is refused, naming the expert
    const e0 = layer.expert(0), odd = { ...layer, expert: (e: number) => (e === 0 ? e0 : { ...layer.expert(e), up: layer.shared!.up }) };
    const all = new RunState(c, 16, 8); all.exact = true;
    expect(() => moe(c, all, odd, Float32Array.from({ length: 16 * Dw }, rnd), 16, new Float32Array(16 * Dw))).toThrow(/differ in shape/);
    wide.store.close();
  });
});
