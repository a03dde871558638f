// `hummingbird make-model`: CLI front of src/model/make-model.ts (random model directories).
// Parses flags, shows a progress bar on stderr while the weights are written (src/progress.ts), prints a
// one-line summary (or JSON / a dry-run tensor table). No state.
import { defaultDtype, makeModel, planModel, PRESET_NAMES, type MakeModelOptions } from "../model/make-model.ts";
import { fmtName, parseFmt, type QFormat } from "../model/formats.ts";
import { choice, fmtBytes, intOption, parseCli, UsageError, type Command } from "./common.ts";
import { Progress } from "../progress.ts";

const help = `usage: hummingbird make-model OUT --preset tiny|bench|glm5-slice [--layers N] [--seed N] [--dtype f32|bf16]
                              [--experts FMT --dense FMT] [--set key=json]... [--mtp-drafts] [--dry-run] [--json]

Write a random glm_moe_dsa model directory OUT: config.json, generation_config.json,
model.safetensors (weights deterministic from the seed), tokenizer.json (byte-level BPE with GLM
special tokens) and tokenizer_config.json (GLM-style chat template).

options:
  --preset P       tiny  = the shape of shared/fixtures/glm-tiny (vocab 512, hidden 64, 4 layers)
                   bench = hidden 1024, 8 layers, 64 experts top-8, vocab 8192 (~1.7 GB at bf16)
                   glm5-slice = GLM-5's exact widths (hidden 6144, 256 experts top-8, vocab 154880), 2 layers
                   (layer 0 dense, the rest MoE) + the MTP layer, in the real checkpoint's tensor names;
                   bf16: 41.2 GiB at 2 layers, 59.6 GiB at 3; with --experts int4g64 --dense int8:
                   13.6 GiB (2), 18.9 GiB (3) (one routed expert 21.2 MB)
  --layers N       num_hidden_layers (the MTP layer comes after them)
  --experts FMT    write the routed experts directly quantized (random codes, scales giving the init's
                   std), as convert stores them: int8|int4|int2|int4g<gs>; needs --dense too
  --dense FMT      the other matrices (not the embedding or the router) likewise
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

function qfmt(name: string, flag: string): QFormat {
  const f = parseFmt(name);
  if (!f) throw new UsageError(`--${flag} must be a weight format (f32|bf16|int8|int4|int2|int4g<gs>), got ${JSON.stringify(name)}`, help);
  return f;
}

async function run(argv: string[]): Promise<number> {
  const r = parseCli(argv, {
    preset: { type: "string" }, seed: { type: "string" }, dtype: { type: "string" },
    set: { type: "string", multiple: true }, "mtp-drafts": { type: "boolean" }, layers: { type: "string" },
    experts: { type: "string" }, dense: { type: "string" },
    "dry-run": { type: "boolean" }, json: { type: "boolean" },
  }, help, true);
  if (!r) return (process.stdout.write(help + "\n"), 0);
  const v = r.values;
  if (r.positionals.length > 1) throw new UsageError(`expected one output directory, got ${r.positionals.length} arguments`, help);
  const out = r.positionals[0];
  if (!out && !v["dry-run"]) throw new UsageError("missing output directory OUT", help);
  if (v.preset === undefined) throw new UsageError("missing required option --preset", help);
  const preset = choice(v.preset, "preset", PRESET_NAMES, help);
  const set = parseSet(v.set ?? []);
  if (v.layers !== undefined) {
    const L = intOption(v.layers, "layers", help);
    if (L < 1) throw new UsageError(`--layers must be ≥ 1, got ${L}`, help);
    set.num_hidden_layers = L;
  }
  if ((v.experts === undefined) !== (v.dense === undefined)) throw new UsageError(`--${v.experts === undefined ? "experts" : "dense"} is needed with --${v.experts === undefined ? "dense" : "experts"}`, help);
  const quant = v.experts === undefined ? undefined : { experts: qfmt(v.experts, "experts"), dense: qfmt(v.dense!, "dense") };
  const opts: MakeModelOptions = {
    preset,
    seed: v.seed === undefined ? 0 : intOption(v.seed, "seed", help),
    dtype: v.dtype === undefined ? defaultDtype(preset) : choice(v.dtype, "dtype", ["f32", "bf16"] as const, help),
    set, quant,
    mtpDrafts: v["mtp-drafts"] ?? false,
  };
  if (v["dry-run"]) {
    const plan = planModel(opts);
    if (v.json) {
      const tensors = plan.written.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, ...(t.fmt && t.dtype === "U8" ? { quant: fmtName(t.fmt) } : {}) }));
      process.stdout.write(JSON.stringify({ config: plan.raw, data_bytes: plan.dataBytes, tensors }) + "\n");
    } else {
      process.stdout.write(JSON.stringify(plan.raw, null, 2) + "\n");
      for (const t of plan.written) process.stdout.write(`${t.name}\t${t.dtype}\t[${t.shape.join(", ")}]\t${t.bytes}\n`);
      process.stdout.write(`${plan.written.length} tensors, ${fmtBytes(plan.dataBytes)}\n`);
    }
    return 0;
  }
  const bar = new Progress("make-model", planModel(opts).dataBytes);
  const made = makeModel(out!, opts, (done, name) => bar.update(done, name));
  bar.end();
  const summary = {
    dir: made.dir, preset, seed: opts.seed, dtype: made.dtype, mtp_drafts: opts.mtpDrafts,
    tensors: made.written.length, file_bytes: made.fileBytes, ...(quant ? { experts: fmtName(quant.experts), dense: fmtName(quant.dense) } : {}),
  };
  if (v.json) process.stdout.write(JSON.stringify(summary) + "\n");
  else process.stdout.write(`wrote ${made.dir}: ${preset} ${made.dtype}${quant ? ` (experts ${fmtName(quant.experts)}, dense ${fmtName(quant.dense)})` : ""} seed ${opts.seed}, ${made.written.length} tensors, ${fmtBytes(made.fileBytes)}\n`);
  return 0;
}

export const command: Command = { summary: "write a random glm_moe_dsa model directory", help, run };
