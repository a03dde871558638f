// Entry of the single binary (`bun run compile`): embeds libhb and the int8 demo model, extracts them
// once into a per-version cache folder (dlopen and pread need real files), then runs the CLI.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { basename, join } from "node:path";
import lib from "../build/libhb.so" with { type: "file" };
import cfg from "../models/glm-demo-int8/config.json" with { type: "file" };
import gen from "../models/glm-demo-int8/generation_config.json" with { type: "file" };
import weights from "../models/glm-demo-int8/model.safetensors" with { type: "file" };
import tok from "../models/glm-demo-int8/tokenizer.json" with { type: "file" };
import tokCfg from "../models/glm-demo-int8/tokenizer_config.json" with { type: "file" };
import pkg from "../package.json";

function extract(dir: string, files: [string, string][]): void {
  mkdirSync(dir, { recursive: true });
  for (const [src, name] of files) {
    const dst = join(dir, name);
    if (existsSync(dst)) continue;
    const tmp = `${dst}.${process.pid}.tmp`;
    writeFileSync(tmp, readFileSync(src));
    renameSync(tmp, dst); // atomic: a concurrent start never sees half a file
  }
}

const base = process.env.XDG_CACHE_HOME ?? (existsSync(homedir()) ? join(homedir(), ".cache") : tmpdir());
const root = join(base, "hummingbird", pkg.version);
extract(join(root, "lib"), [[lib, basename("libhb.so")]]);
extract(join(root, "glm-demo-int8"), [[cfg, "config.json"], [gen, "generation_config.json"], [weights, "model.safetensors"],
  [tok, "tokenizer.json"], [tokCfg, "tokenizer_config.json"]]);
process.env.HB_LIB ??= join(root, "lib", "libhb.so");
process.env.HB_DEMO_DIR ??= join(root, "glm-demo-int8");

const { main } = await import("./cli.ts");
process.exitCode = await main(process.argv.slice(2));
