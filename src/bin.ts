// Entry of the single binary (`bun run compile`): embeds libhb, the Vulkan shim with every SPIR-V shader
// variant (build/shaders.spvpack) and the int8 demo model, extracts them once into a cache folder keyed by
// their content (dlopen and pread need real files), then runs the CLI.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { basename, join } from "node:path";
import lib from "../build/libhb.so" with { type: "file" };
import vkLib from "../build/libhbvk.so" with { type: "file" };
import spv from "../build/shaders.spvpack" with { type: "file" };
import cfg from "../models/glm-demo-int8/config.json" with { type: "file" };
import gen from "../models/glm-demo-int8/generation_config.json" with { type: "file" };
import weights from "../models/glm-demo-int8/model.safetensors" with { type: "file" };
import tok from "../models/glm-demo-int8/tokenizer.json" with { type: "file" };
import tokCfg from "../models/glm-demo-int8/tokenizer_config.json" with { type: "file" };
import pkg from "../package.json";

/** JSON files imported `with { type: "file" }` are paths at run time, whatever TypeScript infers. */
const path = (x: unknown) => x as string;

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

// keyed by content, so a rebuilt binary never reuses a stale extracted copy
const key = [lib, vkLib, spv, weights].reduce((h, f) => Bun.hash(readFileSync(f), h), 0n as number | bigint).toString(16);
const base = process.env.XDG_CACHE_HOME ?? (existsSync(homedir()) ? join(homedir(), ".cache") : tmpdir());
const root = join(base, "hummingbird", `${pkg.version}-${key}`);
extract(join(root, "lib"), [[lib, basename("libhb.so")], [vkLib, basename("libhbvk.so")], [spv, "shaders.spvpack"]]);
extract(join(root, "glm-demo-int8"), [[path(cfg), "config.json"], [path(gen), "generation_config.json"],
  [weights, "model.safetensors"], [path(tok), "tokenizer.json"], [path(tokCfg), "tokenizer_config.json"]]);
process.env.HB_LIB ??= join(root, "lib", "libhb.so");
process.env.HB_VK_LIB ??= join(root, "lib", "libhbvk.so");
process.env.HB_SPV_PACK ??= join(root, "lib", "shaders.spvpack");
process.env.HB_DEMO_DIR ??= join(root, "glm-demo-int8");

const { main } = await import("./cli.ts");
process.exitCode = await main(process.argv.slice(2));
