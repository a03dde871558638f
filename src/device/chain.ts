// The device layer executor (Vulkan or WebGPU: backend.ts): runs layers [lo, hi) ⊆ [0, n) of the exact forward
// with the dense parts on the device and the routed experts on the CPU; each token crosses once per layer (xb
// down, routed y up). The host KVCache stays canonical: every new row is also written there. A lost device (real
// or HB_VK_FAULT=n) makes the forward re-run [lo, hi) on the CPU from its input rows; later forwards stay there.
// State: the device, its copies of the layers' weights, device activations, the mirror pool, the host half of the
// split, stats.
import type { Model } from "../engine/model.ts";
import type { Config } from "../model/config.ts";
import type { Moe } from "../model/weights.ts";
import type { RunState } from "../engine/state.ts";
import type { Segment } from "../engine/batch.ts";
import { keyMode, runLayers, type ForwardOpts } from "../engine/forward.ts";
import { Kernels, ropeTable } from "./kernels.ts";
import { recordCore, recordMlp, recordPost, recordPre } from "./frame.ts";
import { type DevLayer, freeLayer, layerFmts, uploadLayer } from "./devweights.ts";
import { DevState } from "./devstate.ts";
import { type MirrorSlot, MirrorPool, type SplitGeom } from "./mirror.ts";
import { type ChainOpts, type ChainStats, newStats, splitGeom, statsLine } from "./chainopts.ts";
import { HostPart } from "./split.ts";
import { routed } from "../engine/moe.ts";
import type { Api, Cmd, Gpu } from "./backend.ts";
import { DeviceLost, Vk } from "./vulkan/vk.ts";
import { Wgpu } from "./webgpu/webgpu.ts";

export { type ChainOpts, type ChainStats, splitGeom } from "./chainopts.ts";

/** Per layer: frame A1 (device) = [combine of the previous MoE layer: x += routed + shared] input norm, MLA (q / kv
 *  projections, new c_kv ‖ k_pe rows into the device KV mirror), DSA indexer + selection, attention core (absorbed
 *  form), o_proj, residual, post-attention norm (+ the MLP of a dense layer); host step = router + routed experts
 *  (src/engine/moe.ts `routed`; the model's last layer: only for the rows that get logits, as the CPU layer loop
 *  skips them); frame A2 (device) = shared expert, overlapping the host step (waited for after it: stats.a2Ms is
 *  what the host step did not hide).
 *  KV split (option kvBudgetRows / kvBudgetBytes, env HB_VK_KV_ROWS): each layer of a mirrored conversation keeps at
 *  most that many c_kv ‖ k_pe rows on the device, in blocks (residency.ts: the newest window and the blocks the DSA
 *  selections read most); when some key a row reads is only on the host, A1 is split: "pre" (through the selection)
 *  and "core" (attention over the resident blocks, with softmax statistics) are submitted back to back, the CPU
 *  attends over the other keys (split.ts) while "core" runs, and "post" merges the two partials through their
 *  statistics. Indexer keys stay whole on the device. */
export class DeviceChain {
  readonly n: number;
  readonly api: Api;
  lost = false;
  lostReason = "";
  readonly stats: ChainStats;
  private vk: Gpu | null;
  private k: Kernels;
  private layers: DevLayer[] = [];
  private ds: DevState;
  private pool: MirrorPool;
  private cmdA: Cmd;
  private cmdB: Cmd;
  private cmdC: Cmd;
  private host = new HostPart();
  readonly split: SplitGeom | null;

  private constructor(m: Model, vk: Gpu, o: ChainOpts) {
    const c = m.cfg, L = c.num_hidden_layers;
    this.n = Math.max(0, Math.min(L, o.layers ?? L));
    this.vk = vk;
    this.api = vk.api;
    this.k = new Kernels(vk);
    this.ds = new DevState(vk, c);
    const layers = Array.from({ length: this.n }, (_, i) => i), W = c.kv_lora_rank + c.qk_rope_head_dim;
    this.split = splitGeom(o, W);
    this.pool = new MirrorPool(vk, {
      layers, indexed: layers.map((i) => keyMode(m, i) === "full"), W, hd: c.index_head_dim, split: this.split,
    }, o.slots ?? 4);
    this.cmdA = vk.cmd();
    this.cmdB = vk.cmd();
    this.cmdC = vk.cmd();
    this.stats = newStats(this.n);
  }

