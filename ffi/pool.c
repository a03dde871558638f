/* libhb thread pool: a persistent set of pthreads that run hb_parallel_for / hb_parallel_spans jobs with the caller.
 * State (process-global): the workers, the current job (fn, ctx, n, chunk, claim counter or spans), a
 * generation counter that publishes jobs, and the mutex that admits one caller at a time.
 * Workers spin briefly (HB_SPIN_US, default 200 µs) after a job, then park on a condvar.
 * The caller returns once every item is done; it never waits for a worker that did not join the job
 * (a descheduled or parked worker is not a straggler): workers join by raising `users`, and only
 * while the job is still open, so the caller closes the job and waits for `users` to drain.
 * Nested calls (from inside a task, on any pool thread) run serially on the calling thread.
 * A job admits the caller and up to width - 1 workers (tickets); pool_width.h chooses the width. */
#include "hb.h"
#include "pool_width.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HB_MAX_THREADS 256

static struct {
  pthread_mutex_t call_mu;             /* one caller (or hb_init) at a time */
  pthread_mutex_t park_mu;
  pthread_cond_t park_cv;
  pthread_t tid[HB_MAX_THREADS];
  int nworkers;                        /* pool threads besides the caller */
  int ready;                           /* pool started */
  long spin_ns;
  /* the job published by `gen` */
  hb_task_fn fn;
  void *ctx;
  int n, chunk;
  atomic_int stop;                     /* tells workers to exit (read right after a new gen) */
  atomic_long next;                    /* next unclaimed index (long: overshoot past n never wraps) */
  atomic_uint closed;                  /* last generation whose items are all done: no joining it */
  atomic_int users;                    /* workers inside the job */
  atomic_uint gen;
  atomic_int nsleep;                   /* workers parked on park_cv */
  atomic_int tickets;                  /* workers still admitted to the current job */
  pool_width width;                    /* the caller's, under call_mu */
  int adapt;                           /* hb_pool_adapt's choice (0: HB_POOL_ADAPT's, else on 1 / off -1) */
  int spans;                           /* hb_parallel_spans: one span per thread (0: guided claims of `next`) */
  atomic_int slot;                     /* spans: the next joining worker's span */
  struct { _Alignas(64) atomic_llong v; } span[HB_MAX_THREADS];   /* spans: front << 32 | back, items [front, back) unclaimed
                                                                   (a cache line each: each thread claims from its own) */
} P = { .call_mu = PTHREAD_MUTEX_INITIALIZER, .park_mu = PTHREAD_MUTEX_INITIALIZER,
        .park_cv = PTHREAD_COND_INITIALIZER };

static _Thread_local int tl_in_pool;   /* set on workers and on a caller while it runs a job */
static _Thread_local long tl_items;    /* items this thread has run in jobs (the caller's share of each: pool_width) */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}
static long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Guided claiming: each claim takes a share of what is left (remaining / (2·threads), rounded up to a whole
 * number of `chunk`s, at least one), so a job costs O(threads · log) claims instead of n / chunk, while
 * the last claims stay small for balance. Completion needs no per-chunk counter: a chunk is only ever
 * run by a thread counted in `users` (or by the caller), and the caller waits for `users` to drain. */
static void run_chunks(void) {
  const int n = P.n, chunk = P.chunk;
  const long split = 2L * (P.nworkers + 1);
  long lo = atomic_load_explicit(&P.next, memory_order_relaxed);
  while (lo < n) {
    long take = (n - lo) / split;
    take = take <= chunk ? chunk : (take + chunk - 1) / chunk * chunk;
    if (!atomic_compare_exchange_weak_explicit(&P.next, &lo, lo + take, memory_order_relaxed, memory_order_relaxed))
      continue;                        /* lo now holds the current value: retry from there */
    const int hi = n - lo < take ? n : (int)(lo + take);
    P.fn(P.ctx, (int)lo, hi);
    tl_items += hi - lo;
    lo = atomic_load_explicit(&P.next, memory_order_relaxed);
  }
}

