// WGSL twin of copy.comp (same workgroup size and indexing).
// Strided float copy over a 2-level row grid (r0 < R0, r1 < R1, k < K):
//   dst[dOff + r0·dRow0 + r1·dRow1 + k] = src[sOff + r0·sRow0 + r1·sRow1 + k].  Dispatch (ceil(K/64), R1, R0).
// Storage bindings written here are read_write, the others read (src/device/push.ts `writes`); the push block is the uniform p (group 1).
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
struct P { K: i32, sOff: i32, sRow0: i32, sRow1: i32, dOff: i32, dRow0: i32, dRow1: i32 };
@group(1) @binding(0) var<uniform> p: P;

@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let k = i32(gid.x);
  let r1 = i32(wid.y);
  let r0 = i32(wid.z);
  if (k >= p.K) { return; }
  dst[p.dOff + r0 * p.dRow0 + r1 * p.dRow1 + k] = src[p.sOff + r0 * p.sRow0 + r1 * p.sRow1 + k];
}
