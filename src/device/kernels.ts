// Device kernels: one recorder per shader (shaders/*.comp), each with the shape contract of its CPU twin
// in src/native/hb.ts, and the upload of weight matrices (Mat -> DevMat in any format of src/model/formats.ts, split by
// whole rows over chunks).
// Offsets and strides are in elements (f32 / i32) and travel as push constants (named, laid out by the
// table in push.ts), so buffers are always bound whole and descriptor sets stay few (cached by Vk).
// State: the pipelines built so far, a dummy buffer for unused bindings.
import { format, FORMATS, isGrouped, rowBytes, scaleCount } from "../model/formats.ts";
import type { Mat } from "../model/weights.ts";
import { pushOf, SHADERS, type Shader } from "./push.ts";
import type { Buf, Cmd, Gpu, Pipeline } from "./backend.ts";
import { VkError } from "./vulkan/vklib.ts";

/** An element view into a device buffer. */
export interface V { buf: Buf; off?: number }
const off = (v: V) => v.off ?? 0;

/** A weight matrix W [O, I] on the device: whole rows per chunk; scales as f32 ([O] per row, [O, ⌈I/gs⌉] int4g),
 * chunked by the same rows (chunk c of the scales = the scales of chunk c of W). */
export interface DevMat {
  name: string; fmt: number; gs: number; O: number; I: number; buf: Buf; rowsPerChunk: number; chunkBytes: number;
  scales: Buf | null; scaleChunkBytes: number;
}

/** The weight formats with a matmul shader variant (formats.ts: all of them; quantized ones are dequantised in the shader). */
export const DEVICE_FMTS: readonly number[] = FORMATS.filter((f) => f.kernels.device !== null).map((f) => f.code);
const MAX_GROUPS = 65535; // guaranteed maxComputeWorkGroupCount per dimension

export function uploadMat(vk: Gpu, m: Mat): DevMat {
  if (!DEVICE_FMTS.includes(m.fmt)) throw new VkError(`${m.name}: weight format ${m.fmt} is not supported on the device`, -10001);
  if (isGrouped(m.fmt) && !(Number.isInteger(m.gs) && m.gs > 0)) throw new VkError(`${m.name}: ${format(m.fmt).name} without a group size (gs ${m.gs})`, -10001);
  const rb = rowBytes(m.fmt, m.I), total = m.O * rb, ns = scaleCount(m.fmt, m.O, m.I, m.gs), per = ns / m.O;
  if (ns > 0 && (!m.scales || m.scales.length < ns)) throw new VkError(`${m.name}: quantized weight (fmt ${m.fmt}) without its ${ns} scales`, -10001);
  if (m.data.byteLength < total) throw new VkError(`${m.name}: ${m.data.byteLength} bytes of data, the shape needs ${total}`, -10001);
  let rows = m.O;
  if (Math.max(total, 4 * ns) > vk.maxChunk) { // whole rows, 4-byte aligned chunk starts; scales chunked by the same rows
    rows = Math.floor(vk.maxChunk / Math.max(rb, 4 * per) / 4) * 4;
    if (rows < 4) throw new VkError(`${m.name}: a row of ${rb} bytes exceeds the device's buffer limit ${vk.maxChunk}`, -10007);
  }
  const whole = rows >= m.O;
  const chunkBytes = whole ? Math.ceil(total / 4) * 4 : rows * rb;
  const buf = vk.buffer(total, "device", chunkBytes);
  buf.write(0, m.data.byteLength === total ? m.data : new Uint8Array(m.data.buffer, m.data.byteOffset, total));
  let scales: Buf | null = null;
  const scaleChunkBytes = whole ? 4 * ns : 4 * rows * per;
  if (ns > 0) {
    scales = vk.buffer(4 * ns, "device", scaleChunkBytes);
    scales.write(0, m.scales!.subarray(0, ns));
  }
  return { name: m.name, fmt: m.fmt, gs: isGrouped(m.fmt) ? m.gs : 0, O: m.O, I: m.I, buf, rowsPerChunk: Math.min(rows, m.O), chunkBytes,
    scales, scaleChunkBytes };
}

export function freeMat(d: DevMat): void { d.buf.free(); d.scales?.free(); }

/** Upload a float vector. */
export function uploadVec(vk: Gpu, v: Float32Array): Buf {
  const b = vk.buffer(4 * Math.max(1, v.length));
  b.write(0, v);
  return b;
}

