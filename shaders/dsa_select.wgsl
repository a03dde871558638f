// WGSL twin of dsa_select.comp (same workgroup size, passes, histograms, scans and output order).
// DSA top-k selection (the contract of hb_dsa_select), batch row s = s0 + group.x over n = nk[s] scores:
// n <= topk: all keys; else thr = the topk-th largest (radix select on order-preserving keys, 11+11+10 bits),
// take every t with score > thr and the first `need` with score == thr, all in ascending t (spec §3.3 tie
// rule). sel [rows, topk] ascending, nsel[s] = min(n, topk). One workgroup per row; dispatch (rows).
// Storage bindings written here are read_write, the others read (src/device/push.ts `writes`); the push block is the uniform p (group 1).
// n is read once by thread 0 and shared with workgroupUniformLoad, so the early return (n <= topk) is
// uniform control flow ahead of the barriers; the hs == 32 guard keeps every shift below 32.
@group(0) @binding(0) var<storage, read> sc: array<f32>;
@group(0) @binding(1) var<storage, read> nk: array<i32>;
@group(0) @binding(2) var<storage, read_write> sel: array<i32>;
@group(0) @binding(3) var<storage, read_write> nsel: array<i32>;
struct P { s0: i32, scOff: i32, scRow: i32, topk: i32 };
@group(1) @binding(0) var<uniform> p: P;
var<workgroup> hist: array<atomic<u32>, 2048>;
var<workgroup> cnt: array<u32, 256>;
var<workgroup> shPrefix: u32;
var<workgroup> shNeed: i32;
var<workgroup> shTotal: u32;
var<workgroup> shN: i32;

fn fkey(f: f32) -> u32 { // -0 -> +0, so key equality == float equality
  var u = bitcast<u32>(f);
  if (u == 0x80000000u) { u = 0u; }
  return select(u | 0x80000000u, ~u, (u & 0x80000000u) != 0u);
}

// exclusive prefix sum of cnt[0..255] in place (thread 0), the total in shTotal
fn scan(tid: u32) {
  workgroupBarrier();
  if (tid == 0u) {
    var run = 0u;
    for (var i = 0; i < 256; i++) { let c = cnt[i]; cnt[i] = run; run += c; }
    shTotal = run;
  }
  workgroupBarrier();
}

@compute @workgroup_size(256) fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let tid = lid.x;
  let s = p.s0 + i32(wid.x);
  if (tid == 0u) { shN = max(nk[s], 0); }
  let n = workgroupUniformLoad(&shN);
  let sb = p.scOff + s * p.scRow;
  let ob = s * p.topk;
  if (n <= p.topk) {
    for (var t = i32(tid); t < n; t += 256) { sel[ob + t] = t; }
    if (tid == 0u) { nsel[s] = n; }
    return;
  }
  if (tid == 0u) { shPrefix = 0u; shNeed = p.topk; }
  for (var ps = 0; ps < 3; ps++) {
    let sh = select(select(0, 10, ps == 1), 21, ps == 0);
    let width = select(11, 10, ps == 2);
    let nb = 1 << u32(width);
    let hs = sh + width;
    workgroupBarrier();
    for (var b = i32(tid); b < nb; b += 256) { atomicStore(&hist[b], 0u); }
    workgroupBarrier();
    let prefix = shPrefix;
    for (var t = i32(tid); t < n; t += 256) {
      let kk = fkey(sc[sb + t]);
      if (hs == 32 || (kk >> u32(hs)) == (prefix >> u32(hs))) { atomicAdd(&hist[(kk >> u32(sh)) & u32(nb - 1)], 1u); }
    }
    workgroupBarrier();
    if (tid == 0u) {
      var need = shNeed;
      var b = nb - 1;
      for (; b > 0; b--) {
        let c = i32(atomicLoad(&hist[b]));
        if (c >= need) { break; }
        need -= c;
      }
      shPrefix = prefix | (u32(b) << u32(sh));
      shNeed = need;
    }
  }
  workgroupBarrier();
  let thr = shPrefix;
  let need = shNeed;
  let chunk = (n + 255) / 256;
  let lo = min(n, i32(tid) * chunk);
  let hi = min(n, lo + chunk);
  var gt = 0u;
  var eq = 0u;
  for (var t = lo; t < hi; t++) {
    let kk = fkey(sc[sb + t]);
    if (kk > thr) { gt++; } else if (kk == thr) { eq++; }
  }
  cnt[tid] = eq;
  scan(tid);
  let eqBefore = i32(cnt[tid]);
  workgroupBarrier();
  cnt[tid] = gt + u32(clamp(need - eqBefore, 0, i32(eq)));
  scan(tid);
  var at = ob + i32(cnt[tid]);
  var eqr = eqBefore;
  for (var t = lo; t < hi; t++) {
    let kk = fkey(sc[sb + t]);
    if (kk > thr) { sel[at] = t; at++; }
    else if (kk == thr) { if (eqr < need) { sel[at] = t; at++; } eqr++; }
  }
  if (tid == 0u) { nsel[s] = i32(shTotal); }
}
