#!/usr/bin/env bash
# bench/h200.sh — the Vulkan device chain on a real NVIDIA GPU (written for one H200): build, GPU test suites,
# a bench-preset model (make-model --preset bench, then convert to int4g64), the device bench against the
# CPU, and decode tok/s against the HBM roofline (device weight bytes/token × tok/s ÷ ~4.8 TB/s).
#
# HONEST STATUS: THIS SCRIPT HAS NEVER RUN ON A GPU. It was written on a machine without one (the chain was
# only ever exercised on lavapipe, Mesa's CPU Vulkan). Only its smoke mode (HB_H200_SMOKE=1: the tiny preset,
# short runs, lavapipe accepted) was run, on lavapipe. Expect to fix small things on first contact.
#
# Assumptions (checked, with a message when they fail):
#  - x86-64 Linux, an NVIDIA driver with its Vulkan ICD, and the Vulkan loader (libvulkan.so.1);
#  - Bun ≥ 1.1 on PATH, or in $BUN, or in ~/.bun/bin. Without one it tries the official installer, which
#    needs internet (a GPU box without internet needs Bun brought along);
#  - node_modules/zod present (the only package this script's code loads: carry node_modules/zod, 8 MB),
#    or registry access for `bun install --frozen-lockfile`;
#  - a C compiler (cc/gcc) for libhb and libhbvk, else prebuilt build/libhb.so (HB_LIB) / build/libhbvk.so
#    (HB_VK_LIB);
#  - glslc (shaderc) for the shaders, else prebuilt SPIR-V in build/shaders/ (carry it; `bun test test/gpu`
#    on the development machine builds every variant);
#  - ~3 GB free under $HB_H200_WORK (default /tmp/hb-h200) for the models.
# Budget: ≤ 10 minutes in all (each step has its own timeout; optional steps are skipped when time runs
# short). Outputs: logs and JSON under $OUT (default ./h200-out). Exit status: 0 when the GPU suites passed
# and the main bench ran, else 1. Run from anywhere: `bash bench/h200.sh`.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/h200-out}"
WORK="${HB_H200_WORK:-/tmp/hb-h200}"
HBM_GBS="${HB_HBM_GBS:-4800}"          # H200: ~4.8 TB/s
SMOKE="${HB_H200_SMOKE:-0}"            # 1: tiny preset, short runs, a CPU Vulkan device accepted (checks this script)
PRESET=bench; P=128; G=64; PS=256; KVB=64
[[ "$SMOKE" == 1 ]] && { PRESET=tiny; P=12; G=6; PS=24; KVB=8; WORK="$WORK-smoke"; }
BUDGET_S="${HB_H200_BUDGET_S:-570}"    # leave headroom under 10 minutes
mkdir -p "$OUT" "$WORK"
T0=$(date +%s)
STATUS=0
log() { printf '[h200 %4ss] %s\n' "$(( $(date +%s) - T0 ))" "$*" | tee -a "$OUT/summary.txt"; }
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
# run_step NAME TIMEOUT CMD...: log to $OUT/NAME.log, never more than the time left
run_step() {
  local name="$1" t="$2"; shift 2
  local l; l=$(left)
  if (( l < 10 )); then log "skip $name: out of time"; return 124; fi
  (( t > l )) && t=$l
  log "run  $name (timeout ${t}s): $*"
  timeout --kill-after=5 "$t" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  log "done $name: exit $rc$([[ $rc == 124 ]] && echo ' (timed out)')"
  return $rc
}

log "hummingbird device chain on $(uname -m) $(uname -r); out=$OUT work=$WORK"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/summary.txt"
command -v vulkaninfo >/dev/null && timeout 20 vulkaninfo --summary >"$OUT/vulkaninfo.txt" 2>&1

