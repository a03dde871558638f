// out[oOff + i] = silu(g[gOff + i]) · u[uOff + i],  silu(g) = g · 1/(1 + e^−g), i < n (grid-stride).
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Gb { float g[]; };
layout(std430, binding = 1) readonly buffer Ub { float u[]; };
layout(std430, binding = 2) buffer Ob { float o[]; };
layout(push_constant) uniform P { int n, gOff, uOff, oOff; } p;

void main() {
  const int stride = int(gl_NumWorkGroups.x) * 256;
  for (int i = int(gl_GlobalInvocationID.x); i < p.n; i += stride) {
    const float a = g[p.gOff + i], s = 1.0 / (1.0 + exp(-a));
    o[p.oOff + i] = a * s * u[p.uOff + i];
  }
}
