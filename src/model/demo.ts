// The embedded demo model served when no --model is given: ../../models/glm-demo-int8 in a checkout,
// or the copy that the compiled binary's entry (src/bin.ts) extracted and named in HB_DEMO_DIR.
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";

export const DEMO_NAME = "glm-demo-int8";

export function demoModelDir(): string {
  const dir = process.env.HB_DEMO_DIR ?? resolve(import.meta.dir, "../../models", DEMO_NAME);
  if (!existsSync(join(dir, "config.json"))) throw new Error(`the embedded demo model is missing at ${dir}`);
  return dir;
}

/** The banner a command prints when it falls back to the demo model: loudly, because the model is tiny. */
export function demoBanner(what: string): string[] {
  const text = [`NO --model GIVEN: ${what} the EMBEDDED DEMO MODEL (glm-demo, 6.5M parameters,`,
    "int8, trained on fortune cookies). Its output is English-like but rarely sense."];
  const w = Math.max(...text.map((t) => t.length)), rule = "*".repeat(w + 4);
  return [rule, ...text.map((t) => `* ${t.padEnd(w)} *`), rule];
}
