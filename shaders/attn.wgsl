// WGSL twin of attn.comp (same workgroup size, loop order and reduction trees).
// Attention core (the contract of hb_attn): for batch row s = s0 + group.x and head h = group.y,
// keys t_j = useSel ? sel[s·selRow + j] : j for j < nsel[s];
//   p = softmax_j(scale · q[s,h]·k[t_j,h]);  out[s,h] = Σ_j p_j · v[t_j,h]  (no keys: zeros)
// operand (row, head) at off + row·rowStride + head·headStride (head stride 0 = shared, as MLA's c_kv ‖ k_pe).
// useTab (the KV split): key t lives in K/V row tab[t/blk]·blk + t%blk, and keys whose block is not resident
// (tab < 0) are left out (the CPU attends over them). useStats: stats[2(s·H+h)] = the row max m and
// stats[2(s·H+h)+1] = l = Σ exp(score − m) over the attended keys (l = 0 when there were none), the
// statistics attn_merge.comp combines two partial attentions with (hb_attn_stats on the CPU).
// Scores live in the scratch P [rows·H, pStride]. Softmax: max-subtracted, normalised before the sum.
// Storage bindings written here are read_write, the others read (src/device/push.ts `writes`); the push block is the uniform p (group 1).
// The total l is read with workgroupUniformLoad (it decides the early return ahead of later barriers);
// the GLSL's memoryBarrierBuffer() + barrier() before the P·V loop is storageBarrier() + workgroupBarrier().
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> sel: array<i32>;
@group(0) @binding(4) var<storage, read> nsel: array<i32>;
@group(0) @binding(5) var<storage, read_write> pb: array<f32>;
@group(0) @binding(6) var<storage, read_write> o: array<f32>;
@group(0) @binding(7) var<storage, read> tab: array<i32>;
@group(0) @binding(8) var<storage, read_write> stt: array<f32>;
struct P { s0: i32, H: i32, dk: i32, dv: i32, qOff: i32, qRow: i32, qHead: i32, kOff: i32, kRow: i32, kHead: i32, vOff: i32, vRow: i32, vHead: i32, oOff: i32, oRow: i32, oHead: i32, selRow: i32, useSel: i32, pStride: i32, useTab: i32, blk: i32, useStats: i32, scale: f32 };
@group(1) @binding(0) var<uniform> p: P;
var<workgroup> red: array<f32, 64>;
const NEG: f32 = -3.402823466e38;

fn key(s: i32, j: i32) -> i32 {
  if (p.useSel != 0) { return sel[s * p.selRow + j]; }
  return j;
}
// K/V row of key t, or -1 when its block is not on the device
fn rowOf(t: i32) -> i32 {
  if (p.useTab == 0) { return t; }
  let sl = tab[t / p.blk];
  if (sl < 0) { return -1; }
  return sl * p.blk + t % p.blk;
}

@compute @workgroup_size(64) fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let tid = lid.x;
  let s = p.s0 + i32(wid.x);
  let h = i32(wid.y);
  let n = max(nsel[s], 0);
  let ob = p.oOff + s * p.oRow + h * p.oHead;
  let sb = 2 * (s * p.H + h);
  let qb = p.qOff + s * p.qRow + h * p.qHead;
  let base = (s * p.H + h) * p.pStride;
  var mx = NEG;
  for (var j = i32(tid); j < n; j += 64) {
    let r = rowOf(key(s, j));
    if (r < 0) { pb[base + j] = NEG; continue; }
    let kb = p.kOff + r * p.kRow + h * p.kHead;
    var d = 0.0;
    for (var i = 0; i < p.dk; i++) { d += q[qb + i] * k[kb + i]; }
    let sc = p.scale * d;
    pb[base + j] = sc;
    mx = max(mx, sc);
  }
  red[tid] = mx;
  workgroupBarrier();
  for (var w = 32u; w > 0u; w >>= 1u) {
    if (tid < w) { red[tid] = max(red[tid], red[tid + w]); }
    workgroupBarrier();
  }
  let m = red[0];
  workgroupBarrier();
  var sum = 0.0;
  for (var j = i32(tid); j < n; j += 64) {
    let inb = p.useTab == 0 || rowOf(key(s, j)) >= 0;
    var e = 0.0;
    if (inb) { e = exp(pb[base + j] - m); }
    pb[base + j] = e;
    sum += e;
  }
  red[tid] = sum;
  workgroupBarrier();
  for (var w = 32u; w > 0u; w >>= 1u) {
    if (tid < w) { red[tid] += red[tid + w]; }
    workgroupBarrier();
  }
  let tot = workgroupUniformLoad(&red[0]);
  if (p.useStats != 0 && tid == 0u) { stt[sb] = m; stt[sb + 1] = tot; }
  if (tot <= 0.0) { // no (resident) keys
    for (var e = i32(tid); e < p.dv; e += 64) { o[ob + e] = 0.0; }
    return;
  }
  for (var j = i32(tid); j < n; j += 64) { pb[base + j] = pb[base + j] / tot; }
  storageBarrier();
  workgroupBarrier();
  for (var e = i32(tid); e < p.dv; e += 64) {
    var acc = 0.0;
    for (var j = 0; j < n; j++) {
      let r = rowOf(key(s, j));
      if (r >= 0) { acc += pb[base + j] * v[p.vOff + r * p.vRow + h * p.vHead + e]; }
    }
    o[ob + e] = acc;
  }
}
