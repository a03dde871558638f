// libhb binding: the one place that dlopens the native kernel library (ffi/*.c) and declares its
// symbol table. Owns no model state. TypedArrays are passed straight to FFI (ptr() only for the
// addresses inside matmulMany's descriptor).
// Every wrapper documents its shape contract; the C side (ffi/hb.h) is the source of truth.
import { dlopen, FFIType, ptr as ptr_ } from "bun:ffi";
import { ensureNative } from "../../ffi/build.ts";

const { i32, i64, f32, f64, ptr, cstring } = FFIType;

/** Weight formats understood by hb_matmul. 0-4 are formats.md's codes; 5/6 are ours. */
export const Fmt = { f32: 0, int8: 1, int4: 2, int2: 3, int4g: 4, bf16: 5, f16: 6 } as const;
export type FmtCode = (typeof Fmt)[keyof typeof Fmt];
/** Source dtypes understood by hb_convert (to f32). */
export const Conv = { bf16: 1, f16: 2, f8e4m3: 3 } as const;
/** SIMD levels (hb.h HB_SCALAR..; keys = hb_simd_name()). hb_simd_force also takes 1 = best available. */
export const Simd = { scalar: 0, neon: 1, avx2: 2, avxvnni: 3, avx512: 4, avx512vnni: 5, amx: 6 } as const;

