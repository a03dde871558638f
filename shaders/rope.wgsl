// WGSL twin of rope.comp (same workgroup size, indexing and arithmetic).
// Interleaved RoPE (spec §3.2): for row r, vector v, pair j < h:
//   (a, b) = src[sOff + r·sRow + v·sVec + 2j, +1];  c, s = cs[(csRow0 + r)·csStride + 2j, +1]
//   dst[dOff + r·dRow + v·dVec + 2j, +1] = (a·c − b·s, b·c + a·s)
// cos/sin come from the host (double, rounded once). In place allowed. Dispatch (ceil(h/64), nvec, rows).
// Storage bindings written here are read_write, the others read (src/device/push.ts `writes`); the push block is the uniform p (group 1).
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<storage, read> cs: array<f32>;
struct P { h: i32, sOff: i32, sRow: i32, sVec: i32, dOff: i32, dRow: i32, dVec: i32, csRow0: i32, csStride: i32 };
@group(1) @binding(0) var<uniform> p: P;

@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let j = i32(gid.x);
  let v = i32(wid.y);
  let r = i32(wid.z);
  if (j >= p.h) { return; }
  let si = p.sOff + r * p.sRow + v * p.sVec + 2 * j;
  let ci = (p.csRow0 + r) * p.csStride + 2 * j;
  let di = p.dOff + r * p.dRow + v * p.dVec + 2 * j;
  let a = src[si];
  let b = src[si + 1];
  let c = cs[ci];
  let s = cs[ci + 1];
  dst[di] = a * c - b * s;
  dst[di + 1] = b * c + a * s;
}
