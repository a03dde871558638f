/* libhbvk: the Vulkan compute shim (see hbvk.h for the contract). Mechanism only: per context the device,
 * queue, command pool, descriptor pools and the handle tables of buffers, pipelines, descriptor sets and
 * command buffers (the process-wide loader is loader.c). State: everything hangs off a `hbvk` context. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- context ---------------- */
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

static int fail(hbvk *c, int rc, const char *fmt, ...) {
  if (rc == VK_ERROR_DEVICE_LOST) c->lost = 1;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
  if (k >= 0 && (size_t)k < sizeof c->err) snprintf(c->err + k, sizeof c->err - (size_t)k, " (rc %d)", rc);
  return rc;
}
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

static buf_t *get_buf(hbvk *c, int h) { return h >= 0 && h < c->nbufs && c->bufs[h].live ? &c->bufs[h] : NULL; }
static pipe_t *get_pipe(hbvk *c, int h) { return h >= 0 && h < c->npipes && c->pipes[h].live ? &c->pipes[h] : NULL; }
static set_t *get_set(hbvk *c, int h) { return h >= 0 && h < c->nsets && c->sets[h].live ? &c->sets[h] : NULL; }
static cmd_t *get_cmd(hbvk *c, int h) { return h >= 0 && h < c->ncmds && c->cmds[h].live ? &c->cmds[h] : NULL; }

hbvk *hbvk_create(int device_index, int32_t *rc) {
  int r = hbvk_loader_init();
  if (r) { if (rc) *rc = r; return NULL; }
  if (device_index < 0 || (uint32_t)device_index >= hbvk__L.npdev) { if (rc) *rc = HBVK_E_NODEV; return NULL; }
  VkPhysicalDevice pd = hbvk__L.pdevs[device_index];
  int qf = hbvk__compute_family(pd);
  if (qf < 0) { if (rc) *rc = HBVK_E_NODEV; return NULL; }
  hbvk *c = calloc(1, sizeof *c);
  if (!c) { if (rc) *rc = HBVK_E_NOMEM; return NULL; }
  c->pd = pd; c->qf = (uint32_t)qf; c->stage = -1; c->stage_cmd = -1;
  VkPhysicalDeviceProperties p;
  hbvk__L.vkGetPhysicalDeviceProperties(pd, &p);
  c->lim = p.limits;
  hbvk__L.vkGetPhysicalDeviceMemoryProperties(pd, &c->mp);
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qi = { .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = c->qf,
                                 .queueCount = 1, .pQueuePriorities = &prio };
  VkDeviceCreateInfo di = { .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi };
  VkResult vr = hbvk__L.vkCreateDevice(pd, &di, NULL, &c->dev);
  if (vr != VK_SUCCESS) { free(c); if (rc) *rc = vr; return NULL; }
#define LOAD(f) c->f = (PFN_##f)hbvk__L.vkGetDeviceProcAddr(c->dev, #f); if (!c->f) r = HBVK_E_NOLIB;
  DEVICE_FNS(LOAD)
#undef LOAD
  if (r) { PFN_vkDestroyDevice d = (PFN_vkDestroyDevice)hbvk__L.vkGetDeviceProcAddr(c->dev, "vkDestroyDevice"); if (d) d(c->dev, NULL); free(c); if (rc) *rc = r; return NULL; }
  c->vkGetDeviceQueue(c->dev, c->qf, 0, &c->q);
  VkCommandPoolCreateInfo pi = { .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, .queueFamilyIndex = c->qf };
  vr = c->vkCreateCommandPool(c->dev, &pi, NULL, &c->cpool);
  if (vr != VK_SUCCESS) { c->vkDestroyDevice(c->dev, NULL); free(c); if (rc) *rc = vr; return NULL; }
  if (rc) *rc = 0;
  return c;
}

const char *hbvk_error(hbvk *c) { return c ? c->err : "no context"; }
int hbvk_lost(hbvk *c) { return c ? c->lost : 1; }
int hbvk_fault(hbvk *c, int n) {
  if (!c || n < 0) return HBVK_E_ARG;
  c->fault_at = n ? c->submits + n : 0;
  return 0;
}

/* ---------------- buffers ---------------- */
static int mem_type(hbvk *c, uint32_t bits, VkMemoryPropertyFlags need, VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < c->mp.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (c->mp.memoryTypes[i].propertyFlags & (need | want)) == (need | want)) return (int)i;
  for (uint32_t i = 0; i < c->mp.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (c->mp.memoryTypes[i].propertyFlags & need) == need) return (int)i;
  return -1;
}

