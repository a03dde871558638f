// The FFNs (spec §3.4): the dense SwiGLU MLP, and the MoE with the sigmoid router (bias only for choosing, optional
// group-limited routing, norm_topk_prob, routed_scaling_factor: ffi/route.c; opt-in quality policies: quality.ts),
// batch-union expert execution (each chosen expert runs once over all its rows) and the ungated shared expert.
// Reads x = st.xb [S, D], writes st.ao [S, D]. A streamed Moe (src/engine/experts/): see `routed`.
// State: routes, the rows grouped by expert, their gates and the union live in RunState; module-level: per layer a
// table of its experts' packed matrices (moeUp / moeDown's, and moeLayer's buffers when it streams), and the kept
// descriptors of the dense calls (MmCall).
import type { Config } from "../model/config.ts";
import type { ExpertBatch, Mlp, Moe } from "../model/weights.ts";
import { add, Fmt, gatherRows, MANY_W, MOE_P, MOE_TAB, moeDown, moeLayer, type MoeLayerBufs, moeRoute, moeRouteGrouped, moeUp, packMat,
  scatterAxpy, swiglu } from "../native/hb.ts";
import { mm, MmCall } from "./mat.ts";
import { groupRoutes, routePolicy } from "./quality.ts";
import type { RunState } from "./state.ts";

const gateUp = new WeakMap<Mlp, MmCall>(); // each dense MLP's gate ‖ up call, kept across steps
/** y [S,D] = W_down (silu(W_gate x) ⊙ W_up x) for S rows of x [S,D] */
export function mlp(st: RunState, w: Mlp, x: Float32Array, S: number, y: Float32Array): void {
  const F = w.gate.O;
  let c = gateUp.get(w);
  if (!c) gateUp.set(w, c = new MmCall());
  if (!c.fits(st, x, S)) c.set(st, [w.gate, w.up], x, S, [st.hg, st.hu]);
  c.run(st.exact); // one call: x quantized once in fast mode
  swiglu(st.hg, st.hu, st.hg, S * F);
  mm(w.down, st.hg, S, y, st.exact);
}

export interface Route { experts: Int32Array; weights: Float32Array } // [K] each

/** Router for one row: z [E] logits -> the K chosen experts and their gates (spec §3.4; ffi/route.c). */
export function route(cfg: Config, z: Float32Array, bias: Float32Array | null, out: Route): void {
  moeRoute(1, cfg.n_routed_experts, cfg.num_experts_per_tok, z, bias, cfg.n_group, cfg.topk_group, cfg.norm_topk_prob,
    cfg.routed_scaling_factor, out.experts, out.weights);
}

const heads = new WeakMap<Moe, MmCall>(); // each layer's router ‖ shared gate ‖ up call, kept across steps
/**
 * MoE over S rows: y = Σ_k g_k E_k(x) + shared(x), each unique expert computed once for its rows.
 * The router is f32 (weights.ts), so it runs exactly in either mode, also inside the call that computes the
 * shared expert's gate ‖ up; the shared down joins the routed downs. The same kernels, so the same bits, in
 * fewer pool jobs.
 */
export function moe(cfg: Config, st: RunState, w: Moe, x: Float32Array, S: number, y: Float32Array): void {
  const sh = w.shared;
  if (w.router.fmt !== Fmt.f32) throw new Error(`${w.router.name}: the router must be f32, not format ${w.router.fmt}`);
  let c: MmCall | null = null;
  if (sh) {
    c = heads.get(w) ?? null;
    if (!c) heads.set(w, c = new MmCall());
    if (!c.fits(st, x, S)) c.set(st, [w.router, sh.gate, sh.up], x, S, [st.z, st.shg, st.shu]);
  }
  routed(cfg, st, w, x, S, y, sh, c);
}

