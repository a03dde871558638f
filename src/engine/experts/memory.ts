// How much RAM the expert cache may plan with: --ram-gb, else /proc/meminfo MemAvailable plus what
// this process already holds (its resident weights are part of the plan), else macOS
// `sysctl -n hw.memsize`. Stateless.
import { readFileSync } from "node:fs";

export interface RamInfo { bytes: number; source: string }

/** MemAvailable in bytes from a /proc/meminfo text, or null. */
export function parseMemAvailable(text: string): number | null {
  const m = /^MemAvailable:\s+(\d+)\s*kB/m.exec(text);
  return m ? Number(m[1]) * 1024 : null;
}

export function detectRam(ramGb?: number): RamInfo {
  if (ramGb !== undefined) return { bytes: Math.floor(ramGb * 2 ** 30), source: "--ram-gb" };
  const rss = process.memoryUsage().rss;
  try {
    const avail = parseMemAvailable(readFileSync("/proc/meminfo", "utf8"));
    if (avail !== null) return { bytes: avail + rss, source: "MemAvailable + this process" };
  } catch { /* not Linux */ }
  try {
    const r = Bun.spawnSync({ cmd: ["sysctl", "-n", "hw.memsize"], stdout: "pipe", stderr: "ignore" });
    const n = Number(r.stdout.toString().trim());
    if (r.exitCode === 0 && Number.isFinite(n) && n > 0) return { bytes: n, source: "sysctl hw.memsize" };
  } catch { /* no sysctl */ }
  return { bytes: 8 * 2 ** 30, source: "unknown (assumed 8 GiB)" };
}
