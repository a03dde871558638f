// `--device cpu|vulkan|webgpu|auto` policy for the CLI / server: which executor runs the dense layers (the
// modes: on openDevice). Importing this module loads nothing native: libvulkan is only dlopen'ed by
// probe()/open(), Dawn only runs in the host process WebGPU starts. Stateless.
import type { Model } from "../engine/model.ts";
import { type ChainOpts, DeviceChain } from "./chain.ts";
import { isCpuDevice, pickDevice, probe } from "./vulkan/vk.ts";
import { Wgpu } from "./webgpu/webgpu.ts";
import { type AutoTiming, measureAuto, pickFaster } from "./autopick.ts";

export type DeviceMode = "cpu" | "vulkan" | "webgpu" | "auto";
export const DEVICE_MODES: readonly DeviceMode[] = ["cpu", "vulkan", "webgpu", "auto"];

export interface DeviceChoice { chain: DeviceChain | null; why: string }

export function parseDeviceMode(s: string | undefined): DeviceMode {
  const v = (s ?? "auto").toLowerCase();
  if ((DEVICE_MODES as readonly string[]).includes(v)) return v as DeviceMode;
  throw new Error(`--device must be one of ${DEVICE_MODES.join(", ")}, got ${JSON.stringify(s)}`);
}

/**
 * Open the executor for `mode` (throws only for `vulkan` / `webgpu` when no device can run the chain). `measure` times
 * the chain against the CPU in auto mode (default: measureAuto; tests inject figures).
 *  - cpu:    none (the exact CPU forward);
 *  - vulkan: the chain on the chosen Vulkan device (lavapipe included), or an error saying why not;
 *  - webgpu: the chain on Dawn's adapter (webgpu/webgpu.ts; its fallback adapter, lavapipe, included), or an error;
 *  - auto:   on a non-CPU Vulkan device, a short startup race of the chain against the CPU on the loaded model
 *            (autopick.ts, about 1 s) and the faster one, `why` giving the figures; CPU Vulkan devices
 *            (lavapipe, slower than libhb) are skipped without measuring; without Vulkan, Dawn's adapter the same
 *            way (a Mac's Metal, say); else cpu.
 */
export function openDevice(m: Model, mode: DeviceMode, o: ChainOpts = {},
  measure: (m: Model, chain: DeviceChain) => AutoTiming = measureAuto): DeviceChoice {
  if (mode === "cpu") return { chain: null, why: "--device cpu" };
  if (mode === "webgpu") {
    const chain = DeviceChain.open(m, { ...o, api: "webgpu" });
    return { chain, why: `${chain.n} layers on ${chain.device}` };
  }
  const p = probe();
  if (!p.ok) {
    if (mode === "vulkan") throw new Error(`--device vulkan: ${p.reason}`);
    return autoWebgpu(m, o, measure, p.reason);
  }
  const d = pickDevice(p.devices, o.device);
  if (!d) {
    if (mode === "vulkan") throw new Error(`--device vulkan: no device matches ${JSON.stringify(o.device)}`);
    return { chain: null, why: `no Vulkan device matches ${JSON.stringify(o.device)}` };
  }
  if (mode === "auto" && isCpuDevice(d)) return { chain: null, why: `${d.name} is a CPU Vulkan device: the CPU path is faster` };
  try {
    const chain = DeviceChain.open(m, { ...o, device: d.index });
    return mode === "vulkan" ? { chain, why: `${chain.n} layers on ${chain.device}` } : race(m, chain, measure);
  } catch (e) {
    if (mode === "vulkan") throw e;
    return { chain: null, why: `Vulkan chain unavailable: ${e instanceof Error ? e.message : String(e)}` };
  }
}

/** auto without Vulkan: Dawn's adapter (Metal, D3D12 where Vulkan is missing) when it is not a CPU device, raced */
function autoWebgpu(m: Model, o: ChainOpts, measure: (m: Model, chain: DeviceChain) => AutoTiming, noVk: string): DeviceChoice {
  let g: Wgpu;
  try { g = Wgpu.open(); } catch (e) { return { chain: null, why: `${noVk}; WebGPU: ${e instanceof Error ? e.message : String(e)}` }; }
  if (g.isCpu) {
    g.close();
    return { chain: null, why: `${noVk}; WebGPU's adapter ${g.info.name} is a CPU device: the CPU path is faster` };
  }
  try {
    return race(m, DeviceChain.open(m, { ...o, api: "webgpu" }, g), measure);
  } catch (e) {
    return { chain: null, why: `${noVk}; WebGPU chain unavailable: ${e instanceof Error ? e.message : String(e)}` };
  }
}

/** auto: the chain against the CPU on the loaded model; the chain kept when faster (else closed) */
function race(m: Model, chain: DeviceChain, measure: (m: Model, chain: DeviceChain) => AutoTiming): DeviceChoice {
  let pick;
  try { pick = pickFaster(measure(m, chain), chain.device); } catch (e) { chain.close(); throw e; }
  if (!pick.chain || chain.lost) {
    const why = chain.lost ? `auto: ${chain.device} lost while measuring (${chain.lostReason})` : pick.why;
    chain.close();
    return { chain: null, why };
  }
  return { chain, why: `${chain.n} layers on ${chain.device} (${chain.api}); ${pick.why}` };
}