# ---- Bun ----
BUN_BIN="${BUN:-}"
[[ -z "$BUN_BIN" ]] && BUN_BIN="$(command -v bun || true)"
[[ -z "$BUN_BIN" && -x "$HOME/.bun/bin/bun" ]] && BUN_BIN="$HOME/.bun/bin/bun"
if [[ -z "$BUN_BIN" ]]; then
  log "no bun: trying the official installer (needs internet)"
  if command -v curl >/dev/null && timeout 90 bash -c 'curl -fsSL https://bun.sh/install | bash' >"$OUT/bun-install.log" 2>&1; then
    BUN_BIN="$HOME/.bun/bin/bun"
  else
    log "FATAL: Bun is not installed and could not be installed (no internet?). Put bun on PATH or set BUN=/path/to/bun."
    exit 1
  fi
fi
log "bun: $BUN_BIN $("$BUN_BIN" --version 2>/dev/null)"

# ---- dependencies and native builds ----
if [[ ! -d node_modules/zod ]]; then
  run_step bun-install 90 "$BUN_BIN" install --frozen-lockfile || { log "FATAL: node_modules missing and bun install failed: carry node_modules/"; exit 1; }
fi
command -v glslc >/dev/null || log "note: no glslc; the chain will use prebuilt SPIR-V from build/shaders ($(ls build/shaders 2>/dev/null | wc -l) files)"
run_step build-libhb 120 "$BUN_BIN" ffi/build.ts || { log "FATAL: libhb did not build (see build-libhb.log)"; exit 1; }
run_step build-libhbvk 60 "$BUN_BIN" src/device/vulkan/build.ts || { log "FATAL: libhbvk did not build (see build-libhbvk.log)"; exit 1; }

