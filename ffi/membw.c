/* libhb instrumentation for `hummingbird bench`: the weight-bytes counter that every matmul entry
 * point (matmul.c, matmul_q8.c) adds to once per call (bytes of W and its scales touched), and a
 * memory read-bandwidth probe that streams a large buffer with every pool thread.
 * State: the counter (process-global, atomic; the engine calls kernels from one thread). */
#include "hb.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

static atomic_llong wbytes;

void hb_wbytes_add(int64_t n) { atomic_fetch_add_explicit(&wbytes, n, memory_order_relaxed); }

/* bytes counted since the last reset; reset != 0 sets the counter back to 0 */
int64_t hb_wbytes(int reset) {
  return reset ? atomic_exchange(&wbytes, 0) : atomic_load(&wbytes);
}

/* ---- bandwidth probe ---- */
#define CHUNK (1 << 20)   /* bytes per claimed chunk */
typedef struct { const uint8_t *buf; int64_t n; uint64_t sink[256]; } bw_job;

static uint64_t sum_ref(const uint8_t *p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i + 8 <= n; i += 8) { uint64_t v; memcpy(&v, p + i, 8); s ^= v; }
  return s;
}
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint8_t *p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a = _mm256_xor_si256(a, _mm256_load_si256((const __m256i *)(p + i)));
    b = _mm256_xor_si256(b, _mm256_load_si256((const __m256i *)(p + i + 32)));
    c = _mm256_xor_si256(c, _mm256_load_si256((const __m256i *)(p + i + 64)));
    d = _mm256_xor_si256(d, _mm256_load_si256((const __m256i *)(p + i + 96)));
  }
  a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 3) ^ sum_ref(p + i, n - i);
}
#endif

static void bw_task(void *ctx, int lo, int hi) {
  bw_job *j = ctx;
  for (int c = lo; c < hi; c++) {
    const int64_t off = (int64_t)c * CHUNK, n = j->n - off < CHUNK ? j->n - off : CHUNK;
#if defined(__x86_64__) || defined(__i386__)
    const uint64_t s = hb_simd_level() >= HB_AVX2 ? sum_avx2(j->buf + off, (size_t)n) : sum_ref(j->buf + off, (size_t)n);
#else
    const uint64_t s = sum_ref(j->buf + off, (size_t)n);
#endif
    j->sink[c & 255] ^= s;   /* keeps the loads alive */
  }
}
static void fill_task(void *ctx, int lo, int hi) {
  bw_job *j = ctx;
  for (int c = lo; c < hi; c++) {
    const int64_t off = (int64_t)c * CHUNK, n = j->n - off < CHUNK ? j->n - off : CHUNK;
    memset((uint8_t *)j->buf + off, c & 0xff, (size_t)n);
  }
}
static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Read bandwidth in bytes/s: a `bytes` buffer (rounded up to whole MiB, on the weights' kind of pages: mem.c) is
 * filled (pages touched by the pool threads), then read `reps` times with every pool thread (hb_parallel_every: at
 * any pool width); returns the best rep, or -1 when the buffer cannot be allocated. */
double hb_membw(int64_t bytes, int reps) {
  if (bytes < CHUNK) bytes = CHUNK;
  if (reps < 1) reps = 1;
  const int64_t n = (bytes + CHUNK - 1) / CHUNK * CHUNK;
  if (n / CHUNK > 0x7fffffff) return -1;
  bw_job *j = calloc(1, sizeof *j);
  uint8_t *buf = j ? hb_huge_alloc(n) : NULL;
  if (!buf) { free(j); return -1; }
  j->buf = buf; j->n = n;
  const int chunks = (int)(n / CHUNK);
  hb_parallel_every(chunks, 4, fill_task, j);
  double best = 0;
  for (int r = 0; r < reps; r++) {
    const double t0 = now_s();
    hb_parallel_every(chunks, 4, bw_task, j);
    const double dt = now_s() - t0;
    if (dt > 0 && (double)n / dt > best) best = (double)n / dt;
  }
  hb_huge_free(buf, (void *)(uintptr_t)n);
  free(j);
  return best;
}
