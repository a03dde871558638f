/* libhbvk context internals shared by the shim's files (shim.c context, buf.c buffers, pipe.c pipelines
 * and descriptor sets, cmd.c command buffers); not part of the FFI surface (hidden visibility). Holds the
 * types of a `hbvk` context: device entry points, queue, pools and the handle tables. */
#ifndef HBVK_CTX_H
#define HBVK_CTX_H
#include "internal.h"
#include <stdlib.h>
#include <string.h>

typedef struct { VkBuffer b; VkDeviceMemory m; void *map; VkDeviceSize size; int coherent; } chunk_t;
typedef struct { int live, kind, n, mapped; int64_t bytes, chunk; chunk_t *c; } buf_t;
typedef struct { int live, nbind, push; VkShaderModule sm; VkDescriptorSetLayout dsl; VkPipelineLayout pl; VkPipeline p; } pipe_t;
typedef struct { int live, pool, pipe; VkDescriptorSet s; } set_t;
typedef struct { int live, pending, recording; VkCommandBuffer cb; VkFence f; } cmd_t;

struct hbvk {
#define DECL(f) PFN_##f f;
  DEVICE_FNS(DECL)
#undef DECL
  VkPhysicalDevice pd;
  VkDevice dev;
  VkQueue q;
  uint32_t qf;
  VkPhysicalDeviceMemoryProperties mp;
  VkPhysicalDeviceLimits lim;
  VkCommandPool cpool;
  VkDescriptorPool *pools;
  int npools;
  buf_t *bufs; int nbufs, capbufs;
  pipe_t *pipes; int npipes, cappipes;
  set_t *sets; int nsets, capsets;
  cmd_t *cmds; int ncmds, capcmds;
  int stage, stage_cmd; /* internal staging buffer / command buffer for unmapped transfers (-1 = none) */
  int lost, fault_at, submits;
  char err[512];
};

/* record an error message on the context (a lost device marks it lost); returns rc */
int hbvk__fail(hbvk *c, int rc, const char *fmt, ...) HBVK_HIDDEN __attribute__((format(printf, 3, 4)));
#define fail(...) hbvk__fail(__VA_ARGS__)
#define CHECK_LOST(c) do { if (!(c)) return HBVK_E_ARG; if ((c)->lost) return VK_ERROR_DEVICE_LOST; } while (0)
#define VKTRY(c, call, what) do { VkResult r_ = (call); if (r_ != VK_SUCCESS) return fail(c, r_, "%s failed", what); } while (0)

/* append a zeroed slot to a handle table; returns the new handle or HBVK_E_NOMEM */
#define TABLE_ADD(c, arr, n, cap)                                                                     \
  ({ int h_ = HBVK_E_NOMEM;                                                                          \
     if ((c)->n == (c)->cap) {                                                                       \
       int nc_ = (c)->cap ? 2 * (c)->cap : 64;                                                       \
       void *p_ = realloc((c)->arr, sizeof *(c)->arr * (size_t)nc_);                                 \
       if (p_) { (c)->arr = p_; (c)->cap = nc_; }                                                    \
     }                                                                                               \
     if ((c)->n < (c)->cap) { h_ = (c)->n++; memset(&(c)->arr[h_], 0, sizeof *(c)->arr); }           \
     h_; })
static inline buf_t *get_buf(hbvk *c, int h) { return h >= 0 && h < c->nbufs && c->bufs[h].live ? &c->bufs[h] : NULL; }
static inline pipe_t *get_pipe(hbvk *c, int h) { return h >= 0 && h < c->npipes && c->pipes[h].live ? &c->pipes[h] : NULL; }
static inline set_t *get_set(hbvk *c, int h) { return h >= 0 && h < c->nsets && c->sets[h].live ? &c->sets[h] : NULL; }
static inline cmd_t *get_cmd(hbvk *c, int h) { return h >= 0 && h < c->ncmds && c->cmds[h].live ? &c->cmds[h] : NULL; }

/* run fn over the chunk pieces of [off, off+n) of b: fn(chunk index, offset in chunk, offset in [0,n), length) */
#define FOR_PIECES(b, off, n, ...)                                                                      \
  for (int64_t done_ = 0; done_ < (n);) {                                                                  \
    const int64_t pos_ = (off) + done_;                                                                    \
    const int ci = (int)(pos_ / (b)->chunk);                                                               \
    const int64_t lo = pos_ - (int64_t)ci * (b)->chunk;                                                    \
    int64_t len = (int64_t)(b)->c[ci].size - lo;                                                           \
    if (len > (n) - done_) len = (n) - done_;                                                              \
    const int64_t at = done_;                                                                              \
    __VA_ARGS__                                                                                            \
    done_ += len;                                                                                          \
  }
#endif