/* Spans: [0, n) cut into one contiguous span per thread at multiples of `chunk`; each thread claims its own span's
 * chunks front to back, and when it has none left it takes the back half of the fullest span as its own (the whole
 * of it when one chunk is left) and goes on front to back. A thread's rows are then a few long runs of consecutive
 * weights (each new stream starts slow: a thread reading an absent one's rows chunk by chunk backwards ran ~30%
 * slower), while a slow or absent thread's rows still go to the others. */
static int span_take(int s, long *lo, long *hi) {   /* the front chunk of span s */
  const int c = P.chunk;
  long long v = atomic_load_explicit(&P.span[s].v, memory_order_relaxed);
  for (;;) {
    const int f = (int)(v >> 32), b = (int)(v & 0xffffffff);
    if (f >= b) return 0;
    const int nf = b - f > c ? f + c : b;
    if (atomic_compare_exchange_weak_explicit(&P.span[s].v, &v, (long long)nf << 32 | (unsigned)b, memory_order_relaxed,
                                              memory_order_relaxed)) {
      *lo = f; *hi = nf;
      return 1;
    }
  }
}
static int span_split(int s, long *lo, long *hi) {   /* the back half of span s (at a multiple of chunk: fronts are) */
  const int c = P.chunk;
  long long v = atomic_load_explicit(&P.span[s].v, memory_order_relaxed);
  for (;;) {
    const int f = (int)(v >> 32), b = (int)(v & 0xffffffff);
    if (f >= b) return 0;
    const int m = b - f <= c ? f : f + ((b - f) / 2 + c - 1) / c * c;
    if (atomic_compare_exchange_weak_explicit(&P.span[s].v, &v, (long long)f << 32 | (unsigned)m, memory_order_relaxed,
                                              memory_order_relaxed)) {
      *lo = m; *hi = b;
      return 1;
    }
  }
}
static void run_spans(int slot) {
  long lo, hi;
  for (;;) {
    while (span_take(slot, &lo, &hi)) { P.fn(P.ctx, (int)lo, (int)hi); tl_items += hi - lo; }
    int best = -1;
    long most = 0;
    for (int s = 0; s < P.spans; s++) {
      const long long v = atomic_load_explicit(&P.span[s].v, memory_order_relaxed);
      const long left = (long)(v & 0xffffffff) - (long)(v >> 32);
      if (left > most) { most = left; best = s; }
    }
    if (best < 0) return;
    if (span_split(best, &lo, &hi))   /* this thread's span is empty: no one else writes it now */
      atomic_store_explicit(&P.span[slot].v, (long long)lo << 32 | (unsigned)hi, memory_order_relaxed);
  }
}

static void *worker(void *arg) {
  unsigned seen = (unsigned)(uintptr_t)arg;
  tl_in_pool = 1;
  for (;;) {
    unsigned g;
    long t0 = now_ns();
    for (int k = 0; (g = atomic_load_explicit(&P.gen, memory_order_acquire)) == seen; k++) {
      cpu_relax();
      if ((k & 255) == 255 && now_ns() - t0 > P.spin_ns) {
        pthread_mutex_lock(&P.park_mu);
        atomic_fetch_add(&P.nsleep, 1);
        while ((g = atomic_load(&P.gen)) == seen) pthread_cond_wait(&P.park_cv, &P.park_mu);
        atomic_fetch_sub(&P.nsleep, 1);
        pthread_mutex_unlock(&P.park_mu);
        break;
      }
    }
    seen = g;
    if (atomic_load(&P.stop)) return NULL;
    atomic_fetch_add(&P.users, 1);
    if (atomic_load(&P.gen) == g && atomic_load(&P.closed) != g && atomic_fetch_sub(&P.tickets, 1) > 0) {
      if (P.spans) {
        const int slot = atomic_fetch_add(&P.slot, 1) + 1;
        if (slot < P.spans) run_spans(slot);   /* (always: one span per pool thread) */
      }
      else run_chunks();
    }
    atomic_fetch_sub_explicit(&P.users, 1, memory_order_release);
  }
}

