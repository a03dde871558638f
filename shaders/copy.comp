// Strided float copy over a 2-level row grid (r0 < R0, r1 < R1, k < K):
//   dst[dOff + r0·dRow0 + r1·dRow1 + k] = src[sOff + r0·sRow0 + r1·sRow1 + k].  Dispatch (ceil(K/64), R1, R0).
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Sb { float src[]; };
layout(std430, binding = 1) buffer Db { float dst[]; };
layout(push_constant) uniform P { int K, sOff, sRow0, sRow1, dOff, dRow0, dRow1; } p;

void main() {
  const int k = int(gl_GlobalInvocationID.x), r1 = int(gl_WorkGroupID.y), r0 = int(gl_WorkGroupID.z);
  if (k >= p.K) return;
  dst[p.dOff + r0 * p.dRow0 + r1 * p.dRow1 + k] = src[p.sOff + r0 * p.sRow0 + r1 * p.sRow1 + k];
}