const symbols = {
  hb_init: { args: [i32], returns: i32 }, // (nthreads; 0 = physical cores) -> threads in the pool
  hb_nthreads: { args: [], returns: i32 },
  hb_pool_stats: { args: [ptr], returns: FFIType.void }, // (out f64[3]): the width jobs run at now, jobs run narrowed, drops
  hb_pool_adapt: { args: [i32], returns: FFIType.void }, // (on): the pool's width chosen (1, the default) or every thread (0)
  hb_simd_name: { args: [], returns: cstring }, // "amx" | "avx512vnni" | "avx512" | "avxvnni" | "avx2" | "neon" | "scalar"
  hb_simd_force: { args: [i32], returns: i32 }, // 0 scalar, 1 best available; returns level in use
  hb_thread_cpu_us: { args: [], returns: f64 }, // the calling thread's CPU time (us; -1: no such clock)
  // W [O,I] (fmt) · x [S,I] -> y [S,O]; scales/gs only for quantized fmts (null/0 otherwise)
  hb_matmul: { args: [i32, ptr, ptr, i32, i32, i32, ptr, i32, ptr], returns: FFIType.void },
  // the same in fast mode: x rows quantized to int8 (absmax/127), integer dot products (fmts 1-4;
  // float formats are exact); _ref = the scalar kernel whatever the SIMD level (tests)
  hb_matmul_q8: { args: [i32, ptr, ptr, i32, i32, i32, ptr, i32, ptr], returns: FFIType.void },
  hb_matmul_q8_ref: { args: [i32, ptr, ptr, i32, i32, i32, ptr, i32, ptr], returns: FFIType.void },
  hb_q8_amx_rows: { args: [], returns: i64 }, // weight rows the AMX GEMMs have done (tests: the path ran)
  // n matrices: (exact, n, desc f64[MANY_DESC·n]: fmt, gs, O, W, scales, y, x_k, S_k,
  // rows_k (int32 row indices into x_k, 0: none), 0 — addresses; I)
  hb_matmul_many: { args: [i32, i32, ptr, i32], returns: FFIType.void },
  // absorbed-MLA heads: (exact, S, H, fmt, W, scales, gs, O, I, r0, rstride, x, xRow, xHead, xmul, y, yRow, yHead, tail, nt, cols)
  hb_mla_heads: { args: [i32, i32, i32, i32, ptr, ptr, i32, i32, i32, i32, i32, ptr, i32, i32, ptr, ptr, i32, i32, ptr, i32, ptr], returns: FFIType.void },
  hb_gather_rows: { args: [ptr, i32, ptr, i32, ptr], returns: FFIType.void }, // (x, D, rows i32[n], n, out [n,D])
  // (dst, dRow, dHead, src, sRow, sHead, S, H, n): dst[s,h][0..n) = src[s,h][0..n) (sHead 0: shared by all heads)
  hb_copy_heads: { args: [ptr, i32, i32, ptr, i32, i32, i32, i32, i32], returns: FFIType.void },
  hb_to_f16: { args: [ptr, ptr, i64], returns: FFIType.void }, // (f32 src, u16 dst, n)
  hb_kv_write: { args: [i32, ptr, ptr, i32, ptr, i32, i32, i32], returns: FFIType.void }, // (…, HB_KV_* format)
  // MLA cache rows: (exact, npre, pre f64[MANY_DESC·npre] | null, preI: hb_matmul_many's, run first; nseg, desc as
  // hb_kv_write's, a, S, kvr, dr, lat, normw, eps, pos, theta, HB_KV_* format; the indexer's keys: ikdesc | null, kI, hd,
  // lnw, lnb, lneps)
  hb_mla_kv: { args: [i32, i32, ptr, i32, i32, ptr, ptr, i32, i32, i32, ptr, ptr, f32, ptr, f64, i32, ptr, ptr, i32, ptr, ptr, f32], returns: FFIType.void },
  // a layer's absorbed attention: (exact, nrun, runs i32[2·nrun], H, dn, dr, dv, kvr, kt f64[5], kmul, q, qcat, nseg,
  // segs f64[4·nseg] as hb_attn_segs', sel, nsel, topk, scale, HB_KV_* format, o_lat, vw f64[4], o)
  hb_mla_absorbed: {
    args: [i32, i32, ptr, i32, i32, i32, i32, i32, ptr, ptr, ptr, ptr, i32, ptr, ptr, ptr, i32, f32, i32, ptr, ptr, ptr],
    returns: FFIType.void,
  },
  // a layer's queries: (exact, n, desc as hb_matmul_many's, qa, normw, cq, S, qr, eps, q, H, dn, dr, pos, theta, qI | null, nh, hd)
  hb_mla_q: { args: [i32, i32, ptr, ptr, ptr, ptr, i32, i32, f32, ptr, i32, i32, i32, ptr, f64, ptr, i32, i32], returns: FFIType.void },
  hb_scatter_axpy: { args: [ptr, i32, ptr, ptr, ptr, i32], returns: FFIType.void }, // (y, D, rows, gates f32[n], ye [n,D], n)
  // a MoE layer's resident routed experts from a per-expert table (moe.ts): (exact, nu, uni, off, rows, tab, D, F, x, hg, hu)
  hb_moe_up: { args: [i32, i32, ptr, ptr, ptr, ptr, i32, i32, ptr, ptr, ptr], returns: FFIType.void },
  // (exact, nu, uni, off, rows, gates, tab, D, F, n, hg, hu, ye, S, y, shared down packed | null, sg, su, sy)
  hb_moe_down: { args: [i32, i32, ptr, ptr, ptr, ptr, ptr, i32, i32, i32, ptr, ptr, ptr, i32, ptr, ptr, ptr, ptr, ptr], returns: FFIType.void },
  hb_moe_route: { args: [i32, i32, i32, ptr, ptr, i32, i32, i32, FFIType.f64, ptr, ptr, ptr, ptr, ptr, ptr, ptr], returns: i32 },
  // router and experts in one call: (exact, npre, pre, preI: hb_matmul_many's, run first; S, p f64[HB_MOE_P],
  // hb_moe_route's from z, ver, row, tab, x, hg, hu, ye, y, shd, sg, su, sy)
  hb_moe_layer: { args: [i32, i32, ptr, i32, i32, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr], returns: i32 },
  hb_wbytes: { args: [i32], returns: i64 }, // (reset) -> weight bytes read by matmuls since the last reset
  hb_membw: { args: [i64, i32], returns: f64 }, // (buffer bytes, reps) -> best read bandwidth in bytes/s, -1 = no memory
  hb_huge_alloc: { args: [i64], returns: ptr }, // (bytes) -> 2 MiB-aligned THP-advised mapping, null = refused (mem.c)
  hb_huge_free: { args: [ptr, ptr], returns: FFIType.void }, // its ArrayBuffer deallocator (ctx = bytes)
  // y [S,D] = x / sqrt(mean(x²)+eps) ⊙ w
  hb_rmsnorm: { args: [ptr, ptr, ptr, i32, i32, f32], returns: FFIType.void },
  hb_add_rmsnorm: { args: [ptr, ptr, ptr, ptr, i32, i32, f32], returns: FFIType.void }, // x += a; y = RMS(x)·w
  // y [S,D] = (x-mean)/sqrt(var+eps) ⊙ w + b
  hb_layernorm: { args: [ptr, ptr, ptr, ptr, i32, i32, f32], returns: FFIType.void },
  hb_swiglu: { args: [ptr, ptr, ptr, i32], returns: FFIType.void }, // out[n] = silu(g)·u (large n on the pool)
  hb_expm: { args: [ptr, i32, FFIType.f32], returns: FFIType.void }, // x[n] <- e^(x − m) (f32, one polynomial)
  hb_maxf: { args: [ptr, i32], returns: f32 }, // max of x[n] as a forward scan with > finds it (softmax; tests)
  hb_argmaxf: { args: [ptr, i32], returns: i32 }, // that scan's index (greedy decoding)
  hb_sort_u64: { args: [ptr, ptr, i32], returns: FFIType.void }, // (keys [n], tmp [n], n): keys ascending as u64
  hb_add: { args: [ptr, ptr, i32], returns: FFIType.void }, // y[n] += x
  hb_axpy: { args: [ptr, f32, ptr, i32], returns: FFIType.void }, // y[n] += a·x
  // interleaved RoPE in place: x[s*rowStride + v*vecStride + 2j, 2j+1], j < dr/2, angle pos[s]·theta^(-2j/dr)
  hb_rope: { args: [ptr, i32, i32, i32, i32, i32, ptr, f64], returns: FFIType.void },
  hb_convert: { args: [i32, ptr, ptr, i64], returns: FFIType.void }, // (Conv, src, dst f32, n)
  // W [O,I] f32 -> packed q + scales (formats.md fmt 1-4); returns 0 or -1 for a bad fmt/gs
  hb_quantize: { args: [i32, ptr, i32, i32, i32, ptr, ptr], returns: i32 },
  hb_pread: { args: [i32, ptr, i64, i64], returns: i64 }, // (fd, buf, len, off) -> bytes or -errno
  // attention core, parallel over (s,h): see ffi/attn.c for the stride contract
  hb_attn: {
    args: [i32, i32, i32, i32, ptr, i32, i32, ptr, i32, i32, ptr, i32, i32, ptr, ptr, i32, f32, ptr, i32, i32],
    returns: FFIType.void,
  },
  // hb_attn over segments (own keys/values each) in one job: (nseg, desc f64[4·nseg]: r0, n, k addr, v addr,
  // H, dk, dv, q, qRow, qHead, kRow, kHead, vRow, vHead, sel, nsel, selRow, scale, out, oRow, oHead)
  hb_attn_segs: {
    args: [i32, ptr, i32, i32, i32, ptr, i32, i32, i32, i32, i32, i32, ptr, ptr, i32, f32, ptr, i32, i32, i32], // (…, HB_KV_* format)
    returns: FFIType.void,
  },
  // I[s,t] = Σ_h w[s,h]·ReLU(scale·qI[s,h]·kI[t]) for t < nk[s]
  hb_index_scores: { args: [i32, i32, i32, ptr, ptr, ptr, ptr, ptr, i32, f32], returns: FFIType.void },
  // fast mode over int8 keys: (kI, hd, t0, t1, k8, dk) quantizes key rows; scores as above from (k8, dk); _ref:
  // the scalar kernel whatever the level (tests); ok(hd): 1 when the int8 kernel runs here (AVX-512 VNNI)
  hb_ik_quant: { args: [ptr, i32, i32, i32, ptr, ptr], returns: FFIType.void },
  hb_index_scores_q8: { args: [i32, i32, i32, ptr, ptr, ptr, ptr, ptr, ptr, i32, f32], returns: FFIType.void },
  hb_index_scores_q8_ref: { args: [i32, i32, i32, ptr, ptr, ptr, ptr, ptr, ptr, i32, f32], returns: FFIType.void },
  hb_index_q8_ok: { args: [i32], returns: i32 },
  // DSA selection with the spec's tie rule; sel rows ascending
  hb_dsa_select: { args: [i32, ptr, i32, ptr, i32, ptr, ptr], returns: FFIType.void },
  // ---- expert streaming I/O pool (ffi/iopool.c; wrappers in src/engine/experts/io.ts) ----
  hb_io_start: { args: [i32], returns: i32 }, // (threads; 0 = HB_IO_THREADS or 8) -> threads
  // (n, fds i32[n], offs i64[n], lens i64[n], needs i64[n], base, bufoffs i64[n], kind 0 read|1 touch) -> handle or -errno
  hb_io_submit: { args: [i32, ptr, ptr, ptr, ptr, ptr, ptr, i32], returns: i64 },
  hb_io_poll: { args: [i64], returns: i32 }, // 1 done, 0 pending, -ESTALE
  hb_io_wait: { args: [i64], returns: i64 }, // bytes or -errno (-10000 short read); frees the handle
  hb_io_cancel: { args: [i64], returns: i32 },
  hb_io_stats: { args: [ptr], returns: FFIType.void }, // f64[8]: busy s, bytes, chunks, jobs, errors, in flight, threads, queued
  hb_io_fail: { args: [i64, i32], returns: i32 }, // fault injector: the nth chunk read from now fails with errno (0 short)
  hb_io_open: { args: [ptr, i32], returns: i32 }, // (NUL-terminated path, direct) -> fd or -errno
  hb_io_close: { args: [i32], returns: i32 },
  hb_io_fadvise: { args: [i32, i64, i64, i32], returns: i32 }, // advice 4 = DONTNEED
  hb_io_mmap: { args: [i32, i64], returns: ptr }, // read-only shared mapping or null
  hb_io_munmap: { args: [ptr, i64], returns: i32 },
  hb_io_madvise: { args: [ptr, i64, i32], returns: i32 }, // 3 WILLNEED, 4 DONTNEED
  hb_io_blksize: { args: [i32], returns: i64 },
  // ---- attention with softmax statistics (ffi/attn_stats.c; used by src/device/ for the KV split) ----
  // hb_attn's 20 arguments + stats f32 [S·H, 2] = (row max m, Σ exp(score − m)); _ref = scalar kernels
  hb_attn_stats: {
    args: [i32, i32, i32, i32, ptr, i32, i32, ptr, i32, i32, ptr, i32, i32, ptr, ptr, i32, f32, ptr, i32, i32, ptr],
    returns: FFIType.void,
  },
  hb_attn_stats_ref: {
    args: [i32, i32, i32, i32, ptr, i32, i32, ptr, i32, i32, ptr, i32, i32, ptr, ptr, i32, f32, ptr, i32, i32, ptr],
    returns: FFIType.void,
  },
} as const;