/** Grouped matmul layout: output group g reads weight rows wRow0 + g·wGroup + [0, O) and x at + g·xGroup. */
export interface Groups { G: number; O: number; wRow0: number; wGroup: number; xGroup: number; yGroup: number }

/** The (shader, constants) variants the kernels build: matmul once per weight format in `fmts`, the others plain. */
export function pipelineVariants(fmts: readonly number[] = DEVICE_FMTS): [Shader, Record<string, number>][] {
  return [...[...new Set(fmts)].map((f): [Shader, Record<string, number>] => ["matmul", { FMT: f }]),
    ...(Object.keys(SHADERS) as Shader[]).filter((s) => s !== "matmul").map((s): [Shader, Record<string, number>] => [s, {}])];
}

export class Kernels {
  private pipes = new Map<string, Pipeline>();
  readonly dummy: Buf;

  constructor(readonly vk: Gpu) { this.dummy = vk.buffer(16); }

  private pipe(name: Shader, defs: Record<string, number> = {}): Pipeline {
    const key = `${name}${JSON.stringify(defs)}`;
    let p = this.pipes.get(key);
    if (!p) this.pipes.set(key, (p = this.vk.pipeline(name, defs)));
    return p;
  }

  /** Build every pipeline now (the first frame then records without compiling); `fmts`: the matmul
   * formats to build (default: all). */
  warm(fmts: readonly number[] = DEVICE_FMTS): void {
    for (const [s, defs] of pipelineVariants(fmts)) this.pipe(s, defs);
  }

  /**
   * y [S, O] = alpha · W [O, I] · x [S, I] (rows at x.off + s·xRow, y.off + s·yRow), or grouped (see Groups).
   * A matrix split over chunks runs one dispatch per chunk (plain form only).
   */
  matmul(cmd: Cmd, W: DevMat, x: V, S: number, y: V, o: { xRow?: number; yRow?: number; alpha?: number; groups?: Groups } = {}): void {
    const p = this.pipe("matmul", { FMT: W.fmt });
    const xRow = o.xRow ?? W.I, yRow = o.yRow ?? W.O, alpha = o.alpha ?? 1, sc = W.scales ?? this.dummy;
    if (S <= 0) return;
    if (S > MAX_GROUPS) throw new VkError(`matmul ${W.name}: ${S} rows > ${MAX_GROUPS}`, -10007);
    const g = o.groups;
    if (g) {
      if (W.buf.nchunks !== 1) throw new VkError(`matmul ${W.name}: grouped form needs a single-chunk weight`, -10005);
      if (g.O > MAX_GROUPS || g.G > MAX_GROUPS) throw new VkError(`matmul ${W.name}: groups too large`, -10007);
      cmd.dispatch(p, [{ buf: W.buf }, { buf: sc }, { buf: x.buf }, { buf: y.buf }],
        pushOf("matmul", { O: g.O, I: W.I, wRow0: g.wRow0, wGroup: g.wGroup, scRow0: 0, xOff: off(x), xRow, xGroup: g.xGroup,
          yOff: off(y), yRow, yGroup: g.yGroup, gs: W.gs, alpha }), g.O, g.G, S);
      return;
    }
    for (let c = 0; c * W.rowsPerChunk < W.O; c++) {
      const r0 = c * W.rowsPerChunk, rows = Math.min(W.rowsPerChunk, W.O - r0);
      const wb = { buf: W.buf, off: c * W.chunkBytes }, sb = { buf: sc, off: W.scales ? c * W.scaleChunkBytes : 0 };
      for (let k = 0; k < rows; k += MAX_GROUPS) {
        const n = Math.min(MAX_GROUPS, rows - k);
        cmd.dispatch(p, [wb, sb, { buf: x.buf }, { buf: y.buf }],
          pushOf("matmul", { O: n, I: W.I, wRow0: k, wGroup: 0, scRow0: 0, xOff: off(x), xRow, xGroup: 0,
            yOff: off(y) + r0 + k, yRow, yGroup: 0, gs: W.gs, alpha }), n, 1, S);
      }
    }
  }

