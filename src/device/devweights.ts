// The dense weights of one decoder layer on the device (what the chain runs there): the norms, MLA
// projections (+ the absorbed W_K,hᵀ of every head, stacked f32 [H·kv_lora, dn]), the DSA indexer, and the
// dense MLP or the MoE shared expert. Routed experts and the router stay on the host. State: the buffers.
import type { Config } from "../model/config.ts";
import type { Layer, Mat, Mlp } from "../model/weights.ts";
import { Fmt } from "../native/hb.ts";
import { rowsOf, transposeF32 } from "../engine/mat.ts";
import type { KeyMode } from "../engine/attention.ts";
import { type DevMat, freeMat, uploadMat, uploadVec } from "./kernels.ts";
import type { Buf, Gpu } from "./backend.ts";
import { VkError } from "./vulkan/vklib.ts";

export interface DevMlp { gate: DevMat; up: DevMat; down: DevMat }
export interface DevIndexer { wq_b: DevMat; wk: DevMat; k_norm_w: Buf; k_norm_b: Buf; weights_proj: DevMat }
export interface DevLayer {
  index: number; keys: KeyMode;
  input_norm: Buf; post_norm: Buf;
  q_a: DevMat | null; q_a_norm: Buf | null; q_b: DevMat | null; q_proj: DevMat | null;
  kv_a: DevMat; kv_a_norm: Buf; wkT: DevMat; kv_b: DevMat; o: DevMat;
  indexer: DevIndexer | null;
  mlp: DevMlp | null;    // dense layer
  shared: DevMlp | null; // MoE layer's shared expert (null: none)
  moe: boolean;
  bytes: number;
}

const mlpUp = (vk: Gpu, m: Mlp): DevMlp => ({ gate: uploadMat(vk, m.gate), up: uploadMat(vk, m.up), down: uploadMat(vk, m.down) });

/** W_K,hᵀ of every head stacked: row h·kv_lora + c = column c of kv_b rows [h(dn+dv), +dn). */
function absorbedK(cfg: Config, kv_b: Mat): Mat {
  const H = cfg.num_attention_heads, dn = cfg.qk_nope_head_dim, dv = cfg.v_head_dim, kvr = cfg.kv_lora_rank;
  const data = new Float32Array(H * kvr * dn);
  for (let h = 0; h < H; h++) data.set(transposeF32(rowsOf(kv_b, h * (dn + dv), dn)), h * kvr * dn);
  return { name: `${kv_b.name}[K]ᵀ`, fmt: Fmt.f32, O: H * kvr, I: dn, data, scales: null, gs: 0 };
}

export function uploadLayer(vk: Gpu, cfg: Config, w: Layer, index: number, keys: KeyMode): DevLayer {
  const a = w.attn;
  if (keys === "full" && !a.indexer) throw new VkError(`layer ${index}: a full DSA layer without indexer weights`, -10001);
  if (a.indexer && !a.q_a) throw new VkError(`layer ${index}: the indexer needs q_lora (c_q)`, -10001);
  if (w.moe && !w.moe.router) throw new VkError(`layer ${index}: MoE without a router`, -10001);
  const mats: DevMat[] = [];
  const up = (m: Mat) => { const d = uploadMat(vk, m); mats.push(d); return d; };
  const L: DevLayer = {
    index, keys,
    input_norm: uploadVec(vk, w.input_norm), post_norm: uploadVec(vk, w.post_norm),
    q_a: a.q_a ? up(a.q_a) : null, q_a_norm: a.q_a_norm ? uploadVec(vk, a.q_a_norm) : null,
    q_b: a.q_b ? up(a.q_b) : null, q_proj: a.q_proj ? up(a.q_proj) : null,
    kv_a: up(a.kv_a), kv_a_norm: uploadVec(vk, a.kv_a_norm), wkT: up(absorbedK(cfg, a.kv_b)), kv_b: up(a.kv_b), o: up(a.o),
    indexer: keys === "full" && a.indexer ? {
      wq_b: up(a.indexer.wq_b), wk: up(a.indexer.wk), k_norm_w: uploadVec(vk, a.indexer.k_norm_w),
      k_norm_b: uploadVec(vk, a.indexer.k_norm_b), weights_proj: up(a.indexer.weights_proj),
    } : null,
    mlp: w.mlp ? mlpUp(vk, w.mlp) : null,
    shared: w.moe?.shared ? mlpUp(vk, w.moe.shared) : null,
    moe: !!w.moe,
    bytes: 0,
  };
  for (const m of [L.mlp, L.shared]) if (m) mats.push(m.gate, m.up, m.down);
  L.bytes = mats.reduce((t, m) => t + m.buf.bytes + (m.scales?.bytes ?? 0), 0);
  return L;
}

export function freeLayer(L: DevLayer): void {
  for (const m of [L.q_a, L.q_b, L.q_proj, L.kv_a, L.wkT, L.kv_b, L.o, L.indexer?.wq_b, L.indexer?.wk, L.indexer?.weights_proj,
    L.mlp?.gate, L.mlp?.up, L.mlp?.down, L.shared?.gate, L.shared?.up, L.shared?.down]) if (m) freeMat(m);
  for (const b of [L.input_norm, L.post_norm, L.q_a_norm, L.kv_a_norm, L.indexer?.k_norm_w, L.indexer?.k_norm_b]) b?.free();
}

/** The matmul formats a device layer uses (the pipelines to build up front). */
export function layerFmts(L: DevLayer): number[] {
  const ms = [L.q_a, L.q_b, L.q_proj, L.kv_a, L.wkT, L.kv_b, L.o, L.indexer?.wq_b, L.indexer?.wk, L.indexer?.weights_proj,
    L.mlp?.gate, L.mlp?.up, L.mlp?.down, L.shared?.gate, L.shared?.up, L.shared?.down];
  return ms.filter((x) => !!x).map((x) => x!.fmt);
}
