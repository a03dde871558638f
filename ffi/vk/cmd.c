/* libhbvk command buffers: each with its own fence; begin (after a full barrier), record dispatches,
 * barriers, copies and fills, submit (with fault injection) and wait. State: the context's command table. */
#include "ctx.h"

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
