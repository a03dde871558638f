// Reading tensor data: raw bytes, or a float tensor as f32 (F32 / BF16 / F16 / F8_E4M3 with optional FP8
// block scales), read on demand with pread into the caller's buffer (models are 370+ GB). No state.
import { Conv, convert } from "../../native/hb.ts";
import { ModelError } from "../errors.ts";
import { type Dtype, preadExact, type TensorInfo } from "./file.ts";
import { TensorStore } from "./store.ts";

/** The raw bytes of a tensor, into out[0, nbytes) (returned as that view) or a fresh buffer. */
export function readBytes(info: TensorInfo, out?: Uint8Array): Uint8Array {
  const where = { file: info.file, tensor: info.name };
  const buf = out ?? new Uint8Array(info.nbytes);
  if (buf.byteLength < info.nbytes) throw new ModelError(`output buffer holds ${buf.byteLength} bytes, need ${info.nbytes}`, where);
  if (info.nbytes === 0) return buf.subarray(0, 0);
  preadExact(info.owner, buf, info.nbytes, info.offset, where);
  return buf.byteLength === info.nbytes ? buf : buf.subarray(0, info.nbytes);
}

const CONV: Partial<Record<Dtype, number>> = { BF16: Conv.bf16, F16: Conv.f16, F8_E4M3: Conv.f8e4m3 };
export const FP8_BLOCK = 128;

/**
 * A float tensor as f32 (F32 / BF16 / F16 / F8_E4M3), into out[0, numel) or a fresh array.
 * F8_E4M3: block scales `<name>_scale_inv` F32 [⌈O/128⌉, ⌈I/128⌉] are applied when given — either
 * directly as a TensorInfo or looked up in a store (absent there → no scaling).
 */
export function readF32(info: TensorInfo, out?: Float32Array | null, scale?: TensorStore | TensorInfo | null): Float32Array {
  const where = { file: info.file, tensor: info.name };
  const n = info.numel;
  const dst = out ?? new Float32Array(n);
  if (dst.length < n) throw new ModelError(`output array holds ${dst.length} floats, need ${n}`, where);
  const y = dst.length === n ? dst : dst.subarray(0, n);
  if (info.dtype === "F32") {
    readBytes(info, new Uint8Array(y.buffer, y.byteOffset, info.nbytes));
    return y;
  }
  const kind = CONV[info.dtype];
  if (kind === undefined) throw new ModelError(`dtype ${info.dtype} cannot be read as f32`, { ...where, field: "dtype" });
  let sInfo: TensorInfo | null = null;
  if (scale instanceof TensorStore) {
    if (info.dtype === "F8_E4M3" && scale.has(info.name + "_scale_inv")) sInfo = scale.get(info.name + "_scale_inv");
  } else if (scale) {
    if (info.dtype !== "F8_E4M3") throw new ModelError(`block scales given for a ${info.dtype} tensor`, { ...where, field: "dtype" });
    sInfo = scale;
  }
  if (n > 0) convert(kind, readBytes(info), y, n);
  if (sInfo) applyBlockScales(info, sInfo, y);
  return y;
}

/** w[o,i] *= s[o/128][i/128] for an FP8 [O,I] matrix. */
function applyBlockScales(info: TensorInfo, sInfo: TensorInfo, w: Float32Array): void {
  if (info.shape.length !== 2) throw new ModelError(`FP8 block scales need a 2-D tensor, shape is [${info.shape.join(", ")}]`, { file: info.file, tensor: info.name, field: "shape" });
  const [O, I] = info.shape;
  const bo = Math.ceil(O / FP8_BLOCK), bi = Math.ceil(I / FP8_BLOCK);
  const where = { file: sInfo.file, tensor: sInfo.name };
  if (sInfo.dtype !== "F32") throw new ModelError(`scale_inv must be F32, got ${sInfo.dtype}`, { ...where, field: "dtype" });
  if (sInfo.shape.length !== 2 || sInfo.shape[0] !== bo || sInfo.shape[1] !== bi)
    throw new ModelError(`shape [${sInfo.shape.join(", ")}] should be [${bo}, ${bi}] for weight [${O}, ${I}]`, { ...where, field: "shape" });
  const s = readF32(sInfo);
  for (let o = 0; o < O; o++) {
    const row = o * I, srow = (o >> 7) * bi;
    for (let b = 0; b < bi; b++) {
      const f = s[srow + b], i1 = Math.min(I, (b + 1) * FP8_BLOCK);
      for (let i = b * FP8_BLOCK; i < i1; i++) w[row + i] *= f;
    }
  }
}
