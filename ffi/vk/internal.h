/* libhbvk internals shared by loader.c and the shim files (not part of the FFI surface): the process-wide loader
 * state (libvulkan handle, instance, instance-level entry points, physical devices) and the entry-point
 * lists. Hidden visibility: nothing here is exported from the shared library. */
#ifndef HBVK_INTERNAL_H
#define HBVK_INTERNAL_H
#include "hbvk.h"
#include "vk_min.h"

#define INSTANCE_FNS(X) X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties) \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice)    \
  X(vkGetDeviceProcAddr)
#define DEVICE_FNS(X) X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer)             \
  X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory)   \
  X(vkUnmapMemory) X(vkFlushMappedMemoryRanges) X(vkInvalidateMappedMemoryRanges) X(vkCreateShaderModule)    \
  X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout)                    \
  X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) X(vkDestroyPipeline)       \
  X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkAllocateDescriptorSets) X(vkFreeDescriptorSets)    \
  X(vkUpdateDescriptorSets) X(vkCreateCommandPool) X(vkDestroyCommandPool) X(vkAllocateCommandBuffers)        \
  X(vkFreeCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkResetCommandBuffer)              \
  X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatch)                     \
  X(vkCmdPipelineBarrier) X(vkCmdCopyBuffer) X(vkCmdFillBuffer) X(vkCreateFence) X(vkDestroyFence)           \
  X(vkResetFences) X(vkWaitForFences) X(vkQueueSubmit) X(vkDeviceWaitIdle)


typedef struct {
  void *lib;
  PFN_vkGetInstanceProcAddr gipa;
  PFN_vkGetPhysicalDeviceProperties2 gpdp2; /* Vulkan 1.1, may be NULL */
#define DECL(f) PFN_##f f;
  INSTANCE_FNS(DECL)
#undef DECL
  VkInstance inst;
  uint32_t api;
  int rc; /* 1 = not tried yet, 0 = ready, else the failure */
  VkPhysicalDevice pdevs[16];
  uint32_t npdev;
} hbvk_loader_t;

#define HBVK_HIDDEN __attribute__((visibility("hidden")))
extern hbvk_loader_t hbvk__L HBVK_HIDDEN;
/* first queue family with compute, or -1 */
int hbvk__compute_family(VkPhysicalDevice pd) HBVK_HIDDEN;
#endif
