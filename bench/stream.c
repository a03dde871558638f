/* How fast can a core stream weights while it computes on them? (bun bench/stream.ts builds and runs this.)
 * Reads a 1 GiB buffer (huge pages when the kernel gives them) as blocks of B bytes taken in random order, with
 * 1 or 2 threads (each its own blocks: what hb_parallel_spans gives decode), two kinds of work per 64 bytes:
 *  - load: an XOR per 32 bytes (the bandwidth probe's loop, ffi/membw.c; the probe reads 1 MiB chunks in address
 *    order, so its runs are long);
 *  - int4: the int4g decode kernel's arithmetic (two nibble masks, two vpdpbusd on broadcast activations, one
 *    convert and FMA per 512 bytes), no software prefetch (the kernels' own is measured by bench/ab.ts).
 * Prints GB/s per (work, threads, B): the ceiling any kernel of that shape has on this machine. Then, one core over
 * 288 KiB blocks, whether arithmetic adds to the stream's time: the int4 work repeated K times per 512 bytes with a
 * software prefetch 6 KiB ahead, from L2 (one block again and again) and from memory (blocks in random order); and
 * the decode tile's load order (64 bytes of each of 8 rows 512 bytes apart in turn) with and without that prefetch.
 * x86-64 with AVX-512 VNNI only (elsewhere it says so and exits 0). Holds no state between runs. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define TV __attribute__((target("avx2,avx512f,avx512bw,avx512vnni,avx512dq")))

#define TOTAL ((size_t)1 << 30)
static uint8_t *buf;
static size_t blk, nblk, *order;
static int work, nthreads;
static int8_t act[2048] __attribute__((aligned(64)));

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

TV static void load_block(const uint8_t *p, size_t n, __m512i *a) {   /* ffi/membw.c's loop */
  __m256i b[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
  for (size_t i = 0; i < n; i += 128)
    for (int k = 0; k < 4; k++) b[k] = _mm256_xor_si256(b[k], _mm256_load_si256((const void *)(p + i + 32 * k)));
  a[0] = _mm512_xor_si512(a[0], _mm512_castsi256_si512(_mm256_xor_si256(_mm256_xor_si256(b[0], b[1]), _mm256_xor_si256(b[2], b[3]))));
}
TV static void int4_block(const uint8_t *p, size_t n, __m512 *acc) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512 sc = _mm512_set1_ps(0.5f);
  for (size_t i = 0; i < n; i += 512) {
    __m512i a = _mm512_set1_epi32(7), b = _mm512_setzero_si512();
    for (int k = 0; k < 8; k++) {
      const int s = (int)((i / 64 + k) & 127);
      const __m512i w = _mm512_load_si512((const void *)(p + i + 64 * k));
      a = _mm512_dpbusd_epi32(a, _mm512_and_si512(w, m4), _mm512_set1_epi32(*(const int32_t *)(act + 8 * s)));
      b = _mm512_dpbusd_epi32(b, _mm512_and_si512(_mm512_srli_epi16(w, 4), m4), _mm512_set1_epi32(*(const int32_t *)(act + 8 * s + 4)));
    }
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a, b)), sc, *acc);
  }
}
/* the int4 work K times per 512 bytes of p[0, n), 8 rows of `rb` bytes per tile read row after row (rb = 0) or
 * 64 bytes of each row in turn (the decode tile's order); pf > 0: a prefetch pf bytes ahead, in address order */
