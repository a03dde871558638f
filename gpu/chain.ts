// The Vulkan layer executor: runs layers [lo, hi) ⊆ [0, n) of the exact forward with the dense parts on the
// device and the routed experts on the CPU; each token crosses once per layer (xb down, routed y up).
// Per layer: frame A1 (device) = [combine of the previous MoE layer: x += routed + shared] input norm, MLA
// (q / kv projections, new c_kv ‖ k_pe rows into the device KV mirror), DSA indexer + selection, attention
// core (absorbed form), o_proj, residual, post-attention norm (+ the MLP of a dense layer); host step =
// router + routed experts (src/engine/moe.ts `routed`); frame A2 (device, not waited for) = shared expert, overlapping the
// host step. The host KVCache stays canonical: every new row is also written there. A lost device (real or
// HB_VK_FAULT=n) makes the forward re-run [lo, hi) on the CPU from its input rows; later forwards stay on
// the CPU. State: the device, its copies of the layers' weights, device activations, the mirror pool, stats.
import type { Model } from "../src/engine/model.ts";
import type { RunState } from "../src/engine/state.ts";
import type { Segment } from "../src/engine/batch.ts";
import { embed, head, keyMode, runLayers, type ForwardOpts } from "../src/engine/forward.ts";
import { Kernels, ropeTable } from "./kernels.ts";
import { recordLayer, recordMlp } from "./frame.ts";
import { type DevLayer, freeLayer, uploadLayer } from "./devweights.ts";
import { DevState } from "./devstate.ts";
import { type MirrorSlot, MirrorPool } from "./mirror.ts";
import { routed } from "../src/engine/moe.ts";
import { type Cmd, DeviceLost, Vk } from "./vk.ts";

export interface ChainOpts {
  layers?: number;          // run layers [0, layers) on the device (default: all)
  device?: string | number; // device index or name substring (default: HB_VK_DEVICE, else the best)
  slots?: number;           // conversations mirrored at once (default 4)
  fault?: number;           // fake a device loss at the n-th submit (default: HB_VK_FAULT)
}

export interface ChainStats {
  forwards: number; tokens: number; fallbacks: number;
  bytesUp: number; bytesDown: number; mirrorBytes: number; // activations up / down, KV rows uploaded to mirrors
  waitMs: number; hostMs: number; recordMs: number;         // blocked on the device / routed experts / recording
  perLayer: { waitMs: number; hostMs: number }[];
}

export class VulkanChain {
  readonly n: number;
  lost = false;
  lostReason = "";
  readonly stats: ChainStats;
  private vk: Vk | null;
  private k: Kernels;
  private layers: DevLayer[] = [];
  private ds: DevState;
  private pool: MirrorPool;
  private cmdA: Cmd;
  private cmdB: Cmd;

  private constructor(m: Model, vk: Vk, o: ChainOpts) {
    const c = m.cfg, L = c.num_hidden_layers;
    this.n = Math.max(0, Math.min(L, o.layers ?? L));
    this.vk = vk;
    this.k = new Kernels(vk);
    this.ds = new DevState(vk, c);
    const layers = Array.from({ length: this.n }, (_, i) => i);
    this.pool = new MirrorPool(vk, {
      layers, indexed: layers.map((i) => keyMode(m, i) === "full"), W: c.kv_lora_rank + c.qk_rope_head_dim, hd: c.index_head_dim,
    }, o.slots ?? 4);
    this.cmdA = vk.cmd();
    this.cmdB = vk.cmd();
    this.stats = { forwards: 0, tokens: 0, fallbacks: 0, bytesUp: 0, bytesDown: 0, mirrorBytes: 0, waitMs: 0, hostMs: 0, recordMs: 0,
      perLayer: layers.map(() => ({ waitMs: 0, hostMs: 0 })) };
  }

