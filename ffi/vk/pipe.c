/* libhbvk pipelines (compute pipeline + its descriptor-set and pipeline layouts from SPIR-V) and
 * descriptor sets (storage-buffer bindings inside one chunk each, from pools grown on demand).
 * State: the context's pipeline and set tables and its descriptor pools. */
#include "ctx.h"

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
