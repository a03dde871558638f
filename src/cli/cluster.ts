// `hummingbird cluster`: N `serve` replicas on consecutive ports behind HAProxy (haproxy-config.ts) on one machine,
// or, with --balancer none or no haproxy installed, the replicas and the configuration printed to run elsewhere.
// A replica that dies is started again; SIGTERM / SIGINT drain the replicas, then stop HAProxy. State: the children.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { haproxyConfig } from "./haproxy-config.ts";
import { choice, intOption, parseCli, UsageError, type Command } from "./common.ts";

const help = `usage: hummingbird cluster --replicas N --model DIR [--balancer haproxy|none] [--port 8080] [--host 127.0.0.1]
                           [--balance affinity|roundrobin] [-- serve options...]

Start N \`serve\` replicas of one model on ports P+1..P+N (127.0.0.1) and HAProxy on --host:--port in front of them:
consistent hashing on X-Session-Id (else the body's prompt_cache_key or user) keeps each conversation on the
replica that holds its KV rows, health checks on /health take loading, draining or dead replicas out, and a request
refused by one (503, connection refused) is sent to another. Without haproxy on the PATH (or with --balancer none)
the replicas start alone and the configuration is printed for a balancer elsewhere. See docs/serving.md.

options:
  --replicas N     serve processes (1..64)
  --model DIR      the model every replica serves
  --balancer B     haproxy (default when installed) | none
  --balance A      affinity (default) | roundrobin
  --port P         the balancer's port (default 8080); replicas on P+1..P+N
  --host H         the balancer's address (default 127.0.0.1)
  -- ...           options passed on to every \`serve\` (default --threads: the cores shared out, at least 1)
  -h, --help       this help`;

const log = (s: string) => process.stderr.write(`hummingbird cluster: ${s}\n`);

/** argv of a `serve` child: this binary (a compiled one) or bun running src/cli.ts */
function serveArgv(): string[] {
  return import.meta.url.includes("$bunfs") ? [process.execPath] : [process.execPath, resolve(import.meta.dir, "../cli.ts")];
}

async function run(argv: string[]): Promise<number> {
  const dash = argv.indexOf("--"), passed = dash >= 0 ? argv.slice(dash + 1) : [];
  const r = parseCli(dash >= 0 ? argv.slice(0, dash) : argv, {
    replicas: { type: "string" }, model: { type: "string", short: "m" }, balancer: { type: "string" }, balance: { type: "string" },
    port: { type: "string" }, host: { type: "string" },
  }, help);
  if (!r) return (process.stdout.write(help + "\n"), 0);
  const v = r.values;
  if (v.replicas === undefined) throw new UsageError("missing required option --replicas", help);
  const n = intOption(v.replicas, "replicas", help);
  if (n < 1 || n > 64) throw new UsageError("--replicas must be in [1, 64]", help);
  if (v.model === undefined) throw new UsageError("missing required option --model", help);
  const port = v.port === undefined ? 8080 : intOption(v.port, "port", help);
  if (port < 1 || port + n > 65535) throw new UsageError(`--port ${port}: the replicas' ports ${port + 1}..${port + n} must be ≤ 65535`, help);
  const balance = v.balance === undefined ? "affinity" : choice(v.balance, "balance", ["affinity", "roundrobin"] as const, help);
  const installed = Bun.which("haproxy") !== null;
  const balancer = v.balancer === undefined ? (installed ? "haproxy" : "none") : choice(v.balancer, "balancer", ["haproxy", "none"] as const, help);
  if (balancer === "haproxy" && !installed) throw new UsageError("--balancer haproxy: haproxy is not on the PATH (apt-get install haproxy), or use --balancer none", help);
  const host = v.host ?? "127.0.0.1";
  const replicas = Array.from({ length: n }, (_, i) => ({ host: "127.0.0.1", port: port + 1 + i }));
  const cfg = haproxyConfig({ bind: `${host.includes(":") ? `[${host}]` : host}:${port}`, replicas, balance });
  const threads = passed.some((a) => /^(--threads|-t)(=|$)/.test(a)) ? [] : ["--threads", String(Math.max(1, Math.floor(availableParallelism() / n)))];

  let stopping = false;
  const children = new Map<number, Subprocess>();
  const start = (i: number) => {
    const args = [...serveArgv(), "serve", "--model", resolve(v.model!), "--host", "127.0.0.1", "--port", String(replicas[i].port), ...threads, ...passed];
    const p = Bun.spawn(args, { stdin: "ignore", stdout: "inherit", stderr: "inherit" });
    children.set(i, p);
    p.exited.then((code) => {
      if (stopping) return;
      log(`replica ${i + 1} (port ${replicas[i].port}) exited with ${code}; starting it again in 1 s`);
      setTimeout(() => { if (!stopping) start(i); }, 1000);
    });
  };
  for (let i = 0; i < n; i++) start(i);
  let front: Subprocess | null = null, cfgDir = "";
  if (balancer === "haproxy") {
    cfgDir = mkdtempSync(join(tmpdir(), "hb-cluster-"));
    const file = join(cfgDir, "haproxy.cfg");
    writeFileSync(file, cfg);
    front = Bun.spawn(["haproxy", "-W", "-db", "-f", file], { stdin: "ignore", stdout: "inherit", stderr: "inherit" });
    log(`${n} replicas on 127.0.0.1:${port + 1}..${port + n}, HAProxy on ${host}:${port} (${balance}; configuration: ${file})`);
    front.exited.then((code) => { if (!stopping) { log(`haproxy exited with ${code}; stopping`); process.kill(process.pid, "SIGTERM"); } });
  } else {
    log(`${n} replicas on 127.0.0.1:${port + 1}..${port + n}; no balancer started. An HAProxy configuration for them:`);
    process.stdout.write(cfg);
  }
  const sig = await new Promise<string>((res) => { process.once("SIGINT", () => res("SIGINT")); process.once("SIGTERM", () => res("SIGTERM")); });
  stopping = true;
  const again = () => { log("second signal: killing everything now"); for (const p of [...children.values(), front]) p?.kill("SIGKILL"); process.exit(1); };
  process.once("SIGINT", again);
  process.once("SIGTERM", again);
  log(`${sig}: draining the replicas`);
  for (const p of children.values()) p.kill("SIGTERM");
  const codes = await Promise.all([...children.values()].map((p) => p.exited));
  front?.kill("SIGUSR1"); // (HAProxy's soft stop)
  await front?.exited;
  if (cfgDir) rmSync(cfgDir, { recursive: true, force: true });
  return codes.every((c) => c === 0) ? 0 : 1;
}

export const command: Command = { summary: "N serve replicas behind HAProxy (affinity, health checks, drain) on one machine", help, run };
