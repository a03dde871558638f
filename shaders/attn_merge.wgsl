// WGSL twin of attn_merge.comp (same workgroup size, indexing and arithmetic).
// Merge of two partial attentions over disjoint key sets through their softmax statistics (the KV split):
// for row s = s0 + group.z, head h = group.y, element e: (o1, m1, l1) in o/st (the device's part, written in
// place), (o2, m2, l2) in o2/st2 (the CPU's part, hb_attn_stats), both normalised outputs;
//   l2 = 0: o1 kept;  l1 = 0: o2;  else M = max(m1, m2), a = l1·e^(m1−M), b = l2·e^(m2−M), o = (a·o1 + b·o2)/(a + b).
// Operands [rows, H, dv] at (row, head) strides oRow/oHead (same for o2); stats [rows·H, 2].
// Dispatch (ceil(dv/64), H, rows).
// Storage bindings written here are read_write, the others read (src/device/push.ts `writes`); the push block is the uniform p (group 1).
@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@group(0) @binding(1) var<storage, read> st: array<f32>;
@group(0) @binding(2) var<storage, read> o2: array<f32>;
@group(0) @binding(3) var<storage, read> st2: array<f32>;
struct P { s0: i32, H: i32, dv: i32, oRow: i32, oHead: i32 };
@group(1) @binding(0) var<uniform> p: P;

@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let e = i32(gid.x);
  let h = i32(wid.y);
  let s = p.s0 + i32(wid.z);
  if (e >= p.dv) { return; }
  let sb = 2 * (s * p.H + h);
  let i = s * p.oRow + h * p.oHead + e;
  let l1 = st[sb + 1];
  let l2 = st2[sb + 1];
  if (!(l2 > 0.0)) { return; }
  if (!(l1 > 0.0)) { o[i] = o2[i]; return; }
  let m1 = st[sb];
  let m2 = st2[sb];
  let M = max(m1, m2);
  let a = l1 * exp(m1 - M);
  let b = l2 * exp(m2 - M);
  o[i] = (a * o[i] + b * o2[i]) / (a + b);
}
