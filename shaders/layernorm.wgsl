// WGSL twin of layernorm.comp (same workgroup size, loop order and reduction tree).
// LayerNorm over rows (population variance): y = (x − mean) / sqrt(var + eps) ⊙ w + b.
// Rows at xOff + s·xRow / yOff + s·yRow; in place allowed. One workgroup per row; dispatch (S).
// Storage bindings written here are read_write, the others read (src/device/push.ts `writes`); the push block is the uniform p (group 1).
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
struct P { D: i32, xOff: i32, xRow: i32, yOff: i32, yRow: i32, eps: f32 };
@group(1) @binding(0) var<uniform> p: P;
var<workgroup> red: array<f32, 64>;

// workgroup sum of v (tid = the local invocation index); called in uniform control flow
fn total(v: f32, tid: u32) -> f32 {
  workgroupBarrier();
  red[tid] = v;
  workgroupBarrier();
  for (var k = 32u; k > 0u; k >>= 1u) {
    if (tid < k) { red[tid] += red[tid + k]; }
    workgroupBarrier();
  }
  return red[0];
}

@compute @workgroup_size(64) fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let tid = lid.x;
  let s = i32(wid.x);
  let xb = p.xOff + s * p.xRow;
  let yb = p.yOff + s * p.yRow;
  var sum = 0.0;
  for (var i = i32(tid); i < p.D; i += 64) { sum += x[xb + i]; }
  let mean = total(sum, tid) / f32(p.D);
  var vr = 0.0;
  for (var i = i32(tid); i < p.D; i += 64) { let d = x[xb + i] - mean; vr += d * d; }
  let r = 1.0 / sqrt(total(vr, tid) / f32(p.D) + p.eps);
  for (var i = i32(tid); i < p.D; i += 64) { y[yb + i] = (x[xb + i] - mean) * r * w[i] + b[i]; }
}
