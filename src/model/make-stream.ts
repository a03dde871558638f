// The model generator's written tensors: each planned tensor as a stream of chunks (float draws at most CHUNK values
// at a time: the same bytes as drawing it whole), or directly quantized (random codes, scales giving the init's std)
// under the container's names (`name` U8 + `name.qs` F32, `quant.<name>` stamps; each routed expert's six tensors side
// by side), as `convert --experts/--dense` stores them. Holds nothing but the one chunk being written. Stateless.
import { ModelError } from "./errors.ts";
import { fmtName, FORMATS, isGrouped, rowBytes, scalesPerRow, type QFormat } from "./formats.ts";
import { fillTensor, numel, Rng, toBf16, type PlannedTensor } from "./make-weights.ts";

/** One tensor as written: its stored name, dtype and shape, its bytes, and (quantized) its format and source. */
export interface WrittenTensor {
  name: string;
  dtype: "F32" | "BF16" | "U8";
  shape: number[];
  bytes: number;
  /** the planned float tensor it stands for (for `name.qs`, the matrix's) */
  src: PlannedTensor;
  /** quantized (the U8 codes and their `.qs` scales): the format, stamped as `quant.<name>` on the U8 tensor */
  fmt?: QFormat;
}

/** values per chunk of a float tensor (16 MiB of f32) and bytes per chunk of a quantized one */
export const CHUNK = 1 << 22;
const EXPERT = /^model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight$/;

/** The format a planned matrix is written in (convert's roles: routed experts, the rest; never the embedding or the
 *  router); null: as planned (float). */
function roleOf(t: PlannedTensor, q: { experts: QFormat; dense: QFormat }): QFormat | null {
  if (t.shape.length !== 2 || t.name.endsWith("mlp.gate.weight") || t.name === "model.embed_tokens.weight") return null;
  const f = EXPERT.test(t.name) ? q.experts : q.dense;
  return FORMATS[f.fmt].scales === "none" ? null : f;
}

/** The tensors written for a float plan: as planned without `quant`; else quantized where convert would, experts last,
 *  each expert's gate, gate.qs, up, up.qs, down, down.qs together. */
export function writtenTensors(plan: readonly PlannedTensor[], quant?: { experts: QFormat; dense: QFormat }): WrittenTensor[] {
  const float = (t: PlannedTensor): WrittenTensor => ({ name: t.name, dtype: t.dtype, shape: t.shape, bytes: numel(t.shape) * (t.dtype === "F32" ? 4 : 2), src: t });
  if (!quant) return plan.map(float);
  const head: WrittenTensor[] = [], experts: WrittenTensor[] = [];
  for (const t of plan) {
    const f = roleOf(t, quant), list = EXPERT.test(t.name) ? experts : head;
    if (!f) { list.push(float(t)); continue; }
    if (t.init.kind !== "normal") throw new ModelError(`cannot be written quantized (init ${t.init.kind}; --mtp-drafts needs float matrices)`, { tensor: t.name });
    const [O, I] = t.shape, ng = scalesPerRow(f.fmt, I, f.gs);
    list.push({ name: t.name, dtype: "U8", shape: [O, rowBytes(f.fmt, I)], bytes: O * rowBytes(f.fmt, I), src: t, fmt: f });
    list.push({ name: `${t.name}.qs`, dtype: "F32", shape: isGrouped(f.fmt) ? [O, ng] : [O], bytes: 4 * O * ng, src: t, fmt: f });
  }
  const key = (n: string) => { const m = EXPERT.exec(n.replace(/\.qs$/, ""))!; return [+m[1], +m[2], ["gate", "up", "down"].indexOf(m[3]), n.endsWith(".qs") ? 1 : 0]; };
  experts.sort((a, b) => { const x = key(a.name), y = key(b.name); for (let i = 0; i < 4; i++) if (x[i] !== y[i]) return x[i] - y[i]; return 0; });
  return [...head, ...experts];
}

/** The `quant.<name>` metadata stamps of the quantized tensors. */
export function quantStamps(ts: readonly WrittenTensor[]): Record<string, string> {
  return Object.fromEntries(ts.filter((t) => t.fmt && t.dtype === "U8").map((t) => [`quant.${t.name}`, fmtName(t.fmt!)]));
}

/** std of a code drawn uniformly from [−2^(b−1), 2^(b−1) − 1]: the scale that gives a weight std σ is σ / this */
const codeStd = (bits: number) => Math.sqrt((4 ** bits - 1) / 12);

/** The bytes of one written tensor, in chunks (each valid only until the next is asked for). */
export function* tensorChunks(t: WrittenTensor, seed: number): Generator<Uint8Array> {
  const s = t.src;
  if (t.dtype === "U8") { // random codes: every byte pattern is a valid code of each format
    const rng = new Rng(seed, s.name), st = new Uint32Array(4).map(() => rng.nextU32() || 1);
    const buf = new Uint32Array(CHUNK / 4);
    for (let done = 0; done < t.bytes; done += CHUNK) { fillXoshiro(buf, st); yield new Uint8Array(buf.buffer, 0, Math.min(CHUNK, t.bytes - done)); }
    return;
  }
  if (t.fmt) { // the scales: σ / codeStd, jittered ×[0.75, 1.25) each
    const std = s.init.kind === "normal" ? s.init.std : 1, base = std / codeStd(FORMATS[t.fmt.fmt].bits);
    const rng = new Rng(seed, t.name), n = t.bytes / 4, buf = new Float32Array(Math.min(n, CHUNK));
    for (let done = 0; done < n; done += buf.length) {
      const m = Math.min(buf.length, n - done);
      for (let i = 0; i < m; i++) buf[i] = base * (0.75 + 0.5 * rng.uniform());
      yield new Uint8Array(buf.buffer, 0, 4 * m);
    }
    return;
  }
  if (s.init.kind === "eye_left") { const f = fillTensor(s, seed); yield bytesOf(s.dtype === "BF16" ? toBf16(f) : f); return; }
  const rng = new Rng(seed, s.stream ?? s.name), n = numel(s.shape), add = s.init.kind === "norm" ? 1 : 0;
  const buf = new Float32Array(Math.min(n, CHUNK));
  for (let done = 0; done < n; done += buf.length) { // fillNormal continues the stream: the draws of one whole call
    const v = buf.subarray(0, Math.min(buf.length, n - done));
    rng.fillNormal(v, s.init.std, add);
    yield bytesOf(s.dtype === "BF16" ? toBf16(v) : v);
  }
}

const bytesOf = (v: ArrayBufferView) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);

/** xoshiro128** over `st` into `out` (the generator inlined: a 2-layer slice draws ~3 G words). */
function fillXoshiro(out: Uint32Array, st: Uint32Array): void {
  let s0 = st[0], s1 = st[1], s2 = st[2], s3 = st[3];
  for (let i = 0; i < out.length; i++) {
    const r = Math.imul(s1, 5);
    out[i] = Math.imul((r << 7) | (r >>> 25), 9);
    const t = s1 << 9;
    s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = (s3 << 11) | (s3 >>> 21);
  }
  st[0] = s0; st[1] = s1; st[2] = s2; st[3] = s3;
}
