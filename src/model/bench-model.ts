// The benchmark model: the generator's `bench` preset (seed 1) converted to int4g64 experts and int8
// dense weights, made once into a cache folder and reused by every benchmark. No other state.
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { makeModel } from "./make-model.ts";
import { convert } from "./convert.ts";
import { parseFmt } from "./quant.ts";

export function benchModelDir(log: (s: string) => void = (s) => process.stderr.write(s + "\n")): string {
  const base = process.env.XDG_CACHE_HOME ?? (existsSync(homedir()) ? join(homedir(), ".cache") : tmpdir());
  const root = join(base, "hummingbird", "bench-preset-seed1"), src = join(root, "bf16"), out = join(root, "int4g64-int8");
  if (existsSync(join(out, "config.json"))) return out;
  mkdirSync(root, { recursive: true });
  if (!existsSync(join(src, "config.json"))) {
    log(`bench: generating the bench preset into ${src} (once)…`);
    rmSync(src, { recursive: true, force: true });
    makeModel(src, { preset: "bench", seed: 1 });
  }
  log(`bench: converting it to int4g64 experts / int8 dense into ${out} (once)…`);
  const int8 = parseFmt("int8")!;
  convert(src, out, { experts: parseFmt("int4g64")!, dense: int8, mtp: int8 });
  return out;
}
