// `--device vulkan|cpu|auto` policy for the CLI / server: which executor runs the dense layers.
//  - cpu:    none (the exact CPU forward);
//  - vulkan: the Vulkan chain on the chosen device (lavapipe included), or an error saying why not;
//  - auto:   the Vulkan chain when a non-CPU Vulkan device exists (lavapipe is slower than libhb), else cpu.
// Importing this module loads nothing native: libvulkan is only dlopen'ed by probe()/open(). Stateless.
import type { Model } from "../src/engine/model.ts";
import { type ChainOpts, VulkanChain } from "./chain.ts";
import { isCpuDevice, pickDevice, probe } from "./vk.ts";

export type DeviceMode = "cpu" | "vulkan" | "auto";
export const DEVICE_MODES: readonly DeviceMode[] = ["cpu", "vulkan", "auto"];

export interface DeviceChoice { chain: VulkanChain | null; why: string }

export function parseDeviceMode(s: string | undefined): DeviceMode {
  const v = (s ?? "auto").toLowerCase();
  if ((DEVICE_MODES as readonly string[]).includes(v)) return v as DeviceMode;
  throw new Error(`--device must be one of ${DEVICE_MODES.join(", ")}, got ${JSON.stringify(s)}`);
}

/** Open the executor for `mode` (throws only for `vulkan` when no device can run the chain). */
export function openDevice(m: Model, mode: DeviceMode, o: ChainOpts = {}): DeviceChoice {
  if (mode === "cpu") return { chain: null, why: "--device cpu" };
  const p = probe();
  if (!p.ok) {
    if (mode === "vulkan") throw new Error(`--device vulkan: ${p.reason}`);
    return { chain: null, why: p.reason };
  }
  const d = pickDevice(p.devices, o.device);
  if (!d) {
    if (mode === "vulkan") throw new Error(`--device vulkan: no device matches ${JSON.stringify(o.device)}`);
    return { chain: null, why: `no Vulkan device matches ${JSON.stringify(o.device)}` };
  }
  if (mode === "auto" && isCpuDevice(d)) return { chain: null, why: `${d.name} is a CPU Vulkan device: the CPU path is faster` };
  try {
    const chain = VulkanChain.open(m, { ...o, device: d.index });
    return { chain, why: `${chain.n} layers on ${chain.device}` };
  } catch (e) {
    if (mode === "vulkan") throw e;
    return { chain: null, why: `Vulkan chain unavailable: ${e instanceof Error ? e.message : String(e)}` };
  }
}
