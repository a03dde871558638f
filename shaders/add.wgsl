// WGSL twin of add.comp (same workgroup size, indexing and loop order).
// y[yOff + i] += x[xOff + i], i < n (grid-stride).
// Storage bindings written here are read_write, the others read (src/device/push.ts `writes`); the push block is the uniform p (group 1).
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
struct P { n: i32, yOff: i32, xOff: i32 };
@group(1) @binding(0) var<uniform> p: P;

@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let stride = i32(nwg.x) * 256;
  for (var i = i32(gid.x); i < p.n; i += stride) { y[p.yOff + i] += x[p.xOff + i]; }
}
