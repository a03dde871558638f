// Vulkan device discovery and choice (policy) over libhbvk: the physical devices with a compute queue
// (as the shim's JSON descriptions) and which one to open. State: the probe result, computed once.
import { vklib, SHIM_ERRORS } from "./vklib.ts";

/** VkPhysicalDeviceType */
export const DeviceType = { other: 0, integrated: 1, discrete: 2, virtual: 3, cpu: 4 } as const;

export interface DeviceInfo {
  index: number; name: string; type: number; api: number; vendor: number; device: number; driver: number;
  computeQueue: number; maxAlloc: number; maxStorageRange: number; maxPush: number; maxWG: [number, number, number];
  maxInvocations: number; maxShared: number; minStorageAlign: number; nonCoherentAtom: number;
  heaps: { size: number; deviceLocal: number }[];
}
export const isCpuDevice = (d: DeviceInfo) => d.type === DeviceType.cpu;
export const apiString = (v: number) => `${(v >>> 22) & 0x7f}.${(v >>> 12) & 0x3ff}.${v & 0xfff}`;

export type Probe = { ok: true; devices: DeviceInfo[] } | { ok: false; reason: string };
let probed: Probe | null = null;

/** Build/load the shim, load libvulkan and list the physical devices. Never throws. */
export function probe(): Probe {
  if (probed) return probed;
  try {
    const L = vklib();
    const rc = L.hbvk_loader_init();
    if (rc !== 0) return (probed = { ok: false, reason: `Vulkan unavailable: ${SHIM_ERRORS[rc] ?? `VkResult ${rc}`}` });
    const n = L.hbvk_device_count();
    const devices: DeviceInfo[] = [];
    const buf = new Uint8Array(8192);
    for (let i = 0; i < n; i++) {
      const len = L.hbvk_device_info(i, buf, buf.length);
      if (len > 0) devices.push(JSON.parse(new TextDecoder().decode(buf.subarray(0, len))) as DeviceInfo);
    }
    const usable = devices.filter((d) => d.computeQueue >= 0);
    if (usable.length === 0) return (probed = { ok: false, reason: "Vulkan loaded but no device has a compute queue" });
    return (probed = { ok: true, devices: usable });
  } catch (e) {
    return (probed = { ok: false, reason: `Vulkan shim unavailable: ${e instanceof Error ? e.message : String(e)}` });
  }
}

/**
 * Device choice (policy): `want` = an index or a name substring (env HB_VK_DEVICE when absent);
 * otherwise discrete > integrated > virtual > other > cpu (lavapipe last).
 */
export function pickDevice(devices: DeviceInfo[], want: string | number | undefined = process.env.HB_VK_DEVICE): DeviceInfo | null {
  if (want !== undefined && want !== "") {
    const n = Number(want);
    if (Number.isInteger(n)) return devices.find((d) => d.index === n) ?? null;
    return devices.find((d) => d.name.toLowerCase().includes(String(want).toLowerCase())) ?? null;
  }
  const rank = [DeviceType.discrete, DeviceType.integrated, DeviceType.virtual, DeviceType.other, DeviceType.cpu] as number[];
  return [...devices].sort((a, b) => rank.indexOf(a.type) - rank.indexOf(b.type) || a.index - b.index)[0] ?? null;
}
