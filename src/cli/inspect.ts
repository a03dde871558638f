// `hummingbird inspect --model DIR [--json]`: prints src/model/inspect.ts's report. No state.
import { formatReport, inspectModel } from "../model/inspect.ts";
import { fmtBytes, parseCli, required, type Command } from "./common.ts";

const help = `usage: hummingbird inspect --model DIR [--json]

Report a model directory: model_type, vocab/hidden/layers, dense and MoE layers, indexer types,
experts, MTP presence, tensor count, bytes by dtype and by storage format, resident bytes
(everything but routed experts) and bytes per expert. Reads headers only.

options:
  --model DIR   model directory (config.json + model.safetensors or shards)
  --json        print exactly one JSON object on stdout
  -h, --help    this help`;

function run(argv: string[]): number {
  const r = parseCli(argv, { model: { type: "string" }, json: { type: "boolean" } }, help);
  if (!r) return (process.stdout.write(help + "\n"), 0);
  const report = inspectModel(required(r.values, "model", help));
  process.stdout.write((r.values.json ? JSON.stringify(report) : formatReport(report, fmtBytes)) + "\n");
  return 0;
}

export const command: Command = { summary: "report a model directory's shape, tensors and byte budget", help, run };