type Lib = ReturnType<typeof dlopen<typeof symbols>>["symbols"];
let lib: Lib | null = null;

/** Load (building first if needed) and start the pool. Idempotent. */
export function hb(): Lib {
  if (lib) return lib;
  const path = ensureNative();
  lib = dlopen(path, symbols).symbols;
  const n = Number(process.env.HB_THREADS ?? 0);
  lib.hb_init(Number.isFinite(n) ? n : 0);
  return lib;
}
/** The pool's width (ffi/pool_width.h): how many of its threads jobs admit now, how many jobs ran with fewer than all,
 *  and how often it dropped a thread because parallel jobs stopped paying (another process on the cores) */
export function poolWidth(): { width: number; narrowed: number; drops: number } {
  const o = new Float64Array(3);
  hb().hb_pool_stats(o);
  return { width: o[0], narrowed: o[1], drops: o[2] };
}
/** what the pool did since `before` (a poolWidth()), as the bench reports carry it */
export function poolSince(before: ReturnType<typeof poolWidth>): { pool_narrowed: number; pool_drops: number } {
  const now = poolWidth();
  return { pool_narrowed: now.narrowed - before.narrowed, pool_drops: now.drops - before.drops };
}
/** a report's words for that, where the pool narrowed (null: it did not) */
export const poolNote = (p: { pool_narrowed: number; pool_drops: number }): string | null =>
  p.pool_drops > 0 ? `${p.pool_narrowed} jobs ran on fewer threads (${p.pool_drops} drops): the cores were busy with other work` : null;

type F32 = Float32Array;
type Weight = Float32Array | Uint16Array | Uint8Array;

/** W [O,I] · x [S,I] -> y [S,O] (exact: f32 activations) */
export function matmul(fmt: FmtCode, W: Weight, scales: F32 | null, gs: number, O: number, I: number, x: F32, S: number, y: F32) {
  hb().hb_matmul(fmt, W, scales, gs, O, I, x, S, y);
}
/** W [O,I] · x [S,I] -> y [S,O] in fast mode (int8 activations for quantized W; exact for float W) */
export function matmulQ8(fmt: FmtCode, W: Weight, scales: F32 | null, gs: number, O: number, I: number, x: F32, S: number, y: F32) {
  hb().hb_matmul_q8(fmt, W, scales, gs, O, I, x, S, y);
}
/** One W_h of `mlaHeads`: rows [r0 + h·rstride, +O) of W [*, I] (fmt, scales, gs as in `matmul`); cols: an int8 W's
 *  column-quad copy (ffi/matmul_q8.h: cols[((r >> 4)·(I/4) + q)·64 + (r & 15)·4 + t] = W[r, 4q + t] ^ 0x80), read by
 *  fast mode where the SIMD level has that kernel (the same bits as the rows) */
export interface HeadsW { fmt: FmtCode; W: Weight; scales: F32 | null; gs: number; O: number; I: number; r0: number; rstride: number; cols?: Uint8Array }
/** int8 rows W [R, I] as column quads (HeadsW.cols), 16 rows at a time: out[((r >> 4)·(I/4) + q)·64 + (r & 15)·4 + t] =
 *  W[r, 4q + t] ^ 0x80 — one block of 16 rows after another, each its quads in order (a sequential stream) */
export function columnQuads(W: Uint8Array, R: number, I: number, out = new Uint8Array(R * I)): Uint8Array {
  const nq = I >> 2;
  for (let r = 0; r < R; r++)
    for (let i = 0; i < I; i++) out[((r >> 4) * nq + (i >> 2)) * 64 + (r & 15) * 4 + (i & 3)] = W[r * I + i] ^ 0x80;
  return out;
}

/** Strided per-(row, head) vectors: element i of (s, h) at a[s·row + h·head + i]. */
export interface Strided { a: F32; row: number; head: number }
/**
 * For s < S, h < H: y(s,h) [O] = W_h · (x(s,h) ⊙ xmul[h·I ..]) (no multiply when xmul is null), then
 * y(s,h)[O + t] = tail(s,h)[t] for t < nt (tail uses x's strides). One call, parallel over (s, h).
 */
