// RMSNorm over rows: y[yOff + s·yRow + i] = x[xOff + s·xRow + i] / sqrt(mean(x²) + eps) ⊙ w[i]  (hasW 0: w = 1)
// In place is allowed (x and y the same buffer). One workgroup per row; dispatch (S).
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Xb { float x[]; };
layout(std430, binding = 1) readonly buffer Wb { float w[]; };
layout(std430, binding = 2) buffer Yb { float y[]; };
layout(push_constant) uniform P { int D, xOff, xRow, yOff, yRow, hasW; float eps; } p;
shared float red[64];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const int s = int(gl_WorkGroupID.x), xb = p.xOff + s * p.xRow, yb = p.yOff + s * p.yRow;
  float ss = 0.0;
  for (int i = int(tid); i < p.D; i += 64) { float v = x[xb + i]; ss += v * v; }
  red[tid] = ss;
  barrier();
  for (uint k = 32u; k > 0u; k >>= 1) {
    if (tid < k) red[tid] += red[tid + k];
    barrier();
  }
  const float r = 1.0 / sqrt(red[0] / float(p.D) + p.eps);
  for (int i = int(tid); i < p.D; i += 64) y[yb + i] = x[xb + i] * r * (p.hasW != 0 ? w[i] : 1.0);
}
