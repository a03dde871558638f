// `--device cpu|vulkan|webgpu|auto` and `--device-layers N` for the model-running subcommands: opens the
// device chain (src/device/device.ts) as the forward's layer executor, says at start where layers run.
import { intOption, UsageError } from "./common.ts";
import type { Model } from "../engine/model.ts";
import type { ForwardOpts } from "../engine/forward.ts";
import { type DeviceMode, openDevice, parseDeviceMode } from "../device/device.ts";

export const deviceFlags = { device: { type: "string" }, "device-layers": { type: "string" }, "kv-budget": { type: "string" } } as const;
export const DEVICE_HELP = `--device cpu|vulkan|webgpu|auto: where the dense layers run (default auto: the Vulkan chain on a real GPU when a
  short start-up measurement finds it faster, without Vulkan Dawn's adapter the same way, the CPU otherwise; webgpu: the
  same chain on Dawn, the npm webgpu package); --device-layers N: only layers [0, N) on the device (a partial chain);
  --kv-budget ROWS: KV rows per layer kept on the device; past it the cache splits between device and CPU.`;

export interface DeviceRun { forward: ForwardOpts; why: string; summary(): string; close(): void }

type DeviceValues = { device?: string; "device-layers"?: string; "kv-budget"?: string };
export interface DeviceOptions { mode: DeviceMode; layers?: number; kvBudgetRows?: number }

/** --device, --device-layers and --kv-budget checked (a bad value names its flag); serve and chat pass them to the
 *  engine worker, the in-process commands to openDeviceFor */
export function deviceOptions(v: DeviceValues, help: string): DeviceOptions {
  let mode;
  try { mode = parseDeviceMode(v.device); } catch (e) { throw new UsageError((e as Error).message, help); }
  const layers = v["device-layers"] === undefined ? undefined : intOption(v["device-layers"], "device-layers", help);
  const kvBudgetRows = v["kv-budget"] === undefined ? undefined : intOption(v["kv-budget"], "kv-budget", help);
  return { mode, layers, kvBudgetRows };
}

export function openDeviceFor(m: Model, v: DeviceValues, help: string): DeviceRun {
  const { mode, layers, kvBudgetRows } = deviceOptions(v, help);
  const { chain, why } = openDevice(m, mode, { layers, kvBudgetRows });
  process.stderr.write(`device: ${chain?.api ?? "cpu"} (${why})\n`);
  return {
    forward: chain ? { executor: chain } : {}, why,
    summary: () => chain?.summary() ?? "",
    close: () => chain?.close(),
  };
}
