// HTTPS: `serve --ssl-keyfile K --ssl-certfile C` (vLLM's names; llama-server's --ssl-key-file / --ssl-cert-file) on the
// embedded demo model: a client that trusts the certificate gets answers, one that does not (or speaks plain HTTP) gets
// none; bad files and halves of the pair exit 2 naming the flag. Keys and certificates made by openssl (.ci/run
// installs it) in a temp folder.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { spawnServe } from "./server.helpers.ts";

const REPO = resolve(import.meta.dir, "..");
const hasOpenssl = Bun.which("openssl") !== null;
if (!hasOpenssl) console.warn("[skip] serve TLS suite: no openssl to make a certificate with");

async function cli(...args: string[]) {
  const p = Bun.spawn(["bun", "src/cli.ts", ...args], { cwd: REPO, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

describe.skipIf(!hasOpenssl)("serve over HTTPS", () => {
  const dir = mkdtempSync(join(tmpdir(), "hb-tls-")), f = (n: string) => join(dir, n);
  let proc: Subprocess, url = "", cert = "";
  const mk = (name: string) => {
    const r = Bun.spawnSync(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
      "-keyout", f(`${name}.key`), "-out", f(`${name}.crt`), "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"]);
    if (r.exitCode !== 0) throw new Error(`openssl: ${r.stderr.toString()}`);
  };
  beforeAll(async () => {
    mk("a"); mk("b");
    writeFileSync(f("junk.pem"), "not a key\n");
    cert = await Bun.file(f("a.crt")).text();
    ({ p: proc, url } = await spawnServe(["--ssl-keyfile", f("a.key"), "--ssl-certfile", f("a.crt"), "--quiet"]));
  }, 60_000);
  afterAll(() => { proc?.kill(); rmSync(dir, { recursive: true, force: true }); });

  test("a client trusting the certificate is served; an untrusting one and plain HTTP are not", async () => {
    expect(url).toStartWith("https://127.0.0.1:");
    const trusted = { tls: { ca: cert } } as RequestInit;
    expect((await fetch(`${url}/health`, trusted)).status).toBe(200);
    const r = await fetch(`${url}/v1/completions`, { ...trusted, method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: "Once", max_tokens: 3, temperature: 0 }) });
    expect(r.status).toBe(200);
    expect(((await r.json()) as any).usage.completion_tokens).toBeGreaterThan(0);
    await expect(fetch(`${url}/health`)).rejects.toThrow(/certificate/);
    await expect(fetch(`${url.replace("https:", "http:")}/health`)).rejects.toThrow();
  });

  test("bad pairs exit 2 naming the flag", async () => {
    const runs = await Promise.all([
      cli("serve", "--ssl-keyfile", f("a.key")),
      cli("serve", "--ssl-certfile", f("a.crt")),
      cli("serve", "--ssl-keyfile", f("junk.pem"), "--ssl-certfile", f("a.crt")),
      cli("serve", "--ssl-keyfile", f("a.key"), "--ssl-certfile", f("junk.pem")),
      cli("serve", "--ssl-key-file", f("a.key"), "--ssl-cert-file", f("b.crt")),
      cli("serve", "--ssl-keyfile", f("missing.key"), "--ssl-certfile", f("a.crt")),
      cli("serve", "--ssl-keyfile", f("a.key"), "--ssl-key-file", f("a.key"), "--ssl-certfile", f("a.crt")),
    ]);
    for (const r of runs) expect(r.code).toBe(2);
    expect(runs[0].err).toContain("--ssl-keyfile needs --ssl-certfile too");
    expect(runs[1].err).toContain("--ssl-certfile needs --ssl-keyfile too");
    expect(runs[2].err).toContain(`--ssl-keyfile ${f("junk.pem")}: not a PEM private key`);
    expect(runs[3].err).toContain(`--ssl-certfile ${f("junk.pem")}: not a PEM certificate`);
    expect(runs[4].err).toContain(`--ssl-key-file ${f("a.key")} is not the key of the certificate in --ssl-cert-file ${f("b.crt")}`);
    expect(runs[5].err).toContain(`--ssl-keyfile ${f("missing.key")}: ENOENT`);
    expect(runs[6].err).toContain("give --ssl-keyfile or --ssl-key-file, not both");
  }, 60_000);
});
