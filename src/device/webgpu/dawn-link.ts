// The engine's end of the channel to the Dawn host (dawn-host.ts, a child process): two FIFOs in a private
// temporary folder (requests out, replies in) and the host's log there. Calls block: a request is written whole,
// then its reply read whole, polling the non-blocking FIFOs (spinning first, then short sleeps) and watching the
// host: one that exits (crash included) or stops answering marks the link dead, and the call throws DeviceLost
// with the tail of the host's log. State: the host process, the FIFOs' descriptors and folder, whether it died;
// the links open (closed at exit).
import { closeSync, constants as C, existsSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { decodeReply, encodeReq, type Reply, type Req } from "./webgpu-channel.ts";
import { DeviceLost, VK_ERROR_DEVICE_LOST, VkError } from "../vulkan/vklib.ts";

const HOST = resolve(import.meta.dir, "dawn-host.ts");
/** how long a request other than wait may go unanswered (a hung host) before it fails */
const REPLY_MS = Number(process.env.HB_WEBGPU_TIMEOUT_MS ?? 120_000);

/** Is process `pid` still running (not exited, not a zombie)? */
function alive(pid: number): boolean {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, "utf8");
    return st.slice(st.lastIndexOf(")") + 2, st.lastIndexOf(")") + 3) !== "Z";
  } catch {
    try { process.kill(pid, 0); return true; } catch { return false; }
  }
}

const nap = new Int32Array(new SharedArrayBuffer(4));
/** back off while polling: spin first, then short sleeps, then 1 ms */
function idle(i: number): void {
  if (i >= 4096) Atomics.wait(nap, 0, 0, i < 16384 ? 0.05 : 1);
}

/** the tail of the host's log (Dawn's messages, a crash), for error messages */
function logTail(dir: string): string {
  try {
    const t = readFileSync(join(dir, "log"), "utf8").split("\n").filter((l) => l && !l.startsWith("Warning: max")).slice(-5).join(" | ");
    return t ? `: ${t}` : "";
  } catch { return ""; }
}

/** links still open: closed when the process exits, so no host or temporary folder outlives it */
const open = new Set<DawnLink>();
process.on("exit", () => { for (const l of open) l.close(); });

export class DawnLink {
  /** why the host is gone ("" while it answers) */
  dead = "";
  private heard = false;
  private constructor(private readonly proc: ReturnType<typeof Bun.spawn>, readonly dir: string,
    private readonly req: number, private readonly rep: number) {}

  /** Start the host and wait until it reads its FIFO. Throws VkError when it cannot. */
  static start(): DawnLink {
    if (!existsSync(HOST)) throw new VkError("WebGPU: src/device/webgpu/dawn-host.ts is not here (the compiled binary has the Vulkan backend only)", -10002);
    const dir = mkdtempSync(join(tmpdir(), "hb-dawn-"));
    const fds: number[] = [];
    let proc: ReturnType<typeof Bun.spawn> | null = null;
    try {
      for (const f of ["req", "rep"]) {
        const r = Bun.spawnSync({ cmd: ["mkfifo", join(dir, f)], stderr: "pipe" });
        if (r.exitCode !== 0) throw new VkError(`WebGPU: mkfifo failed: ${r.stderr.toString()}`, -10002);
      }
      fds.push(openSync(join(dir, "rep"), C.O_RDONLY | C.O_NONBLOCK), openSync(join(dir, "log"), "w"));
      proc = Bun.spawn({ cmd: [process.execPath, HOST, dir], stdin: "ignore", stdout: fds[1], stderr: fds[1] });
      proc.unref(); // the host never keeps the engine's process alive
      closeSync(fds.pop()!);
      const t0 = performance.now();
      let req = -1;
      for (let i = 0; req < 0; i++) { // the host opens its end of `req` once it runs
        try { req = openSync(join(dir, "req"), C.O_WRONLY | C.O_NONBLOCK); } catch (e) {
          if ((e as { code?: string }).code !== "ENXIO") throw e;
          if (!alive(proc.pid) || performance.now() - t0 > 30_000) throw new VkError(`WebGPU: the Dawn host did not start${logTail(dir)}`, -10002);
          idle(i);
        }
      }
      const l = new DawnLink(proc, dir, req, fds[0]);
      open.add(l);
      return l;
    } catch (e) {
      proc?.kill();
      for (const f of fds) closeSync(f);
      rmSync(dir, { recursive: true, force: true });
      throw e;
    }
  }

  /** the host's process id */
  get pid(): number { return this.proc.pid; }

  private gone(why: string): never {
    this.dead = `the Dawn host ${why}${logTail(this.dir)}`;
    throw new DeviceLost(`webgpu: ${this.dead}`);
  }

  /** A request without a reply (write, free, submit): its failure is the answer to the next request. */
  post(r: Req, payload?: Uint8Array): void { this.send(encodeReq(r, payload), performance.now(), REPLY_MS); }

  /** One request and its reply (status ≥ 0), or a thrown VkError / DeviceLost. */
  request(r: Req, payload?: Uint8Array): Reply {
    if (r.op === "write" || r.op === "free" || r.op === "submit") throw new VkError(`webgpu ${r.op} is posted (it has no reply)`, -10001);
    const t0 = performance.now(), limit = r.op === "wait" ? (r.timeoutMs < 0 ? Infinity : r.timeoutMs + REPLY_MS) : REPLY_MS;
    this.send(encodeReq(r, payload), t0, limit);
    const len = new Uint8Array(4);
    this.readFull(len, t0, limit);
    const body = new Uint8Array(new DataView(len.buffer).getUint32(0, true));
    this.readFull(body, t0, limit);
    const rep = decodeReply(body);
    if (rep.status === VK_ERROR_DEVICE_LOST) { this.dead = rep.text || "device lost"; throw new DeviceLost(`webgpu ${r.op}: ${this.dead}`); }
    if (rep.status < 0) throw new VkError(`webgpu ${r.op}: ${rep.text}`, rep.status);
    return rep;
  }

  private send(f: Uint8Array, t0: number, limit: number): void {
    for (let w = 0, i = 0; w < f.byteLength; i++) {
      try { w += writeSync(this.req, f, w); i = 0; continue; } catch (e) {
        const code = (e as { code?: string }).code;
        if (code === "EPIPE") this.gone("exited");
        if (code !== "EAGAIN") throw e;
      }
      if (!alive(this.proc.pid)) this.gone("exited");
      if (performance.now() - t0 > limit) this.gone(`took more than ${limit} ms to take a request`);
      idle(i);
    }
  }

  private readFull(out: Uint8Array, t0: number, limit: number): void {
    for (let got = 0, i = 0; got < out.byteLength; i++) {
      let n = -1;
      try { n = readSync(this.rep, out, got, out.byteLength - got, null); } catch (e) {
        if ((e as { code?: string }).code !== "EAGAIN") throw e;
      }
      if (n > 0) { got += n; i = 0; this.heard = true; continue; }
      if (n === 0 && this.heard) this.gone("exited"); // no writer left
      if (i % 1024 === 0 && !alive(this.proc.pid)) this.gone("exited");
      if (performance.now() - t0 > limit) this.gone(`did not answer in ${limit} ms`);
      idle(i);
    }
  }

  /** Stop the host, remove the FIFOs. Idempotent. */
  close(): void {
    if (!open.delete(this)) return;
    this.proc.kill();
    closeSync(this.req);
    closeSync(this.rep);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
