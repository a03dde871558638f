// The benchmark model: the generator's `bench` preset (seed 1) converted to int4g64 experts and int8
// dense / MTP weights, made once into a cache folder ($HB_BENCH_CACHE, else ~/.cache/hummingbird/bench)
// and reused by every benchmark; the bf16 source (~1.6 GiB) is dropped after conversion. No other state.
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { makeModel } from "./make-model.ts";
import { convert } from "./convert.ts";
import { parseFmt } from "./quant.ts";

export function benchModelDir(cache?: string, log: (s: string) => void = (s) => process.stderr.write(s + "\n")): string {
  const base = process.env.XDG_CACHE_HOME ?? (existsSync(homedir()) ? join(homedir(), ".cache") : tmpdir());
  const root = cache ?? process.env.HB_BENCH_CACHE ?? join(base, "hummingbird", "bench");
  const src = join(root, "bench-src"), out = join(root, "bench-q");
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
  rmSync(src, { recursive: true, force: true });
  return out;
}

/** P deterministic pseudo-random token ids in [3, V) (a fixed LCG: the same prompt in every bench). */
export function benchPrompt(V: number, P: number): number[] {
  const ids: number[] = [];
  let a = 12345;
  for (let i = 0; i < P; i++) {
    a = (Math.imul(a, 1103515245) + 12345) >>> 0;
    ids.push(3 + (a % Math.max(1, V - 3)));
  }
  return ids;
}
