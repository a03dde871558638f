// The machine's rates a forecast (plan.ts) needs: memory read bandwidth (libhb's probe, as `bench` takes it) and
// fast-mode matmul rates (MAC/s and weight bytes/s) of a model's matrices (their shapes, format and rows per call),
// timed over a pool of weights larger than the caches (so the weights stream from RAM, as a forward's do); or a saved
// profile (zod-checked JSON). Stateless.
import { z } from "zod";
import { fromZod, ModelError, readJsonFile } from "../model/errors.ts";
import { fmtName, format, rowBytes, scaleCount, type QFormat } from "../model/formats.ts";
import { hb, matmulMany, memBandwidth, type ManyMat } from "../native/hb.ts";

/** One measured point: the matrices of `mix` ("dense": a model's non-expert matrices, by their shapes and counts;
 *  "experts": its expert matrices) in format fmt at S rows a call. */
export interface GemmRate { mix: "dense" | "experts"; fmt: string; S: number; gmac_s: number; gb_s: number }
export interface Rates {
  membw_gb_s: number; threads: number; simd: string; gemm: GemmRate[];
  /** the matrix shapes ([O, I]) each mix was measured on */
  shapes?: Record<GemmRate["mix"], [number, number][]>;
}

const pos = z.number().positive();
export const RatesSchema = z.object({
  membw_gb_s: pos, threads: z.int().min(1), simd: z.string(),
  gemm: z.array(z.object({ mix: z.enum(["dense", "experts"]), fmt: z.string(), S: z.int().min(1), gmac_s: pos, gb_s: pos })).min(1),
  shapes: z.object({ dense: z.array(z.tuple([z.int(), z.int()])), experts: z.array(z.tuple([z.int(), z.int()])) }).optional(),
});

/** A saved profile (`plan --save-profile`), checked. */
export function readRates(file: string): Rates {
  const r = RatesSchema.safeParse(readJsonFile(file, 1 << 20));
  if (!r.success) throw fromZod(r.error, { file });
  return r.data;
}

/** Weight pool per measurement: POOL bytes, larger than any L3 this runs on, so each call reads from RAM (at most
 *  MAX_MATS matrices: a small model's weights stay in the caches when it runs, too). */
const POOL = 256 * 2 ** 20, MAX_MATS = 512, MIN_S = 0.15, PASSES = 3, BATCH = 8;

/** Random weights of W [O, I] in format f (every code valid; floats small). */
function randomMat(f: QFormat, O: number, I: number): ManyMat {
  const fm = format(f.fmt), wBytes = O * rowBytes(f.fmt, I), ns = scaleCount(f.fmt, O, I, f.gs), b = new Uint8Array(wBytes);
  for (let i = 0; i < wBytes; i += 65536) crypto.getRandomValues(b.subarray(i, Math.min(wBytes, i + 65536)));
  const mat = (data: ManyMat["data"], scales: Float32Array | null): ManyMat => ({ fmt: f.fmt, data, scales, gs: f.gs, O });
  if (fm.dtype === "F32") { const w = new Float32Array(b.buffer); for (let i = 0; i < w.length; i++) w[i] = (i % 251) * 1e-4; return mat(w, null); }
  if (fm.unit === 2) { const w = new Uint16Array(b.buffer); for (let i = 0; i < w.length; i++) w[i] = 0x3c00 | (w[i] & 0x3ff); return mat(w, null); }
  return mat(b, ns ? new Float32Array(ns).fill(1e-3) : null);
}

/** MAC/s and weight bytes/s of `shapes` ([O, I] each, repeated as given until the pool is filled) · x [S, I] in fast
 *  mode, up to BATCH matrices of one I a call (each with its own rows, as moe.ts batches a layer's experts): the best of
 *  PASSES timed passes over the pool (the machine may be shared). */
export function measureGemm(f: QFormat, S: number, shapes: readonly [number, number][]): { macs: number; bytes: number } {
  const mats: { m: ManyMat; I: number; bytes: number }[] = [];
  for (let total = 0, k = 0; (total < POOL && k < MAX_MATS) || k < shapes.length; k++) {
    const [O, I] = shapes[k % shapes.length], m = randomMat(f, O, I), bytes = m.data.byteLength + (m.scales?.byteLength ?? 0);
    mats.push({ m, I, bytes }); total += bytes;
  }
  const calls: { ws: ManyMat[]; ys: Float32Array[]; I: number; macs: number; bytes: number }[] = [];
  for (let k = 0; k < mats.length;) {
    const I = mats[k].I, run: typeof mats = [];
    while (k < mats.length && mats[k].I === I && run.length < BATCH) run.push(mats[k++]);
    calls.push({ ws: run.map(({ m }, j) => ({ ...m, x: new Float32Array(S * I).map((_, i) => Math.sin(i + j)), S })), ys: run.map(({ m }) => new Float32Array(S * m.O)),
      I, macs: run.reduce((a, { m }) => a + m.O * I * S, 0), bytes: run.reduce((a, r) => a + r.bytes, 0) });
  }
  const pass = () => { for (const c of calls) matmulMany(false, c.ws, c.ys, c.I, null, S); };
  pass();
  const macs = calls.reduce((a, c) => a + c.macs, 0), bytes = calls.reduce((a, c) => a + c.bytes, 0);
  let best = 0;
  for (let p = 0; p < PASSES; p++) {
    let n = 0;
    const t0 = performance.now();
    do { pass(); n++; } while (performance.now() - t0 < MIN_S * 1000);
    best = Math.max(best, n / ((performance.now() - t0) / 1000));
  }
  return { macs: macs * best, bytes: bytes * best };
}

/** Read bandwidth in bytes/s of this machine: a 1 GiB buffer (256 MiB when short of memory) read by every
 *  pool thread, best of `reps` reads (`bench`'s probe too). */
export function probeBandwidth(reps = 3): number {
  const bw = memBandwidth(1 << 30, reps);
  return bw > 0 ? bw : memBandwidth(1 << 28, reps);
}

/** The probe (best of 3 reads) and each (mix, format, rows) point. */
export function measureRates(points: readonly { mix: GemmRate["mix"]; f: QFormat; S: number; shapes: [number, number][] }[]): Rates {
  const bw = probeBandwidth(3);
  const gemm = points.map(({ mix, f, S, shapes }) => {
    const r = measureGemm(f, S, shapes);
    return { mix, fmt: fmtName(f), S, gmac_s: r.macs / 1e9, gb_s: r.bytes / 1e9 };
  });
  return { membw_gb_s: bw / 1e9, threads: hb().hb_nthreads(), simd: String(hb().hb_simd_name()), gemm };
}

/** MAC/s and weight bytes/s of `mix` in format `fmt` at S rows: the measured point, else the nearest S (log scale). */
export function gemmRate(r: Rates, mix: GemmRate["mix"], fmt: string, S: number, file = "profile"): { macs: number; bytes: number } {
  const pts = r.gemm.filter((g) => g.mix === mix && g.fmt === fmt);
  if (!pts.length) throw new ModelError(`has no rate for ${mix} matrices in ${fmt} (it has ${[...new Set(r.gemm.map((g) => `${g.mix} ${g.fmt}`))].join(", ")})`, { file, field: "gemm" });
  const best = pts.reduce((a, g) => (Math.abs(Math.log(g.S / S)) < Math.abs(Math.log(a.S / S)) ? g : a));
  return { macs: best.gmac_s * 1e9, bytes: best.gb_s * 1e9 };
}