/**
 * y [S,D] = Σ_k g_k E_k(x) over the routed experts (streamed through w.resolve when it has one), then, given
 * `shared` (its gate / up in st.shg / st.shu once `first` ran), + that expert's output (its down runs with the routed
 * ones when the widths match). first: the call that writes the router logits st.z (and the shared gate / up; run
 * inside moeLayer's call when that path is taken); null: the router alone, here.
 * A streamed Moe resolves the union first and hands experts out resident-first; outputs are still added in
 * ascending expert order, so results do not depend on the cache. When every chosen expert's weights are where its
 * table row was packed (w.ver), router and experts run in one call (moeLayer: the same calls, the same bits).
 */
export function routed(cfg: Config, st: RunState, w: Moe, x: Float32Array, S: number, y: Float32Array,
  shared: Mlp | null = null, first: MmCall | null = null): void {
  const D = cfg.hidden_size, E = cfg.n_routed_experts, K = cfg.num_experts_per_tok;
  // (an opt-in quality policy, st.quality: fewer experts per row, quality.ts; absent: ffi/route.c's choice as trained)
  const q = st.quality, one = !q && !!w.ver && !!w.account;
  if (!first) mm(w.router, x, S, st.z, true); // [S, E], always exact (f32 router)
  else if (!one) first.run(st.exact);
  // route each row; its (row, gate) pairs grouped by expert (rows ascending within each) and the union, in one call
  const off = st.moff, mrows = st.mrows, mgates = st.mgates;
  let nu: number;
  if (q) nu = groupRoutes(S, E, routePolicy(cfg, q, S, st.z, w.bias, st.mexp, st.mgate, st.mkept), st.mexp, st.mgate, st.mkept,
    off, mrows, mgates, st.muni, st.mcnt);
  else if (one) {
    const t = tableOf(st, w), withShared = joinShared(t, shared) && shared!.down.O === D, b = layerBufs(cfg, st, w, t, withShared);
    const r = first ? first.builder.runMoeLayer(st.exact, D, S, t.p, b, x, y) : moeLayer(st.exact, S, t.p, b, x, y);
    if (r >= 0) {
      w.account!(st.muni, st.mcnt, r);
      if (shared && !withShared) sharedDown(st, shared, S, D, y, false);
      return;
    }
    nu = ~r;
  } else nu = moeRouteGrouped(S, E, K, st.z, w.bias, cfg.n_group, cfg.topk_group, cfg.norm_topk_prob, cfg.routed_scaling_factor,
    st.mexp, st.mgate, off, mrows, mgates, st.muni, st.mcnt);
  if (!w.resolve) {
    resident(st, w, null, nu, x, D, y, shared, S);
    return;
  }
  const union: number[] = new Array(nu), counts: number[] = new Array(nu);
  for (let u = 0; u < nu; u++) { union[u] = st.muni[u]; counts[u] = st.mcnt[u]; }
  const batch = w.resolve(union, counts);
  try {
    let ready = !!batch.ready;
    for (let u = 0; ready && u < nu; u++) ready = batch.ready!(union[u]);
    if (ready) { // all in memory: two kernel calls
      resident(st, w, batch, nu, x, D, y, shared, S);
      for (let u = 0; u < nu; u++) batch.release(union[u]);
    } else {
      y.fill(0, 0, S * D);
      const rows: Int32Array[] = new Array(E), gates: Float32Array[] = new Array(E); // views for the union only
      for (const e of union) { rows[e] = mrows.subarray(off[e], off[e + 1]); gates[e] = mgates.subarray(off[e], off[e + 1]); }
      streamed(st, w, batch, union, rows, gates, x, D, y);
      if (shared) sharedDown(st, shared, S, D, y, false);
    }
  } finally { batch.end(); }
}

/** y += W_down (silu(shg) ⊙ shu) of the shared expert (gate / up already in st.shg / st.shu); `ready`: the
 * down is already in st.ye. */
function sharedDown(st: RunState, sh: Mlp, S: number, D: number, y: Float32Array, ready: boolean): void {
  if (!ready) {
    swiglu(st.shg, st.shu, st.shg, S * sh.gate.O);
    mm(sh.down, st.shg, S, st.ye, st.exact);
  }
  add(y, st.ye, S * D);
}

