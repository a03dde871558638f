/* libhbvk: the Vulkan compute shim (see hbvk.h for the contract). Mechanism only: per context the device,
 * queue, command pool, descriptor pools and the handle tables of buffers (buf.c), pipelines and descriptor
 * sets (pipe.c) and command buffers (cmd.c); the process-wide loader is loader.c. This file: context
 * creation, errors, fault injection and teardown. State: everything hangs off a `hbvk` context (ctx.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ctx.h"
#include <stdarg.h>
#include <stdio.h>

int hbvk__fail(hbvk *c, int rc, const char *fmt, ...) {
  if (rc == VK_ERROR_DEVICE_LOST) c->lost = 1;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
  if (k >= 0 && (size_t)k < sizeof c->err) snprintf(c->err + k, sizeof c->err - (size_t)k, " (rc %d)", rc);
  return rc;
}

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
