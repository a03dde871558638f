// DSA top-k selection (the contract of hb_dsa_select), batch row s = s0 + group.x over n = nk[s] scores:
// n <= topk: all keys; else thr = the topk-th largest (radix select on order-preserving keys, 11+11+10 bits),
// take every t with score > thr and the first `need` with score == thr, all in ascending t (spec §3.3 tie
// rule). sel [rows, topk] ascending, nsel[s] = min(n, topk). One workgroup per row; dispatch (rows).
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Sb { float sc[]; };
layout(std430, binding = 1) readonly buffer Nb { int nk[]; };
layout(std430, binding = 2) buffer Selb { int sel[]; };
layout(std430, binding = 3) buffer NSb { int nsel[]; };
layout(push_constant) uniform P { int s0, scOff, scRow, topk; } p;
shared uint hist[2048];
shared uint cnt[256];
shared uint shPrefix;
shared int shNeed;

uint fkey(float f) { // -0 -> +0, so key equality == float equality
  uint u = floatBitsToUint(f);
  if (u == 0x80000000u) u = 0u;
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

// exclusive prefix sum of cnt[0..255] in place (thread 0), returns the total through shNeed's sibling
shared uint shTotal;
void scan() {
  barrier();
  if (gl_LocalInvocationID.x == 0u) {
    uint run = 0u;
    for (int i = 0; i < 256; i++) { uint c = cnt[i]; cnt[i] = run; run += c; }
    shTotal = run;
  }
  barrier();
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const int s = p.s0 + int(gl_WorkGroupID.x), n = max(nk[s], 0), sb = p.scOff + s * p.scRow, ob = s * p.topk;
  if (n <= p.topk) {
    for (int t = int(tid); t < n; t += 256) sel[ob + t] = t;
    if (tid == 0u) nsel[s] = n;
    return;
  }
  if (tid == 0u) { shPrefix = 0u; shNeed = p.topk; }
  for (int pass = 0; pass < 3; pass++) {
    const int sh = pass == 0 ? 21 : pass == 1 ? 10 : 0, width = pass == 2 ? 10 : 11, nb = 1 << width, hs = sh + width;
    barrier();
    for (int b = int(tid); b < nb; b += 256) hist[b] = 0u;
    barrier();
    const uint prefix = shPrefix;
    for (int t = int(tid); t < n; t += 256) {
      const uint kk = fkey(sc[sb + t]);
      if (hs == 32 || (kk >> uint(hs)) == (prefix >> uint(hs))) atomicAdd(hist[(kk >> uint(sh)) & uint(nb - 1)], 1u);
    }
    barrier();
    if (tid == 0u) {
      int need = shNeed, b = nb - 1;
      for (; b > 0; b--) {
        if (int(hist[b]) >= need) break;
        need -= int(hist[b]);
      }
      shPrefix = prefix | (uint(b) << uint(sh));
      shNeed = need;
    }
  }
  barrier();
  const uint thr = shPrefix;
  const int need = shNeed, chunk = (n + 255) / 256, lo = min(n, int(tid) * chunk), hi = min(n, lo + chunk);
  uint gt = 0u, eq = 0u;
  for (int t = lo; t < hi; t++) {
    const uint kk = fkey(sc[sb + t]);
    if (kk > thr) gt++; else if (kk == thr) eq++;
  }
  cnt[tid] = eq;
  scan();
  const int eqBefore = int(cnt[tid]);
  barrier();
  cnt[tid] = gt + uint(clamp(need - eqBefore, 0, int(eq)));
  scan();
  int at = ob + int(cnt[tid]), eqr = eqBefore;
  for (int t = lo; t < hi; t++) {
    const uint kk = fkey(sc[sb + t]);
    if (kk > thr) sel[at++] = t;
    else if (kk == thr) { if (eqr < need) sel[at++] = t; eqr++; }
  }
  if (tid == 0u) nsel[s] = int(shTotal);
}