static void free_chunks(hbvk *c, buf_t *b) {
  for (int i = 0; i < b->n; i++) {
    if (b->c[i].map) c->vkUnmapMemory(c->dev, b->c[i].m);
    if (b->c[i].b) c->vkDestroyBuffer(c->dev, b->c[i].b, NULL);
    if (b->c[i].m) c->vkFreeMemory(c->dev, b->c[i].m, NULL);
  }
  free(b->c);
  b->c = NULL; b->n = 0;
}

static int alloc_chunk(hbvk *c, chunk_t *ch, VkDeviceSize size, int kind) {
  VkBufferCreateInfo bi = { .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                            .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                            .sharingMode = VK_SHARING_MODE_EXCLUSIVE };
  VKTRY(c, c->vkCreateBuffer(c->dev, &bi, NULL, &ch->b), "vkCreateBuffer");
  VkMemoryRequirements mr;
  c->vkGetBufferMemoryRequirements(c->dev, ch->b, &mr);
  int t = kind == HBVK_HOST
    ? mem_type(c, mr.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
    : mem_type(c, mr.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  if (t < 0 && kind != HBVK_HOST) t = mem_type(c, mr.memoryTypeBits, 0, 0);
  if (t < 0) return fail(c, HBVK_E_MEMTYPE, "no memory type for a %s buffer", kind == HBVK_HOST ? "host" : "device");
  VkMemoryAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = mr.size, .memoryTypeIndex = (uint32_t)t };
  VkResult r = c->vkAllocateMemory(c->dev, &ai, NULL, &ch->m);
  if (r != VK_SUCCESS) { ch->m = NULL; return fail(c, r, "vkAllocateMemory(%llu bytes)", (unsigned long long)mr.size); }
  VKTRY(c, c->vkBindBufferMemory(c->dev, ch->b, ch->m, 0), "vkBindBufferMemory");
  const VkMemoryPropertyFlags f = c->mp.memoryTypes[t].propertyFlags;
  ch->size = size;
  ch->coherent = (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
  if ((f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && kind != HBVK_DEVICE_NOMAP) VKTRY(c, c->vkMapMemory(c->dev, ch->m, 0, VK_WHOLE_SIZE, 0, &ch->map), "vkMapMemory");
  return 0;
}

int hbvk_buf_new(hbvk *c, int64_t bytes, int64_t chunk, int kind) {
  CHECK_LOST(c);
  if (bytes < 0 || kind < HBVK_DEVICE || kind > HBVK_DEVICE_NOMAP) return fail(c, HBVK_E_ARG, "hbvk_buf_new(%lld, kind %d)", (long long)bytes, kind);
  if (bytes == 0) bytes = 4;
  if (chunk <= 0 || chunk > bytes) chunk = bytes;
  if (chunk % 4) return fail(c, HBVK_E_ARG, "chunk %lld is not a multiple of 4", (long long)chunk);
  int h = TABLE_ADD(c, bufs, nbufs, capbufs);
  if (h < 0) return fail(c, h, "out of host memory");
  buf_t *b = &c->bufs[h];
  const int n = (int)((bytes + chunk - 1) / chunk);
  b->c = calloc((size_t)n, sizeof *b->c);
  if (!b->c) return fail(c, HBVK_E_NOMEM, "out of host memory");
  b->kind = kind; b->bytes = bytes; b->chunk = chunk; b->n = n; b->mapped = 1;
  for (int i = 0; i < n; i++) {
    int64_t sz = bytes - (int64_t)i * chunk < chunk ? bytes - (int64_t)i * chunk : chunk;
    int r = alloc_chunk(c, &b->c[i], (VkDeviceSize)((sz + 3) & ~3LL), kind);
    if (r) { free_chunks(c, b); return r; }
    if (!b->c[i].map) b->mapped = 0;
  }
  b->live = 1;
  return h;
}

int hbvk_buf_free(hbvk *c, int h) {
  if (!c) return HBVK_E_ARG;
  buf_t *b = get_buf(c, h);
  if (!b) return HBVK_E_ARG;
  free_chunks(c, b);
  b->live = 0;
  return 0;
}

int hbvk_buf_info(hbvk *c, int h, int64_t *out) {
  if (!c || !out) return HBVK_E_ARG;
  buf_t *b = get_buf(c, h);
  if (!b) return HBVK_E_ARG;
  out[0] = b->bytes; out[1] = b->chunk; out[2] = b->n; out[3] = b->mapped; out[4] = b->kind;
  return 0;
}

static int submit_wait(hbvk *c, int h);

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

static int ensure_stage(hbvk *c) {
  if (c->stage < 0) {
    int s = hbvk_buf_new(c, 8 << 20, 0, HBVK_HOST);
    if (s < 0) return s;
    c->stage = s;
  }
  if (c->stage_cmd < 0) {
    int k = hbvk_cmd_new(c);
    if (k < 0) return k;
    c->stage_cmd = k;
  }
  return 0;
}

/* one synchronous staged copy between buffer h [off, off+n) and the staging buffer (n <= 8 MiB) */
static int staged_copy(hbvk *c, int h, int64_t off, int64_t n, int to_buffer) {
  int r = hbvk_cmd_begin(c, c->stage_cmd);
  if (r) return r;
  r = to_buffer ? hbvk_cmd_copy(c, c->stage_cmd, c->stage, 0, h, off, n) : hbvk_cmd_copy(c, c->stage_cmd, h, off, c->stage, 0, n);
  if (r) return r;
  return submit_wait(c, c->stage_cmd);
}

int hbvk_buf_write(hbvk *c, int h, int64_t off, const void *src, int64_t n) {
  CHECK_LOST(c);
  buf_t *b = get_buf(c, h);
  if (!b || !src || off < 0 || n < 0) return fail(c, HBVK_E_ARG, "hbvk_buf_write: bad arguments");
  if (off + n > b->bytes) return fail(c, HBVK_E_RANGE, "write [%lld, +%lld) past %lld bytes", (long long)off, (long long)n, (long long)b->bytes);
  if (!b->mapped) {
    int r = ensure_stage(c);
    if (r) return r;
    const int64_t S = c->bufs[c->stage].bytes;
    for (int64_t d = 0; d < n; d += S) {
      const int64_t len = n - d < S ? n - d : S;
      memcpy(c->bufs[c->stage].c[0].map, (const char *)src + d, (size_t)len);
      r = staged_copy(c, h, off + d, len, 1);
      if (r) return r;
    }
    return 0;
  }
  FOR_PIECES(b, off, n, {
    chunk_t *ch = &b->c[ci];
    memcpy((char *)ch->map + lo, (const char *)src + at, (size_t)len);
    if (!ch->coherent) {
      VkMappedMemoryRange mr = { .sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = ch->m, .offset = 0, .size = VK_WHOLE_SIZE };
      VKTRY(c, c->vkFlushMappedMemoryRanges(c->dev, 1, &mr), "vkFlushMappedMemoryRanges");
    }
  })
  return 0;
}

int hbvk_buf_read(hbvk *c, int h, int64_t off, void *dst, int64_t n) {
  CHECK_LOST(c);
  buf_t *b = get_buf(c, h);
  if (!b || !dst || off < 0 || n < 0) return fail(c, HBVK_E_ARG, "hbvk_buf_read: bad arguments");
  if (off + n > b->bytes) return fail(c, HBVK_E_RANGE, "read [%lld, +%lld) past %lld bytes", (long long)off, (long long)n, (long long)b->bytes);
  if (!b->mapped) {
    int r = ensure_stage(c);
    if (r) return r;
    const int64_t S = c->bufs[c->stage].bytes;
    for (int64_t d = 0; d < n; d += S) {
      const int64_t len = n - d < S ? n - d : S;
      r = staged_copy(c, h, off + d, len, 0);
      if (r) return r;
      memcpy((char *)dst + d, c->bufs[c->stage].c[0].map, (size_t)len);
    }
    return 0;
  }
  FOR_PIECES(b, off, n, {
    chunk_t *ch = &b->c[ci];
    if (!ch->coherent) {
      VkMappedMemoryRange mr = { .sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = ch->m, .offset = 0, .size = VK_WHOLE_SIZE };
      VKTRY(c, c->vkInvalidateMappedMemoryRanges(c->dev, 1, &mr), "vkInvalidateMappedMemoryRanges");
    }
    memcpy((char *)dst + at, (const char *)ch->map + lo, (size_t)len);
  })
  return 0;
}

/* ---------------- pipelines and descriptor sets ---------------- */
int hbvk_pipe_new(hbvk *c, const uint32_t *code, int64_t bytes, int nbind, int pushBytes) {
  CHECK_LOST(c);
  if (!code || bytes <= 0 || bytes % 4 || nbind < 0 || nbind > 16 || pushBytes < 0 || pushBytes % 4)
    return fail(c, HBVK_E_ARG, "hbvk_pipe_new: bad arguments");
  if ((uint32_t)pushBytes > c->lim.maxPushConstantsSize)
    return fail(c, HBVK_E_LIMIT, "push constants %d > device limit %u", pushBytes, c->lim.maxPushConstantsSize);
  int h = TABLE_ADD(c, pipes, npipes, cappipes);
  if (h < 0) return fail(c, h, "out of host memory");
  pipe_t *p = &c->pipes[h];
  p->nbind = nbind; p->push = pushBytes;
  VkShaderModuleCreateInfo si = { .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = (size_t)bytes, .pCode = code };
  VKTRY(c, c->vkCreateShaderModule(c->dev, &si, NULL, &p->sm), "vkCreateShaderModule");
  VkDescriptorSetLayoutBinding lb[16];
  for (int i = 0; i < nbind; i++)
    lb[i] = (VkDescriptorSetLayoutBinding){ .binding = (uint32_t)i, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                            .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT };
  VkDescriptorSetLayoutCreateInfo li = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = (uint32_t)nbind, .pBindings = lb };
  VKTRY(c, c->vkCreateDescriptorSetLayout(c->dev, &li, NULL, &p->dsl), "vkCreateDescriptorSetLayout");
  VkPushConstantRange pr = { .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = (uint32_t)pushBytes };
  VkPipelineLayoutCreateInfo pli = { .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1, .pSetLayouts = &p->dsl,
                                     .pushConstantRangeCount = pushBytes ? 1u : 0u, .pPushConstantRanges = &pr };
  VKTRY(c, c->vkCreatePipelineLayout(c->dev, &pli, NULL, &p->pl), "vkCreatePipelineLayout");
  VkComputePipelineCreateInfo ci = { .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
    .stage = { .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = p->sm, .pName = "main" },
    .layout = p->pl };
  VKTRY(c, c->vkCreateComputePipelines(c->dev, NULL, 1, &ci, NULL, &p->p), "vkCreateComputePipelines");
  p->live = 1;
  return h;
}

int hbvk_pipe_free(hbvk *c, int h) {
  if (!c) return HBVK_E_ARG;
  pipe_t *p = get_pipe(c, h);
  if (!p) return HBVK_E_ARG;
  c->vkDestroyPipeline(c->dev, p->p, NULL);
  c->vkDestroyPipelineLayout(c->dev, p->pl, NULL);
  c->vkDestroyDescriptorSetLayout(c->dev, p->dsl, NULL);
  c->vkDestroyShaderModule(c->dev, p->sm, NULL);
  p->live = 0;
  return 0;
}

enum { POOL_SETS = 512, POOL_DESCRIPTORS = POOL_SETS * 8 };

static int new_pool(hbvk *c) {
  VkDescriptorPool *np = realloc(c->pools, sizeof *np * (size_t)(c->npools + 1));
  if (!np) return fail(c, HBVK_E_NOMEM, "out of host memory");
  c->pools = np;
  VkDescriptorPoolSize ps = { .type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = POOL_DESCRIPTORS };
  VkDescriptorPoolCreateInfo pi = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT,
                                    .maxSets = POOL_SETS, .poolSizeCount = 1, .pPoolSizes = &ps };
  VKTRY(c, c->vkCreateDescriptorPool(c->dev, &pi, NULL, &c->pools[c->npools]), "vkCreateDescriptorPool");
  c->npools++;
  return 0;
}

int hbvk_set_new(hbvk *c, int pipe, int n, const int32_t *bufs, const int64_t *offs, const int64_t *ranges) {
  CHECK_LOST(c);
  pipe_t *p = get_pipe(c, pipe);
  if (!p || n != p->nbind || (n && (!bufs || !offs || !ranges))) return fail(c, HBVK_E_ARG, "hbvk_set_new: pipeline %d wants %d bindings, got %d", pipe, p ? p->nbind : -1, n);
  VkDescriptorBufferInfo bi[16];
  for (int i = 0; i < n; i++) {
    buf_t *b = get_buf(c, bufs[i]);
    if (!b || offs[i] < 0 || offs[i] >= b->bytes) return fail(c, HBVK_E_ARG, "binding %d: buffer %d / offset %lld", i, bufs[i], (long long)offs[i]);
    const int ci = (int)(offs[i] / b->chunk);
    const int64_t lo = offs[i] - (int64_t)ci * b->chunk;
    const int64_t size = (int64_t)b->c[ci].size;
    const int64_t range = ranges[i] > 0 ? ranges[i] : size - lo;
    if (lo + range > size) return fail(c, HBVK_E_RANGE, "binding %d: [%lld, +%lld) crosses chunk %d of buffer %d", i, (long long)offs[i], (long long)range, ci, bufs[i]);
    if (c->lim.minStorageBufferOffsetAlignment && lo % (int64_t)c->lim.minStorageBufferOffsetAlignment)
      return fail(c, HBVK_E_ALIGN, "binding %d: offset %lld not aligned to %llu", i, (long long)lo, (unsigned long long)c->lim.minStorageBufferOffsetAlignment);
    bi[i] = (VkDescriptorBufferInfo){ .buffer = b->c[ci].b, .offset = (VkDeviceSize)lo, .range = (VkDeviceSize)range };
  }
  int h = TABLE_ADD(c, sets, nsets, capsets);
  if (h < 0) return fail(c, h, "out of host memory");
  set_t *s = &c->sets[h];
  VkDescriptorSetAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, .descriptorSetCount = 1, .pSetLayouts = &p->dsl };
  VkResult r = VK_ERROR_OUT_OF_POOL_MEMORY;
  if (c->npools) { ai.descriptorPool = c->pools[c->npools - 1]; r = c->vkAllocateDescriptorSets(c->dev, &ai, &s->s); }
  if (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL || (r == VK_ERROR_OUT_OF_HOST_MEMORY && c->npools)) {
    int e = new_pool(c);
    if (e) return e;
    ai.descriptorPool = c->pools[c->npools - 1];
    r = c->vkAllocateDescriptorSets(c->dev, &ai, &s->s);
  }
  if (r != VK_SUCCESS) return fail(c, r, "vkAllocateDescriptorSets");
  s->pool = c->npools - 1; s->pipe = pipe;
  VkWriteDescriptorSet w[16];
  for (int i = 0; i < n; i++)
    w[i] = (VkWriteDescriptorSet){ .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = s->s, .dstBinding = (uint32_t)i,
                                   .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &bi[i] };
  if (n) c->vkUpdateDescriptorSets(c->dev, (uint32_t)n, w, 0, NULL);
  s->live = 1;
  return h;
}

