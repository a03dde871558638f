/* libhb weight memory: anonymous mappings aligned to 2 MiB and advised onto transparent huge pages, for the
 * buffers the kernels stream (weights, expert slabs). The experts of a decode step are scattered 0.25-1 MiB
 * pieces: on 4 KiB pages every piece starts with TLB misses the prefetchers cannot run past (a VM pays two
 * page walks per miss); on 2 MiB pages one entry covers several pieces. Where the kernel has no THP (or
 * refuses the advice) the mapping still works, on small pages. No state: a mapping's length travels with it
 * (the JS ArrayBuffer's deallocator context). */
#include "hb.h"
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define HB_HUGE (2u << 20)

/* the mapped length of a request: whole small pages only (the system's: 4 KiB on x86-64, 16 or 64 KiB on some arm64
 * kernels, where munmap of the tail at a 4 KiB multiple would fail), so a buffer's last partial 2 MiB stays on small
 * pages (a huge page there would commit up to 2 MiB that nothing uses) */
static size_t mapped_len(int64_t bytes) {
  const long pg = sysconf(_SC_PAGESIZE);
  const size_t page = pg > 0 ? (size_t)pg : 4096;
  return ((size_t)bytes + page - 1) / page * page;
}

/* a zeroed mapping of `bytes` on a 2 MiB boundary; NULL when the OS refuses */
void *hb_huge_alloc(int64_t bytes) {
  if (bytes <= 0) return NULL;
  const size_t n = mapped_len(bytes);
  uint8_t *raw = mmap(NULL, n + HB_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  uint8_t *p = (uint8_t *)(((uintptr_t)raw + HB_HUGE - 1) & ~(uintptr_t)(HB_HUGE - 1));
  /* the unaligned head and tail go back at once */
  if (p > raw) munmap(raw, (size_t)(p - raw));
  if (raw + n + HB_HUGE > p + n) munmap(p + n, (size_t)(raw + n + HB_HUGE - (p + n)));
#ifdef MADV_HUGEPAGE
  madvise(p, n, MADV_HUGEPAGE);
#endif
  return p;
}

/* the deallocator of an ArrayBuffer over hb_huge_alloc(bytes): ctx carries `bytes` */
void hb_huge_free(void *p, void *ctx) {
  if (p) munmap(p, mapped_len((int64_t)(uintptr_t)ctx));
}
