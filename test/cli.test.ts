// CLI end to end (`bun src/cli.ts ...` as a child process): help and exit codes, inspect --json,
// make-model, bad config / truncated weights → exit 2 naming file + field/tensor; internal errors
// → exit 1 (in process, with a throwing command injected into the registry).
import { afterAll, describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { main } from "../src/cli.ts";
import { COMMANDS } from "../src/cli/registry.ts";
import { makeModel } from "../src/model/make-model.ts";

const REPO = resolve(import.meta.dir, "..");
const FIXTURE_REL = "../shared/fixtures/glm-tiny";
const haveFixture = existsSync(join(REPO, FIXTURE_REL, "config.json"));
if (!haveFixture) console.log(`cli fixture tests use a generated tiny model: ${FIXTURE_REL} absent`);
const root = mkdtempSync(join(tmpdir(), "hb-cli-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Run the CLI as a child process (each spawn costs ~0.1-1 s, so tests run theirs concurrently). */
async function cli(...args: string[]) {
  const p = Bun.spawn(["bun", "src/cli.ts", ...args], { cwd: REPO, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}
const T = 60_000; // per-test timeout: child processes on a loaded 2-core CI machine

/** A writable copy of the fixture (or of a generated tiny model of the same shape). */
function modelCopy(name: string): string {
  const dir = join(root, name);
  if (haveFixture) cpSync(join(REPO, FIXTURE_REL), dir, { recursive: true });
  else makeModel(dir, { preset: "tiny", seed: 0 });
  return dir;
}

const REPORT_KEYS = [
  "model_dir", "model_type", "vocab_size", "hidden_size", "num_layers", "dense_layers", "moe_layers",
  "indexer_types", "n_routed_experts", "experts_per_token", "n_shared_experts", "mtp", "tensors", "total_bytes",
  "bytes_by_dtype", "bytes_by_format", "resident_bytes", "routed_expert_bytes", "experts_stored", "per_expert_bytes",
];

describe("help and usage errors", () => {
  test("--help / help / <cmd> --help → 0 on stdout", async () => {
    const top = [["--help"], ["-h"], ["help"]];
    const rs = await Promise.all(top.map((a) => cli(...a)));
    rs.forEach((r, k) => {
      expect([top[k], r.code]).toEqual([top[k], 0]);
      expect(r.out).toContain("usage: hummingbird <command>");
      for (const c of ["make-model", "inspect"]) expect(r.out).toContain(c);
    });
    for (const c of ["make-model", "inspect"]) {
      const [a, b] = await Promise.all([cli(c, "--help"), cli("help", c)]);
      expect([a.code, b.code]).toEqual([0, 0]);
      expect(a.out).toContain(`usage: hummingbird ${c}`);
      expect(b.out).toBe(a.out);
    }
  }, T);

  test("no command, unknown command, bad flags → 2: one line, a hint, where the usage is (not the usage)", async () => {
    const cases: [string[], RegExp, string][] = [
      [[], /missing command/, "run 'hummingbird --help'"],
      [["frobnicate"], /unknown command "frobnicate"/, "run 'hummingbird --help'"],
      [["inspect", "--bogus"], /--bogus/, "run 'hummingbird inspect --help'"],
      [["inspect"], /--model/, "run 'hummingbird inspect --help'"],
      [["inspect", "--model"], /--model/, "run 'hummingbird inspect --help'"],
      [["make-model", join(root, "x"), "--preset", "huge"], /--preset must be one of tiny\|bench/, "run 'hummingbird make-model --help'"],
      [["make-model", join(root, "x"), "--preset", "tiny", "--seed", "-1"], /--seed/, "run 'hummingbird make-model --help'"],
      [["make-model", join(root, "x"), "--preset", "tiny", "--dtype", "f16"], /--dtype/, "run 'hummingbird make-model --help'"],
      [["make-model", "--preset", "tiny"], /output directory/, "run 'hummingbird make-model --help'"],
      [["generate", "--max-token", "3"], /unknown option --max-token\nhummingbird: did you mean --max-tokens\?/, "run 'hummingbird generate --help'"],
      [["serve", "--prot", "80"], /did you mean --port\?/, "run 'hummingbird serve --help'"],
      [["generat"], /did you mean generate\?/, "run 'hummingbird --help'"],
    ];
    const rs = await Promise.all(cases.map(([args]) => cli(...args)));
    for (const [k, [args, msg, help]] of cases.entries()) {
      const r = rs[k];
      expect([args, r.code]).toEqual([args, 2]);
      expect(r.err).toMatch(/^hummingbird: /);
      expect(r.err).toMatch(msg);
      expect(r.err).toContain(help);
      expect(r.err).not.toContain("usage:"); // the usage is --help's
      expect([args, r.err.split("\n").length <= 4]).toEqual([args, true]); // message, hint, where the usage is
      expect(r.out).toBe("");
    }
    expect(existsSync(join(root, "x"))).toBe(false);
  }, T);
});

describe("inspect", () => {
  test.skipIf(!haveFixture)("--json on the shared fixture: exactly one JSON object", async () => {
    const r = await cli("inspect", "--model", FIXTURE_REL, "--json");
    expect(r.code).toBe(0);
    expect(r.out.trim().split("\n").length).toBe(1);
    const j = JSON.parse(r.out);
    expect(Object.keys(j).sort()).toEqual([...REPORT_KEYS].sort());
    expect([j.vocab_size, j.hidden_size, j.num_layers, j.mtp, j.tensors]).toEqual([512, 64, 4, true, 282]);
  }, T);

  test("table output", async () => {
    const dir = haveFixture ? FIXTURE_REL : modelCopy("table");
    const r = await cli("inspect", "--model", dir);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^model_type\s+glm_moe_dsa$/m);
    expect(r.out).toMatch(/^indexer_types\s+full, shared, full, shared$/m);
    expect(r.out).toMatch(/^mtp\s+yes$/m);
  }, T);

  test("config with hidden_size 99999999 → 2, names config.json and hidden_size", async () => {
    const dir = modelCopy("bad-hidden");
    const cfg = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
    writeFileSync(join(dir, "config.json"), JSON.stringify({ ...cfg, hidden_size: 99999999 }));
    const r = await cli("inspect", "--model", dir, "--json");
    expect(r.code).toBe(2);
    expect(r.out).toBe("");
    expect(r.err).toMatch(/^hummingbird: .*config\.json.*hidden_size/);
  }, T);

  test("shard truncated in the middle of its last tensor → 2, names the file and that tensor", async () => {
    const dir = modelCopy("truncated");
    const file = join(dir, "model.safetensors");
    const buf = readFileSync(file);
    const n = Number(buf.readBigUInt64LE(0));
    const header = JSON.parse(buf.subarray(8, 8 + n).toString("utf8"));
    delete header.__metadata__;
    const [last, meta] = Object.entries<{ data_offsets: [number, number] }>(header).sort((a, b) => b[1].data_offsets[0] - a[1].data_offsets[0])[0];
    const [b, e] = meta.data_offsets;
    truncateSync(file, 8 + n + Math.floor((b + e) / 2));
    const r = await cli("inspect", "--model", dir);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/^hummingbird: /);
    expect(r.err).toContain("model.safetensors");
    expect(r.err).toContain(JSON.stringify(last));
  }, T);

  test("missing model directory → 2", async () => {
    const r = await cli("inspect", "--model", join(root, "nope"));
    expect(r.code).toBe(2);
    expect(r.err).toContain(join(root, "nope"));
  }, T);
});

describe("make-model", () => {
  test("writes a model that inspect reads; --set and --json", async () => {
    const dir = join(root, "made");
    const r = await cli("make-model", dir, "--preset", "tiny", "--seed", "3", "--dtype", "bf16", "--set", "num_hidden_layers=2", "--set", "index_topk=4", "--json");
    expect(r.code).toBe(0);
    const s = JSON.parse(r.out);
    expect([s.preset, s.seed, s.dtype]).toEqual(["tiny", 3, "bf16"]);
    const i = await cli("inspect", "--model", dir, "--json");
    expect(i.code).toBe(0);
    const j = JSON.parse(i.out);
    expect([j.num_layers, j.tensors, j.bytes_by_format.bf16 > 0]).toEqual([2, s.tensors, true]);
    expect(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")).index_topk).toBe(4);
  }, T);

  test("--dry-run --json lists the plan and writes nothing", async () => {
    const dir = join(root, "dry");
    const r = await cli("make-model", dir, "--preset", "bench", "--dry-run", "--json");
    expect(r.code).toBe(0);
    const p = JSON.parse(r.out);
    expect(p.config.hidden_size).toBe(1024);
    expect(p.tensors.length).toBe(1712);
    expect(existsSync(dir)).toBe(false);
  }, T);

  test("bad --set values → 2 naming the field", async () => {
    const bad: [string, string][] = [["vocab_size=100", "vocab_size"], ["hidden_size=\"wide\"", "hidden_size"], ["rope_interleave=false", "rope_interleave"]];
    const rs = await Promise.all(bad.map(([set]) => cli("make-model", join(root, "bad"), "--preset", "tiny", "--set", set)));
    bad.forEach(([set, field], k) => {
      expect([set, rs[k].code]).toEqual([set, 2]);
      expect(rs[k].err).toContain(field);
    });
    const r = await cli("make-model", join(root, "bad"), "--preset", "tiny", "--set", "novalue");
    expect(r.code).toBe(2);
    expect(r.err).toContain("key=json");
  }, T);
});

describe("exit codes in process", () => {
  test("an unexpected exception → 1", async () => {
    COMMANDS["test-throw"] = {
      summary: "throws",
      load: async () => ({ summary: "throws", help: "usage: test-throw", run: () => { throw new TypeError("boom"); } }),
    };
    const write = process.stderr.write;
    let err = "";
    process.stderr.write = ((s: string) => ((err += s), true)) as typeof process.stderr.write;
    try {
      expect(await main(["test-throw"])).toBe(1);
    } finally {
      process.stderr.write = write;
      delete COMMANDS["test-throw"];
    }
    expect(err).toBe("hummingbird: internal error: boom\n");
  });
});

describe("llama-cli's short flags", () => {
  test("generate -m DIR -p TEXT -n N is --model --prompt --max-tokens", async () => {
    const { demoModelDir } = await import("../src/model/demo.ts");
    const [short, long] = await Promise.all([cli("generate", "-m", demoModelDir(), "-p", "Once upon a time", "-n", "6", "--json", "--draft", "off"),
      cli("generate", "--model", demoModelDir(), "--prompt", "Once upon a time", "--max-tokens", "6", "--json", "--draft", "off")]);
    expect([short.code, long.code]).toEqual([0, 0]);
    expect(JSON.parse(short.out).gen_ids).toHaveLength(6);
    expect(JSON.parse(short.out).gen_ids).toEqual(JSON.parse(long.out).gen_ids);
  });
  test("generate's llama-cli launch flags: -ngl 0 -fa -ctk / -ctv f16 -t 1 --jinja are --device cpu --kv-cache-dtype f16 --threads 1", async () => {
    const { demoModelDir } = await import("../src/model/demo.ts");
    const base = ["generate", "-m", demoModelDir(), "-p", "Once upon a time", "-n", "5", "--json", "--draft", "off"];
    const [llama, ours, other, clash] = await Promise.all([cli(...base, "-ngl", "0", "-fa", "-ctk", "f16", "-ctv", "f16", "-t", "1", "--jinja", "--no-mmap"),
      cli(...base, "--device", "cpu", "--kv-cache-dtype", "f16", "--threads", "1"), cli(...base, "-ctk", "f16", "--device", "vulkan"),
      cli(...base, "-ngl", "0", "--device", "vulkan")]);
    expect([llama.code, ours.code]).toEqual([0, 0]);
    expect(llama.err).toContain("device: cpu (--device cpu)");
    expect(other.err).toContain("--kv-cache-dtype f16 runs on the CPU path only"); // -ctk reached --kv-cache-dtype
    const ids = (r: { out: string }) => JSON.parse(r.out).gen_ids as number[];
    expect(ids(llama)).toEqual(ids(ours));
    expect(ids(llama)).toHaveLength(5);
    expect(clash.code).toBe(2);
    expect(clash.err).toContain("-ngl 0 keeps every layer on the CPU: not with --device vulkan");
  }, T);
  test("chat's llama-cli flags: -m -n -c -t -ngl 0 -ctk f16 answer as the long forms", async () => {
    const { demoModelDir } = await import("../src/model/demo.ts");
    const run = async (...a: string[]) => {
      const p = Bun.spawn(["bun", "src/cli.ts", "chat", "-m", demoModelDir(), "--temperature", "0", ...a], { cwd: REPO, stdin: "pipe", stdout: "pipe", stderr: "pipe" });
      p.stdin.write("Hello\n/exit\n");
      p.stdin.end();
      const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
      return { out, err, code };
    };
    const [short, long, bad, gpu] = await Promise.all([run("-n", "6", "-c", "512", "-t", "1", "-ngl", "0", "-ctk", "f16"),
      run("--max-tokens", "6", "--ctx", "512", "--threads", "1", "--device", "cpu", "--kv-cache-dtype", "f16"), run("-ctk", "q4_0"),
      run("-ctk", "f16", "--device", "vulkan")]);
    expect([short.code, long.code]).toEqual([0, 0]);
    expect(short.err).toContain("device: cpu (--device cpu)");
    expect(gpu.err).toContain("--kv-cache-dtype f16 runs on the CPU path only"); // -ctk reached the engine
    expect(short.out.length).toBeGreaterThan(0);
    expect(short.out).toBe(long.out);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain("--cache-type-k must be one of");
  }, T);
});

describe("generate's sampling flags", () => {
  test("--typical-p, --xtc, --top-n-sigma, --mirostat change the draw as defined; bad values exit 2 naming the flag", async () => {
    const { demoModelDir } = await import("../src/model/demo.ts");
    const gen = async (...a: string[]) => {
      const r = await cli("generate", "--model", demoModelDir(), "--ids", "5,6,7,8", "--max-tokens", "1", "--json", "--draft", "off", ...a);
      if (r.code !== 0) console.error("generate", a.join(" "), "->", r.code, r.err);
      expect(r.code).toBe(0);
      return JSON.parse(r.out).gen_ids[0] as number;
    };
    const seeds = ["1", "2", "3", "4", "5", "6"], top2 = ["--temperature", "1", "--top-k", "2"];
    const [greedy, plain, xtc, typical, sigma, bad, badMirostat] = await Promise.all([gen("--temperature", "0"),
      Promise.all(seeds.map((sd) => gen(...top2, "--seed", sd))),
      Promise.all(seeds.map((sd) => gen(...top2, "--xtc", "1,0", "--seed", sd))), // the top two's more probable removed
      Promise.all(seeds.map((sd) => gen(...top2, "--typical-p", "0.01", "--seed", sd))), // of two, the more probable is the more typical
      Promise.all(seeds.map((sd) => gen(...top2, "--top-n-sigma", "0.0001", "--seed", sd))), // only the top logit is that close
      cli("generate", "--model", demoModelDir(), "--ids", "5", "--max-tokens", "1", "--xtc", "2"),
      cli("generate", "--model", demoModelDir(), "--ids", "5", "--max-tokens", "1", "--mirostat", "3")]);
    expect(sigma).toEqual(seeds.map(() => greedy));
    expect(badMirostat.code).toBe(2);
    expect(badMirostat.err).toContain("mirostat");
    const m = ["--temperature", "1", "--mirostat", "2", "--mirostat-ent", "2", "--seed", "4", "--max-tokens", "6"];
    expect(await gen(...m)).toBe(await gen(...m)); // seeded
    expect(new Set(plain).size).toBe(2); // these seeds draw both of the top two without the filters
    const runnerUp = plain.find((t) => t !== greedy)!;
    expect(xtc).toEqual(seeds.map(() => runnerUp));
    expect(typical).toEqual(seeds.map(() => greedy));
    expect(bad.code).toBe(2);
    expect(bad.err).toContain("xtc");
  }, T);
});