int hbvk_set_free(hbvk *c, int h) {
  if (!c) return HBVK_E_ARG;
  set_t *s = get_set(c, h);
  if (!s) return HBVK_E_ARG;
  c->vkFreeDescriptorSets(c->dev, c->pools[s->pool], 1, &s->s);
  s->live = 0;
  return 0;
}

/* ---------------- command buffers ---------------- */
int hbvk_cmd_new(hbvk *c) {
  CHECK_LOST(c);
  int h = TABLE_ADD(c, cmds, ncmds, capcmds);
  if (h < 0) return fail(c, h, "out of host memory");
  cmd_t *k = &c->cmds[h];
  VkCommandBufferAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = c->cpool,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1 };
  VKTRY(c, c->vkAllocateCommandBuffers(c->dev, &ai, &k->cb), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fi = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
  VKTRY(c, c->vkCreateFence(c->dev, &fi, NULL, &k->f), "vkCreateFence");
  k->live = 1;
  return h;
}

int hbvk_cmd_free(hbvk *c, int h) {
  if (!c) return HBVK_E_ARG;
  cmd_t *k = get_cmd(c, h);
  if (!k) return HBVK_E_ARG;
  if (k->pending && !c->lost) c->vkWaitForFences(c->dev, 1, &k->f, 1, UINT64_MAX);
  c->vkDestroyFence(c->dev, k->f, NULL);
  c->vkFreeCommandBuffers(c->dev, c->cpool, 1, &k->cb);
  k->live = 0;
  return 0;
}

