// Attention core (the contract of hb_attn): for batch row s = s0 + group.x and head h = group.y,
// keys t_j = useSel ? sel[s·selRow + j] : j for j < nsel[s];
//   p = softmax_j(scale · q[s,h]·k[t_j,h]);  out[s,h] = Σ_j p_j · v[t_j,h]  (no keys: zeros)
// operand (row, head) at off + row·rowStride + head·headStride (head stride 0 = shared, as MLA's c_kv ‖ k_pe).
// useTab (the KV split): key t lives in K/V row tab[t/blk]·blk + t%blk, and keys whose block is not resident
// (tab < 0) are left out (the CPU attends over them). useStats: stats[2(s·H+h)] = the row max m and
// stats[2(s·H+h)+1] = l = Σ exp(score − m) over the attended keys (l = 0 when there were none), the
// statistics attn_merge.comp combines two partial attentions with (hb_attn_stats on the CPU).
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
layout(std430, binding = 7) readonly buffer Tb { int tab[]; };
layout(std430, binding = 8) buffer Stb { float stt[]; };
layout(push_constant) uniform P {
  int s0, H, dk, dv, qOff, qRow, qHead, kOff, kRow, kHead, vOff, vRow, vHead, oOff, oRow, oHead, selRow, useSel, pStride,
    useTab, blk, useStats;
  float scale;
} p;
shared float red[64];
const float NEG = -3.402823466e38;

int key(int s, int j) { return p.useSel != 0 ? sel[s * p.selRow + j] : j; }
// K/V row of key t, or -1 when its block is not on the device
int rowOf(int t) {
  if (p.useTab == 0) return t;
  const int sl = tab[t / p.blk];
  return sl < 0 ? -1 : sl * p.blk + t % p.blk;
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const int s = p.s0 + int(gl_WorkGroupID.x), h = int(gl_WorkGroupID.y);
  const int n = max(nsel[s], 0), ob = p.oOff + s * p.oRow + h * p.oHead, sb = 2 * (s * p.H + h);
  const int qb = p.qOff + s * p.qRow + h * p.qHead, base = (s * p.H + h) * p.pStride;
  float mx = NEG;
  for (int j = int(tid); j < n; j += 64) {
    const int r = rowOf(key(s, j));
    if (r < 0) { pb[base + j] = NEG; continue; }
    const int kb = p.kOff + r * p.kRow + h * p.kHead;
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
  for (int j = int(tid); j < n; j += 64) {
    const bool in_ = p.useTab == 0 || rowOf(key(s, j)) >= 0;
    const float e = in_ ? exp(pb[base + j] - m) : 0.0;
    pb[base + j] = e;
    sum += e;
  }
  red[tid] = sum;
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (tid < w) red[tid] += red[tid + w];
    barrier();
  }
  const float tot = red[0];
  if (p.useStats != 0 && tid == 0u) { stt[sb] = m; stt[sb + 1] = tot; }
  if (tot <= 0.0) { // no (resident) keys
    for (int e = int(tid); e < p.dv; e += 64) o[ob + e] = 0.0;
    return;
  }
  for (int j = int(tid); j < n; j += 64) pb[base + j] = pb[base + j] / tot;
  memoryBarrierBuffer();
  barrier();
  for (int e = int(tid); e < p.dv; e += 64) {
    float acc = 0.0;
    for (int j = 0; j < n; j++) {
      const int r = rowOf(key(s, j));
      if (r >= 0) acc += pb[base + j] * v[p.vOff + r * p.vRow + h * p.vHead + e];
    }
    o[ob + e] = acc;
  }
}
