// WGSL twin of rmsnorm.comp (same workgroup size, loop order and reduction tree).
// RMSNorm over rows: y[yOff + s·yRow + i] = x[xOff + s·xRow + i] / sqrt(mean(x²) + eps) ⊙ w[i]  (hasW 0: w = 1)
// In place is allowed (x and y the same buffer). One workgroup per row; dispatch (S).
// Storage bindings written here are read_write, the others read (src/device/push.ts `writes`); the push block is the uniform p (group 1).
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
struct P { D: i32, xOff: i32, xRow: i32, yOff: i32, yRow: i32, hasW: i32, eps: f32 };
@group(1) @binding(0) var<uniform> p: P;
var<workgroup> red: array<f32, 64>;

@compute @workgroup_size(64) fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let tid = lid.x;
  let s = i32(wid.x);
  let xb = p.xOff + s * p.xRow;
  let yb = p.yOff + s * p.yRow;
  var ss = 0.0;
  for (var i = i32(tid); i < p.D; i += 64) { let v = x[xb + i]; ss += v * v; }
  red[tid] = ss;
  workgroupBarrier();
  for (var k = 32u; k > 0u; k >>= 1u) {
    if (tid < k) { red[tid] += red[tid + k]; }
    workgroupBarrier();
  }
  let r = 1.0 / sqrt(red[0] / f32(p.D) + p.eps);
  for (var i = i32(tid); i < p.D; i += 64) {
    var wi = 1.0;
    if (p.hasW != 0) { wi = w[i]; }
    y[yb + i] = x[xb + i] * r * wi;
  }
}
