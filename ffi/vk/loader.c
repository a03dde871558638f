/* libhbvk loader: dlopen(libvulkan), one VkInstance per process (Vulkan 1.1 when the loader has it),
 * the physical-device list and its JSON description for src/device/vulkan/vk.ts (hbvk.h). State: hbvk__L. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

hbvk_loader_t hbvk__L = { .rc = 1 };
#define L hbvk__L

int hbvk_loader_init(void) {
  if (L.rc != 1) return L.rc;
  const char *names[] = { "libvulkan.so.1", "libvulkan.so", "libvulkan.1.dylib", "libMoltenVK.dylib" };
  for (unsigned i = 0; i < sizeof names / sizeof *names && !L.lib; i++) L.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!L.lib) return L.rc = HBVK_E_NOLIB;
  L.gipa = (PFN_vkGetInstanceProcAddr)dlsym(L.lib, "vkGetInstanceProcAddr");
  if (!L.gipa) return L.rc = HBVK_E_NOLIB;
  PFN_vkCreateInstance create = (PFN_vkCreateInstance)L.gipa(NULL, "vkCreateInstance");
  PFN_vkEnumerateInstanceVersion ver = (PFN_vkEnumerateInstanceVersion)L.gipa(NULL, "vkEnumerateInstanceVersion");
  if (!create) return L.rc = HBVK_E_NOLIB;
  uint32_t v = VK_API_VERSION_1_0;
  if (ver && ver(&v) != VK_SUCCESS) v = VK_API_VERSION_1_0;
  L.api = v >= VK_API_VERSION_1_1 ? VK_API_VERSION_1_1 : VK_API_VERSION_1_0;
  VkApplicationInfo app = { .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "hummingbird",
                            .pEngineName = "hummingbird", .apiVersion = L.api };
  VkInstanceCreateInfo ci = { .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app };
  VkResult r = create(&ci, NULL, &L.inst);
  if (r != VK_SUCCESS) return L.rc = r;
#define LOAD(f) L.f = (PFN_##f)L.gipa(L.inst, #f); if (!L.f) return L.rc = HBVK_E_NOLIB;
  INSTANCE_FNS(LOAD)
#undef LOAD
  if (L.api >= VK_API_VERSION_1_1) L.gpdp2 = (PFN_vkGetPhysicalDeviceProperties2)L.gipa(L.inst, "vkGetPhysicalDeviceProperties2");
  L.npdev = 16;
  r = L.vkEnumeratePhysicalDevices(L.inst, &L.npdev, L.pdevs);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) { L.npdev = 0; return L.rc = r; }
  return L.rc = 0;
}

int hbvk_device_count(void) {
  int r = hbvk_loader_init();
  return r ? r : (int)L.npdev;
}

int hbvk__compute_family(VkPhysicalDevice pd) {
  VkQueueFamilyProperties qf[32];
  uint32_t n = 32;
  L.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, qf);
  for (uint32_t i = 0; i < n; i++) if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && qf[i].queueCount > 0) return (int)i;
  return -1;
}

static uint64_t max_alloc(VkPhysicalDevice pd) {
  if (!L.gpdp2) return 1ull << 30; /* Vulkan 1.0: the spec's guaranteed minimum */
  VkPhysicalDeviceMaintenance3Properties m3 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES };
  VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3 };
  L.gpdp2(pd, &p2);
  return m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : 1ull << 30;
}

static void json_str(char *dst, size_t cap, const char *s) { /* escape quotes, backslashes, control chars */
  size_t k = 0;
  for (; *s && k + 7 < cap; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') { dst[k++] = '\\'; dst[k++] = (char)ch; }
    else if (ch < 0x20) k += (size_t)snprintf(dst + k, cap - k, "\\u%04x", ch);
    else dst[k++] = (char)ch;
  }
  dst[k] = 0;
}

int hbvk_device_info(int i, char *buf, int len) {
  int r = hbvk_loader_init();
  if (r) return r;
  if (i < 0 || (uint32_t)i >= L.npdev || !buf || len <= 0) return HBVK_E_ARG;
  VkPhysicalDeviceProperties p;
  L.vkGetPhysicalDeviceProperties(L.pdevs[i], &p);
  VkPhysicalDeviceMemoryProperties mp;
  L.vkGetPhysicalDeviceMemoryProperties(L.pdevs[i], &mp);
  char name[600];
  json_str(name, sizeof name, p.deviceName);
  const VkPhysicalDeviceLimits *l = &p.limits;
  int k = snprintf(buf, (size_t)len,
    "{\"index\":%d,\"name\":\"%s\",\"type\":%d,\"api\":%u,\"vendor\":%u,\"device\":%u,\"driver\":%u,"
    "\"computeQueue\":%d,\"maxAlloc\":%llu,\"maxStorageRange\":%u,\"maxPush\":%u,\"maxWG\":[%u,%u,%u],"
    "\"maxInvocations\":%u,\"maxShared\":%u,\"minStorageAlign\":%llu,\"nonCoherentAtom\":%llu,\"heaps\":[",
    i, name, (int)p.deviceType, p.apiVersion, p.vendorID, p.deviceID, p.driverVersion, hbvk__compute_family(L.pdevs[i]),
    (unsigned long long)max_alloc(L.pdevs[i]), l->maxStorageBufferRange, l->maxPushConstantsSize,
    l->maxComputeWorkGroupCount[0], l->maxComputeWorkGroupCount[1], l->maxComputeWorkGroupCount[2],
    l->maxComputeWorkGroupInvocations, l->maxComputeSharedMemorySize,
    (unsigned long long)l->minStorageBufferOffsetAlignment, (unsigned long long)l->nonCoherentAtomSize);
  for (uint32_t h = 0; h < mp.memoryHeapCount && k > 0 && k < len; h++)
    k += snprintf(buf + k, (size_t)(len - k), "%s{\"size\":%llu,\"deviceLocal\":%d}", h ? "," : "",
                  (unsigned long long)mp.memoryHeaps[h].size, (mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) ? 1 : 0);
  if (k > 0 && k < len) k += snprintf(buf + k, (size_t)(len - k), "]}");
  if (k <= 0 || k >= len) return HBVK_E_ARG; /* buffer too small */
  return k;
}