  /** Open a device and upload the dense weights of layers [0, layers). Throws VkError when impossible. */
  static open(m: Model, o: ChainOpts = {}): VulkanChain {
    const vk = Vk.open(o.device);
    try {
      const ch = new VulkanChain(m, vk, o);
      ch.k.warm();
      for (let i = 0; i < ch.n; i++) ch.layers.push(uploadLayer(vk, m.cfg, m.w.layers[i], i, keyMode(m, i)));
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

  /** The executor seam: same contract as forward.ts runLayers for layers [lo, hi) ⊆ [0, n). */
  run(m: Model, st: RunState, segs: Segment[], S: number, lo: number, hi: number, opts: ForwardOpts): void {
    if (lo < 0 || hi > this.n || lo > hi) throw new RangeError(`chain runs layers [0, ${this.n}), asked [${lo}, ${hi})`);
    if (lo === hi) return;
    if (this.lost || !this.vk) { runLayers(m, st, segs, S, lo, hi, opts); return; }
    const xIn = st.x.slice(0, S * m.cfg.hidden_size);
    try {
      this.runDevice(m, st, segs, S, lo, hi, opts);
    } catch (e) {
      if (!(e instanceof DeviceLost)) throw e;
      this.markLost(e.message);
      st.x.set(xIn);
      runLayers(m, st, segs, S, lo, hi, opts); // same rows, same tokens: the CPU rewrites every KV row too
      this.stats.fallbacks++;
    }
  }

  private markLost(why: string): void {
    this.lost = true;
    this.lostReason = why;
    console.warn(`[vulkan] device lost (${why}): continuing on the CPU`);
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
  summary(): string {
    const s = this.stats, t = Math.max(1, s.tokens), kb = (b: number) => (b / 1024).toFixed(1);
    const per = s.perLayer.map((l, i) => `L${i} ${(l.waitMs / Math.max(1, s.forwards)).toFixed(2)}/${(l.hostMs / Math.max(1, s.forwards)).toFixed(2)}`).join(" ");
    return `vulkan ${this.device}${this.lost ? " (lost: on the CPU)" : ""}: ${s.forwards} forwards, ${s.tokens} tokens; ` +
      `per token ${kb(s.bytesUp / t)} KiB up, ${kb(s.bytesDown / t)} KiB down, KV mirror ${kb(s.mirrorBytes)} KiB total; ` +
      `device wait ${s.waitMs.toFixed(1)} ms, routed experts ${s.hostMs.toFixed(1)} ms, recording ${s.recordMs.toFixed(1)} ms; ` +
      `per layer ms/forward (device wait/host): ${per}${s.fallbacks ? `; ${s.fallbacks} CPU fallbacks` : ""}`;
  }

  private runDevice(m: Model, st: RunState, segs: Segment[], S: number, lo: number, hi: number, opts: ForwardOpts): void {
    const cfg = m.cfg, k = this.k, D = cfg.hidden_size, dr = cfg.qk_rope_head_dim, W = cfg.kv_lora_rank + dr;
    const hd = cfg.index_head_dim, topk = Math.max(1, cfg.index_topk), st0 = this.stats;
    let T = 0;
    for (const g of segs) T = Math.max(T, g.pos0 + g.n);
    this.ds.ensure(S, T);
    const ds = this.ds, b = ds.b, up = ds.up, dn_ = ds.dn;

    // KV mirrors: upload the host rows each slot lacks below the step's first position
    const busy = new Set<MirrorSlot>();
    const slots = segs.map((g) => {
      const s = this.pool.get(g.kv, busy);
      busy.add(s);
      const from = s.wm.sync(g.kv, g.pos0);
      s.ensure(g.pos0 + g.n);
      const before = s.uploadedBytes;
      s.upload(g.kv, from, g.pos0);
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

    for (let i = lo; i < hi; i++) {
      const L = this.layers[i], full = L.keys === "full";
      const c = this.cmdA, t0 = performance.now();
      c.begin();
      if (i === lo) {
        c.copy(up.x, 0, b.x, 0, 4 * S * D).copy(up.cs, 0, b.cs, 0, 4 * S * dr).copy(up.nk, 0, b.nk, 0, 4 * S);
        if (needSel) c.copy(up.sel, 0, b.sel, 0, 4 * S * topk).copy(up.nsel, 0, b.nsel, 0, 4 * S);
        c.barrier();
      }
      combine(c);
      const down = recordLayer(c, k, ds, cfg, L, segs, slots, S);
      c.submit();
      const t1 = performance.now();
      c.wait();
      const t2 = performance.now();
      st0.recordMs += t1 - t0;
      st0.waitMs += t2 - t1;
      st0.perLayer[i].waitMs += t2 - t1;
      st0.bytesDown += down;

      dn_.a.read(0, aRows);
      for (const g of segs) g.kv.kv[i].set(aRows.subarray(g.r0 * W, (g.r0 + g.n) * W), g.pos0 * W);
      if (full) {
        dn_.kI.read(0, kRows);
        for (const g of segs) g.kv.ik[i]!.set(kRows.subarray(g.r0 * hd, (g.r0 + g.n) * hd), g.pos0 * hd);
        dn_.sel.read(0, st.sel.subarray(0, S * topk));
        dn_.nsel.read(0, st.nsel.subarray(0, S));
        if (opts.onSelect)
          for (const g of segs) for (let j = 0; j < g.n; j++) {
            const r = g.r0 + j;
            opts.onSelect(i, g.pos0 + j, st.sel.subarray(r * topk, r * topk + st.nsel[r]));
          }
      } else if (L.keys === "dense") st.nsel.set(st.nk.subarray(0, S));

      if (L.moe) { // A2 on the device (shared expert) while the host runs the router and routed experts
        dn_.xb.read(0, st.xb.subarray(0, S * D));
        if (L.shared) {
          this.cmdB.begin();
          recordMlp(this.cmdB, k, ds, L.shared, { buf: b.xb }, S, { buf: b.sh });
          this.cmdB.submit();
        }
        const h0 = performance.now();
        routed(cfg, st, m.w.layers[i].moe!, st.xb, S, st.ao);
        const h1 = performance.now();
        st0.hostMs += h1 - h0;
        st0.perLayer[i].hostMs += h1 - h0;
        up.routed.write(0, st.ao.subarray(0, S * D));
        st0.bytesUp += 4 * S * D;
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
      slots[j].wm.wrote(g.kv, end, { layer: lo, row: end - 1, data: g.kv.kv[lo].subarray((end - 1) * W, end * W) });
    });
    st0.forwards++;
    for (const g of segs) st0.tokens += g.n;
  }
}
