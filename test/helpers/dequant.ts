// Writes the f32 "dequantized reference" of a quantized container: every U8 + .qs pair becomes the
// F32 matrix it stands for (formats.md), everything else is copied as f32.
import { cpSync, existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openModel, readBytes, readF32, writeSafetensors } from "../../src/model/safetensors.ts";
import { dequantize, parseFmt } from "../../src/model/quant.ts";

/** `src` is the model that was converted: it gives each matrix's true [O, I]. */
export function dequantizedCopy(dir: string, src: string): string {
  const out = mkdtempSync(join(tmpdir(), "hb-deq-"));
  for (const f of ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"])
    if (existsSync(join(dir, f))) cpSync(join(dir, f), join(out, f));
  const store = openModel(dir), orig = openModel(src);
  const names = store.names().filter((n) => !n.endsWith(".qs"));
  writeSafetensors(join(out, "model.safetensors"), names.map((n) => {
    const t = store.get(n);
    if (t.dtype !== "U8") return { name: n, dtype: "F32" as const, shape: t.shape, data: readF32(t) };
    const f = parseFmt(store.metadata[`quant.${n}`])!, s = readF32(store.get(`${n}.qs`)), [O, I] = orig.get(n).shape;
    return { name: n, dtype: "F32" as const, shape: [O, I], data: dequantize(f, readBytes(t), s, O, I) };
  }));
  store.close(); orig.close();
  return out;
}
