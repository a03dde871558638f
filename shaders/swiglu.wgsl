// WGSL twin of swiglu.comp (same workgroup size, indexing and loop order).
// out[oOff + i] = silu(g[gOff + i]) · u[uOff + i],  silu(g) = g · 1/(1 + e^−g), i < n (grid-stride).
// Storage bindings written here are read_write, the others read (src/device/push.ts `writes`); the push block is the uniform p (group 1).
@group(0) @binding(0) var<storage, read> g: array<f32>;
@group(0) @binding(1) var<storage, read> u: array<f32>;
@group(0) @binding(2) var<storage, read_write> o: array<f32>;
struct P { n: i32, gOff: i32, uOff: i32, oOff: i32 };
@group(1) @binding(0) var<uniform> p: P;

@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let stride = i32(nwg.x) * 256;
  for (var i = i32(gid.x); i < p.n; i += stride) {
    let a = g[p.gOff + i];
    let s = 1.0 / (1.0 + exp(-a));
    o[p.oOff + i] = a * s * u[p.uOff + i];
  }
}