/* publish the job (or P.stop = 1: workers exit) as a new generation and wake parked workers */
static unsigned publish(void) {
  unsigned g = atomic_fetch_add(&P.gen, 1) + 1;
  if (atomic_load(&P.nsleep) > 0) {
    pthread_mutex_lock(&P.park_mu);
    pthread_cond_broadcast(&P.park_cv);
    pthread_mutex_unlock(&P.park_mu);
  }
  return g;
}

/* physical cores: unique (physical id, core id) pairs in /proc/cpuinfo, capped by the affinity mask */
static int physical_cores(void) {
  int n = 0;
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    static int pairs[4096][2];
    char line[256];
    int phys = 0, core = -1;
    while (fgets(line, sizeof line, f)) {
      if (!strncmp(line, "physical id", 11)) phys = atoi(strchr(line, ':') ? strchr(line, ':') + 1 : "0");
      else if (!strncmp(line, "core id", 7) && strchr(line, ':')) {
        core = atoi(strchr(line, ':') + 1);
        int dup = 0;
        for (int i = 0; i < n && !dup; i++) dup = pairs[i][0] == phys && pairs[i][1] == core;
        if (!dup && n < 4096) { pairs[n][0] = phys; pairs[n][1] = core; n++; }
      }
    }
    fclose(f);
  }
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (n <= 0) n = online > 0 ? (int)online : 1;
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 && CPU_COUNT(&set) < n)
    n = CPU_COUNT(&set);
#endif
  return n;
}

static void stop_workers(void) {
  if (!P.nworkers) return;
  atomic_store(&P.stop, 1);
  publish();
  for (int i = 0; i < P.nworkers; i++) pthread_join(P.tid[i], NULL);
  atomic_store(&P.stop, 0);
  P.nworkers = 0;
}

/* (re)start the pool with `want` threads in all; call_mu held */
static void start_pool(int want) {
  if (want > HB_MAX_THREADS) want = HB_MAX_THREADS;
  stop_workers();
  const char *sp = getenv("HB_SPIN_US");            /* workers read it: set while none run */
  P.spin_ns = (sp ? atol(sp) : 200) * 1000L;
  unsigned g = atomic_load(&P.gen);
  for (int i = 0; i < want - 1; i++) {
    if (pthread_create(&P.tid[i], NULL, worker, (void *)(uintptr_t)g) != 0) break;
    P.nworkers++;
  }
  const char *ad = getenv("HB_POOL_ADAPT");
  width_reset(&P.width, P.nworkers + 1, P.adapt ? P.adapt > 0 : !(ad && ad[0] == '0'));
  P.ready = 1;
}

int hb_init(int nthreads) {
  if (tl_in_pool) return P.nworkers + 1;  /* not from inside a task */
  int want = nthreads > 0 ? nthreads : physical_cores();
  if (want > HB_MAX_THREADS) want = HB_MAX_THREADS;   /* so re-init compares like with like */
  pthread_mutex_lock(&P.call_mu);
  if (!P.ready || want != P.nworkers + 1) start_pool(want);
  int r = P.nworkers + 1;
  pthread_mutex_unlock(&P.call_mu);
  return r;
}

int hb_nthreads(void) { return P.ready ? P.nworkers + 1 : 1; }

void hb_pool_stats(double *out) {
  if (!out) return;
  pthread_mutex_lock(&P.call_mu);
  out[0] = P.ready ? P.width.width : 1; out[1] = (double)P.width.narrowed; out[2] = (double)P.width.drops;
  pthread_mutex_unlock(&P.call_mu);
}

void hb_pool_adapt(int on) {
  pthread_mutex_lock(&P.call_mu);
  const long narrowed = P.width.narrowed, drops = P.width.drops;   /* (the counts go on) */
  width_reset(&P.width, P.ready ? P.nworkers + 1 : 1, on);
  P.width.narrowed = narrowed; P.width.drops = drops;
  P.adapt = on ? 1 : -1;
  pthread_mutex_unlock(&P.call_mu);
}

/* [0, n) in chunks on the calling thread */
static void serially(int n, int chunk, hb_task_fn fn, void *ctx) {
  for (long lo = 0; lo < n; lo += chunk) fn(ctx, (int)lo, n - lo < chunk ? n : (int)lo + chunk);
}

