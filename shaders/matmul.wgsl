// WGSL twin of matmul.comp (same workgroup size, loop order and reduction tree; -DFMT is the override FMT).
// y [S, G·O] = alpha · W [rows, I] · x: for output o of group g and row s,
//   y[yOff + s·yRow + g·yGroup + o] = alpha · Σ_i W[wRow0 + g·wGroup + o, i] · x[xOff + s·xRow + g·xGroup + i]
// G = 1 is the plain matmul. Weight formats (formats.md) via the override FMT: 0 f32, 1 int8-row (q·s[row]),
// 2 int4-row ((nib−8)·s[row], ⌈I/2⌉ bytes a row), 3 int2-row ((f−2)·s[row], ⌈I/4⌉ bytes a row),
// 4 int4-group ((nib−8)·s[row·⌈I/gs⌉ + ⌊i/gs⌋]), 5 bf16, 6 f16; dequantised here, activations stay f32.
// W is bound as raw 32-bit words of one chunk (whole rows, chunk starts 4-byte aligned); the scales as f32
// of the same rows (chunked alike), scRow0 = the scale row of the binding's first weight row. Row scales
// multiply the row's sum; group scales each element. One workgroup per (o, g, s); dispatch (O, G, S).
// Storage bindings written here are read_write, the others read (src/device/push.ts `writes`); the push block is the uniform p (group 1).
// An FMT outside 0..6 fails pipeline creation (the workgroup array's size becomes 0), as glslc's #error did.
override FMT: u32 = 0u;
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> sc: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
struct P { O: i32, I: i32, wRow0: i32, wGroup: i32, scRow0: i32, xOff: i32, xRow: i32, xGroup: i32, yOff: i32, yRow: i32, yGroup: i32, gs: i32, alpha: f32 };
@group(1) @binding(0) var<uniform> p: P;
var<workgroup> red: array<f32, select(0u, 64u, FMT <= 6u)>;

fn byteAt(b: u32) -> u32 { return (w[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu; }

// element i of chunk row r (row-major), before any row scale; gsc = the row's first group scale index
fn wq(r: u32, i: u32, gsc: u32) -> f32 {
  switch FMT {
    case 0u: {
      return bitcast<f32>(w[r * u32(p.I) + i]);
    }
    case 5u: {
      let e = r * u32(p.I) + i;
      let v = w[e >> 1u];
      return bitcast<f32>(select(v << 16u, v & 0xffff0000u, (e & 1u) != 0u));
    }
    case 6u: {
      let e = r * u32(p.I) + i;
      let h = unpack2x16float(w[e >> 1u]);
      return select(h.x, h.y, (e & 1u) != 0u);
    }
    case 1u: {
      let e = r * u32(p.I) + i;
      return f32(extractBits(bitcast<i32>(w[e >> 2u]), (e & 3u) * 8u, 8u));
    }
    case 2u, 4u: {
      let b = byteAt(r * ((u32(p.I) + 1u) >> 1u) + (i >> 1u));
      let v = f32(i32((b >> ((i & 1u) * 4u)) & 15u) - 8);
      if (FMT == 4u) { return v * sc[gsc + i / u32(p.gs)]; }
      return v;
    }
    case 3u: {
      let b = byteAt(r * ((u32(p.I) + 3u) >> 2u) + (i >> 2u));
      return f32(i32((b >> ((i & 3u) * 2u)) & 3u) - 2);
    }
    default: {
      return 0.0; // unreachable: red's size rejects FMT > 6 at pipeline creation
    }
  }
}

@compute @workgroup_size(64) fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let tid = lid.x;
  let o = i32(wid.x);
  let g = i32(wid.y);
  let s = i32(wid.z);
  let wr = p.wRow0 + g * p.wGroup + o;
  let xb = p.xOff + s * p.xRow + g * p.xGroup;
  var gsc = 0u;
  if (FMT == 4u) { gsc = u32(p.scRow0 + wr) * u32((p.I + p.gs - 1) / p.gs); }
  var acc = 0.0;
  for (var i = i32(tid); i < p.I; i += 64) { acc += wq(u32(wr), u32(i), gsc) * x[xb + i]; }
  red[tid] = acc;
  workgroupBarrier();
  for (var k = 32u; k > 0u; k >>= 1u) {
    if (tid < k) { red[tid] += red[tid + k]; }
    workgroupBarrier();
  }
  if (tid == 0u) {
    var v = red[0];
    if (FMT == 1u || FMT == 2u || FMT == 3u) { v *= sc[p.scRow0 + wr]; }
    y[p.yOff + s * p.yRow + g * p.yGroup + o] = v * p.alpha;
  }
}
