// Entry of the single binary (`bun run compile`): embeds libhb, the Vulkan shim with every SPIR-V shader
// variant (build/shaders.spvpack) and the int8 demo model, unpacks them once into a cache folder keyed by
// their content (dlopen and pread need real files; where: unpack.ts), then runs the CLI.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import lib from "../build/libhb.so" with { type: "file" };
import vkLib from "../build/libhbvk.so" with { type: "file" };
import spv from "../build/shaders.spvpack" with { type: "file" };
import cfg from "../models/glm-demo-int8/config.json" with { type: "file" };
import gen from "../models/glm-demo-int8/generation_config.json" with { type: "file" };
import weights from "../models/glm-demo-int8/model.safetensors" with { type: "file" };
import tok from "../models/glm-demo-int8/tokenizer.json" with { type: "file" };
import tokCfg from "../models/glm-demo-int8/tokenizer_config.json" with { type: "file" };
import pkg from "../package.json";
import { unpackEmbedded } from "./unpack.ts";

/** JSON files imported `with { type: "file" }` are paths at run time, whatever TypeScript infers. */
const path = (x: unknown) => x as string;

// keyed by content, so a rebuilt binary never reuses a stale extracted copy
const key = [lib, vkLib, spv, weights].reduce((h, f) => Bun.hash(readFileSync(f), h), 0n as number | bigint).toString(16);
const say = (line: string) => process.stderr.write(`hummingbird: ${line}\n`);
let root: string;
try {
  root = unpackEmbedded({
    lib: [[lib, "libhb.so"], [vkLib, "libhbvk.so"], [spv, "shaders.spvpack"]],
    "glm-demo-int8": [[path(cfg), "config.json"], [path(gen), "generation_config.json"], [weights, "model.safetensors"],
      [path(tok), "tokenizer.json"], [path(tokCfg), "tokenizer_config.json"]],
  }, `${pkg.version}-${key}`, say);
} catch (e) {
  say((e as Error).message); // (an UnpackError: one line, no stack)
  process.exit(1);
}
process.env.HB_LIB ??= join(root, "lib", "libhb.so");
process.env.HB_VK_LIB ??= join(root, "lib", "libhbvk.so");
process.env.HB_SPV_PACK ??= join(root, "lib", "shaders.spvpack");
process.env.HB_DEMO_DIR ??= join(root, "glm-demo-int8");

const { main } = await import("./cli.ts");
process.exitCode = await main(process.argv.slice(2));
