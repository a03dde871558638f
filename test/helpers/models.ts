// Generated test models (our own generator), cached per shape for the whole test run in the run's tmp dir
// (test/setup.ts removes it).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeModel, type MakeModelOptions } from "../../src/model/make-model.ts";

const root = mkdtempSync(join(tmpdir(), "hb-models-"));
const made = new Map<string, string>();

/** Directory of a generated model for these options (made once per process). */
export function genModel(opts: MakeModelOptions): string {
  const key = JSON.stringify(opts);
  let dir = made.get(key);
  if (!dir) {
    dir = join(root, `m${made.size}`);
    makeModel(dir, opts);
    made.set(key, dir);
  }
  return dir;
}