export function mlaHeads(exact: boolean, S: number, H: number, w: HeadsW, x: Strided, xmul: F32 | null, y: Strided,
  tail: F32 | null, nt: number) {
  hb().hb_mla_heads(exact ? 1 : 0, S, H, w.fmt, w.W, w.scales, w.gs, w.O, w.I, w.r0, w.rstride, x.a, x.row, x.head,
    xmul, y.a, y.row, y.head, tail, nt, w.cols ?? null);
}
/** doubles per matrix in hb_matmul_many's descriptor (ffi/matmul_many.c HB_MANY_DESC) */
export const MANY_DESC = 10;
/** One matrix of `matmulMany`; x/S: its own activations [S, I] instead of the shared ones. */
export interface ManyMat { fmt: FmtCode; data: Weight; scales: F32 | null; gs: number; O: number; x?: F32; S?: number }
/**
 * ys[k] [S_k, O_k] = W_k · x_k for up to 4096 matrices in one call, x_k [S_k, I] = the shared x [S, I]
 * unless the matrix brings its own. Fast mode quantizes each distinct activation block once.
 */
export function matmulMany(exact: boolean, ws: readonly ManyMat[], ys: readonly F32[], I: number, x: F32 | null, S: number) {
  if (ys.length !== ws.length) throw new Error(`matmulMany: ${ws.length} matrices and ${ys.length} outputs`);
  const b = many.reset();
  ws.forEach((w, k) => {
    const xk = w.x ?? x;
    if (!xk) throw new Error(`matmulMany: matrix ${k} has no input`);
    b.add(w, I, xk, 0, w.S ?? S, ys[k], 0);
  });
  b.run(exact, I);
}
const addr = (a: F32 | Weight) => (a.byteLength > 0 ? ptr_(a) : 0);
/** An address that stays valid while `a` lives, to keep across calls: a small typed array's elements may live inline
 *  in the engine's heap until its ArrayBuffer is first asked for, when they move to the buffer; ask first. */
function stableAddr(a: F32 | Weight | Int32Array): number {
  if (a.byteLength === 0) return 0;
  void a.buffer;
  return ptr_(a);
}
/** doubles of a matrix's constant part in a ManyBuilder entry: fmt, gs, O, address of W, of its scales */
export const MANY_W = 5;
export function packMat(w: Omit<ManyMat, "x" | "S">, out: Float64Array, at: number): void {
  out[at] = w.fmt; out[at + 1] = w.gs; out[at + 2] = w.O; out[at + 3] = stableAddr(w.data); out[at + 4] = w.scales ? stableAddr(w.scales) : 0;
}

/** each matrix's packMat, made once (a decode step adds ~200 dense matrices: their buffers' addresses were looked up
 *  again at every call); redone when the object's weights, scales or shape change */
const packedMats = new WeakMap<object, { p: Float64Array; data: unknown; scales: unknown }>();

/**
 * matmulMany's descriptor written in place, one matrix at a time, for callers that give each matrix its own
 * rows of one activation buffer and one output buffer (the experts): no per-matrix objects or views.
 * Reusable: reset(), add()…, run(). State: the descriptor (grown as needed) and its count.
 */
export class ManyBuilder {
  private desc = new Float64Array(MANY_DESC * 64);
  private n = 0;
  // the last x, y and rows buffers and their (stable) addresses: the adds of one call share them
  private bufs: (F32 | Int32Array | null)[] = [null, null, null];
  private addrs = [0, 0, 0];
  private at(i: number, a: F32 | Int32Array): number {
    if (this.bufs[i] !== a) { this.bufs[i] = a; this.addrs[i] = stableAddr(a); }
    return this.addrs[i];
  }
  reset(): this { this.n = 0; return this; }
  /**
   * y[yOff, yOff + S·O) = W [O, I] · x_rows, x_rows = x[xOff, xOff + S·I), or with `rows`: the rows
   * rows[rOff + s] (s < S) of x [*, I] (no copy in fast mode: they are quantized where they are)
   */
  add(w: Omit<ManyMat, "x" | "S">, I: number, x: F32, xOff: number, S: number, y: F32, yOff: number, rows?: Int32Array, rOff = 0): void {
    let e = packedMats.get(w);
    if (!e || e.data !== w.data || e.scales !== w.scales || e.p[0] !== w.fmt || e.p[1] !== w.gs || e.p[2] !== w.O) {
      e = { p: new Float64Array(MANY_W), data: w.data, scales: w.scales };
      packMat(w, e.p, 0);
      packedMats.set(w, e);
    }
    const O = w.O;
    if (S <= 0 || xOff < 0 || yOff < 0 || yOff + S * O > y.length || (rows ? rOff < 0 || rOff + S > rows.length : xOff + S * I > x.length))
      throw new Error(`ManyBuilder: ${S} rows of ${I} at ${xOff} (of ${x.length}) -> ${O} at ${yOff} (of ${y.length})`);
    if (rows) for (let s = 0; s < S; s++) {
      const r = rows[rOff + s];
      if (!(r >= 0 && xOff + (r + 1) * I <= x.length)) throw new Error(`ManyBuilder: row ${r} outside the ${x.length / I} rows of x`);
    }
    if (this.n === 4096) throw new Error("ManyBuilder: more than 4096 matrices");
    if (this.desc.length < MANY_DESC * (this.n + 1)) { const d = new Float64Array(2 * this.desc.length); d.set(this.desc); this.desc = d; }
    const d = this.desc, k = MANY_DESC * this.n++;
    for (let i = 0; i < MANY_W; i++) d[k + i] = e.p[i];
    d[k + 5] = this.at(0, y) + 4 * yOff; d[k + 6] = this.at(1, x) + 4 * xOff; d[k + 7] = S;
    d[k + 8] = rows ? this.at(2, rows) + 4 * rOff : 0; d[k + 9] = 0;
  }
  /** every matrix added since reset(), in one call (rows of I elements) */
  run(exact: boolean, I: number): void {
    if (this.n > 0) hb().hb_matmul_many(exact ? 1 : 0, this.n, this.desc, I);
  }
  /**
   * MLA's queries in one call (ffi/mla.c hb_mla_q): cq [S, qr] = RMS(qa; normW, eps), then every matrix added since
   * reset() (rows of qr elements: q_b ‖ indexer wq_b on cq), then RoPE of the last dr of each head of q [S, H·(dn+dr)]
   * at pos, and with qI of the first dr of each of its nh heads of hd — rmsnorm, run and ropes in one call.
   */
  runMlaQ(exact: boolean, qa: F32, normW: F32, cq: F32, S: number, qr: number, eps: number, q: F32, H: number, dn: number,
    dr: number, pos: Int32Array, theta: number, qI: F32 | null = null, nh = 0, hd = 0): void {
    if (qa.length < S * qr || cq.length < S * qr || normW.length < qr || q.length < S * H * (dn + dr) || pos.length < S ||
      (qI && (qI.length < S * nh * hd || hd < dr)))
      throw new Error("runMlaQ: buffers too small");
    hb().hb_mla_q(exact ? 1 : 0, this.n, this.desc, qa, normW, cq, S, qr, eps, q, H, dn, dr, pos, theta, qI, nh, hd);
  }
  /** `mlaKv` preceded in the same call by every matrix added since reset() (rows of I elements: the layer's projections
   *  of h, which write a and kI) */
  runMlaKv(exact: boolean, I: number, segs: readonly KvSeg[], nseg: number, a: F32, S: number, kvr: number, dr: number, lat: F32,
    normW: F32, eps: number, pos: Int32Array, theta: number, keys: IdxKeys | null): void {
    mlaKv(segs, nseg, a, S, kvr, dr, lat, normW, eps, pos, theta, keys, exact, this.n, this.desc, I);
  }
  /** `moeLayer` preceded in the same call by every matrix added since reset() (rows of I elements: the layer's router ‖
   *  shared gate ‖ up, which write b.z) */
  runMoeLayer(exact: boolean, I: number, S: number, p: Float64Array, b: MoeLayerBufs, x: F32, y: F32): number {
    return moeLayer(exact, S, p, b, x, y, this.n, this.desc, I);
  }
}
const many = new ManyBuilder(); // matmulMany's descriptor
/** Weight bytes the matmul kernels have read since the last reset (reset: start counting again from 0). */
export const weightBytes = (reset = false): number => Number(hb().hb_wbytes(reset ? 1 : 0));
/** Best memory read bandwidth (bytes/s) over `reps` reads of a `bytes` buffer with every pool thread. */
export const memBandwidth = (bytes: number, reps: number): number => hb().hb_membw(bytes, reps);
/** the SIMD level in use (Simd's numbers: levels are ordered, so `simdLevel() >= Simd.avx512vnni` holds on AMX too) */
export const simdLevel = (): number => Simd[String(hb().hb_simd_name()) as keyof typeof Simd];
export const rmsnorm = (x: F32, w: F32, y: F32, S: number, D: number, eps: number) => hb().hb_rmsnorm(x, w, y, S, D, eps);
/** x [S, D] += a, then y = rmsnorm(x; w) (one call, the same bits as add then rmsnorm) */
export function addRmsnorm(x: F32, a: F32, w: F32, y: F32, S: number, D: number, eps: number): void {
  if (x.length < S * D || a.length < S * D || y.length < S * D || w.length < D) throw new Error(`addRmsnorm: buffers too small for ${S} rows of ${D}`);
  hb().hb_add_rmsnorm(x, a, w, y, S, D, eps);
}
export const layernorm = (x: F32, w: F32, b: F32, y: F32, S: number, D: number, eps: number) =>
  hb().hb_layernorm(x, w, b, y, S, D, eps);
