// y[yOff + i] += x[xOff + i], i < n (grid-stride).
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Yb { float y[]; };
layout(std430, binding = 1) readonly buffer Xb { float x[]; };
layout(push_constant) uniform P { int n, yOff, xOff; } p;

void main() {
  const int stride = int(gl_NumWorkGroups.x) * 256;
  for (int i = int(gl_GlobalInvocationID.x); i < p.n; i += stride) y[p.yOff + i] += x[p.xOff + i];
}
