// Where the compiled binary unpacks what it embeds (libhb, the Vulkan shim and shaders, the demo model), and the
// unpacking: $XDG_CACHE_HOME/hummingbird, else ~/.cache/hummingbird; where that cannot be written (read-only, no home,
// a file in the way) a private folder of this user's in the temp dir ($TMPDIR), said on stderr. Each file is written
// once, atomically (tmp + rename), under a folder keyed by content. Failing even there: an UnpackError, one line.
// No state.
import { existsSync, lstatSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { isAbsolute, join } from "node:path";

/** folder name → [embedded file, name to write] */
export type Embedded = Record<string, [string, string][]>;
export class UnpackError extends Error {}

const text = (e: unknown) => (e as Error).message.split("\n")[0];

/** The cache folder the environment asks for ($XDG_CACHE_HOME, absolute, else $HOME/.cache), or why there is none. */
export function cacheHome(env: Record<string, string | undefined> = process.env): { dir: string } | { why: string } {
  const xdg = env.XDG_CACHE_HOME;
  if (xdg && isAbsolute(xdg)) return { dir: join(xdg, "hummingbird") }; // (a relative one is ignored, as the XDG spec says)
  const home = env.HOME ?? homedir();
  if (!home || !existsSync(home)) return { why: `the home directory ${home || "(HOME unset)"} does not exist` };
  return { dir: join(home, ".cache", "hummingbird") };
}

/** Write `files` into root (those already there, of the same size, are kept); returns how many were written. */
function write(root: string, files: Embedded): number {
  let n = 0;
  for (const [sub, list] of Object.entries(files)) {
    const dir = join(root, sub);
    mkdirSync(dir, { recursive: true });
    for (const [src, name] of list) {
      const dst = join(dir, name);
      if (existsSync(dst) && statSync(dst).size === Bun.file(src).size) continue; // (kept: not read again at each start)
      const data = readFileSync(src);
      const tmp = `${dst}.${process.pid}.tmp`;
      try {
        writeFileSync(tmp, data);
        renameSync(tmp, dst); // atomic: a concurrent start never sees half a file
      } catch (e) { rmSync(tmp, { force: true }); throw e; }
      n++;
    }
  }
  return n;
}

/** The temp-dir fallback: a folder only this user can write (another user's, or a link, in a shared /tmp is refused:
 *  its files would be loaded as libhb). */
function privateTmp(env: Record<string, string | undefined>): string {
  const uid = process.getuid?.() ?? -1, dir = join(env.TMPDIR || tmpdir(), `hummingbird-${uid < 0 ? "user" : uid}`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  if (!st.isDirectory() || (uid >= 0 && st.uid !== uid) || (st.mode & 0o022) !== 0)
    throw new Error(`${dir} is not a private folder of this user's (owner ${st.uid}, mode ${(st.mode & 0o777).toString(8)})`);
  return dir;
}

/** Unpack `files` under `<cache>/<key>` (the cache of cacheHome, else the temp dir) and return that folder; `say` gets a
 *  line when files were written and whenever the temp dir is used (with why). */
export function unpackEmbedded(files: Embedded, key: string, say: (line: string) => void, env: Record<string, string | undefined> = process.env): string {
  const home = cacheHome(env);
  let why: string;
  if ("dir" in home) {
    const root = join(home.dir, key);
    try {
      if (write(root, files) > 0) say(`unpacked the embedded files into ${root} (once; XDG_CACHE_HOME picks another place)`);
      return root;
    } catch (e) { why = `${home.dir} is not writable (${text(e)})`; }
  } else why = home.why;
  let root = "";
  try {
    root = join(privateTmp(env), key);
    write(root, files);
  } catch (e) {
    throw new UnpackError(`cannot unpack the embedded files: ${why}, nor into the temp dir (${text(e)}); set XDG_CACHE_HOME to a writable folder`);
  }
  say(`${why}: unpacked the embedded files into ${root} instead (set XDG_CACHE_HOME to a writable folder to keep them)`);
  return root;
}