/** x[n] <- e^(x − m) in f32 (the softmax numerators' exp: 0 below e^-87.3, NaN passes through) */
export const expm = (x: F32, n: number, m: number) => hb().hb_expm(x, n, m);
export const maxf = (x: F32, n: number): number => hb().hb_maxf(x, n);
/** the index of maxf's value in x[0..n) as the forward scan finds it (0 when x[0] is NaN) */
export const argmaxf = (x: F32, n: number): number => {
  if (n < 1 || n > x.length) throw new RangeError(`argmaxf: ${n} elements of ${x.length}`);
  return hb().hb_argmaxf(x, n);
};
/** keys[0..n) ascending by their bit patterns (for non-negative doubles: by value), tmp [n] scratch (sort.c) */
export const sortKeys = (keys: Float64Array, tmp: Float64Array, n: number): void => {
  if (n < 0 || n > keys.length || n > tmp.length) throw new RangeError(`sortKeys: ${n} keys of ${keys.length} (scratch ${tmp.length})`);
  hb().hb_sort_u64(keys, tmp, n);
};
export const swiglu = (g: F32, u: F32, out: F32, n: number) => hb().hb_swiglu(g, u, out, n);
export const add = (y: F32, x: F32, n: number) => hb().hb_add(y, x, n);
export const axpy = (y: F32, a: number, x: F32, n: number) => hb().hb_axpy(y, a, x, n);
/** out[j] = x[rows[j]] for j < n (rows of D floats) */
export const gatherRows = (x: F32, D: number, rows: Int32Array, n: number, out: F32) => hb().hb_gather_rows(x, D, rows, n, out);
/** dst[s·dst.row + h·dst.head + i] = src[s·src.row + h·src.head + i] for s < S, h < H, i < n (src.head 0: shared) */
export const copyHeads = (dst: Strided, src: Strided, S: number, H: number, n: number) =>
  hb().hb_copy_heads(dst.a, dst.row, dst.head, src.a, src.row, src.head, S, H, n);
let kvDesc = new Float64Array(3 * 8);
/** How KV cache rows are stored (ffi/hb.h HB_KV_*): f32; IEEE halves (rounded to nearest even, saturated at ±65504);
 *  int8 in blocks of 32 values, each with an f32 scale (amax/127) after the row's bytes. */
export type KvDtype = "f32" | "f16" | "q8";
export const KV_DTYPES: readonly KvDtype[] = ["f32", "f16", "q8"];
/** a cache array of each dtype (Float32Array, Uint16Array, Uint8Array) */
export type KvRows = Float32Array | Uint16Array | Uint8Array;
const KV_CODE = { f32: 0, f16: 1, q8: 2 } as const;
export const kvDtypeOf = (a: KvRows): KvDtype => (a instanceof Float32Array ? "f32" : a instanceof Uint16Array ? "f16" : "q8");
/** elements of a cache array per row of W values */
export const kvRowElems = (t: KvDtype, W: number) => (t === "q8" ? W + 4 * Math.ceil(W / 32) : W);
/** One segment of `kvWrite`: its cache [*, kvr + dr values] (KvDtype), the first cache row to write (pos0), batch rows
 *  [r0, r0+n). */
export interface KvSeg { cache: KvRows; pos0: number; r0: number; n: number; /** mlaKv with keys: its indexer keys [*, hd] */ ik?: F32 | null }
/** For each segment, cache row pos0 + r = [lat row r0+r (kvr) ‖ kpe row r0+r (dr, rows kpeRow apart)], r < n: one call
 *  (the segments' caches all of one dtype) */
