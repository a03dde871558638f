/* libhbvk: a small, dumb Vulkan compute shim for src/device/vulkan/vk.ts (bun:ffi). Built separately from libhb
 * (src/device/vulkan/build.ts -> build/libhbvk.so); libvulkan is dlopen'ed at run time, so nothing links against it.
 * Owns: the loader + one VkInstance per process; per context (hbvk_create) one device, one compute
 * queue, and tables of buffers / pipelines / descriptor sets / command buffers addressed by small
 * integer handles (never reused). Policy (which device, chunk sizes, what to record) lives in TS.
 * Every call returns a status: 0 / a handle >= 0 on success, a negative VkResult or HBVK_E_* on failure.
 * Nothing aborts: after VK_ERROR_DEVICE_LOST (real, or faked by hbvk_fault) every call on the context
 * returns VK_ERROR_DEVICE_LOST (-4) until it is destroyed. */
#ifndef HBVK_H
#define HBVK_H
#include <stdint.h>

enum {
  HBVK_E_ARG = -10001,     /* bad handle / argument */
  HBVK_E_NOLIB = -10002,   /* libvulkan could not be loaded */
  HBVK_E_NODEV = -10003,   /* no such physical device / no compute queue */
  HBVK_E_MEMTYPE = -10004, /* no suitable memory type */
  HBVK_E_RANGE = -10005,   /* a binding or copy crosses a chunk / buffer end */
  HBVK_E_ALIGN = -10006,   /* binding offset not aligned to minStorageBufferOffsetAlignment */
  HBVK_E_LIMIT = -10007,   /* dispatch larger than maxComputeWorkGroupCount, push too big */
  HBVK_E_STATE = -10008,   /* command buffer not recording / already pending */
  HBVK_E_NOMEM = -10009,   /* host allocation failed */
};
/* buffer kinds: device-local / host-visible staging / device-local never mapped (forces the staged
 * transfer path of discrete GPUs; for tests) */
enum { HBVK_DEVICE = 0, HBVK_HOST = 1, HBVK_DEVICE_NOMAP = 2 };

typedef struct hbvk hbvk;

/* loader + instance (idempotent); returns 0 or an error */
int hbvk_loader_init(void);
int hbvk_device_count(void);
/* JSON description of physical device i into buf (NUL-terminated); returns its length or an error */
int hbvk_device_info(int i, char *buf, int len);

hbvk *hbvk_create(int device_index, int32_t *rc);
void hbvk_destroy(hbvk *c);
const char *hbvk_error(hbvk *c);      /* last error message of the context ("" if none) */
int hbvk_lost(hbvk *c);               /* 1 once the device is lost */
int hbvk_fault(hbvk *c, int n);       /* fake VK_ERROR_DEVICE_LOST at the n-th submit from now (0 = off) */

/* logical buffer of `bytes`, split over allocations of at most `chunk` bytes (<= 0: one) */
int hbvk_buf_new(hbvk *c, int64_t bytes, int64_t chunk, int kind);
int hbvk_buf_free(hbvk *c, int h);
/* out[0..4] = bytes, chunk, nchunks, host-mapped (all chunks), kind */
int hbvk_buf_info(hbvk *c, int h, int64_t *out);
/* synchronous host <-> buffer transfer (mapped: memcpy; else through an internal staging copy) */
int hbvk_buf_write(hbvk *c, int h, int64_t off, const void *src, int64_t n);
int hbvk_buf_read(hbvk *c, int h, int64_t off, void *dst, int64_t n);

/* compute pipeline from SPIR-V: nbind storage buffers at bindings 0..nbind-1, pushBytes of push constants */
int hbvk_pipe_new(hbvk *c, const uint32_t *code, int64_t bytes, int nbind, int pushBytes);
int hbvk_pipe_free(hbvk *c, int h);
/* descriptor set for pipe: binding i = buffer bufs[i], logical [offs[i], offs[i]+ranges[i]) inside one
 * chunk (ranges[i] <= 0: to the end of that chunk) */
int hbvk_set_new(hbvk *c, int pipe, int n, const int32_t *bufs, const int64_t *offs, const int64_t *ranges);
int hbvk_set_free(hbvk *c, int h);

/* command buffers (each with its own fence) */
int hbvk_cmd_new(hbvk *c);
int hbvk_cmd_free(hbvk *c, int h);
int hbvk_cmd_begin(hbvk *c, int h);   /* waits if still pending, resets, begins, full barrier first */
int hbvk_cmd_dispatch(hbvk *c, int h, int pipe, int set, const void *push, int pushBytes, int gx, int gy, int gz);
int hbvk_cmd_barrier(hbvk *c, int h); /* global compute/transfer memory barrier */
int hbvk_cmd_copy(hbvk *c, int h, int src, int64_t soff, int dst, int64_t doff, int64_t n);
int hbvk_cmd_fill(hbvk *c, int h, int buf, int64_t off, int64_t n, uint32_t value);
int hbvk_cmd_submit(hbvk *c, int h);  /* ends recording (barrier to host reads) and submits */
int hbvk_cmd_wait(hbvk *c, int h, int64_t timeout_ns); /* 0 done, VK_TIMEOUT (2), or an error */
int hbvk_cmd_pending(hbvk *c, int h); /* 1 submitted and not yet waited for */
#endif