  /** y rows = RMS(x rows) ⊙ w (w null: 1); rows of D at x.off + s·xRow -> y.off + s·yRow; in place allowed */
  rmsnorm(cmd: Cmd, x: V, w: Buf | null, y: V, S: number, D: number, eps: number, xRow = D, yRow = D): void {
    cmd.dispatch(this.pipe("rmsnorm"), [{ buf: x.buf }, { buf: w ?? this.dummy }, { buf: y.buf }],
      pushOf("rmsnorm", { D, xOff: off(x), xRow, yOff: off(y), yRow, hasW: w ? 1 : 0, eps }), S);
  }

  /** y rows = LN(x rows) ⊙ w + b */
  layernorm(cmd: Cmd, x: V, w: Buf, b: Buf, y: V, S: number, D: number, eps: number, xRow = D, yRow = D): void {
    cmd.dispatch(this.pipe("layernorm"), [{ buf: x.buf }, { buf: w }, { buf: b }, { buf: y.buf }],
      pushOf("layernorm", { D, xOff: off(x), xRow, yOff: off(y), yRow, eps }), S);
  }

  /**
   * Interleaved RoPE of S rows × nvec vectors, dr wide: src at src.off + r·row + v·vec, written to dst with
   * dst strides (default: same as src; in place when dst is src). cs = [rows, dr] (cos, sin) pairs; row r
   * uses cs row csRow0 + r.
   */
  rope(cmd: Cmd, src: V, S: number, row: number, nvec: number, vec: number, dr: number, cs: V, csRow0: number,
    dst: V = src, dRow = row, dVec = vec): void {
    const h = dr >> 1;
    if (S <= 0 || h <= 0) return;
    cmd.dispatch(this.pipe("rope"), [{ buf: src.buf }, { buf: dst.buf }, { buf: cs.buf }],
      pushOf("rope", { h, sOff: off(src), sRow: row, sVec: vec, dOff: off(dst), dRow, dVec, csRow0, csStride: dr }),
      Math.ceil(h / 64), nvec, S);
  }

  /** out[n] = silu(g)·u */
  swiglu(cmd: Cmd, g: V, u: V, out: V, n: number): void {
    cmd.dispatch(this.pipe("swiglu"), [{ buf: g.buf }, { buf: u.buf }, { buf: out.buf }],
      pushOf("swiglu", { n, gOff: off(g), uOff: off(u), oOff: off(out) }), Math.min(MAX_GROUPS, Math.ceil(n / 256)));
  }

  /** y[n] += x */
  add(cmd: Cmd, y: V, x: V, n: number): void {
    cmd.dispatch(this.pipe("add"), [{ buf: y.buf }, { buf: x.buf }], pushOf("add", { n, yOff: off(y), xOff: off(x) }),
      Math.min(MAX_GROUPS, Math.ceil(n / 256)));
  }

  /** dst[r0·dRow0 + r1·dRow1 + k] = src[r0·sRow0 + r1·sRow1 + k] for r0 < R0, r1 < R1, k < K */
  copy(cmd: Cmd, src: V, dst: V, K: number, R1: number, sRow1: number, dRow1: number, R0 = 1, sRow0 = 0, dRow0 = 0): void {
    cmd.dispatch(this.pipe("copy"), [{ buf: src.buf }, { buf: dst.buf }],
      pushOf("copy", { K, sOff: off(src), sRow0, sRow1, dOff: off(dst), dRow0, dRow1 }), Math.ceil(K / 64), R1, R0);
  }