export function kvWrite(segs: readonly KvSeg[], lat: F32, kvr: number, kpe: F32, kpeRow: number, dr: number) {
  const t = kvDescOf(segs, segs.length, kvr + dr);
  hb().hb_kv_write(segs.length, kvDesc, lat, kvr, kpe, kpeRow, dr, KV_CODE[t]);
}
/** kvDesc for segs[0..n) (rows of W values); their one dtype */
function kvDescOf(segs: readonly KvSeg[], n: number, W: number): KvDtype {
  if (kvDesc.length < 3 * n) kvDesc = new Float64Array(6 * n);
  const t = n > 0 ? kvDtypeOf(segs[0].cache) : "f32", row = kvRowElems(t, W);
  for (let i = 0; i < n; i++) {
    const g = segs[i];
    if (kvDtypeOf(g.cache) !== t) throw new Error("kvWrite: caches of several dtypes in one call");
    if ((g.pos0 + g.n) * row > g.cache.length) throw new Error(`kvWrite: rows [${g.pos0}, ${g.pos0 + g.n}) outside the cache of ${g.cache.length / row}`);
    kvDesc[3 * i] = ptr_(g.cache) + g.cache.BYTES_PER_ELEMENT * g.pos0 * row; kvDesc[3 * i + 1] = g.r0; kvDesc[3 * i + 2] = g.n;
  }
  return t;
}
/** doubles per expert in moeUp / moeDown's table (ffi/moe.c HB_MOE_TAB): its gate, up and down as `packMat` writes
 *  them, then down.I */
export const MOE_TAB = 3 * MANY_W + 1;
/** A MoE layer's routed experts, rows grouped by expert as `moeRoute` leaves them (off [E+1], rows [n]), from tab
 *  [E, MOE_TAB]: hg / hu [n, F] = each expert of uni [nu]'s gate / up on its rows of x [*, D] (one batched call) */
export const moeUp = (exact: boolean, nu: number, uni: Int32Array, off: Int32Array, rows: Int32Array, tab: Float64Array,
  D: number, F: number, x: F32, hg: F32, hu: F32) => hb().hb_moe_up(exact ? 1 : 0, nu, uni, off, rows, tab, D, F, x, hg, hu);
/** then hg <- swiglu(hg, hu); ye [n, D] = each expert's down on its rows of hg (with shd, the shared expert's down
 *  packed: sg <- swiglu(sg, su) [S, F] and sy [S, D] = its down, in the same batch); y [S, D] = Σ gates · ye by row
 *  (`scatterAxpy` onto zeros), + sy with shd */
export const moeDown = (exact: boolean, nu: number, uni: Int32Array, off: Int32Array, rows: Int32Array, gates: F32,
  tab: Float64Array, D: number, F: number, n: number, hg: F32, hu: F32, ye: F32, S: number, y: F32,
  shd: Float64Array | null, sg: F32, su: F32, sy: F32) =>
  hb().hb_moe_down(exact ? 1 : 0, nu, uni, off, rows, gates, tab, D, F, n, hg, hu, ye, S, y, shd, sg, su, sy);
/** doubles of moeLayer's parameters (ffi/hb.h HB_MOE_P): E, K, n_group, topk_group, norm (1 / 0), scale, D, F */
export const MOE_P = 8;
/** The buffers of `moeLayer`: moeRouteGrouped's (z on), moeUp / moeDown's, and the liveness of each expert's table row */
export interface MoeLayerBufs {
  z: F32; bias: F32 | null; experts: Int32Array; gates: F32; off: Int32Array; rows: Int32Array; rgates: F32; uni: Int32Array;
  cnt: Int32Array; ver: Int32Array; row: Int32Array; tab: Float64Array; hg: F32; hu: F32; ye: F32;
  shd: Float64Array | null; sg: F32; su: F32; sy: F32;
}
/**
 * A MoE layer in one call (ffi/moe.c hb_moe_layer): S rows of router logits b.z routed as `moeRouteGrouped`, then,
 * when every chosen expert e is live (b.ver[e] ≠ 0 and b.row[e] = b.ver[e]: its row of b.tab packed from the
 * weights held now), `moeUp` and `moeDown` into y [S, D]. Returns the union's size nu when y was computed, else ~nu
 * (negative: routed only, the caller brings the experts in). npre > 0: first, in the same call, hb_matmul_many of the
 * npre matrices of `pre` (rows of preI; ManyBuilder.runMoeLayer), which write b.z.
 */
export function moeLayer(exact: boolean, S: number, p: Float64Array, b: MoeLayerBufs, x: F32, y: F32, npre = 0,
  pre: Float64Array | null = null, preI = 0): number {
  const E = p[0], K = p[1], D = p[6], F = p[7], n = S * K;
  if (p.length < MOE_P || b.z.length < S * E || (b.bias && b.bias.length < E) || b.experts.length < n || b.gates.length < n ||
    b.off.length < E + 1 || b.rows.length < n || b.rgates.length < n || b.uni.length < E || b.cnt.length < E ||
    b.ver.length < E || b.row.length < E || b.tab.length < E * MOE_TAB || b.hg.length < n * F || b.hu.length < n * F ||
    b.ye.length < n * D || x.length < S * D || y.length < S * D ||
    (b.shd && (b.shd.length < MANY_W || b.sg.length < S * F || b.su.length < S * F || b.sy.length < S * D)))
    throw new Error(`moeLayer: buffers too small for ${S} rows of ${E} experts, top ${K}, widths ${D} / ${F}`);
  const r = hb().hb_moe_layer(exact ? 1 : 0, npre, pre, preI, S, p, b.z, b.bias, b.experts, b.gates, b.off, b.rows, b.rgates, b.uni, b.cnt,
    b.ver, b.row, b.tab, x, b.hg, b.hu, b.ye, y, b.shd, b.sg, b.su, b.sy);
  if (r === -1) throw badRoute(E, K, p[2], p[3]);
  return r >= 0 ? r : ~(-2 - r);
}
/** The indexer's new keys for `mlaKv` (DSA full layers): kI [S, hd] = W_wk h, LayerNorm weights w / b and eps */
export interface IdxKeys { kI: F32; hd: number; w: F32; b: F32; eps: number }
let ikDesc = new Float64Array(48);
/** `kvWrite` of segs[0..nseg) preceded in the same call by lat [S, kvr] = RMS(a[:, :kvr]; normW, eps) (a copy) and
 *  RoPE of a[:, kvr:] [S, dr] in place at pos (MLA's cache rows from a = W_kva h [S, kvr + dr]); with keys, then
 *  keys.kI <- LayerNorm(kI) with its first dr roped at pos, row r0 + r of each segment into its ik at row pos0 + r.
 *  npre > 0: first, in the same call, hb_matmul_many of the npre matrices of `pre` (rows of preI; ManyBuilder.runMlaKv),
 *  which write a (and kI). */