static void global_barrier(hbvk *c, cmd_t *k, VkPipelineStageFlags dstStage, VkAccessFlags dstAccess) {
  VkMemoryBarrier mb = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                         .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
                         .dstAccessMask = dstAccess };
  c->vkCmdPipelineBarrier(k->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                          dstStage, 0, 1, &mb, 0, NULL, 0, NULL);
}
#define DEV_STAGES (VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT)
#define DEV_ACCESS (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT)

int hbvk_cmd_wait(hbvk *c, int h, int64_t timeout_ns) {
  CHECK_LOST(c);
  cmd_t *k = get_cmd(c, h);
  if (!k) return fail(c, HBVK_E_ARG, "bad command buffer %d", h);
  if (!k->pending) return 0;
  VkResult r = c->vkWaitForFences(c->dev, 1, &k->f, 1, timeout_ns < 0 ? UINT64_MAX : (uint64_t)timeout_ns);
  if (r == VK_TIMEOUT) return VK_TIMEOUT;
  if (r != VK_SUCCESS) return fail(c, r, "vkWaitForFences");
  k->pending = 0;
  VKTRY(c, c->vkResetFences(c->dev, 1, &k->f), "vkResetFences");
  return 0;
}

int hbvk_cmd_pending(hbvk *c, int h) {
  cmd_t *k = c ? get_cmd(c, h) : NULL;
  return k ? k->pending : HBVK_E_ARG;
}

