// Each device shader against its CPU kernel (src/native/hb.ts) on random inputs: f32 to 1e-5 relative
// (RoPE 1e-6), the DSA selection exactly (random scores with many ties); matmul in every weight format
// (formats.md int8/int4/int2/int4g, bf16, f16), plain, split over chunks and grouped; the attention core
// over a KV block table with softmax statistics, and the merge of two partials. On both backends (the GLSL
// shaders on Vulkan, their WGSL twins on WebGPU); each skips, saying why, without its device.
import { describe, expect, test } from "bun:test";
import { attn, dsaSelect, Fmt, hb, indexScores, layernorm, matmul, rmsnorm, rope, swiglu } from "../src/native/hb.ts";
import { quantize } from "../src/model/quant.ts";
import type { Mat } from "../src/model/weights.ts";
import { Kernels, ropeTable, uploadMat, uploadVec } from "../src/device/kernels.ts";
import { download, downloadI, rand, relErr, runFrame, testDevice, upload } from "./helpers/device.ts";
import { APIS } from "../src/device/backend.ts";

function matOf(fmt: number, O: number, I: number, seed: number, gs = 32): Mat {
  const f = rand(O * I, seed);
  if (fmt === Fmt.int4 || fmt === Fmt.int2 || fmt === Fmt.int4g) {
    const q = quantize({ fmt, gs }, f, O, I);
    return { name: `fmt${fmt}[${O},${I}]`, fmt, O, I, data: q.q, scales: q.scales, gs: fmt === Fmt.int4g ? gs : 0 };
  }
  if (fmt === Fmt.f32) return { name: `f32[${O},${I}]`, fmt: Fmt.f32, O, I, data: f, scales: null, gs: 0 };
  if (fmt === Fmt.bf16) {
    const u = new Uint32Array(f.buffer), d = new Uint16Array(O * I);
    for (let i = 0; i < d.length; i++) d[i] = u[i] >>> 16;
    return { name: `bf16[${O},${I}]`, fmt: Fmt.bf16, O, I, data: d, scales: null, gs: 0 };
  }
  if (fmt === Fmt.f16) { // finite normal halves: exponent 8..19
    const d = new Uint16Array(O * I), r = rand(O * I * 3, seed + 1);
    for (let i = 0; i < d.length; i++)
      d[i] = (r[3 * i] < 0 ? 0x8000 : 0) | ((8 + Math.floor(Math.abs(r[3 * i + 1]) * 12)) << 10) | Math.floor(Math.abs(r[3 * i + 2]) * 1023);
    return { name: `f16[${O},${I}]`, fmt: Fmt.f16, O, I, data: d, scales: null, gs: 0 };
  }
  const q = new Uint8Array(O * I), sc = rand(O, seed + 2, 0.05);
  for (let i = 0; i < q.length; i++) q[i] = Math.floor((f[i] + 1) * 127.5) & 0xff;
  return { name: `int8[${O},${I}]`, fmt: Fmt.int8, O, I, data: q, scales: sc.map(Math.abs), gs: 0 };
}

