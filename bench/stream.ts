// `bun bench/stream.ts [--reps N]`: builds bench/stream.c (cc -O2, into the OS temp dir) and runs it: how many GB/s one
// and two cores stream from memory with nothing but loads (the probe's loop) and with the int4g decode kernel's
// arithmetic, for contiguous runs of 144 KiB (half a routed expert's matrix of the bench preset) to 1 GiB; then, on one
// core, whether more arithmetic per byte adds to the stream's time (from L2 against from memory) and what the decode
// tile's load order costs without software prefetch. It bounds what `bench`'s roofline can reach on this machine
// (docs/performance.md "Two cores against the probe"). Prints the
// CPU's model name and the probe (ffi/membw.c, `bench`'s roofline) before and after. Holds no state.
import { cpus, tmpdir } from "node:os";
import { hb } from "../src/native/hb.ts";
import { probeBandwidth } from "../src/engine/rates.ts";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

const { values: v } = parseArgs({ options: { reps: { type: "string" } } });
const reps = Math.max(1, Math.floor(Number(v.reps ?? 3)) || 3);
const src = resolve(import.meta.dir, "stream.c"), exe = join(tmpdir(), `hb-stream-${process.pid}`);
const cc = Bun.spawnSync({ cmd: [process.env.CC || "cc", "-O2", "-pthread", "-o", exe, src], stderr: "pipe" });
if (cc.exitCode !== 0) throw new Error(`bench/stream.c: ${cc.stderr.toString().trim()}`);
try {
  console.log(`cpu: ${cpus()[0]?.model ?? "unknown"}, ${cpus().length} logical`);
  const probe = () => `${(probeBandwidth() / 1e9).toFixed(1)} GB/s with ${hb().hb_nthreads()} threads`;
  console.log(`probe (bench's roofline): ${probe()}`);
  const r = Bun.spawnSync({ cmd: [exe, String(reps)], stdout: "inherit", stderr: "inherit" });
  if (r.exitCode !== 0) process.exitCode = r.exitCode ?? 1;
  console.log(`probe again: ${probe()}`);
} finally {
  await Bun.file(exe).delete();
}
