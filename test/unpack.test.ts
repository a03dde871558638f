// Where the compiled binary unpacks what it embeds (src/unpack.ts): $XDG_CACHE_HOME, else ~/.cache, else (not
// writable — a file in the way works as root too — or no home) a private folder in $TMPDIR, said in one line; a clean
// UnpackError when even that fails. And `generate` without --model runs the embedded demo model, as serve and chat
// (the binary's own run: test/compile.test.ts).
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { cacheHome, unpackEmbedded, UnpackError, type Embedded } from "../src/unpack.ts";
import { demoModelDir } from "../src/model/demo.ts";

const root = mkdtempSync(join(tmpdir(), "hb-unpack-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const src = join(root, "src.bin");
writeFileSync(src, "embedded bytes");
const files: Embedded = { lib: [[src, "libhb.so"]], demo: [[src, "config.json"]] };
const uid = process.getuid?.() ?? -1;

/** unpack with env, the lines it said */
function run(env: Record<string, string | undefined>): { dir: string; said: string[] } {
  const said: string[] = [];
  const dir = unpackEmbedded(files, "v1-abc", (l) => said.push(l), env);
  return { dir, said };
}

describe("unpack: where", () => {
  test("XDG_CACHE_HOME first, written once, said once", () => {
    const xdg = join(root, "xdg"), env = { XDG_CACHE_HOME: xdg, HOME: join(root, "nohome"), TMPDIR: join(root, "tmp1") };
    const a = run(env);
    expect(a.dir).toBe(join(xdg, "hummingbird", "v1-abc"));
    expect(readFileSync(join(a.dir, "lib", "libhb.so"), "utf8")).toBe("embedded bytes");
    expect(a.said).toEqual([`unpacked the embedded files into ${a.dir} (once; XDG_CACHE_HOME picks another place)`]);
    expect(run(env).said).toEqual([]); // already there: nothing written, nothing said
  });

  test("else ~/.cache/hummingbird; a relative XDG_CACHE_HOME is ignored", () => {
    const home = join(root, "home");
    mkdirSync(home);
    expect(cacheHome({ HOME: home, XDG_CACHE_HOME: "rel/cache" })).toEqual({ dir: join(home, ".cache", "hummingbird") });
    expect(run({ HOME: home, TMPDIR: join(root, "tmp2") }).dir).toBe(join(home, ".cache", "hummingbird", "v1-abc"));
  });

  test("XDG_CACHE_HOME under a file, ~/.cache a file, a read-only home, no home: the temp dir, saying why", () => {
    const file = join(root, "a-file");
    writeFileSync(file, "");
    const fileHome = join(root, "file-home");
    mkdirSync(fileHome);
    writeFileSync(join(fileHome, ".cache"), ""); // (mkdir fails even as root)
    const roHome = join(root, "ro-home");
    mkdirSync(roHome);
    chmodSync(roHome, 0o500);
    const cases: [Record<string, string>, RegExp][] = [
      [{ XDG_CACHE_HOME: join(file, "cache") }, /^.*a-file\/cache\/hummingbird is not writable \((ENOTDIR|EEXIST)[^)]*\): unpacked the embedded files into (.*) instead \(set XDG_CACHE_HOME to a writable folder to keep them\)$/],
      [{ HOME: fileHome }, /file-home\/\.cache\/hummingbird is not writable \((ENOTDIR|EEXIST)/],
      [{ HOME: join(root, "missing") }, /^the home directory .*missing does not exist: unpacked the embedded files into /],
    ];
    if (uid !== 0) cases.push([{ HOME: roHome }, /ro-home\/\.cache\/hummingbird is not writable \((EACCES|EPERM)/]); // (root writes anyway)
    for (const [env, line] of cases) {
      const tmp = mkdtempSync(join(root, "tmp-")), r = run({ ...env, TMPDIR: tmp });
      expect(r.dir).toBe(join(tmp, `hummingbird-${uid}`, "v1-abc"));
      expect(existsSync(join(r.dir, "demo", "config.json"))).toBe(true);
      expect(r.said).toHaveLength(1);
      expect(r.said[0]).toMatch(line);
      expect(r.said[0]).toContain(r.dir);
    }
    chmodSync(roHome, 0o700);
  });

  test("nowhere writable: one clean line (UnpackError), no stack; another user's or a shared tmp folder is refused", () => {
    const file = join(root, "b-file");
    writeFileSync(file, "");
    const fail = (env: Record<string, string>) => {
      try { run(env); } catch (e) { return e as Error; }
      throw new Error("expected an UnpackError");
    };
    const e = fail({ XDG_CACHE_HOME: join(file, "x"), TMPDIR: join(file, "t") });
    expect(e).toBeInstanceOf(UnpackError);
    expect(e.message).toMatch(/^cannot unpack the embedded files: .*b-file\/x\/hummingbird is not writable \(ENOTDIR.*\), nor into the temp dir \(ENOTDIR.*\); set XDG_CACHE_HOME to a writable folder$/);
    expect(e.message).not.toContain("\n");
    const shared = mkdtempSync(join(root, "shared-"));
    mkdirSync(join(shared, `hummingbird-${uid}`));
    chmodSync(join(shared, `hummingbird-${uid}`), 0o777); // (a planted libhb.so would be loaded)
    expect(fail({ XDG_CACHE_HOME: join(file, "x"), TMPDIR: shared }).message).toMatch(/is not a private folder of this user's \(owner \d+, mode 777\)/);
  });
});

describe("generate without --model", () => {
  test("runs the embedded demo model (the banner on stderr, the same tokens as --model DEMO)", async () => {
    const cli = async (...a: string[]) => {
      const p = Bun.spawn(["bun", "src/cli.ts", "generate", ...a, "--prompt", "hi", "--max-tokens", "4", "--json", "--draft", "off"],
        { cwd: resolve(import.meta.dir, ".."), stdout: "pipe", stderr: "pipe" });
      const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
      return { out, err, code };
    };
    const [none, named] = await Promise.all([cli(), cli("--model", demoModelDir())]);
    expect([none.code, named.code], none.err).toEqual([0, 0]);
    expect(none.err).toContain("hummingbird generate: * NO --model GIVEN: generating with the EMBEDDED DEMO MODEL");
    expect(named.err).not.toContain("NO --model GIVEN");
    expect(JSON.parse(none.out).gen_ids).toHaveLength(4);
    expect(JSON.parse(none.out).gen_ids).toEqual(JSON.parse(named.out).gen_ids);
  }, 60_000);
});
