// The bun:ffi binding of libhbvk (ffi/vk/*.c, built by build.ts): its symbol table, loaded once on
// first use, the status codes the shim returns and the errors they become. State: the loaded library.
import { dlopen, FFIType } from "bun:ffi";
import { ensureVk } from "./build.ts";

const { i32, i64, ptr, cstring, u32 } = FFIType;

const symbols = {
  hbvk_loader_init: { args: [], returns: i32 },
  hbvk_device_count: { args: [], returns: i32 },
  hbvk_device_info: { args: [i32, ptr, i32], returns: i32 },
  hbvk_create: { args: [i32, ptr], returns: ptr },
  hbvk_destroy: { args: [ptr], returns: FFIType.void },
  hbvk_error: { args: [ptr], returns: cstring },
  hbvk_lost: { args: [ptr], returns: i32 },
  hbvk_fault: { args: [ptr, i32], returns: i32 },
  hbvk_buf_new: { args: [ptr, i64, i64, i32], returns: i32 },
  hbvk_buf_free: { args: [ptr, i32], returns: i32 },
  hbvk_buf_info: { args: [ptr, i32, ptr], returns: i32 },
  hbvk_buf_write: { args: [ptr, i32, i64, ptr, i64], returns: i32 },
  hbvk_buf_read: { args: [ptr, i32, i64, ptr, i64], returns: i32 },
  hbvk_pipe_new: { args: [ptr, ptr, i64, i32, i32], returns: i32 },
  hbvk_pipe_free: { args: [ptr, i32], returns: i32 },
  hbvk_set_new: { args: [ptr, i32, i32, ptr, ptr, ptr], returns: i32 },
  hbvk_set_free: { args: [ptr, i32], returns: i32 },
  hbvk_cmd_new: { args: [ptr], returns: i32 },
  hbvk_cmd_free: { args: [ptr, i32], returns: i32 },
  hbvk_cmd_begin: { args: [ptr, i32], returns: i32 },
  hbvk_cmd_dispatch: { args: [ptr, i32, i32, i32, ptr, i32, i32, i32, i32], returns: i32 },
  hbvk_cmd_barrier: { args: [ptr, i32], returns: i32 },
  hbvk_cmd_copy: { args: [ptr, i32, i32, i64, i32, i64, i64], returns: i32 },
  hbvk_cmd_fill: { args: [ptr, i32, i32, i64, i64, u32], returns: i32 },
  hbvk_cmd_submit: { args: [ptr, i32], returns: i32 },
  hbvk_cmd_wait: { args: [ptr, i32, i64], returns: i32 },
  hbvk_cmd_pending: { args: [ptr, i32], returns: i32 },
} as const;
type Lib = ReturnType<typeof dlopen<typeof symbols>>["symbols"];
let lib: Lib | null = null;
/** The shim's symbols (builds/loads it on first use; throws when it cannot be built or loaded). */
export function vklib(): Lib {
  return (lib ??= dlopen(ensureVk(), symbols).symbols);
}

/** VkResult / HBVK_E_* codes the shim returns (checked against ffi/vk/*.h by test/layouts.test.ts). */
export const VK_ERROR_DEVICE_LOST = -4;
export const VK_TIMEOUT = 2;
export const SHIM_ERRORS: Record<number, string> = {
  [-10001]: "bad argument", [-10002]: "libvulkan not loadable", [-10003]: "no such device", [-10004]: "no memory type",
  [-10005]: "range crosses a chunk", [-10006]: "misaligned binding", [-10007]: "device limit", [-10008]: "bad command state",
  [-10009]: "out of host memory",
  [-1]: "VK_ERROR_OUT_OF_HOST_MEMORY", [-2]: "VK_ERROR_OUT_OF_DEVICE_MEMORY", [-3]: "VK_ERROR_INITIALIZATION_FAILED",
  [-4]: "VK_ERROR_DEVICE_LOST", [-7]: "VK_ERROR_EXTENSION_NOT_PRESENT", [-9]: "VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver installed)",
};

export class VkError extends Error {
  constructor(message: string, readonly code: number) { super(message); this.name = "VkError"; }
}
/** The device is gone (VK_ERROR_DEVICE_LOST, real or injected): the context does no more work. */
export class DeviceLost extends VkError {
  constructor(message: string) { super(message, VK_ERROR_DEVICE_LOST); this.name = "DeviceLost"; }
}