int hbvk_cmd_begin(hbvk *c, int h) {
  CHECK_LOST(c);
  cmd_t *k = get_cmd(c, h);
  if (!k) return fail(c, HBVK_E_ARG, "bad command buffer %d", h);
  if (k->pending) { int r = hbvk_cmd_wait(c, h, -1); if (r) return r; }
  if (k->recording) { c->vkEndCommandBuffer(k->cb); k->recording = 0; }
  VKTRY(c, c->vkResetCommandBuffer(k->cb, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT };
  VKTRY(c, c->vkBeginCommandBuffer(k->cb, &bi), "vkBeginCommandBuffer");
  k->recording = 1;
  global_barrier(c, k, DEV_STAGES, DEV_ACCESS); /* earlier submissions and host writes happen-before this one */
  return 0;
}

static cmd_t *recording(hbvk *c, int h) {
  cmd_t *k = get_cmd(c, h);
  return k && k->recording ? k : NULL;
}

int hbvk_cmd_dispatch(hbvk *c, int h, int pipe, int set, const void *push, int pushBytes, int gx, int gy, int gz) {
  CHECK_LOST(c);
  cmd_t *k = recording(c, h);
  pipe_t *p = get_pipe(c, pipe);
  set_t *s = get_set(c, set);
  if (!k) return fail(c, HBVK_E_STATE, "dispatch: command buffer %d is not recording", h);
  if (!p || !s) return fail(c, HBVK_E_ARG, "dispatch: bad pipeline %d / set %d", pipe, set);
  if (s->pipe != pipe) return fail(c, HBVK_E_ARG, "dispatch: set %d was made for pipeline %d, not %d", set, s->pipe, pipe);
  if (pushBytes != p->push || (pushBytes && !push)) return fail(c, HBVK_E_ARG, "dispatch: pipeline %d takes %d push bytes, got %d", pipe, p->push, pushBytes);
  if (gx < 0 || gy < 0 || gz < 0) return fail(c, HBVK_E_ARG, "dispatch: negative group count");
  if ((uint32_t)gx > c->lim.maxComputeWorkGroupCount[0] || (uint32_t)gy > c->lim.maxComputeWorkGroupCount[1] ||
      (uint32_t)gz > c->lim.maxComputeWorkGroupCount[2])
    return fail(c, HBVK_E_LIMIT, "dispatch (%d, %d, %d) exceeds maxComputeWorkGroupCount", gx, gy, gz);
  if (!gx || !gy || !gz) return 0;
  c->vkCmdBindPipeline(k->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->p);
  c->vkCmdBindDescriptorSets(k->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pl, 0, 1, &s->s, 0, NULL);
  if (pushBytes) c->vkCmdPushConstants(k->cb, p->pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t)pushBytes, push);
  c->vkCmdDispatch(k->cb, (uint32_t)gx, (uint32_t)gy, (uint32_t)gz);
  return 0;
}

