// Shader interface table: for every compute shader (shaders/<name>.comp and its WGSL twin <name>.wgsl) the
// number of storage-buffer bindings (0..bind-1), the ones it writes (the rest are read-only), and its push-
// constant block, field by field in declaration order. This is the one TypeScript definition of those
// layouts: kernels.ts builds push blocks from it, the backends their pipelines, and test/layouts.test.ts
// parses every shader (GLSL `layout(push_constant) uniform P { ... }` and `readonly` buffers; WGSL `struct P`
// and `var<storage, read|read_write>`) and checks it against this table. Holds no state.
import { push as encode } from "./backend.ts";

/** i = int, f = float; std430 scalars, 4 bytes each, in declaration order. */
export type PushType = "i" | "f";
type Field = readonly [name: string, type: PushType];
interface Layout { readonly bind: number; readonly writes: readonly number[]; readonly push: readonly Field[] }

const i = <const N extends string>(...names: N[]) => names.map((n) => [n, "i"] as const);

export const SHADERS = {
  matmul: { bind: 4, writes: [3], push: [...i("O", "I", "wRow0", "wGroup", "scRow0", "xOff", "xRow", "xGroup", "yOff", "yRow", "yGroup", "gs"), ["alpha", "f"]] },
  rmsnorm: { bind: 3, writes: [2], push: [...i("D", "xOff", "xRow", "yOff", "yRow", "hasW"), ["eps", "f"]] },
  layernorm: { bind: 4, writes: [3], push: [...i("D", "xOff", "xRow", "yOff", "yRow"), ["eps", "f"]] },
  rope: { bind: 3, writes: [1], push: i("h", "sOff", "sRow", "sVec", "dOff", "dRow", "dVec", "csRow0", "csStride") },
  swiglu: { bind: 3, writes: [2], push: i("n", "gOff", "uOff", "oOff") },
  add: { bind: 2, writes: [0], push: i("n", "yOff", "xOff") },
  copy: { bind: 2, writes: [1], push: i("K", "sOff", "sRow0", "sRow1", "dOff", "dRow0", "dRow1") },
  attn: {
    bind: 9, writes: [5, 6, 8],
    push: [...i("s0", "H", "dk", "dv", "qOff", "qRow", "qHead", "kOff", "kRow", "kHead", "vOff", "vRow", "vHead",
      "oOff", "oRow", "oHead", "selRow", "useSel", "pStride", "useTab", "blk", "useStats"), ["scale", "f"]],
  },
  attn_merge: { bind: 4, writes: [0], push: i("s0", "H", "dv", "oRow", "oHead") },
  index_scores: { bind: 5, writes: [4], push: [...i("s0", "nh", "hd", "kOff", "outOff", "outRow"), ["scale", "f"]] },
  dsa_select: { bind: 4, writes: [2, 3], push: i("s0", "scOff", "scRow", "topk") },
} as const satisfies Record<string, Layout>;

export type Shader = keyof typeof SHADERS;
/** The named values of one shader's push block: every field, nothing else. */
export type PushValues<S extends Shader> = Record<(typeof SHADERS)[S]["push"][number][0], number>;

/** Bytes of a shader's push block. */
export const pushBytes = (s: Shader): number => SHADERS[s].push.length * 4;

/** Encode a shader's push block from named values; a missing or unknown field throws. */
export function pushOf<S extends Shader>(s: S, v: PushValues<S>): Uint8Array {
  const fields: readonly Field[] = SHADERS[s].push;
  const given = v as Record<string, number>;
  const missing = fields.filter(([n]) => typeof given[n] !== "number").map(([n]) => n);
  if (missing.length) throw new Error(`push ${s}: missing field(s) ${missing.join(", ")}`);
  if (Object.keys(given).length !== fields.length) {
    const extra = Object.keys(given).filter((k) => !fields.some(([n]) => n === k));
    throw new Error(`push ${s}: unknown field(s) ${extra.join(", ")}`);
  }
  return encode(fields.map(([n, t]) => [t, given[n]]));
}
