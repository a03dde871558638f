// Random-weight machinery for the model generator: a seeded PRNG (splitmix32 → xoshiro128**),
// polar Box-Muller normals, per-tensor initialisers and f32 → bf16 rounding (tensor-sized buffers only:
// the generator streams them to writeSafetensors one at a time).
// Holds no state between calls: every tensor's stream is seeded from (seed, tensor name), so a
// tensor's values do not depend on which other tensors exist or on the write order.
/** How one tensor is initialised. All draws are N(0,1) samples z from the tensor's own stream. */
export type Init =
  | { kind: "normal"; std: number } // w = std·z
  | { kind: "norm"; std: number } // w = 1 + std·z  (RMSNorm / LayerNorm gains)
  | { kind: "eye_left"; noise: number }; // [O, 2O]: w = [I | 0] + noise·z  (MTP eh_proj, --mtp-drafts)

export type GenDtype = "F32" | "BF16";

export interface PlannedTensor {
  name: string;
  dtype: GenDtype;
  shape: number[];
  init: Init;
  /** PRNG stream name (default: `name`); two tensors with one stream and init get equal values */
  stream?: string;
}

export const dtypeBytes: Record<GenDtype, number> = { F32: 4, BF16: 2 };

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function tensorBytes(t: Pick<PlannedTensor, "dtype" | "shape">): number {
  return numel(t.shape) * dtypeBytes[t.dtype];
}

/** FNV-1a 32-bit hash of a string (UTF-16 code units; names are ASCII). */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** splitmix32 step: returns [next state, output]. */
function splitmix32(state: number): [number, number] {
  state = (state + 0x9e3779b9) >>> 0;
  let z = state;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
  return [state, (z ^ (z >>> 16)) >>> 0];
}

/** xoshiro128** seeded from (seed, stream name). Deterministic across platforms. */
export class Rng {
  private s = new Uint32Array(4);
  private spare = 0;
  private hasSpare = false;

  constructor(seed: number, stream: string) {
    if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`seed must be a non-negative integer, got ${seed}`);
    const lo = seed >>> 0;
    const hi = Math.floor(seed / 0x100000000) >>> 0;
    let st = (lo ^ Math.imul(hi, 0x27d4eb2f) ^ fnv1a(stream)) >>> 0;
    for (let i = 0; i < 4; i++) {
      const [ns, out] = splitmix32(st);
      st = ns;
      this.s[i] = out;
    }
    if ((this.s[0] | this.s[1] | this.s[2] | this.s[3]) === 0) this.s[0] = 1;
  }

  /** Uniform u32. */
  nextU32(): number {
    const s = this.s;
    const r = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return r;
  }

  /** Uniform in the open interval (0, 1). */
  uniform(): number {
    return (this.nextU32() + 0.5) / 4294967296;
  }

  /** N(0,1) via the polar (Marsaglia) form of Box-Muller: no trig; both outputs of a pair are used. */
  normal(): number {
    if (this.hasSpare) {
      this.hasSpare = false;
      return this.spare;
    }
    let u: number, v: number, s: number;
    do {
      u = this.nextU32() / 2147483648 - 1; // [-1, 1)
      v = this.nextU32() / 2147483648 - 1;
      s = u * u + v * v;
    } while (s >= 1 || s === 0);
    const f = Math.sqrt((-2 * Math.log(s)) / s);
    this.spare = v * f;
    this.hasSpare = true;
    return u * f;
  }

  /**
   * out[i] = add + mul·z_i for i < out.length: the same draws as calling normal() out.length
   * times, with the generator inlined (the bench preset draws ~0.9 G normals).
   */
  fillNormal(out: Float32Array, mul: number, add: number): void {
    let i = 0;
    if (this.hasSpare && out.length > 0) out[i++] = add + mul * this.normal();
    let s0 = this.s[0], s1 = this.s[1], s2 = this.s[2], s3 = this.s[3];
    const n = out.length;
    while (i < n) {
      let u: number, v: number, q: number;
      do {
        // two xoshiro128** steps
        let r = Math.imul(s1, 5);
        r = Math.imul((r << 7) | (r >>> 25), 9) >>> 0;
        let t = s1 << 9;
        s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = (s3 << 11) | (s3 >>> 21);
        u = r / 2147483648 - 1;
        r = Math.imul(s1, 5);
        r = Math.imul((r << 7) | (r >>> 25), 9) >>> 0;
        t = s1 << 9;
        s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = (s3 << 11) | (s3 >>> 21);
        v = r / 2147483648 - 1;
        q = u * u + v * v;
      } while (q >= 1 || q === 0);
      const f = Math.sqrt((-2 * Math.log(q)) / q);
      out[i++] = add + mul * u * f;
      if (i < n) out[i++] = add + mul * v * f;
      else {
        this.spare = v * f;
        this.hasSpare = true;
      }
    }
    this.s[0] = s0; this.s[1] = s1; this.s[2] = s2; this.s[3] = s3;
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** The f32 values of one planned tensor (row-major), from its own seeded stream. */
export function fillTensor(t: PlannedTensor, seed: number): Float32Array {
  const n = numel(t.shape);
  const out = new Float32Array(n);
  const rng = new Rng(seed, t.stream ?? t.name);
  const init = t.init;
  if (init.kind === "normal") rng.fillNormal(out, init.std, 0);
  else if (init.kind === "norm") rng.fillNormal(out, init.std, 1);
  else {
    // [O, 2O] = [I | 0] + noise: the embedding half passes through, the hidden half is ~0.
    const [O, I] = t.shape;
    if (t.shape.length !== 2 || I !== 2 * O) throw new Error(`eye_left init needs [O, 2O], got [${t.shape}] for ${t.name}`);
    rng.fillNormal(out, init.noise, 0);
    for (let o = 0; o < O; o++) out[o * I + o] += 1;
  }
  return out;
}

/** f32 → bf16 bits, round to nearest even; NaN → quiet NaN. */
export function toBf16(x: Float32Array): Uint16Array {
  const u = new Uint32Array(x.buffer, x.byteOffset, x.length);
  const out = new Uint16Array(x.length);
  for (let i = 0; i < u.length; i++) {
    const b = u[i];
    out[i] = (b & 0x7fffffff) > 0x7f800000 ? 0x7fc0 : (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
  }
  return out;
}

/** bf16 bits → f32 (exact). */
export function fromBf16(x: Uint16Array): Float32Array {
  const out = new Float32Array(x.length);
  const u = new Uint32Array(out.buffer);
  for (let i = 0; i < x.length; i++) u[i] = x[i] << 16;
  return out;
}

/** The bytes of one planned tensor as stored (little-endian; x86/ARM hosts are LE). */
export function tensorData(t: PlannedTensor, seed: number): Uint8Array {
  const f = fillTensor(t, seed);
  const v = t.dtype === "BF16" ? toBf16(f) : f;
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}
