// Merge of two partial attentions over disjoint key sets through their softmax statistics (the KV split):
// for row s = s0 + group.z, head h = group.y, element e: (o1, m1, l1) in o/st (the device's part, written in
// place), (o2, m2, l2) in o2/st2 (the CPU's part, hb_attn_stats), both normalised outputs;
//   l2 = 0: o1 kept;  l1 = 0: o2;  else M = max(m1, m2), a = l1·e^(m1−M), b = l2·e^(m2−M), o = (a·o1 + b·o2)/(a + b).
// Operands [rows, H, dv] at (row, head) strides oRow/oHead (same for o2); stats [rows·H, 2].
// Dispatch (ceil(dv/64), H, rows).
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Ob { float o[]; };
layout(std430, binding = 1) readonly buffer Sb { float st[]; };
layout(std430, binding = 2) readonly buffer O2b { float o2[]; };
layout(std430, binding = 3) readonly buffer S2b { float st2[]; };
layout(push_constant) uniform P { int s0, H, dv, oRow, oHead; } p;

void main() {
  const int e = int(gl_GlobalInvocationID.x), h = int(gl_WorkGroupID.y), s = p.s0 + int(gl_WorkGroupID.z);
  if (e >= p.dv) return;
  const int sb = 2 * (s * p.H + h), i = s * p.oRow + h * p.oHead + e;
  const float l1 = st[sb + 1], l2 = st2[sb + 1];
  if (!(l2 > 0.0)) return;
  if (!(l1 > 0.0)) { o[i] = o2[i]; return; }
  const float m1 = st[sb], m2 = st2[sb], M = max(m1, m2);
  const float a = l1 * exp(m1 - M), b = l2 * exp(m2 - M);
  o[i] = (a * o[i] + b * o2[i]) / (a + b);
}