export function mlaKv(segs: readonly KvSeg[], nseg: number, a: F32, S: number, kvr: number, dr: number, lat: F32, normW: F32,
  eps: number, pos: Int32Array, theta: number, keys: IdxKeys | null = null, exact = false, npre = 0, pre: Float64Array | null = null,
  preI = 0) {
  const t = kvDescOf(segs, nseg, kvr + dr);
  if (a.length < S * (kvr + dr) || lat.length < S * kvr || pos.length < S || normW.length < kvr) throw new Error("mlaKv: buffers too small");
  if (keys) {
    const hd = keys.hd;
    if (keys.kI.length < S * hd || keys.w.length < hd || keys.b.length < hd || dr > hd) throw new Error("mlaKv: indexer key buffers too small");
    if (ikDesc.length < 3 * nseg) ikDesc = new Float64Array(6 * nseg);
    for (let i = 0; i < nseg; i++) {
      const g = segs[i], ik = g.ik;
      if (!ik) throw new Error("mlaKv: a segment's cache holds no indexer keys");
      if ((g.pos0 + g.n) * hd > ik.length || g.r0 + g.n > S) throw new Error(`mlaKv: indexer key rows [${g.pos0}, ${g.pos0 + g.n}) outside its cache of ${ik.length / hd}`);
      ikDesc[3 * i] = ptr_(ik) + 4 * g.pos0 * hd; ikDesc[3 * i + 1] = g.r0; ikDesc[3 * i + 2] = g.n;
    }
  }
  hb().hb_mla_kv(exact ? 1 : 0, npre, pre, preI, nseg, kvDesc, a, S, kvr, dr, lat, normW, eps, pos, theta, KV_CODE[t], keys ? ikDesc : null, keys?.kI ?? null,
    keys?.hd ?? 0, keys?.w ?? null, keys?.b ?? null, keys?.eps ?? 0);
}
/** the packed HeadsW of `mlaAbsorbed` (fmt, gs, W, scales, cols addresses) */
export function packHeads(w: HeadsW): Float64Array {
  return Float64Array.of(w.fmt, w.gs, stableAddr(w.W), w.scales ? stableAddr(w.scales) : 0, w.cols ? stableAddr(w.cols) : 0);
}
/** One segment of `mlaAbsorbed`: batch rows [r0, r0+n), its cache rows (keys and values, [kvr + dr] each) */
export interface MlaSeg { r0: number; n: number; kv: KvRows }
let runsBuf = new Int32Array(16);
/**
 * A layer's absorbed attention in one call (ffi/mla.c hb_mla_absorbed) for the rows of segs[0..nseg) (batch order):
 * per run of consecutive rows qcat = [W_K,hᵀ (kmul ⊙ q_nope) ‖ q_pe] (mlaHeads with kt, packHeads), then attnSegs of
 * qcat against each segment's cache rows into o_lat [*, H·kvr], then o [*, H·dv] = W_V,h o_lat (vw: kv_b's heads,
 * packHeads). The same three calls as mlaHeads / attnSegs / mlaHeads: the same bits.
 */
export function mlaAbsorbed(exact: boolean, segs: readonly MlaSeg[], nseg: number, H: number, dn: number, dr: number, dv: number,
  kvr: number, kt: Float64Array, kmul: F32 | null, q: F32, qcat: F32, sel: Int32Array | null, nsel: Int32Array, topk: number,
  scale: number, olat: F32, vw: Float64Array, o: F32) {
  if (segDesc.length < 4 * nseg) segDesc = new Float64Array(8 * nseg);
  if (runsBuf.length < 2 * nseg) runsBuf = new Int32Array(4 * nseg);
  const t = nseg > 0 ? kvDtypeOf(segs[0].kv) : "f32";
  let nrun = 0, rows = 0;
  for (let i = 0; i < nseg; i++) {
    const g = segs[i];
    if (kvDtypeOf(g.kv) !== t) throw new Error("mlaAbsorbed: caches of several dtypes in one call");
    segDesc[4 * i] = g.r0; segDesc[4 * i + 1] = g.n; segDesc[4 * i + 2] = addr(g.kv); segDesc[4 * i + 3] = segDesc[4 * i + 2];
    if (nrun > 0 && runsBuf[2 * nrun - 2] + runsBuf[2 * nrun - 1] === g.r0) runsBuf[2 * nrun - 1] += g.n;
    else { runsBuf[2 * nrun] = g.r0; runsBuf[2 * nrun + 1] = g.n; nrun++; }
    rows = Math.max(rows, g.r0 + g.n);
  }
  if (q.length < rows * H * (dn + dr) || qcat.length < rows * H * (kvr + dr) || olat.length < rows * H * kvr || o.length < rows * H * dv || nsel.length < rows)
    throw new Error("mlaAbsorbed: buffers too small");
  hb().hb_mla_absorbed(exact ? 1 : 0, nrun, runsBuf, H, dn, dr, dv, kvr, kt, kmul, q, qcat, nseg, segDesc, sel, nsel, topk, scale,
    KV_CODE[t], olat, vw, o);
}
/** y[rows[j]] += gates[j] · ye[j] for j < n, each row exactly as `axpy` */
export const scatterAxpy = (y: F32, D: number, rows: Int32Array, gates: F32, ye: F32, n: number) => hb().hb_scatter_axpy(y, D, rows, gates, ye, n);
/** The router's choice for S rows (ffi/route.c, spec §3.4): z [S, E] -> experts / gates [S, K]. Returns 0. */
export function moeRoute(S: number, E: number, K: number, z: F32, bias: F32 | null, nGroup: number, topkGroup: number, norm: boolean,
  scale: number, experts: Int32Array, gates: F32): number {
  return routeRows(S, E, K, z, bias, nGroup, topkGroup, norm, scale, experts, gates, null, null, null, null, null);
}
/** `moeRoute`, and the pairs grouped by expert: off [E+1], rows / rgates [S·K] (ascending expert, rows ascending within),
 *  the union uni [E] (ascending) and its row counts cnt [E]; returns the union's size */
export function moeRouteGrouped(S: number, E: number, K: number, z: F32, bias: F32 | null, nGroup: number, topkGroup: number,
  norm: boolean, scale: number, experts: Int32Array, gates: F32, off: Int32Array, rows: Int32Array, rgates: F32, uni: Int32Array,
  cnt: Int32Array): number {
  if (off.length < E + 1 || rows.length < S * K || rgates.length < S * K || uni.length < E || cnt.length < E)
    throw new Error(`moeRoute: grouping buffers too small for ${S} rows of ${E} experts, top ${K}`);
  return routeRows(S, E, K, z, bias, nGroup, topkGroup, norm, scale, experts, gates, off, rows, rgates, uni, cnt);
}
/** hb_moe_route's -1 */
const badRoute = (E: number, K: number, nGroup: number, topkGroup: number) =>
  new Error(`moeRoute: bad sizes (E ${E}, K ${K}, n_group ${nGroup}, topk_group ${topkGroup})`);