/* spans: hb_parallel_spans; every: all threads whatever the width, the job not judged (hb_parallel_every) */
static void parallel(int n, int chunk, hb_task_fn fn, void *ctx, int spans, int every) {
  if (n <= 0) return;
  if (chunk < 1) chunk = 1;
  if (tl_in_pool || n <= chunk) {          /* nested or a single chunk: run here */
    serially(n, chunk, fn, ctx);
    return;
  }
  pthread_mutex_lock(&P.call_mu);
  if (!P.ready) start_pool(physical_cores());  /* lazy start when hb_init was never called */
  tl_in_pool = 1;
  const int width = every ? P.nworkers + 1 : width_begin(&P.width);
  if (width <= 1) {                        /* the caller alone (the workers park) */
    serially(n, chunk, fn, ctx);
    tl_in_pool = 0;
    pthread_mutex_unlock(&P.call_mu);
    return;
  }
  const int judged = !every && atomic_load(&P.nsleep) == 0;   /* (parked workers are woken late by design) */
  const long t0 = now_ns(), i0 = tl_items;
  P.fn = fn; P.ctx = ctx; P.n = n; P.chunk = chunk;
  atomic_store(&P.tickets, width - 1);
  P.spans = spans ? width : 0;
  if (spans) {
    for (int s = 0; s < P.spans; s++) {
      const long long f = (long long)n * s / P.spans / chunk * chunk, b = (long long)n * (s + 1) / P.spans / chunk * chunk;
      atomic_store_explicit(&P.span[s].v, f << 32 | (s + 1 == P.spans ? n : b), memory_order_relaxed);
    }
    atomic_store(&P.slot, 0);
  } else atomic_store(&P.next, 0);
  const unsigned g = publish();
  if (spans) run_spans(0);                 /* each returns once every item is claimed */
  else run_chunks();
  const long t1 = now_ns();
  atomic_store(&P.closed, g);              /* no late joiners; then wait for the workers still inside */
  for (int k = 0; atomic_load(&P.users) != 0; k++) {   /* seq_cst: pairs with the workers' join */
    if (k < 4096) cpu_relax(); else sched_yield();
  }
  if (judged) width_end(&P.width, now_ns() - t0, t1 - t0, n, tl_items - i0);
  tl_in_pool = 0;
  pthread_mutex_unlock(&P.call_mu);
}

void hb_parallel_for(int n, int chunk, hb_task_fn fn, void *ctx) { parallel(n, chunk, fn, ctx, 0, 0); }
void hb_parallel_spans(int n, int chunk, hb_task_fn fn, void *ctx) { parallel(n, chunk, fn, ctx, 1, 0); }
void hb_parallel_every(int n, int chunk, hb_task_fn fn, void *ctx) { parallel(n, chunk, fn, ctx, 0, 1); }

/* ---- self-check used by test/kernels.test.ts ---- */
typedef struct { atomic_int *seen; int nested, chunk; atomic_int misaligned; } check_ctx;
static void check_inner(void *c, int lo, int hi) {
  atomic_int *seen = c;
  for (int i = lo; i < hi; i++) atomic_fetch_add(&seen[i], 1);
}
static void check_task(void *c, int lo, int hi) {
  check_ctx *k = c;
  if (lo % k->chunk) atomic_fetch_add(&k->misaligned, 1);
  if (k->nested) {                       /* nested call over this chunk, offset into the array */
    hb_parallel_for(hi - lo, 3, check_inner, k->seen + lo);
  } else check_inner(k->seen, lo, hi);
}
int hb_pool_check(int n, int chunk, int flags) {
  if (n < 0) return -1;
  atomic_int *seen = calloc(n ? (size_t)n : 1, sizeof *seen);
  if (!seen) return -1;
  check_ctx c = { seen, flags & 1, chunk < 1 ? 1 : chunk, 0 };
  (flags & 2 ? hb_parallel_spans : hb_parallel_for)(n, chunk, check_task, &c);
  int bad = atomic_load(&c.misaligned);
  for (int i = 0; i < n; i++) bad += atomic_load(&seen[i]) != 1;
  free(seen);
  return bad;
}