for (const api of APIS) describe.skipIf(!testDevice(api))(`gpu kernels vs CPU (${api})`, () => {
  const vk = testDevice(api), k = vk ? new Kernels(vk) : (null as never);

  for (const [fmt, I] of [[Fmt.f32, 70], [Fmt.int8, 70], [Fmt.bf16, 70], [Fmt.f16, 70], [Fmt.int4, 71], [Fmt.int2, 70], [Fmt.int2, 73], [Fmt.int4g, 96], [Fmt.int4g, 77]]) {
    test(`matmul fmt ${fmt} I=${I}: y [S,O] = W [O,I] · x [S,I], strided rows`, () => {
      const O = 37, S = 3, m = matOf(fmt, O, I, 10 + fmt), x = rand(S * I, 99);
      const ref = new Float32Array(S * O);
      matmul(m.fmt, m.data, m.scales, m.gs, O, I, x, S, ref);
      const W = uploadMat(vk!, m), xb = upload(vk!, x), yb = vk!.buffer(4 * (S * (O + 5) + 3));
      runFrame(vk!, (c) => k.matmul(c, W, { buf: xb }, S, { buf: yb, off: 3 }, { yRow: O + 5 }));
      const y = download(yb, 3 + S * (O + 5));
      const got = new Float32Array(S * O);
      for (let s = 0; s < S; s++) got.set(y.subarray(3 + s * (O + 5), 3 + s * (O + 5) + O), s * O);
      expect(relErr(got, ref)).toBeLessThan(1e-5);
    });
  }

  for (const [fmt, I] of [[Fmt.f32, 66], [Fmt.int8, 66], [Fmt.bf16, 66], [Fmt.int4, 67], [Fmt.int2, 69], [Fmt.int4g, 80]]) {
    test(`matmul fmt ${fmt} I=${I} split over chunks (HB_VK_MAX_CHUNK) equals the CPU`, () => {
      const O = 301, S = 2, m = matOf(fmt, O, I, 20 + fmt, 16), x = rand(S * I, 7);
      const ref = new Float32Array(S * O);
      matmul(m.fmt, m.data, m.scales, m.gs, O, I, x, S, ref);
      const saved = process.env.HB_VK_MAX_CHUNK;
      process.env.HB_VK_MAX_CHUNK = "4096";
      let W;
      try { W = uploadMat(vk!, m); } finally { if (saved === undefined) delete process.env.HB_VK_MAX_CHUNK; else process.env.HB_VK_MAX_CHUNK = saved; }
      expect(W.buf.nchunks).toBeGreaterThan(1);
      const xb = upload(vk!, x), yb = vk!.buffer(4 * S * O);
      runFrame(vk!, (c) => k.matmul(c, W, { buf: xb }, S, { buf: yb }));
      expect(relErr(download(yb, S * O), ref)).toBeLessThan(1e-5);
    });
  }

  test("grouped matmul: per-head W_V,h · o_lat[h] (rows of kv_b), alpha", () => {
    const H = 3, dn = 5, dv = 7, kvr = 24, S = 2, m = matOf(Fmt.bf16, H * (dn + dv), kvr, 5), x = rand(S * H * kvr, 6);
    const ref = new Float32Array(S * H * dv), tmp = new Float32Array(dv);
    for (let s = 0; s < S; s++)
      for (let h = 0; h < H; h++) {
        const rows = (m.data as Uint16Array).subarray((h * (dn + dv) + dn) * kvr, (h * (dn + dv) + dn + dv) * kvr);
        matmul(Fmt.bf16, rows, null, 0, dv, kvr, x.subarray((s * H + h) * kvr, (s * H + h + 1) * kvr), 1, tmp);
        for (let e = 0; e < dv; e++) ref[(s * H + h) * dv + e] = tmp[e] * 0.5;
      }
    const W = uploadMat(vk!, m), xb = upload(vk!, x), yb = vk!.buffer(4 * S * H * dv);
    runFrame(vk!, (c) => k.matmul(c, W, { buf: xb }, S, { buf: yb }, {
      xRow: H * kvr, yRow: H * dv, alpha: 0.5, groups: { G: H, O: dv, wRow0: dn, wGroup: dn + dv, xGroup: kvr, yGroup: dv },
    }));
    expect(relErr(download(yb, S * H * dv), ref)).toBeLessThan(1e-5);
  });

  for (const fmt of [Fmt.int4g, Fmt.int2]) {
    test(`grouped matmul over fmt ${fmt} rows (per-head W_V,h of a quantized kv_b)`, () => {
      const H = 3, dn = 5, dv = 7, kvr = 40, S = 2, m = matOf(fmt, H * (dn + dv), kvr, 15 + fmt, 16), x = rand(S * H * kvr, 16);
      const ref = new Float32Array(S * H * dv), tmp = new Float32Array(dv), rb = Math.ceil(kvr / (fmt === Fmt.int2 ? 4 : 2));
      const per = fmt === Fmt.int4g ? Math.ceil(kvr / 16) : 1;
      for (let s = 0; s < S; s++)
        for (let h = 0; h < H; h++) {
          const r0 = h * (dn + dv) + dn;
          matmul(fmt as 2, (m.data as Uint8Array).subarray(r0 * rb, (r0 + dv) * rb), m.scales!.subarray(r0 * per, (r0 + dv) * per), m.gs, dv, kvr,
            x.subarray((s * H + h) * kvr, (s * H + h + 1) * kvr), 1, tmp);
          ref.set(tmp, (s * H + h) * dv);
        }
      const W = uploadMat(vk!, m), xb = upload(vk!, x), yb = vk!.buffer(4 * S * H * dv);
      runFrame(vk!, (c) => k.matmul(c, W, { buf: xb }, S, { buf: yb }, {
        xRow: H * kvr, yRow: H * dv, groups: { G: H, O: dv, wRow0: dn, wGroup: dn + dv, xGroup: kvr, yGroup: dv },
      }));
      expect(relErr(download(yb, S * H * dv), ref)).toBeLessThan(1e-5);
    });
  }

  test("attention over a KV block table with statistics, merged with the CPU's partial (hb_attn_stats) = full attention", () => {
    // MLA absorbed layout; keys of blocks with tab < 0 are the CPU's; device rows permuted by the table
    const S = 3, H = 4, kvr = 16, dr = 8, W = kvr + dr, T = 40, blk = 4, nb = T / blk, scale = 0.2, topk = 12;
    const q = rand(S * H * W, 61), cache = rand(T * W, 62, 2);
    const tab = Int32Array.from({ length: nb }, (_, b) => (b % 3 === 1 ? -1 : (b * 7) % nb)); // resident blocks, permuted
    const dev = new Float32Array(nb * blk * W);
    for (let b = 0; b < nb; b++) if (tab[b] >= 0) dev.set(cache.subarray(b * blk * W, (b + 1) * blk * W), tab[b] * blk * W);
    const sel = new Int32Array(S * topk), nselSel = Int32Array.from([5, 12, 12]), nsel = Int32Array.from([3, 25, 40]);
    for (let s = 0; s < S; s++) for (let j = 0; j < topk; j++) sel[s * topk + j] = (j * 7 + s * 3) % T;
    const qb = upload(vk!, q), kb = upload(vk!, dev), tb = upload(vk!, tab), sb = upload(vk!, sel), p = vk!.buffer(4 * S * H * T);
    for (const useSel of [false, true]) {
      const ns = useSel ? nselSel : nsel, full = new Float32Array(S * H * kvr);
      const qo = { a: q, row: H * W, head: W }, ko = { a: cache, row: W, head: 0 };
      attn(S, H, W, kvr, qo, ko, ko, useSel ? sel : null, ns, topk, scale, { a: full, row: H * kvr, head: kvr });
      // the CPU's part: the keys of non-resident blocks, with statistics
      const cpuSel = new Int32Array(S * T), cpuN = new Int32Array(S);
      for (let s = 0; s < S; s++)
        for (let j = 0; j < ns[s]; j++) { const t = useSel ? sel[s * topk + j] : j; if (tab[Math.floor(t / blk)] < 0) cpuSel[s * T + cpuN[s]++] = t; }
      const o2 = new Float32Array(S * H * kvr), st2 = new Float32Array(S * H * 2);
      hb().hb_attn_stats(S, H, W, kvr, q, H * W, W, cache, W, 0, cache, W, 0, cpuSel, cpuN, T, scale, o2, H * kvr, kvr, st2);
      const nb_ = upload(vk!, ns), ob = vk!.buffer(4 * S * H * kvr), stb = vk!.buffer(4 * S * H * 2);
      const o2b = upload(vk!, o2), st2b = upload(vk!, st2);
      runFrame(vk!, (c) => {
        k.attn(c, { s0: 0, n: S, H, dk: W, dv: kvr, q: { buf: qb, row: H * W, head: W }, k: { buf: kb, row: W, head: 0 },
          v: { buf: kb, row: W, head: 0 }, out: { buf: ob, row: H * kvr, head: kvr }, sel: useSel ? sb : null, selRow: topk,
          nsel: nb_, p, pStride: T, scale, tab: { buf: tb, blk }, stats: stb });
        c.barrier();
        k.attnMerge(c, { s0: 0, n: S, H, dv: kvr, o: ob, oRow: H * kvr, oHead: kvr, st: stb, o2: o2b, st2: st2b });
      });
      expect(cpuN.some((n) => n > 0)).toBe(true); // the split is real
      expect(relErr(download(ob, S * H * kvr), full)).toBeLessThan(1e-5);
    }
  });

  test("rmsnorm (strided, in place) and layernorm", () => {
    const S = 4, D = 90, row = 100, x = rand(S * row, 3, 3), w = rand(D, 4), b = rand(D, 5);
    const ref = x.slice();
    for (let s = 0; s < S; s++) rmsnorm(x.subarray(s * row, s * row + D), w, ref.subarray(s * row, s * row + D), 1, D, 1e-5);
    const xb = upload(vk!, x), wb = uploadVec(vk!, w), bb = uploadVec(vk!, b);
    runFrame(vk!, (c) => k.rmsnorm(c, { buf: xb }, wb, { buf: xb }, S, D, 1e-5, row, row));
    expect(relErr(download(xb, S * row), ref)).toBeLessThan(1e-5);
    const lref = new Float32Array(S * D);
    layernorm(x.subarray(0, S * D), w, b, lref, S, D, 1e-6);
    const x2 = upload(vk!, x.subarray(0, S * D)), y2 = vk!.buffer(4 * S * D);
    runFrame(vk!, (c) => k.layernorm(c, { buf: x2 }, wb, bb, { buf: y2 }, S, D, 1e-6));
    expect(relErr(download(y2, S * D), lref)).toBeLessThan(1e-5);
  });

  test("rope: interleaved pairs with a host cos/sin table, to 1e-6", () => {
    const S = 3, nvec = 4, dr = 8, vec = 24, row = nvec * vec, theta = 10000, x = rand(S * row, 8);
    const pos = Int32Array.from([0, 17, 4095]);
    const ref = x.slice();
    rope(ref.subarray(16), S, row, nvec, vec, dr, pos, theta); // the last dr of each 24-wide head
    const xb = upload(vk!, x), cs = upload(vk!, ropeTable(pos, S, dr, theta));
    runFrame(vk!, (c) => k.rope(c, { buf: xb, off: 16 }, S, row, nvec, vec, dr, { buf: cs }, 0));
    expect(relErr(download(xb, S * row), ref)).toBeLessThan(1e-6);
  });

  test("swiglu, add, copy", () => {
    const n = 1000, g = rand(n, 1, 4), u = rand(n, 2), y = rand(n, 3);
    const ref = new Float32Array(n);
    swiglu(g, u, ref, n);
    const gb = upload(vk!, g), ub = upload(vk!, u), ob = vk!.buffer(4 * n), yb = upload(vk!, y);
    runFrame(vk!, (c) => { k.swiglu(c, { buf: gb }, { buf: ub }, { buf: ob }, n); k.add(c, { buf: yb }, { buf: ub }, n); });
    expect(relErr(download(ob, n), ref)).toBeLessThan(1e-5);
    expect(download(yb, n)).toEqual(y.map((v, i) => Math.fround(v + u[i])));
    // copy the last 3 of each 8-wide head of [2 rows, 4 heads] into [2, 4, 3]
    const cb = vk!.buffer(4 * 24);
    runFrame(vk!, (c) => k.copy(c, { buf: gb, off: 5 }, { buf: cb }, 3, 4, 8, 3, 2, 32, 12));
    const want = new Float32Array(24);
    for (let r = 0; r < 2; r++) for (let h = 0; h < 4; h++) for (let e = 0; e < 3; e++) want[r * 12 + h * 3 + e] = g[5 + r * 32 + h * 8 + e];
    expect(download(cb, 24)).toEqual(want);
  });

  test("attention core: MLA absorbed layout (shared c_kv ‖ k_pe), dense and over a selection", () => {
    const S = 3, H = 4, kvr = 16, dr = 8, W = kvr + dr, T = 40, topk = 9, scale = 0.2;
    const q = rand(S * H * W, 11), cache = rand(T * W, 12, 2);
    const nsel = Int32Array.from([1, 25, 40]), sel = new Int32Array(S * topk), nselSel = Int32Array.from([1, 9, 9]);
    for (let s = 0; s < S; s++) for (let j = 0; j < topk; j++) sel[s * topk + j] = (j * 7 + s * 3) % Math.max(1, nsel[s]);
    const qb = upload(vk!, q), kb = upload(vk!, cache), sb = upload(vk!, sel), p = vk!.buffer(4 * S * H * T);
    for (const useSel of [false, true]) {
      const ns = useSel ? nselSel : nsel, ref = new Float32Array(S * H * kvr);
      attn(S, H, W, kvr, { a: q, row: H * W, head: W }, { a: cache, row: W, head: 0 }, { a: cache, row: W, head: 0 },
        useSel ? sel : null, ns, topk, scale, { a: ref, row: H * kvr, head: kvr });
      const nb = upload(vk!, ns), ob = vk!.buffer(4 * S * H * kvr);
      runFrame(vk!, (c) => k.attn(c, {
        s0: 0, n: S, H, dk: W, dv: kvr, q: { buf: qb, row: H * W, head: W }, k: { buf: kb, row: W, head: 0 },
        v: { buf: kb, row: W, head: 0 }, out: { buf: ob, row: H * kvr, head: kvr }, sel: useSel ? sb : null, selRow: topk,
        nsel: nb, p, pStride: T, scale,
      }));
      expect(relErr(download(ob, S * H * kvr), ref)).toBeLessThan(1e-5);
    }
  });

  test("attention core: per-head K and V (naive layout), rows s0.. of a batch, zero keys", () => {
    const S = 2, H = 2, dk = 12, dv = 5, T = 20, KV = H * 20, scale = 0.3;
    const q = rand(S * H * dk, 21), kk = rand(T * H * dk, 22), v = rand(T * KV, 23), nsel = Int32Array.from([0, 20]);
    const ref = new Float32Array(S * H * dv);
    attn(S, H, dk, dv, { a: q, row: H * dk, head: dk }, { a: kk, row: H * dk, head: dk }, { a: v.subarray(3), row: KV, head: 20 },
      null, nsel, 0, scale, { a: ref, row: H * dv, head: dv });
    const ob = vk!.buffer(4 * S * H * dv), nb = upload(vk!, nsel), p = vk!.buffer(4 * S * H * T);
    const qb = upload(vk!, q), kb = upload(vk!, kk), vb = upload(vk!, v);
    runFrame(vk!, (c) => k.attn(c, {
      s0: 0, n: S, H, dk, dv, q: { buf: qb, row: H * dk, head: dk }, k: { buf: kb, row: H * dk, head: dk },
      v: { buf: vb, off: 3, row: KV, head: 20 }, out: { buf: ob, row: H * dv, head: dv }, sel: null, selRow: 0, nsel: nb, p, pStride: T, scale,
    }));
    expect(relErr(download(ob, S * H * dv), ref)).toBeLessThan(1e-5);
  });

  test("indexer scores: Σ_h w·ReLU(scale·qI·kI)", () => {
    const S = 3, nh = 4, hd = 16, T = 50, scale = 0.25, outRow = 64;
    const qI = rand(S * nh * hd, 31), w = rand(S * nh, 32), kI = rand(T * hd, 33), nk = Int32Array.from([7, 30, 50]);
    const ref = new Float32Array(S * outRow);
    indexScores(S, nh, hd, qI, w, kI, nk, ref, outRow, scale);
    const ob = vk!.buffer(4 * S * outRow);
    runFrame(vk!, (c) => { c.fill(ob, 0, 4 * S * outRow); c.barrier(); k.indexScores(c, {
      s0: 0, n: S, nh, hd, qI: upload(vk!, qI), w: upload(vk!, w), kI: { buf: upload(vk!, kI) }, nk: upload(vk!, nk),
      out: { buf: ob }, outRow, maxNk: 50, scale,
    }); });
    expect(relErr(download(ob, S * outRow), ref)).toBeLessThan(1e-5);
  });

  test("DSA top-k selection equals the CPU exactly (ties, ±0, n ≤ topk, large n)", () => {
    const topk = 64, rows = [10, 64, 65, 200, 3000, 3000, 1000], S = rows.length, T = 3000;
    const sc = new Float32Array(S * T), r = rand(S * T, 41);
    for (let s = 0; s < S; s++)
      for (let t = 0; t < T; t++) {
        const v = r[s * T + t];
        // few distinct levels (heavy ties), some -0 / +0, row 5 all equal, row 6 continuous
        sc[s * T + t] = s === 5 ? 0.5 : s === 6 ? v : Math.round(v * 6) / 6 + (t % 97 === 0 ? -0 : 0) * 0;
        if (s === 3 && t % 5 === 0) sc[s * T + t] = -0;
      }
    const nk = Int32Array.from(rows), sel = new Int32Array(S * topk).fill(-1), nsel = new Int32Array(S);
    dsaSelect(S, sc, T, nk, topk, sel, nsel);
    expect(sel[4 * topk + topk - 1]).toBeGreaterThan(topk); // row 4 really selects (not a prefix)
    const selb = vk!.buffer(4 * S * topk), nselb = vk!.buffer(4 * S);
    runFrame(vk!, (c) => { c.fill(selb, 0, 4 * S * topk, 0xffffffff); c.barrier();
      k.dsaSelect(c, { s0: 0, n: S, scores: { buf: upload(vk!, sc) }, scoreRow: T, nk: upload(vk!, nk), topk, sel: selb, nsel: nselb }); });
    expect(downloadI(nselb, S)).toEqual(nsel);
    expect(downloadI(selb, S * topk)).toEqual(sel);
  });
});