  /** Open a device (or take `gpu`, then the chain's to close) and upload the dense weights of layers [0, layers).
   *  Throws VkError when impossible. */
  static open(m: Model, o: ChainOpts = {}, gpu?: Gpu): DeviceChain {
    const vk: Gpu = gpu ?? (o.api === "webgpu" ? Wgpu.open() : Vk.open(o.device));
    try {
      const ch = new DeviceChain(m, vk, o);
      for (let i = 0; i < ch.n; i++) ch.layers.push(uploadLayer(vk, m.cfg, m.w.layers[i], i, keyMode(m, i)));
      ch.k.warm(ch.layers.flatMap(layerFmts));
      const fault = o.fault ?? Number(process.env.HB_VK_FAULT ?? 0);
      if (Number.isInteger(fault) && fault > 0) vk.fault(fault);
      return ch;
    } catch (e) {
      vk.close();
      throw e;
    }
  }

  get device(): string { return this.vk?.info.name ?? "(closed)"; }
  get weightBytes(): number { return this.layers.reduce((t, l) => t + l.bytes, 0); }
  /** device bytes of the KV mirrors now allocated */
  get mirrorBytes(): number { return this.pool.bytes; }
  /** mirror slots now allocated (at most ChainOpts.slots between forwards) */
  get mirrorSlots(): number { return this.pool.slots.length; }

  /** The executor seam: same contract as forward.ts runLayers for layers [lo, hi) ⊆ [0, n), k included: the model's
   *  last layer runs its routed experts (the host step) only for rows st.keep[0..k); its device parts run for every row. */
  run(m: Model, st: RunState, segs: Segment[], S: number, lo: number, hi: number, opts: ForwardOpts, k = S): void {
    if (lo < 0 || hi > this.n || lo > hi) throw new RangeError(`chain runs layers [0, ${this.n}), asked [${lo}, ${hi})`);
    if (lo === hi) return;
    if (this.lost || !this.vk) { runLayers(m, st, segs, S, lo, hi, opts, k); return; }
    const xIn = st.x.slice(0, S * m.cfg.hidden_size);
    try {
      this.runDevice(m, st, segs, S, lo, hi, opts, k);
    } catch (e) {
      if (!(e instanceof DeviceLost)) throw e;
      this.markLost(e.message);
      st.x.set(xIn);
      runLayers(m, st, segs, S, lo, hi, opts, k); // same rows, same tokens: the CPU rewrites every KV row too
      this.stats.fallbacks++;
    }
  }

  private markLost(why: string): void {
    this.lost = true;
    this.lostReason = why;
    console.warn(`[${this.vk?.api ?? "device"}] device lost (${why}): continuing on the CPU`);
    this.release();
  }

  private release(): void {
    const vk = this.vk;
    if (!vk) return;
    this.vk = null;
    this.pool.free();
    this.ds.free();
    for (const l of this.layers) freeLayer(l);
    this.layers = [];
    vk.close();
  }

  close(): void { this.release(); }

  /** One line of stats: crossings per token, time blocked on the device vs in the routed experts per layer. */
  summary(): string { return statsLine(this.stats, `${this.api} ${this.device}`, this.lost, this.split); }

