// LayerNorm over rows (population variance): y = (x − mean) / sqrt(var + eps) ⊙ w + b.
// Rows at xOff + s·xRow / yOff + s·yRow; in place allowed. One workgroup per row; dispatch (S).
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Xb { float x[]; };
layout(std430, binding = 1) readonly buffer Wb { float w[]; };
layout(std430, binding = 2) readonly buffer Bb { float b[]; };
layout(std430, binding = 3) buffer Yb { float y[]; };
layout(push_constant) uniform P { int D, xOff, xRow, yOff, yRow; float eps; } p;
shared float red[64];

float total(float v) {
  const uint tid = gl_LocalInvocationID.x;
  barrier();
  red[tid] = v;
  barrier();
  for (uint k = 32u; k > 0u; k >>= 1) {
    if (tid < k) red[tid] += red[tid + k];
    barrier();
  }
  return red[0];
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const int s = int(gl_WorkGroupID.x), xb = p.xOff + s * p.xRow, yb = p.yOff + s * p.yRow;
  float sum = 0.0;
  for (int i = int(tid); i < p.D; i += 64) sum += x[xb + i];
  const float mean = total(sum) / float(p.D);
  float var = 0.0;
  for (int i = int(tid); i < p.D; i += 64) { float d = x[xb + i] - mean; var += d * d; }
  const float r = 1.0 / sqrt(total(var) / float(p.D) + p.eps);
  for (int i = int(tid); i < p.D; i += 64) y[yb + i] = (x[xb + i] - mean) * r * w[i] + b[i];
}
