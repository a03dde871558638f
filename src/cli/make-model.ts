// `hummingbird make-model`: CLI front of src/model/make-model.ts (random model directories).
// Parses flags, shows a progress bar on stderr while the weights are written (src/progress.ts), prints a
// one-line summary (or JSON / a dry-run tensor table). No state.
import { defaultDtype, makeModel, planModel, PRESET_NAMES, type MakeModelOptions } from "../model/make-model.ts";
import { tensorBytes } from "../model/make-weights.ts";
import { choice, fmtBytes, intOption, parseCli, UsageError, type Command } from "./common.ts";
import { Progress } from "../progress.ts";

const help = `usage: hummingbird make-model OUT --preset tiny|bench [--seed N] [--dtype f32|bf16]
                              [--set key=json]... [--mtp-drafts] [--dry-run] [--json]

Write a random glm_moe_dsa model directory OUT: config.json, generation_config.json,
model.safetensors (weights deterministic from the seed), tokenizer.json (byte-level BPE with GLM
special tokens) and tokenizer_config.json (GLM-style chat template).

options:
  --preset P       tiny  = the shape of shared/fixtures/glm-tiny (vocab 512, hidden 64, 4 layers)
                   bench = hidden 1024, 8 layers, 64 experts top-8, vocab 8192 (~1.7 GB at bf16)
  --seed N         PRNG seed (default 0); same seed → identical bytes
  --dtype D        f32|bf16 storage of matrices (default: f32 for tiny, bf16 for bench);
                   norms, biases and e_score_correction_bias stay F32
  --set key=json   override a config key before weights are generated (repeatable); the value is
                   JSON (a bare word is taken as a string); dotted keys reach into objects, e.g.
                   --set num_hidden_layers=2 --set index_topk=4 --set rope_parameters.rope_theta=1e6
  --mtp-drafts     make the MTP head draft well, for speculative-decoding tests: eh_proj ≈ [I|0],
                   MTP-layer residual × 0.01, MTP norms tied, embeddings × 32 (≈85-95% of drafts
                   accepted; see MTP_DRAFT_* in src/model/make-model.ts)
  --dry-run        print the config and tensor plan; write nothing
  --json           print the summary (or the dry-run plan) as one JSON object
  -h, --help       this help`;

function parseSet(items: string[]): Record<string, unknown> {
  const set: Record<string, unknown> = {};
  for (const it of items) {
    const eq = it.indexOf("=");
    if (eq <= 0) throw new UsageError(`--set expects key=json, got ${JSON.stringify(it)}`, help);
    const key = it.slice(0, eq), text = it.slice(eq + 1);
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      v = text;
    }
    set[key] = v;
  }
  return set;
}

async function run(argv: string[]): Promise<number> {
  const r = parseCli(argv, {
    preset: { type: "string" }, seed: { type: "string" }, dtype: { type: "string" },
    set: { type: "string", multiple: true }, "mtp-drafts": { type: "boolean" },
    "dry-run": { type: "boolean" }, json: { type: "boolean" },
  }, help, true);
  if (!r) return (process.stdout.write(help + "\n"), 0);
  const v = r.values;
  if (r.positionals.length > 1) throw new UsageError(`expected one output directory, got ${r.positionals.length} arguments`, help);
  const out = r.positionals[0];
  if (!out && !v["dry-run"]) throw new UsageError("missing output directory OUT", help);
  if (v.preset === undefined) throw new UsageError("missing required option --preset", help);
  const preset = choice(v.preset, "preset", PRESET_NAMES, help);
  const opts: MakeModelOptions = {
    preset,
    seed: v.seed === undefined ? 0 : intOption(v.seed, "seed", help),
    dtype: v.dtype === undefined ? defaultDtype(preset) : choice(v.dtype, "dtype", ["f32", "bf16"] as const, help),
    set: parseSet(v.set ?? []),
    mtpDrafts: v["mtp-drafts"] ?? false,
  };
  if (v["dry-run"]) {
    const plan = planModel(opts);
    if (v.json) {
      const tensors = plan.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape }));
      process.stdout.write(JSON.stringify({ config: plan.raw, data_bytes: plan.dataBytes, tensors }) + "\n");
    } else {
      process.stdout.write(JSON.stringify(plan.raw, null, 2) + "\n");
      for (const t of plan.tensors) process.stdout.write(`${t.name}\t${t.dtype}\t[${t.shape.join(", ")}]\t${tensorBytes(t)}\n`);
      process.stdout.write(`${plan.tensors.length} tensors, ${fmtBytes(plan.dataBytes)}\n`);
    }
    return 0;
  }
  const bar = new Progress("make-model", planModel(opts).dataBytes);
  let done = 0;
  const made = makeModel(out!, opts, (_, t) => bar.update(done += tensorBytes(t), t.name));
  bar.end();
  const summary = {
    dir: made.dir, preset, seed: opts.seed, dtype: made.dtype, mtp_drafts: opts.mtpDrafts,
    tensors: made.tensors.length, file_bytes: made.fileBytes,
  };
  if (v.json) process.stdout.write(JSON.stringify(summary) + "\n");
  else process.stdout.write(`wrote ${made.dir}: ${preset} ${made.dtype} seed ${opts.seed}, ${made.tensors.length} tensors, ${fmtBytes(made.fileBytes)}\n`);
  return 0;
}

export const command: Command = { summary: "write a random glm_moe_dsa model directory", help, run };