  /**
   * Attention core for rows s0 .. s0+n-1 (hb_attn contract): q/k/v/out operands with (row, head) strides;
   * keys from sel [rows, selRow] when sel is given, else 0..nsel[s]-1; p = scratch of pStride floats per (s, h).
   * tab (the KV split): key t at K/V row tab[t/blk]·blk + t%blk, keys of blocks with tab < 0 left out.
   * stats: [rows·H, 2] (row max, Σ exp) of what was attended (hb_attn_stats' layout; l = 0: no key).
   */
  attn(cmd: Cmd, a: {
    s0: number; n: number; H: number; dk: number; dv: number;
    q: V & { row: number; head: number }; k: V & { row: number; head: number }; v: V & { row: number; head: number };
    out: V & { row: number; head: number }; sel: Buf | null; selRow: number; nsel: Buf; p: Buf; pStride: number; scale: number;
    tab?: { buf: Buf; blk: number } | null; stats?: Buf | null;
  }): void {
    if (a.n <= 0) return;
    const tab = a.tab ?? null, stats = a.stats ?? null;
    cmd.dispatch(this.pipe("attn"),
      [{ buf: a.q.buf }, { buf: a.k.buf }, { buf: a.v.buf }, { buf: a.sel ?? this.dummy }, { buf: a.nsel }, { buf: a.p }, { buf: a.out.buf },
        { buf: tab?.buf ?? this.dummy }, { buf: stats ?? this.dummy }],
      pushOf("attn", { s0: a.s0, H: a.H, dk: a.dk, dv: a.dv, qOff: off(a.q), qRow: a.q.row, qHead: a.q.head,
        kOff: off(a.k), kRow: a.k.row, kHead: a.k.head, vOff: off(a.v), vRow: a.v.row, vHead: a.v.head,
        oOff: off(a.out), oRow: a.out.row, oHead: a.out.head, selRow: a.selRow, useSel: a.sel ? 1 : 0, pStride: a.pStride,
        useTab: tab ? 1 : 0, blk: tab ? tab.blk : 1, useStats: stats ? 1 : 0, scale: a.scale }), a.n, a.H);
  }

  /**
   * o [rows, H, dv] (row/head strides) ← merge of the partial attentions (o, st) and (o2, st2) through their
   * softmax statistics [rows·H, 2], rows s0..s0+n-1 (attn_merge.comp); o2 shares o's layout.
   */
  attnMerge(cmd: Cmd, a: { s0: number; n: number; H: number; dv: number; o: Buf; oRow: number; oHead: number; st: Buf; o2: Buf; st2: Buf }): void {
    if (a.n <= 0) return;
    cmd.dispatch(this.pipe("attn_merge"), [{ buf: a.o }, { buf: a.st }, { buf: a.o2 }, { buf: a.st2 }],
      pushOf("attn_merge", { s0: a.s0, H: a.H, dv: a.dv, oRow: a.oRow, oHead: a.oHead }), Math.ceil(a.dv / 64), a.H, a.n);
  }

  /** out[s·outRow + t] = Σ_h w[s,h]·ReLU(scale·qI[s,h]·kI[t]) for rows s0.., t < nk[s] (maxNk bounds the grid) */
  indexScores(cmd: Cmd, a: { s0: number; n: number; nh: number; hd: number; qI: Buf; w: Buf; kI: V; nk: Buf; out: V; outRow: number; maxNk: number; scale: number }): void {
    if (a.n <= 0 || a.maxNk <= 0) return;
    cmd.dispatch(this.pipe("index_scores"), [{ buf: a.qI }, { buf: a.w }, { buf: a.kI.buf }, { buf: a.nk }, { buf: a.out.buf }],
      pushOf("index_scores", { s0: a.s0, nh: a.nh, hd: a.hd, kOff: off(a.kI), outOff: off(a.out), outRow: a.outRow, scale: a.scale }),
      Math.ceil(a.maxNk / 64), a.n);
  }

  /** sel [rows, topk] / nsel [rows] for rows s0.. from scores (rows at scores.off + s·scoreRow), spec tie rule */
  dsaSelect(cmd: Cmd, a: { s0: number; n: number; scores: V; scoreRow: number; nk: Buf; topk: number; sel: Buf; nsel: Buf }): void {
    if (a.n <= 0) return;
    cmd.dispatch(this.pipe("dsa_select"), [{ buf: a.scores.buf }, { buf: a.nk }, { buf: a.sel }, { buf: a.nsel }],
      pushOf("dsa_select", { s0: a.s0, scOff: off(a.scores), scRow: a.scoreRow, topk: a.topk }), a.n);
  }
}

/** cos/sin table for rows at positions pos[0..S): cs[r, 2j] = cos(pos_r·θ_j), cs[r, 2j+1] = sin, θ_j = theta^(−2j/dr). */
export function ropeTable(pos: ArrayLike<number>, S: number, dr: number, theta: number, out = new Float32Array(S * dr)): Float32Array {
  const h = dr >> 1;
  const th = Array.from({ length: h }, (_, j) => Math.pow(theta, (-2 * j) / dr));
  for (let r = 0; r < S; r++)
    for (let j = 0; j < h; j++) {
      const phi = pos[r] * th[j];
      out[r * dr + 2 * j] = Math.cos(phi);
      out[r * dr + 2 * j + 1] = Math.sin(phi);
    }
  return out;
}