/** a layer's experts for moeUp / moeDown: tab [E, MOE_TAB] (each expert's packMat'd gate, up, down, then down.I), the
 *  Mlp each row was packed from (a cache slot that takes another expert makes a new Mlp: repacked), their width F
 *  (checked as each is packed: every row has gate / up [F, D], down [D, F]; 0 before the first), the shared
 *  expert's down likewise; for moeLayer: row [E] (w.ver[e] as row e was last used from a batch), its parameters
 *  p [MOE_P] and buffers (bufs, made for the RunState of generation `gen`) */
interface Table {
  tab: Float64Array; from: (Mlp | null)[]; F: number; shd: Float64Array; shFrom: Mlp | null;
  row: Int32Array; p: Float64Array; bufs: MoeLayerBufs | null; gen: number;
}
const tables = new WeakMap<Moe, Table>();

function tableOf(st: RunState, w: Moe): Table {
  let t = tables.get(w);
  if (!t) {
    const E = st.moff.length - 1;
    t = { tab: new Float64Array(E * MOE_TAB), from: new Array<Mlp | null>(E).fill(null), F: 0, shd: new Float64Array(MANY_W), shFrom: null,
      row: new Int32Array(E), p: new Float64Array(MOE_P), bufs: null, gen: -1 };
    tables.set(w, t);
  }
  return t;
}

/** moeLayer's parameters and buffers for this layer and RunState (kept while st.gen and the width are theirs) */
function layerBufs(cfg: Config, st: RunState, w: Moe, t: Table, withShared: boolean): MoeLayerBufs {
  const p = t.p;
  if (!t.bufs || t.gen !== st.gen || p[7] !== t.F) {
    p[0] = cfg.n_routed_experts; p[1] = cfg.num_experts_per_tok; p[2] = cfg.n_group; p[3] = cfg.topk_group;
    p[4] = cfg.norm_topk_prob ? 1 : 0; p[5] = cfg.routed_scaling_factor; p[6] = cfg.hidden_size; p[7] = t.F;
    t.bufs = { z: st.z, bias: w.bias, experts: st.mexp, gates: st.mgate, off: st.moff, rows: st.mrows, rgates: st.mgates, uni: st.muni,
      cnt: st.mcnt, ver: w.ver!, row: t.row, tab: t.tab, hg: st.ehg, hu: st.ehu, ye: st.eye, shd: null, sg: st.shg, su: st.shu, sy: st.ye };
    t.gen = st.gen;
  }
  t.bufs.shd = withShared ? t.shd : null;
  return t.bufs;
}

/**
 * Every expert of the union (st.muni[0..nu), from `batch` or w.expert) at once, from the layer's table, in two calls
 * (ffi/moe.c): every gate ‖ up on its rows of x (by index, grouped by expert as st.mrows), one SwiGLU, every down —
 * the shared expert's too when its width is the routed ones' — then y [S, D] = Σ gate · out in st.mrows order
 * (ascending expert, rows ascending: the order of the per-expert path, whose results it equals bit for bit) + the
 * shared expert's output.
 */
function resident(st: RunState, w: Moe, batch: ExpertBatch | null, nu: number, x: Float32Array, D: number,
  y: Float32Array, shared: Mlp | null, S: number): void {
  const t = tableOf(st, w), uni = st.muni, ver = batch ? w.ver : undefined;
  for (let u = 0; u < nu; u++) {
    const e = uni[u];
    packRow(t, e, batch ? batch.get(e) : w.expert(e), D, ver);
  }
  const F = t.F, n = st.moff[st.moff.length - 1], withShared = joinShared(t, shared);
  if (x.length < S * D || y.length < S * D || st.ehg.length < n * F || st.ehu.length < n * F || st.eye.length < n * D ||
    (withShared && (shared!.down.O !== D || st.shg.length < S * F || st.ye.length < S * D)))
    throw new Error(`routed experts: buffers too small for ${S} rows, ${n} routes of width ${F}`);
  moeUp(st.exact, nu, uni, st.moff, st.mrows, t.tab, D, F, x, st.ehg, st.ehu);
  moeDown(st.exact, nu, uni, st.moff, st.mrows, st.mgates, t.tab, D, F, n, st.ehg, st.ehu, st.eye, S, y,
    withShared ? t.shd : null, st.shg, st.shu, st.ye);
  if (shared && !withShared) sharedDown(st, shared, S, D, y, false);
}