TV static inline __attribute__((always_inline)) void int4_kblock(const uint8_t *p, size_t n, int K, size_t rb, size_t pf, __m512 *acc) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const size_t tile = rb ? 8 * rb : 512, nb = rb ? rb / 64 : 1;
  for (size_t i = 0; i + tile <= n; i += tile)
    for (size_t b = 0; b < nb; b++) {
      __m512i a = _mm512_set1_epi32(7), c = _mm512_setzero_si512();
      for (int k = 0; k < 8; k++) {
        const size_t off = rb ? (size_t)k * rb + 64 * b : 64 * (size_t)k;
        if (pf) _mm_prefetch((const char *)(p + i + pf + 64 * (8 * b + (size_t)k)), _MM_HINT_T0);
        const __m512i w = _mm512_load_si512((const void *)(p + i + off));
        for (int r = 0; r < K; r++) {
          const int s = (int)((b + (size_t)k + (size_t)r) & 127);
          a = _mm512_dpbusd_epi32(a, _mm512_and_si512(w, m4), _mm512_set1_epi32(*(const int32_t *)(act + 8 * s)));
          c = _mm512_dpbusd_epi32(c, _mm512_and_si512(_mm512_srli_epi16(w, 4), m4), _mm512_set1_epi32(*(const int32_t *)(act + 8 * s + 4)));
        }
      }
      *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a, c)), _mm512_set1_ps(0.5f), *acc);
    }
}
static volatile float sink;
/* us per 288 KiB block, best of reps: blocks in random order (memory) or block 0 again and again (L2) */
TV static inline __attribute__((always_inline)) double per_block(int reps, int from_l2, int K, size_t rb, size_t pf) {
  const size_t b = 288 << 10, nb = TOTAL / b / 2;
  __m512 acc = _mm512_setzero_ps();
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    const double t0 = now();
    for (size_t i = 0; i < nb; i++) int4_kblock(buf + (from_l2 ? 0 : order[i] * b), b, K, rb, pf, &acc);
    const double t = (now() - t0) / (double)nb;
    if (t < best) best = t;
  }
  sink += _mm512_reduce_add_ps(acc);
  return best * 1e6;
}
/* thread t of nthreads: blocks t, t + nthreads, ... of the shuffled order */
TV static void *run(void *arg) {
  const size_t t = (size_t)(uintptr_t)arg;
  __m512i a[4] = { _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512() };
  __m512 acc = _mm512_setzero_ps();
  if (nblk == 1) {   /* one block: each thread its contiguous share */
    const size_t n = blk / (size_t)nthreads;
    if (work) int4_block(buf + t * n, n, &acc);
    else load_block(buf + t * n, n, a);
  }
  for (size_t i = t; nblk > 1 && i < nblk; i += (size_t)nthreads) {
    const uint8_t *p = buf + order[i] * blk;
    if (work) int4_block(p, blk, &acc);
    else load_block(p, blk, a);
  }
  sink += _mm512_reduce_add_ps(acc) + (float)_mm_cvtsi128_si32(_mm512_castsi512_si128(_mm512_xor_si512(a[0], a[3])));
  return NULL;
}
static double measure(void) {
  pthread_t th[2];
  const double t0 = now();
  for (int t = 1; t < nthreads; t++) pthread_create(&th[t], NULL, run, (void *)(uintptr_t)t);
  run((void *)0);
  for (int t = 1; t < nthreads; t++) pthread_join(th[t], NULL);
  return (double)(nblk * blk) / (now() - t0) / 1e9;
}

/* the second table (see the top), one core; each per_block call compiled for its constant arguments */
TV static void overlap(int reps) {
  blk = 288 << 10;   /* the blocks' order for per_block */
  nblk = TOTAL / blk;
  for (size_t i = 0; i < nblk; i++) order[i] = i;
  srand(2);
  for (size_t i = nblk - 1; i > 0; i--) { const size_t j = (size_t)rand() % (i + 1), x = order[i]; order[i] = order[j]; order[j] = x; }
  printf("one core, 288K blocks, us per block (best of %d): the int4 work K times per 512 bytes, prefetch 6 KiB ahead\n", reps);
#define ROW(K) printf("K=%d    from L2 %6.1f   from memory %6.1f\n", K, per_block(reps, 1, K, 0, 0), per_block(reps, 0, K, 0, 6144))
  ROW(1); ROW(2); ROW(3); ROW(4);
#undef ROW
  printf("the decode tile's order (8 rows of 512 bytes, 64 bytes of each in turn), K=1, from memory: %.1f us without "
         "prefetch, %.1f with\n", per_block(reps, 0, 1, 512, 0), per_block(reps, 0, 1, 512, 6144));
}

int main(int argc, char **argv) {
  if (!__builtin_cpu_supports("avx512vnni")) { printf("stream: needs AVX-512 VNNI; skipped\n"); return 0; }
  const int reps = argc > 1 ? atoi(argv[1]) : 3;
  uint8_t *raw = mmap(NULL, TOTAL + (2 << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) { perror("mmap"); return 1; }
  buf = (uint8_t *)(((uintptr_t)raw + (2 << 20) - 1) & ~(uintptr_t)((2 << 20) - 1));
  madvise(buf, TOTAL, MADV_HUGEPAGE);
  for (size_t i = 0; i < TOTAL; i += 8) { const uint64_t v = i * 2654435761u; memcpy(buf + i, &v, 8); }
  for (int i = 0; i < 2048; i++) act[i] = (int8_t)(i * 7);
  const size_t sizes[] = { 144 << 10, 288 << 10, 576 << 10, 1152 << 10, 4 << 20, TOTAL };
  order = malloc(sizeof *order * (TOTAL / (144 << 10) + 1));
  printf("%-6s %-7s %10s %10s %10s %10s %10s %10s   (GB/s, best of %d; blocks in random order; 1G: one block, a share per thread)\n",
         "work", "threads", "144K", "288K", "576K", "1152K", "4M", "1G", reps);
  for (work = 0; work < 2; work++)
    for (nthreads = 1; nthreads <= 2; nthreads++) {
      printf("%-6s %-7d", work ? "int4" : "load", nthreads);
      for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        blk = sizes[k];
        nblk = TOTAL / blk;
        for (size_t i = 0; i < nblk; i++) order[i] = i;
        srand(1);
        for (size_t i = nblk - 1; i > 0; i--) { const size_t j = (size_t)rand() % (i + 1), x = order[i]; order[i] = order[j]; order[j] = x; }
        double best = 0;
        for (int r = 0; r < reps; r++) { const double g = measure(); if (g > best) best = g; }
        printf(" %10.1f", best);
      }
      printf("\n");
    }
  overlap(reps);
  return 0;
}
#else
int main(void) { printf("stream: x86-64 only; skipped\n"); return 0; }
#endif