# ---- the device ----
cat >"$WORK/probe.ts" <<EOF
import { probe, pickDevice, isCpuDevice } from "$ROOT/src/device/vulkan/vk.ts";
const p = probe();
if (!p.ok) { console.log("NO-VULKAN " + p.reason); process.exit(2); }
for (const d of p.devices) console.log(\`device \${d.index}: \${d.name} type \${d.type} maxAlloc \${d.maxAlloc} maxStorageRange \${d.maxStorageRange}\`);
const d = pickDevice(p.devices);
console.log(d && !isCpuDevice(d) ? "PICK " + d.index + " " + d.name : "CPU-ONLY");
EOF
run_step probe 30 "$BUN_BIN" "$WORK/probe.ts"
cat "$OUT/probe.log" | tee -a "$OUT/summary.txt"
if ! grep -q '^PICK ' "$OUT/probe.log" && ! { [[ "$SMOKE" == 1 ]] && grep -q '^CPU-ONLY' "$OUT/probe.log"; }; then
  log "FATAL: no GPU Vulkan device (only lavapipe/none): see probe.log and vulkaninfo.txt"
  exit 1
fi

# ---- GPU test suites (the same files as on lavapipe; they pick the discrete GPU) ----
if run_step gpu-tests 180 "$BUN_BIN" test --timeout 120000 test/gpu.vk.test.ts test/gpu.kernels.test.ts test/gpu.chain.test.ts test/gpu.split.test.ts test/gpu.residency.test.ts test/gpu.watermark.test.ts; then
  log "GPU suites: $(grep -E '^ *[0-9]+ (pass|fail)' "$OUT/gpu-tests.log" | tr '\n' ' ')"
else
  STATUS=1
  log "GPU suites FAILED: $(grep -E '^ *[0-9]+ (pass|fail)' "$OUT/gpu-tests.log" | tr '\n' ' ') (see gpu-tests.log)"
fi

# ---- the bench-preset model: bf16 (1.7 GB), then int4g64 dense + experts ----
# (through the modules, not src/cli.ts, so zod is the only package needed: the CLI would also load hono and
# @huggingface/*; same code as `hummingbird make-model --preset bench` and `hummingbird convert`)
cat >"$WORK/model.ts" <<EOF
import { makeModel } from "$ROOT/src/model/make-model.ts";
import { convert } from "$ROOT/src/model/convert.ts";
import { parseFmt } from "$ROOT/src/model/quant.ts";
const [what, a, b] = process.argv.slice(2);
if (what === "make") console.log(JSON.stringify(makeModel(a, { preset: "$PRESET", seed: 0, dtype: "bf16" }).fileBytes));
else console.log(JSON.stringify(convert(a, b, { experts: parseFmt("int4g64")!, dense: parseFmt("int4g64")!, mtp: parseFmt("int8")! })));
EOF
if [[ ! -f "$WORK/bf16/config.json" ]]; then
  run_step make-model 150 "$BUN_BIN" "$WORK/model.ts" make "$WORK/bf16" || { log "FATAL: make-model failed (see make-model.log)"; exit 1; }
fi
if [[ ! -f "$WORK/q/config.json" ]]; then
  run_step convert 120 "$BUN_BIN" "$WORK/model.ts" convert "$WORK/bf16" "$WORK/q" || { log "FATAL: convert failed (see convert.log)"; exit 1; }
fi

# ---- benches: JSON per run; the report reads them ----
bench() { # name timeout model extra-args...
  local name="$1" t="$2" model="$3"; shift 3
  run_step "$name" "$t" "$BUN_BIN" src/device/bench.ts --model "$model" --hbm-gbs "$HBM_GBS" --json "$@" && tail -n 1 "$OUT/$name.log" >"$OUT/$name.json"
}
bench bench-int4g 170 "$WORK/q" --prompt-tokens "$P" --gen "$G" --reps 2 --exact || STATUS=1 # exact: tokens comparable
bench bench-bf16 120 "$WORK/bf16" --prompt-tokens "$P" --gen $(( G / 2 )) --reps 1 --no-cpu
bench bench-split 90 "$WORK/q" --prompt-tokens "$PS" --gen $(( G / 2 )) --reps 1 --no-cpu --kv-budget "$KVB"

cat >"$WORK/report.ts" <<'EOF'
import { existsSync, readFileSync } from "node:fs";
const out = process.argv[2];
for (const name of ["bench-int4g", "bench-bf16", "bench-split"]) {
  const f = `${out}/${name}.json`;
  if (!existsSync(f)) { console.log(`${name}: no result`); continue; }
  let r: any;
  try { r = JSON.parse(readFileSync(f, "utf8")); } catch { console.log(`${name}: unreadable ${f}`); continue; }
  const s = r.decode_shares, pc = (x: number) => (100 * x).toFixed(1) + "%";
  console.log(`${name}: ${r.device} ${r.layers} layers, ${r.mode}; decode ${r.device_decode_tok_s.toFixed(1)} tok/s on the device` +
    (r.cpu_decode_tok_s ? ` vs ${r.cpu_decode_tok_s.toFixed(1)} on the CPU (tokens ${r.tokens_match ? "match" : "differ"})` : "") +
    `; prefill ${r.device_prefill_tok_s.toFixed(1)} tok/s` + (r.cpu_prefill_tok_s ? ` vs ${r.cpu_prefill_tok_s.toFixed(1)}` : ""));
  console.log(`  HBM roofline ${pc(r.hbm_roofline)}: ${(r.device_weight_bytes / 1e6).toFixed(1)} MB dense weights/token × ` +
    `${r.device_decode_tok_s.toFixed(1)} tok/s ÷ ${r.hbm_gb_s} GB/s (routed experts stay on the CPU)`);
  console.log(`  crossing/token: ${(r.bytes_up_per_token / 1024).toFixed(1)} KiB up, ${(r.bytes_down_per_token / 1024).toFixed(1)} KiB down, ` +
    `${(r.kv_upload_bytes_per_token / 1024).toFixed(1)} KiB KV; decode time: A1 ${pc(s.a1)}, host ${pc(s.host)}, A2 ${pc(s.a2)}, ` +
    `split ${pc(s.split)}, recording ${pc(s.record)}, other ${pc(s.other)}` + (r.fallbacks ? `; ${r.fallbacks} CPU FALLBACKS` : ""));
}
EOF
"$BUN_BIN" "$WORK/report.ts" "$OUT" | tee -a "$OUT/summary.txt"
log "finished with status $STATUS in $(( $(date +%s) - T0 )) s"
exit $STATUS
