// Interleaved RoPE (spec §3.2): for row r, vector v, pair j < h:
//   (a, b) = src[sOff + r·sRow + v·sVec + 2j, +1];  c, s = cs[(csRow0 + r)·csStride + 2j, +1]
//   dst[dOff + r·dRow + v·dVec + 2j, +1] = (a·c − b·s, b·c + a·s)
// cos/sin come from the host (double, rounded once). In place allowed. Dispatch (ceil(h/64), nvec, rows).
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Sb { float src[]; };
layout(std430, binding = 1) buffer Db { float dst[]; };
layout(std430, binding = 2) readonly buffer Cb { float cs[]; };
layout(push_constant) uniform P { int h, sOff, sRow, sVec, dOff, dRow, dVec, csRow0, csStride; } p;

void main() {
  const int j = int(gl_GlobalInvocationID.x), v = int(gl_WorkGroupID.y), r = int(gl_WorkGroupID.z);
  if (j >= p.h) return;
  const int si = p.sOff + r * p.sRow + v * p.sVec + 2 * j, ci = (p.csRow0 + r) * p.csStride + 2 * j;
  const int di = p.dOff + r * p.dRow + v * p.dVec + 2 * j;
  const float a = src[si], b = src[si + 1], c = cs[ci], s = cs[ci + 1];
  dst[di] = a * c - b * s;
  dst[di + 1] = b * c + a * s;
}
