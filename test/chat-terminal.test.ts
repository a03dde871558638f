// `hummingbird chat` as a terminal program (llama-cli's chat): /help is answered locally (never sent to the model), an
// unknown /command is refused, an empty reply says so, Ctrl-C at the prompt quits with exit 0 and no noise, and the
// engine's startup diagnostics are plain text, not red (a worker's console.error is red on a TTY).
import { expect, test } from "bun:test";
import { join } from "node:path";

const root = join(import.meta.dir, "..");

function chat(input: string, ...args: string[]) {
  const r = Bun.spawnSync({ cmd: ["bun", "src/cli.ts", "chat", "--temperature", "0", ...args], cwd: root, stdin: Buffer.from(input), stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

test("/help lists the commands and sends nothing to the model; /frob is refused; an empty reply says so", () => {
  const r = chat("/help\n/frob\nGood things\n", "--max-tokens", "0", "--timings");
  expect(r.code, r.err).toBe(0);
  expect(r.err).toContain("/think [on|off]");
  expect(r.err).toContain("(unknown command /frob; /help lists them)");
  expect([...r.err.matchAll(/^turn \d+:/gm)].length).toBe(1); // only "Good things" reached the model
  expect(r.err).toContain("(empty reply)");
  expect(r.out).toBe("\n");
}, 30_000);

test("Ctrl-C at the prompt: exit 0, a newline, no exit-code noise", async () => {
  const p = Bun.spawn({ cmd: ["bun", "src/cli.ts", "chat"], cwd: root, stdin: "pipe", stdout: "pipe", stderr: "pipe" });
  let err = "";
  const dec = new TextDecoder(), reader = p.stderr.getReader();
  while (!err.includes("device:")) { // ready: the last startup line
    const { value, done } = await reader.read();
    if (done) break;
    err += dec.decode(value);
  }
  p.kill("SIGINT");
  expect(await p.exited).toBe(0);
  expect(await new Response(p.stdout).text()).toBe("\n");
}, 30_000);

test("startup diagnostics are plain on a terminal (no red)", () => {
  if (Bun.spawnSync({ cmd: ["sh", "-c", "command -v script"] }).exitCode !== 0) return console.warn("[skip] no `script` to give chat a TTY");
  const r = Bun.spawnSync({ cmd: ["script", "-qec", "bun src/cli.ts chat --max-tokens 1 < /dev/null", "/dev/null"], cwd: root, stdout: "pipe", stderr: "pipe" });
  const out = r.stdout.toString();
  expect(out).toContain("experts: RAM");
  expect(out).not.toContain("\x1b[31m");
}, 30_000);
