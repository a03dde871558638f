/* libhbvk buffers: logical buffers split over chunks (one VkBuffer + memory each), mapped when the memory
 * is host-visible, and synchronous host transfers (mapped: memcpy + flush/invalidate; unmapped: through
 * the context's 8 MiB staging buffer and command buffer). State: the context's buffer table. */
#include "ctx.h"

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

/* one synchronous staged copy between buffer h [off, off+n) and the staging buffer (n <= 8 MiB) */
static int staged_copy(hbvk *c, int h, int64_t off, int64_t n, int to_buffer) {
  int r = hbvk_cmd_begin(c, c->stage_cmd);
  if (r) return r;
  r = to_buffer ? hbvk_cmd_copy(c, c->stage_cmd, c->stage, 0, h, off, n) : hbvk_cmd_copy(c, c->stage_cmd, h, off, c->stage, 0, n);
  if (r) return r;
  r = hbvk_cmd_submit(c, c->stage_cmd);
  return r ? r : hbvk_cmd_wait(c, c->stage_cmd, -1);
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

/* host <-> buffer h [off, off+n): to_buffer = write (host -> buffer), else read */
static int transfer(hbvk *c, int h, int64_t off, void *host, int64_t n, int to_buffer) {
  CHECK_LOST(c);
  const char *what = to_buffer ? "write" : "read";
  buf_t *b = get_buf(c, h);
  if (!b || !host || off < 0 || n < 0) return fail(c, HBVK_E_ARG, "hbvk_buf_%s: bad arguments", what);
  if (off + n > b->bytes) return fail(c, HBVK_E_RANGE, "%s [%lld, +%lld) past %lld bytes", what, (long long)off, (long long)n, (long long)b->bytes);
  if (!b->mapped) {
    int r = ensure_stage(c); /* may grow the buffer table: b is stale from here on */
    if (r) return r;
    const int64_t S = c->bufs[c->stage].bytes;
    for (int64_t d = 0; d < n; d += S) {
      const int64_t len = n - d < S ? n - d : S;
      if (to_buffer) memcpy(c->bufs[c->stage].c[0].map, (const char *)host + d, (size_t)len);
      r = staged_copy(c, h, off + d, len, to_buffer);
      if (r) return r;
      if (!to_buffer) memcpy((char *)host + d, c->bufs[c->stage].c[0].map, (size_t)len);
    }
    return 0;
  }
  FOR_PIECES(b, off, n, {
    chunk_t *ch = &b->c[ci];
    VkMappedMemoryRange mr = { .sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = ch->m, .offset = 0, .size = VK_WHOLE_SIZE };
    if (to_buffer) {
      memcpy((char *)ch->map + lo, (const char *)host + at, (size_t)len);
      if (!ch->coherent) VKTRY(c, c->vkFlushMappedMemoryRanges(c->dev, 1, &mr), "vkFlushMappedMemoryRanges");
    } else {
      if (!ch->coherent) VKTRY(c, c->vkInvalidateMappedMemoryRanges(c->dev, 1, &mr), "vkInvalidateMappedMemoryRanges");
      memcpy((char *)host + at, (const char *)ch->map + lo, (size_t)len);
    }
  })
  return 0;
}

int hbvk_buf_write(hbvk *c, int h, int64_t off, const void *src, int64_t n) { return transfer(c, h, off, (void *)src, n, 1); }
int hbvk_buf_read(hbvk *c, int h, int64_t off, void *dst, int64_t n) { return transfer(c, h, off, dst, n, 0); }
