// WGSL twin of index_scores.comp (same workgroup size, loop order and arithmetic).
// DSA lightning-indexer scores (the contract of hb_index_scores), batch row s = s0 + group.y, key t:
//   out[outOff + s·outRow + t] = Σ_h w[s·nh + h] · ReLU(scale · qI[s·nh·hd + h·hd ..]·kI[kOff + t·hd ..]),  t < nk[s]
// Heads summed in ascending order. Dispatch (ceil(maxNk/64), rows).
// Storage bindings written here are read_write, the others read (src/device/push.ts `writes`); the push block is the uniform p (group 1).
@group(0) @binding(0) var<storage, read> qI: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> kI: array<f32>;
@group(0) @binding(3) var<storage, read> nk: array<i32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;
struct P { s0: i32, nh: i32, hd: i32, kOff: i32, outOff: i32, outRow: i32, scale: f32 };
@group(1) @binding(0) var<uniform> p: P;

@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let t = i32(gid.x);
  let s = p.s0 + i32(wid.y);
  if (t >= nk[s]) { return; }
  let kb = p.kOff + t * p.hd;
  var acc = 0.0;
  for (var h = 0; h < p.nh; h++) {
    let qb = (s * p.nh + h) * p.hd;
    var d = 0.0;
    for (var i = 0; i < p.hd; i++) { d += qI[qb + i] * kI[kb + i]; }
    let x = p.scale * d;
    acc += w[s * p.nh + h] * select(0.0, x, x > 0.0);
  }
  o[p.outOff + s * p.outRow + t] = acc;
}
