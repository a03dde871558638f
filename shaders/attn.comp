// Attention core (the contract of hb_attn): for batch row s = s0 + group.x and head h = group.y,
// keys t_j = useSel ? sel[s·selRow + j] : j for j < nsel[s];
//   p = softmax_j(scale · q[s,h]·k[t_j,h]);  out[s,h] = Σ_j p_j · v[t_j,h]  (no keys: zeros)
// operand (row, head) at off + row·rowStride + head·headStride (head stride 0 = shared, as MLA's c_kv ‖ k_pe).
// Scores live in the scratch P [rows·H, pStride]. Softmax: max-subtracted, normalised before the sum.
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) readonly buffer Selb { int sel[]; };
layout(std430, binding = 4) readonly buffer Nb { int nsel[]; };
layout(std430, binding = 5) coherent buffer Pb { float pb[]; };
layout(std430, binding = 6) buffer Ob { float o[]; };
layout(push_constant) uniform P {
  int s0, H, dk, dv, qOff, qRow, qHead, kOff, kRow, kHead, vOff, vRow, vHead, oOff, oRow, oHead, selRow, useSel, pStride;
  float scale;
} p;
shared float red[64];

int key(int s, int j) { return p.useSel != 0 ? sel[s * p.selRow + j] : j; }

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const int s = p.s0 + int(gl_WorkGroupID.x), h = int(gl_WorkGroupID.y);
  const int n = max(nsel[s], 0), ob = p.oOff + s * p.oRow + h * p.oHead;
  if (n == 0) {
    for (int e = int(tid); e < p.dv; e += 64) o[ob + e] = 0.0;
    return;
  }
  const int qb = p.qOff + s * p.qRow + h * p.qHead, base = (s * p.H + h) * p.pStride;
  float mx = -3.402823466e38;
  for (int j = int(tid); j < n; j += 64) {
    const int kb = p.kOff + key(s, j) * p.kRow + h * p.kHead;
    float d = 0.0;
    for (int i = 0; i < p.dk; i++) d += q[qb + i] * k[kb + i];
    const float sc = p.scale * d;
    pb[base + j] = sc;
    mx = max(mx, sc);
  }
  red[tid] = mx;
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (tid < w) red[tid] = max(red[tid], red[tid + w]);
    barrier();
  }
  const float m = red[0];
  barrier();
  float sum = 0.0;
  for (int j = int(tid); j < n; j += 64) { const float e = exp(pb[base + j] - m); pb[base + j] = e; sum += e; }
  red[tid] = sum;
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (tid < w) red[tid] += red[tid + w];
    barrier();
  }
  const float tot = red[0];
  for (int j = int(tid); j < n; j += 64) pb[base + j] = pb[base + j] / tot;
  memoryBarrierBuffer();
  barrier();
  for (int e = int(tid); e < p.dv; e += 64) {
    float acc = 0.0;
    for (int j = 0; j < n; j++) acc += pb[base + j] * v[p.vOff + key(s, j) * p.vRow + h * p.vHead + e];
    o[ob + e] = acc;
  }
}