int hbvk_cmd_barrier(hbvk *c, int h) {
  CHECK_LOST(c);
  cmd_t *k = recording(c, h);
  if (!k) return fail(c, HBVK_E_STATE, "barrier: command buffer %d is not recording", h);
  global_barrier(c, k, DEV_STAGES, DEV_ACCESS);
  return 0;
}

int hbvk_cmd_copy(hbvk *c, int h, int src, int64_t soff, int dst, int64_t doff, int64_t n) {
  CHECK_LOST(c);
  cmd_t *k = recording(c, h);
  buf_t *s = get_buf(c, src), *d = get_buf(c, dst);
  if (!k || !s || !d || soff < 0 || doff < 0 || n < 0) return fail(c, !k ? HBVK_E_STATE : HBVK_E_ARG, "copy: bad arguments");
  if (soff + n > s->bytes || doff + n > d->bytes) return fail(c, HBVK_E_RANGE, "copy of %lld bytes past a buffer end", (long long)n);
  for (int64_t done = 0; done < n;) {
    const int si = (int)((soff + done) / s->chunk), di = (int)((doff + done) / d->chunk);
    const int64_t slo = soff + done - (int64_t)si * s->chunk, dlo = doff + done - (int64_t)di * d->chunk;
    int64_t len = n - done;
    if (len > (int64_t)s->c[si].size - slo) len = (int64_t)s->c[si].size - slo;
    if (len > (int64_t)d->c[di].size - dlo) len = (int64_t)d->c[di].size - dlo;
    VkBufferCopy r = { .srcOffset = (VkDeviceSize)slo, .dstOffset = (VkDeviceSize)dlo, .size = (VkDeviceSize)len };
    c->vkCmdCopyBuffer(k->cb, s->c[si].b, d->c[di].b, 1, &r);
    done += len;
  }
  return 0;
}