function routeRows(S: number, E: number, K: number, z: F32, bias: F32 | null, nGroup: number, topkGroup: number, norm: boolean,
  scale: number, experts: Int32Array, gates: F32, off: Int32Array | null, rows: Int32Array | null, rgates: F32 | null,
  uni: Int32Array | null, cnt: Int32Array | null): number {
  if (z.length < S * E || experts.length < S * K || gates.length < S * K || (bias && bias.length < E))
    throw new Error(`moeRoute: buffers too small for ${S} rows of ${E} experts, top ${K}`);
  const n = hb().hb_moe_route(S, E, K, z, bias, nGroup, topkGroup, norm ? 1 : 0, scale, experts, gates, off, rows, rgates, uni, cnt);
  if (n < 0) throw badRoute(E, K, nGroup, topkGroup);
  return n;
}
/** interleaved RoPE in place over S rows × nvec vectors of width dr */
export function rope(x: F32, S: number, rowStride: number, nvec: number, vecStride: number, dr: number, pos: Int32Array, theta: number) {
  hb().hb_rope(x, S, rowStride, nvec, vecStride, dr, pos, theta);
}
export const convert = (kind: number, src: Uint8Array | Uint16Array, dst: F32, n: number) => hb().hb_convert(kind, src, dst, n);
/** f32 -> IEEE half (round to nearest even, saturated at ±65504: an f16 KV cache's writes) */
export const toF16 = (src: F32, dst: Uint16Array, n: number) => hb().hb_to_f16(src, dst, n);
export const pread = (fd: number, buf: Uint8Array, len: number, off: number): number =>
  Number(hb().hb_pread(fd, buf, len, off));

/** Strided view of one attention operand: base array, row stride and head stride (0 = shared by heads). */
export interface AttnOperand { a: F32; row: number; head: number }
/**
 * For each row s < S and head h < H: keys t_j = sel ? sel[s*selRow + j] : j, j < nsel[s];
 * p = softmax_j(scale · q[s,h]·k[t_j,h]);  out[s,h] = Σ_j p_j v[t_j,h].
 * q [.., dk], k [.., dk], v [.., dv], out [.., dv] addressed as base + s*row + h*head.
 */
export function attn(S: number, H: number, dk: number, dv: number, q: AttnOperand, k: AttnOperand, v: AttnOperand,
  sel: Int32Array | null, nsel: Int32Array, selRow: number, scale: number, out: AttnOperand) {
  hb().hb_attn(S, H, dk, dv, q.a, q.row, q.head, k.a, k.row, k.head, v.a, v.row, v.head, sel, nsel, selRow, scale,
    out.a, out.row, out.head);
}
let segDesc = new Float64Array(4 * 8);
/** One segment of `attnSegs`: rows [r0, r0+n) of q/sel/nsel/out against its own keys k and values v (an f16 / q8
 *  cache: the same rows for both, the absorbed form's). */
export interface AttnSeg { r0: number; n: number; k: KvRows; v: KvRows }
/**
 * `attn` for several segments in one call (one pool job): the q/sel/nsel/out operands are shared buffers
 * addressed by row (segment g uses rows r0..r0+n-1), keys and values are per segment with shared strides.
 * Every row equals `attn` of its segment alone, bit for bit.
 */
export function attnSegs(segs: readonly AttnSeg[], H: number, dk: number, dv: number, q: AttnOperand,
  k: { row: number; head: number }, v: { row: number; head: number }, sel: Int32Array | null, nsel: Int32Array,
  selRow: number, scale: number, out: AttnOperand) {
  if (segDesc.length < 4 * segs.length) segDesc = new Float64Array(8 * segs.length);
  const t = segs.length > 0 ? kvDtypeOf(segs[0].k) : "f32";
  segs.forEach((g, i) => {
    if (kvDtypeOf(g.k) !== t || (t !== "f32" && (g.v !== g.k || k.row !== v.row || k.head !== 0 || v.head !== 0)))
      throw new Error(`attnSegs: an ${t} cache must be every segment's keys and values (shared heads, one row stride)`);
    segDesc[4 * i] = g.r0; segDesc[4 * i + 1] = g.n; segDesc[4 * i + 2] = addr(g.k); segDesc[4 * i + 3] = addr(g.v);
  });
  hb().hb_attn_segs(segs.length, segDesc, H, dk, dv, q.a, q.row, q.head, k.row, k.head, v.row, v.head, sel, nsel,
    selRow, scale, out.a, out.row, out.head, KV_CODE[t]);
}
/** qI [S, nh*hd], w [S, nh], kI [T, hd], nk [S] -> out [S, outRow] (t < nk[s] written) */
export function indexScores(S: number, nh: number, hd: number, qI: F32, w: F32, kI: F32, nk: Int32Array, out: F32, outRow: number, scale: number) {
  hb().hb_index_scores(S, nh, hd, qI, w, kI, nk, out, outRow, scale);
}
/** Indexer keys in int8 for fast mode (ffi/dsa.h): k8 [⌈T/16⌉·16·hd] in blocks of 16 keys, dk [T]. */
export interface IkQ8 { k8: Uint8Array; dk: F32 }
/** key rows [t0, t1) of kI [*, hd] -> q (the rows' bytes and scales) */
export const ikQuant = (kI: F32, hd: number, t0: number, t1: number, q: IkQ8) => hb().hb_ik_quant(kI, hd, t0, t1, q.k8, q.dk);
/** `indexScores` over int8 keys (the queries quantized per head inside); needs hd % 4 = 0 */
export function indexScoresQ8(S: number, nh: number, hd: number, qI: F32, w: F32, q: IkQ8, nk: Int32Array, out: F32, outRow: number, scale: number) {
  hb().hb_index_scores_q8(S, nh, hd, qI, w, q.k8, q.dk, nk, out, outRow, scale);
}
/** does the int8 indexer have its kernel at this SIMD level (else the f32 one is faster)? */
export const indexQ8Ok = (hd: number): boolean => hb().hb_index_q8_ok(hd) === 1;
/** scores [S, scoreRow], nk [S] -> sel [S, topk] ascending, nsel [S] = min(nk, topk) */
export function dsaSelect(S: number, scores: F32, scoreRow: number, nk: Int32Array, topk: number, sel: Int32Array, nsel: Int32Array) {
  hb().hb_dsa_select(S, scores, scoreRow, nk, topk, sel, nsel);
}
