// y [S, G·O] = alpha · W [rows, I] · x: for output o of group g and row s,
//   y[yOff + s·yRow + g·yGroup + o] = alpha · Σ_i W[wRow0 + g·wGroup + o, i] · x[xOff + s·xRow + g·xGroup + i]
// G = 1 is the plain matmul (formats.md fmt via -DFMT: 0 f32, 1 int8-row (q·s[row]), 5 bf16, 6 f16).
// W is bound as raw 32-bit words of one chunk (whole rows); int8 scales as f32 [rows of the whole matrix],
// scRow0 = the matrix row of the chunk's first row. One workgroup per (o, g, s); dispatch (O, G, S).
#version 450
#ifndef FMT
#define FMT 0
#endif
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Sb { float sc[]; };
layout(std430, binding = 2) readonly buffer Xb { float x[]; };
layout(std430, binding = 3) buffer Yb { float y[]; };
layout(push_constant) uniform P { int O, I, wRow0, wGroup, scRow0, xOff, xRow, xGroup, yOff, yRow, yGroup; float alpha; } p;
shared float red[64];

float wq(uint e) { // element e of the chunk (row-major), before the row scale
#if FMT == 0
  return uintBitsToFloat(w[e]);
#elif FMT == 5
  uint v = w[e >> 1];
  return uintBitsToFloat((e & 1u) != 0u ? (v & 0xffff0000u) : (v << 16));
#elif FMT == 6
  vec2 h = unpackHalf2x16(w[e >> 1]);
  return (e & 1u) != 0u ? h.y : h.x;
#elif FMT == 1
  return float(bitfieldExtract(int(w[e >> 2]), int((e & 3u) * 8u), 8));
#else
#error unsupported FMT
#endif
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const int o = int(gl_WorkGroupID.x), g = int(gl_WorkGroupID.y), s = int(gl_WorkGroupID.z);
  const int wr = p.wRow0 + g * p.wGroup + o;
  const uint base = uint(wr) * uint(p.I);
  const int xb = p.xOff + s * p.xRow + g * p.xGroup;
  float acc = 0.0;
  for (int i = int(tid); i < p.I; i += 64) acc += wq(base + uint(i)) * x[xb + i];
  red[tid] = acc;
  barrier();
  for (uint k = 32u; k > 0u; k >>= 1) {
    if (tid < k) red[tid] += red[tid + k];
    barrier();
  }
  if (tid == 0u) {
    float v = red[0];
#if FMT == 1
    v *= sc[p.scRow0 + wr];
#endif
    y[p.yOff + s * p.yRow + g * p.yGroup + o] = v * p.alpha;
  }
}
