// `hummingbird convert`: HF directory -> quantized container, with a progress line (src/progress.ts: %, GB/s, ETA).
import { type Command, parseCli, required, UsageError } from "./common.ts";
import { convert } from "../model/convert.ts";
import { parseFmt, type QFormat } from "../model/quant.ts";
import { Progress } from "../progress.ts";

const help = `usage: hummingbird convert --in HF_DIR --out DIR [--experts int4g64] [--dense int8] [--mtp int8] [--shard-gb 4]

Formats: f32, bf16, int8, int4, int2, int4g<gs> (gs a power of two ≥ 8). Norms, the router and its bias
stay f32; embeddings are written as f32. Reruns resume: finished shards whose headers match are kept.`;

function fmt(v: unknown, name: string, dflt: string): QFormat {
  const s = typeof v === "string" ? v : dflt, f = parseFmt(s);
  if (!f) throw new UsageError(`--${name}: unknown format ${JSON.stringify(s)}`, help);
  return f;
}

export const command: Command = {
  summary: "convert an HF checkpoint to a quantized container",
  help,
  run(argv) {
    const s = { type: "string" } as const;
    const r = parseCli(argv, { in: s, out: s, experts: s, dense: s, mtp: s, "shard-gb": s }, help);
    if (!r) return (console.log(help), 0);
    const v = r.values;
    const shardGb = v["shard-gb"] === undefined ? 4 : Number(v["shard-gb"]);
    if (!(shardGb > 0)) throw new UsageError("--shard-gb must be a positive number", help);
    const bar = new Progress("convert", 0);
    const res = convert(required(v, "in", help), required(v, "out", help), {
      experts: fmt(v.experts, "experts", "int4g64"), dense: fmt(v.dense, "dense", "int8"), mtp: fmt(v.mtp, "mtp", "int8"),
      shardBytes: shardGb * 2 ** 30,
      onProgress: (done, total) => { bar.total = total; bar.update(done); },
    });
    bar.end(`wrote ${res.shards} shard(s), ${(res.bytes / 1e6).toFixed(1)} MB${res.resumed ? `, ${res.resumed} kept from an earlier run` : ""}; verified`);
    return 0;
  },
};
