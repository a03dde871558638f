// DSA lightning-indexer scores (the contract of hb_index_scores), batch row s = s0 + group.y, key t:
//   out[outOff + s·outRow + t] = Σ_h w[s·nh + h] · ReLU(scale · qI[s·nh·hd + h·hd ..]·kI[kOff + t·hd ..]),  t < nk[s]
// Heads summed in ascending order. Dispatch (ceil(maxNk/64), rows).
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Qb { float qI[]; };
layout(std430, binding = 1) readonly buffer Wb { float w[]; };
layout(std430, binding = 2) readonly buffer Kb { float kI[]; };
layout(std430, binding = 3) readonly buffer Nb { int nk[]; };
layout(std430, binding = 4) buffer Ob { float o[]; };
layout(push_constant) uniform P { int s0, nh, hd, kOff, outOff, outRow; float scale; } p;

void main() {
  const int t = int(gl_GlobalInvocationID.x), s = p.s0 + int(gl_WorkGroupID.y);
  if (t >= nk[s]) return;
  const int kb = p.kOff + t * p.hd;
  float acc = 0.0;
  for (int h = 0; h < p.nh; h++) {
    const int qb = (s * p.nh + h) * p.hd;
    float d = 0.0;
    for (int i = 0; i < p.hd; i++) d += qI[qb + i] * kI[kb + i];
    const float x = p.scale * d;
    acc += w[s * p.nh + h] * (x > 0.0 ? x : 0.0);
  }
  o[p.outOff + s * p.outRow + t] = acc;
}