/** whether the shared expert's down joins the routed ones' call (its width theirs, t.F), packed into t.shd when it does */
function joinShared(t: Table, shared: Mlp | null): boolean {
  if (shared === null || t.F === 0 || shared.down.I !== t.F) return false;
  if (t.shFrom !== shared) { packMat(shared.down, t.shd, 0); t.shFrom = shared; }
  return true;
}

/** Row e of t from expert e's weights m (unless packed from m already), checked against the layer's shape; with ver
 *  (a streamed Moe's) the row is live for moeLayer while ver[e] stays (≠ 0: m is the cache's copy, which stays put). */
function packRow(t: Table, e: number, m: Mlp, D: number, ver: Int32Array | undefined): void {
  if (t.from[e] !== m) {
    const f = m.gate.O, tab = t.tab;
    if (m.gate.I !== D || m.up.O !== f || m.up.I !== D || m.down.O !== D || m.down.I !== f || (t.F !== 0 && f !== t.F))
      throw new Error(`${m.gate.name}: experts of one layer differ in shape`);
    packMat(m.gate, tab, e * MOE_TAB); packMat(m.up, tab, e * MOE_TAB + MANY_W); packMat(m.down, tab, e * MOE_TAB + 2 * MANY_W);
    tab[e * MOE_TAB + 3 * MANY_W] = f;
    t.from[e] = m; t.F = f;
  }
  if (ver) t.row[e] = ver[e];
}

/** ye [n,D] = E(x rows) for the n rows routed to one expert. */
function expertRows(st: RunState, w: Mlp, x: Float32Array, rows: Int32Array, D: number, ye: Float32Array): void {
  gatherRows(x, D, rows, rows.length, st.xe);
  mlp(st, w, st.xe, rows.length, ye);
}

/**
 * A streamed batch: experts computed in the batch's order (resident first, misses as they arrive),
 * their outputs added to y in ascending expert order all the same (outputs computed ahead of that
 * order wait in the batch's stage), so y is bit-identical whatever was cached.
 */
function streamed(st: RunState, w: Moe, batch: ExpertBatch, union: number[], rows: Int32Array[], gates: Float32Array[], x: Float32Array, D: number,
  y: Float32Array): void {
  const t = w.ver ? tableOf(st, w) : null;
  const ahead = new Set<number>();
  let need = 0;
  for (let c = 0, k = 0; k < batch.order.length; k++) {
    const e = batch.order[k];
    if (e === union[c]) { c++; while (c < union.length && ahead.has(union[c])) c++; }
    else { ahead.add(e); need += rows[e].length * D; }
  }
  const stage = need > 0 ? batch.stage(need) : st.ye;
  const at = new Map<number, number>();
  let next = 0, top = 0;
  for (const e of batch.order) {
    const inOrder = e === union[next];
    const out = inOrder ? st.ye : stage.subarray(top, top + rows[e].length * D);
    const m = batch.get(e);
    if (t && w.ver![e] !== 0) packRow(t, e, m, D, w.ver); // cached: moeLayer may run it next time
    expertRows(st, m, x, rows[e], D, out);
    batch.release(e);
    if (!inOrder) { at.set(e, top); top += rows[e].length * D; continue; }
    scatterAxpy(y, D, rows[e], gates[e], st.ye, rows[e].length);
    for (next++; next < union.length && at.has(union[next]); next++) {
      const u = union[next];
      scatterAxpy(y, D, rows[u], gates[u], stage.subarray(at.get(u)!), rows[u].length);
    }
  }
}