int hbvk_cmd_fill(hbvk *c, int h, int buf, int64_t off, int64_t n, uint32_t value) {
  CHECK_LOST(c);
  cmd_t *k = recording(c, h);
  buf_t *b = get_buf(c, buf);
  if (!k || !b || off < 0 || n < 0 || off % 4 || n % 4) return fail(c, !k ? HBVK_E_STATE : HBVK_E_ARG, "fill: bad arguments");
  if (off + n > b->bytes) return fail(c, HBVK_E_RANGE, "fill past the buffer end");
  FOR_PIECES(b, off, n, { (void)at; c->vkCmdFillBuffer(k->cb, b->c[ci].b, (VkDeviceSize)lo, (VkDeviceSize)len, value); })
  return 0;
}

int hbvk_cmd_submit(hbvk *c, int h) {
  CHECK_LOST(c);
  cmd_t *k = recording(c, h);
  if (!k) return fail(c, HBVK_E_STATE, "submit: command buffer %d is not recording", h);
  global_barrier(c, k, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT); /* results visible to host reads */
  k->recording = 0;
  VKTRY(c, c->vkEndCommandBuffer(k->cb), "vkEndCommandBuffer");
  c->submits++;
  if (c->fault_at && c->submits >= c->fault_at) return fail(c, VK_ERROR_DEVICE_LOST, "fault injected at submit %d", c->submits);
  VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &k->cb };
  VKTRY(c, c->vkQueueSubmit(c->q, 1, &si, k->f), "vkQueueSubmit");
  k->pending = 1;
  return 0;
}

static int submit_wait(hbvk *c, int h) {
  int r = hbvk_cmd_submit(c, h);
  return r ? r : hbvk_cmd_wait(c, h, -1);
}

void hbvk_destroy(hbvk *c) {
  if (!c) return;
  if (!c->lost) c->vkDeviceWaitIdle(c->dev);
  for (int i = 0; i < c->ncmds; i++) if (c->cmds[i].live) { c->cmds[i].pending = 0; hbvk_cmd_free(c, i); }
  for (int i = 0; i < c->nsets; i++) c->sets[i].live = 0; /* freed with their pools */
  for (int i = 0; i < c->npools; i++) c->vkDestroyDescriptorPool(c->dev, c->pools[i], NULL);
  for (int i = 0; i < c->npipes; i++) if (c->pipes[i].live) hbvk_pipe_free(c, i);
  for (int i = 0; i < c->nbufs; i++) if (c->bufs[i].live) hbvk_buf_free(c, i);
  c->vkDestroyCommandPool(c->dev, c->cpool, NULL);
  c->vkDestroyDevice(c->dev, NULL);
  free(c->pools); free(c->bufs); free(c->pipes); free(c->sets); free(c->cmds);
  free(c);
}