  private runDevice(m: Model, st: RunState, segs: Segment[], S: number, lo: number, hi: number, opts: ForwardOpts, kept: number): void {
    const cfg = m.cfg, k = this.k, D = cfg.hidden_size, dr = cfg.qk_rope_head_dim, W = cfg.kv_lora_rank + dr;
    const H = cfg.num_attention_heads, kvr = cfg.kv_lora_rank;
    const hd = cfg.index_head_dim, topk = Math.max(1, cfg.index_topk), st0 = this.stats;
    let T = 0;
    for (const g of segs) T = Math.max(T, g.pos0 + g.n);
    this.ds.ensure(S, T);
    const ds = this.ds, b = ds.b, up = ds.up, dn_ = ds.dn;

    // KV mirrors: upload the host rows each slot lacks below the step's first position (split: per layer,
    // the resident blocks' rows and the block tables)
    this.pool.trim();
    const busy = new Set<MirrorSlot>();
    const slots = segs.map((g) => {
      const s = this.pool.get(g.kv, busy);
      busy.add(s);
      const from = s.wm.sync(g.kv, g.pos0);
      s.ensure(g.pos0 + g.n);
      const before = s.uploadedBytes;
      s.upload(g.kv, from, g.pos0);
      if (s.split) s.prepare(g.kv, g.pos0, g.pos0 + g.n, from, lo, hi);
      st0.mirrorBytes += s.uploadedBytes - before;
      return s;
    });

    // inputs of the first frame
    up.x.write(0, st.x.subarray(0, S * D));
    up.cs.write(0, ropeTable(st.pos, S, dr, cfg.rope_theta));
    up.nk.write(0, st.nk.subarray(0, S));
    const needSel = keyMode(m, lo) === "shared";
    if (needSel) { up.sel.write(0, st.sel.subarray(0, S * topk)); up.nsel.write(0, st.nsel.subarray(0, S)); }
    st0.bytesUp += 4 * S * (D + dr + 1) + (needSel ? 4 * S * (topk + 1) : 0);

    const aRows = new Float32Array(S * W), kRows = new Float32Array(S * hd);
    let pending: { shared: boolean } | null = null;
    const combine = (c: Cmd) => {
      if (!pending) return;
      c.copy(up.routed, 0, b.routed, 0, 4 * S * D).barrier();
      if (pending.shared) { k.add(c, { buf: b.routed }, { buf: b.sh }, S * D); c.barrier(); }
      k.add(c, { buf: b.x }, { buf: b.routed }, S * D);
      c.barrier();
      pending = null;
    };
    const waitOn = (c: Cmd, i: number) => {
      const t = performance.now();
      c.wait();
      const dt = performance.now() - t;
      st0.waitMs += dt;
      st0.perLayer[i].waitMs += dt;
    };
    let qcat: Float32Array | null = null, ocpu: Float32Array | null = null, cst: Float32Array | null = null;

    for (let i = lo; i < hi; i++) {
      const L = this.layers[i], full = L.keys === "full";
      const split = slots.some((s, j) => s.partial(i, segs[j].pos0 + segs[j].n));
      const c = this.cmdA, t0 = performance.now();
      c.begin();
      if (i === lo) {
        c.copy(up.x, 0, b.x, 0, 4 * S * D).copy(up.cs, 0, b.cs, 0, 4 * S * dr).copy(up.nk, 0, b.nk, 0, 4 * S);
        if (needSel) c.copy(up.sel, 0, b.sel, 0, 4 * S * topk).copy(up.nsel, 0, b.nsel, 0, 4 * S);
        c.barrier();
      }
      combine(c);
      let down = recordPre(c, k, ds, cfg, L, segs, slots, S, split);
      segs.forEach((g, j) => { if (slots[j].split) slots[j].res[i].wrote(g.pos0, g.pos0 + g.n); });
      if (!split) {
        recordCore(c, k, ds, cfg, L, segs, slots, false);
        down += recordPost(c, k, ds, cfg, L, S, false);
      }
      c.submit();
      if (split) { // the device's partial attention runs while the CPU does its own
        this.cmdC.begin();
        recordCore(this.cmdC, k, ds, cfg, L, segs, slots, true);
        this.cmdC.submit();
      }
      st0.recordMs += performance.now() - t0;
      waitOn(c, i);

      // the frame's outputs in one go (one mapping on WebGPU): the new KV rows; a full layer's indexer keys and
      // selection; xb of a MoE layer not split (a split one has it after its post frame)
      const xbNow = !!L.moe && !split;
      this.vk!.readMany([{ buf: dn_.a, out: aRows },
        ...(full ? [{ buf: dn_.kI, out: kRows }, { buf: dn_.sel, out: st.sel.subarray(0, S * topk) }, { buf: dn_.nsel, out: st.nsel.subarray(0, S) }] : []),
        ...(xbNow ? [{ buf: dn_.xb, out: st.xb.subarray(0, S * D) }] : [])]);
      for (const g of segs) g.kv.kv[i].set(aRows.subarray(g.r0 * W, (g.r0 + g.n) * W), g.pos0 * W);
      if (full) {
        for (const g of segs) g.kv.ik[i]!.set(kRows.subarray(g.r0 * hd, (g.r0 + g.n) * hd), g.pos0 * hd);
        if (opts.onSelect)
          for (const g of segs) for (let j = 0; j < g.n; j++) {
            const r = g.r0 + j;
            opts.onSelect(i, g.pos0 + j, st.sel.subarray(r * topk, r * topk + st.nsel[r]));
          }
      } else if (L.keys === "dense") st.nsel.set(st.nk.subarray(0, S));
      if (this.split) this.host.count(i, L.keys, st, segs, slots, topk);

      if (split) { // the CPU's partial over the host-only keys, then merge and the rest of A1
        if (!qcat || qcat.length < S * H * W) { qcat = new Float32Array(S * H * W); ocpu = new Float32Array(S * H * kvr); cst = new Float32Array(S * H * 2); }
        dn_.qcat.read(0, qcat.subarray(0, S * H * W));
        const h0 = performance.now();
        const nkeys = this.host.run(cfg, i, i, L.keys, st, segs, slots, qcat, ocpu!, cst!);
        st0.splitMs += performance.now() - h0;
        st0.splitLayers++;
        st0.splitKeys += nkeys;
        if (nkeys > 0) {
          up.ocpu.write(0, ocpu!.subarray(0, S * H * kvr));
          up.cst.write(0, cst!.subarray(0, S * H * 2));
          st0.bytesUp += 4 * S * H * (kvr + 2);
        }
        waitOn(this.cmdC, i);
        const t1 = performance.now();
        c.begin();
        down += recordPost(c, k, ds, cfg, L, S, nkeys > 0);
        c.submit();
        st0.recordMs += performance.now() - t1;
        waitOn(c, i);
      }
      st0.bytesDown += down;

      if (L.moe) { // A2 on the device (shared expert) while the host runs the router and routed experts
        if (!xbNow) dn_.xb.read(0, st.xb.subarray(0, S * D));
        if (L.shared) {
          this.cmdB.begin();
          recordMlp(this.cmdB, k, ds, L.shared, { buf: b.xb }, S, { buf: b.sh });
          this.cmdB.submit();
        }
        const h0 = performance.now();
        const skip = i === cfg.num_hidden_layers - 1 && kept < S;
        if (skip) keptRouted(cfg, st, m.w.layers[i].moe!, S, kept);
        else routed(cfg, st, m.w.layers[i].moe!, st.xb, S, st.ao);
        const h1 = performance.now();
        st0.hostMs += h1 - h0;
        st0.hostRows += skip && kept === 0 ? 0 : st.moff[st.moff.length - 1] / cfg.num_experts_per_tok; // rows routed
        st0.perLayer[i].hostMs += h1 - h0;
        up.routed.write(0, st.ao.subarray(0, S * D));
        st0.bytesUp += 4 * S * D;
        if (L.shared) { // what the host step did not hide of A2
          const a0 = performance.now();
          this.cmdB.wait();
          st0.a2Ms += performance.now() - a0;
        }
        pending = { shared: !!L.shared };
      }
    }

    // last combine, x back to the host
    const c = this.cmdA;
    c.begin();
    combine(c);
    c.copy(b.x, 0, dn_.x, 0, 4 * S * D);
    c.submit();
    const t1 = performance.now();
    c.wait();
    st0.waitMs += performance.now() - t1;
    dn_.x.read(0, st.x.subarray(0, S * D));
    st0.bytesDown += 4 * S * D;

    // the mirrors now hold the step's rows in every chain layer (a sub-range leaves them at pos0: conservative)
    if (lo === 0 && hi === this.n) segs.forEach((g, j) => {
      const end = g.pos0 + g.n;
      slots[j].wm.wrote(g.kv, end, { layer: lo, row: end - 1, data: g.kv.f32(lo).subarray((end - 1) * W, end * W) });
    });
    this.pool.trim(); // a batch with more conversations than `slots` grew the pool for itself only
    st0.forwards++;
    for (const g of segs) st0.tokens += g.n;
  }
}

/** The routed experts of the model's last layer for rows st.keep[0..k) only (ascending: the rows that get logits),
 *  moved to rows 0..k-1 of st.xb and run there (the same bits per row as over all S rows: batch-invariant kernels),
 *  their outputs moved back to their rows of st.ao (as forward.ts `block`); the other rows get zeros (their final x,
 *  the layer's attention output plus the shared expert's, is read by no one). */
function keptRouted(cfg: Config, st: RunState, moe: Moe, S: number, k: number): void {
  const D = cfg.hidden_size;
  for (let r = 0; r < k; r++) st.xb.copyWithin(r * D, st.keep[r] * D, (st.keep[r] + 1) * D); // keep[r] ≥ r
  if (k > 0) routed(cfg, st, moe, st.xb, k, st.ao);
  for (let r = k - 1; r >= 0; r--) if (st.keep[r] !== r) st.ao.copyWithin(st.keep[r] * D, r * D, (r + 1) * D);
  for (let r = 0, j = 0; r < S; r++) {
    if (j < k && st.keep[j] === r) j++;
    else st.ao.fill(0, r * D, (r + 1) * D);
  }
}
