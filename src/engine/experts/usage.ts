// The learning cache's memory: per-layer expert usage counts (decayed heat) persisted as JSON in `<model>/.hb_usage`,
// or — when the model directory is not writable (no owner-write bit, or access() says no; root honours the bits too,
// so shared read-only fixtures stay clean) — in `$HB_CACHE_DIR | $XDG_CACHE_HOME/hummingbird | ~/.cache/hummingbird`
// keyed by the model path. Written atomically: a unique tmp file, fsync, rename (a crash mid-write leaves the old
// file valid). A fingerprint (experts, MoE layers, expert bytes) guards against a different model.
// Stateless beyond the file.
import { accessSync, closeSync, constants, fsyncSync, mkdirSync, openSync, readdirSync, realpathSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { createHash } from "node:crypto";
import { homedir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { z } from "zod";
import { type ModelError, readModelFile } from "../../model/errors.ts";

export const USAGE_FILE = ".hb_usage";
/** the largest usage file read (GLM-5's: 75 layers × 256 experts, ~150 KB) */
export const MAX_USAGE_FILE = 16 << 20;

export interface Usage {
  version: 1;
  fingerprint: string;
  /** tokens (rows through the first MoE layer) behind the counts */
  tokens: number;
  /** layer index -> heat per expert */
  layers: Record<string, number[]>;
}

const UsageJson = z.strictObject({
  version: z.literal(1),
  fingerprint: z.string(),
  tokens: z.number().finite().min(0),
  layers: z.record(z.string().regex(/^\d+$/), z.array(z.number().finite().min(0))),
  updated: z.string().optional(),
});

function writableDir(dir: string): boolean {
  try {
    if ((statSync(dir).mode & 0o200) === 0) return false;
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

export function cacheDir(): string {
  const env = process.env;
  return env.HB_CACHE_DIR || join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "hummingbird");
}

/** Where the usage of the model in `dir` is kept (the model dir when writable, else the cache dir). */
export function usagePath(dir: string): string {
  let real = resolve(dir);
  try { real = realpathSync(dir); } catch { /* keep the resolved path */ }
  if (writableDir(real)) return join(real, USAGE_FILE);
  const key = createHash("sha256").update(real).digest("hex").slice(0, 16);
  return join(cacheDir(), `usage-${basename(real).replace(/[^\w.-]/g, "_")}-${key}.json`);
}

/** The persisted usage, or null (absent, unreadable, corrupt or another model's: `warn` says which). */
export function loadUsage(path: string, fingerprint: string, warn: (msg: string) => void = () => {}): Usage | null {
  let text: string;
  try {
    text = readModelFile(path, MAX_USAGE_FILE); // (it sits in the model's directory: a FIFO or a huge file there is refused)
  } catch (e) {
    if (((e as Error).cause as NodeJS.ErrnoException | undefined)?.code !== "ENOENT") warn(`${path}: ignoring an unreadable usage file (${(e as ModelError).detail ?? (e as Error).message})`);
    return null;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    warn(`${path}: ignoring a corrupt usage file (${(e as Error).message})`);
    return null;
  }
  const r = UsageJson.safeParse(raw);
  if (!r.success) {
    warn(`${path}: ignoring a usage file of the wrong shape (${r.error.issues[0]?.path.join(".")}: ${r.error.issues[0]?.message})`);
    return null;
  }
  if (r.data.fingerprint !== fingerprint) {
    warn(`${path}: usage recorded for another model (${r.data.fingerprint}), starting fresh`);
    return null;
  }
  return { version: 1, fingerprint: r.data.fingerprint, tokens: r.data.tokens, layers: r.data.layers };
}

export interface SaveHooks {
  /** called after half of the bytes reached the tmp file (tests: crash here) */
  onPartial?: () => void;
}

/** Write atomically: tmp (unique) + fsync + rename; the directory is created if needed. */
export function saveUsage(path: string, u: Usage, hooks: SaveHooks = {}): void {
  mkdirSync(dirname(path), { recursive: true });
  sweepTmp(path);
  const round = (x: number) => Math.round(x * 1000) / 1000;
  const layers: Record<string, number[]> = {};
  for (const [k, v] of Object.entries(u.layers)) layers[k] = v.map(round);
  const body = Buffer.from(JSON.stringify({ version: 1, fingerprint: u.fingerprint, tokens: round(u.tokens), layers, updated: new Date().toISOString() }));
  const tmp = `${path}.tmp-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const fd = openSync(tmp, "wx", 0o644); // (a fresh file: never through a link planted at its name)
  try {
    const half = body.byteLength >> 1;
    writeAll(fd, body.subarray(0, half));
    hooks.onPartial?.();
    writeAll(fd, body.subarray(half));
    fsyncSync(fd);
    closeSync(fd);
    renameSync(tmp, path);
  } catch (e) {
    try { closeSync(fd); } catch { /* closed */ }
    rmSync(tmp, { force: true });
    throw e;
  }
  try {
    const dfd = openSync(dirname(path), "r");
    try { fsyncSync(dfd); } finally { closeSync(dfd); }
  } catch { /* directories cannot be fsynced everywhere */ }
}

function writeAll(fd: number, b: Uint8Array): void {
  for (let done = 0; done < b.byteLength;) done += writeSync(fd, b, done, b.byteLength - done);
}

/** Remove tmp files of crashed writers (older than 10 minutes; younger ones may be in flight). */
function sweepTmp(path: string): void {
  const dir = dirname(path), prefix = `${basename(path)}.tmp-`;
  try {
    for (const f of readdirSync(dir)) {
      if (!f.startsWith(prefix)) continue;
      const p = join(dir, f);
      if (Date.now() - statSync(p).mtimeMs > 600_000) rmSync(p, { force: true });
    }
  } catch { /* best effort */ }
}
