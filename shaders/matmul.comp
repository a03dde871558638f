// y [S, G·O] = alpha · W [rows, I] · x: for output o of group g and row s,
//   y[yOff + s·yRow + g·yGroup + o] = alpha · Σ_i W[wRow0 + g·wGroup + o, i] · x[xOff + s·xRow + g·xGroup + i]
// G = 1 is the plain matmul. Weight formats (formats.md) via -DFMT: 0 f32, 1 int8-row (q·s[row]),
// 2 int4-row ((nib−8)·s[row], ⌈I/2⌉ bytes a row), 3 int2-row ((f−2)·s[row], ⌈I/4⌉ bytes a row),
// 4 int4-group ((nib−8)·s[row·⌈I/gs⌉ + ⌊i/gs⌋]), 5 bf16, 6 f16; dequantised here, activations stay f32.
// W is bound as raw 32-bit words of one chunk (whole rows, chunk starts 4-byte aligned); the scales as f32
// of the same rows (chunked alike), scRow0 = the scale row of the binding's first weight row. Row scales
// multiply the row's sum; group scales each element. One workgroup per (o, g, s); dispatch (O, G, S).
#version 450
#ifndef FMT
#define FMT 0
#endif
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Sb { float sc[]; };
layout(std430, binding = 2) readonly buffer Xb { float x[]; };
layout(std430, binding = 3) buffer Yb { float y[]; };
layout(push_constant) uniform P { int O, I, wRow0, wGroup, scRow0, xOff, xRow, xGroup, yOff, yRow, yGroup, gs; float alpha; } p;
shared float red[64];

uint byteAt(uint b) { return (w[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }

// element i of chunk row r (row-major), before any row scale; gsc = the row's first group scale index
float wq(uint r, uint i, uint gsc) {
#if FMT == 0
  return uintBitsToFloat(w[r * uint(p.I) + i]);
#elif FMT == 5
  const uint e = r * uint(p.I) + i, v = w[e >> 1];
  return uintBitsToFloat((e & 1u) != 0u ? (v & 0xffff0000u) : (v << 16));
#elif FMT == 6
  const uint e = r * uint(p.I) + i;
  vec2 h = unpackHalf2x16(w[e >> 1]);
  return (e & 1u) != 0u ? h.y : h.x;
#elif FMT == 1
  const uint e = r * uint(p.I) + i;
  return float(bitfieldExtract(int(w[e >> 2]), int((e & 3u) * 8u), 8));
#elif FMT == 2 || FMT == 4
  const uint b = byteAt(r * ((uint(p.I) + 1u) >> 1) + (i >> 1));
  const float v = float(int((b >> ((i & 1u) * 4u)) & 15u) - 8);
#if FMT == 4
  return v * sc[gsc + i / uint(p.gs)];
#else
  return v;
#endif
#elif FMT == 3
  const uint b = byteAt(r * ((uint(p.I) + 3u) >> 2) + (i >> 2));
  return float(int((b >> ((i & 3u) * 2u)) & 3u) - 2);
#else
#error unsupported FMT
#endif
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const int o = int(gl_WorkGroupID.x), g = int(gl_WorkGroupID.y), s = int(gl_WorkGroupID.z);
  const int wr = p.wRow0 + g * p.wGroup + o;
  const int xb = p.xOff + s * p.xRow + g * p.xGroup;
#if FMT == 4
  const uint gsc = uint(p.scRow0 + wr) * uint((p.I + p.gs - 1) / p.gs);
#else
  const uint gsc = 0u;
#endif
  float acc = 0.0;
  for (int i = int(tid); i < p.I; i += 64) acc += wq(uint(wr), uint(i), gsc) * x[xb + i];
  red[tid] = acc;
  barrier();
  for (uint k = 32u; k > 0u; k >>= 1) {
    if (tid < k) red[tid] += red[tid + k];
    barrier();
  }
  if (tid == 0u) {
    float v = red[0];
#if FMT == 1 || FMT == 2 || FMT == 3
    v *= sc[p.scRow0 + wr];
#endif
    y[p.yOff + s * p.yRow + g * p.yGroup + o] = v * p.alpha;
  }
}
