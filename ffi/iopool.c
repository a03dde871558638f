/* libhb I/O pool: background pread threads for expert streaming (src/engine/experts/).
 * A *job* is up to HB_IO_MAX_PARTS reads (one expert: one coalesced span, or several); each part is
 * cut into chunks of HB_IO_CHUNK bytes that the I/O threads claim from one FIFO queue, so one big
 * expert is read by several threads at once. The caller submits, computes, then polls or waits per
 * job: the JS thread never blocks except in hb_io_wait. A job that is cancelled skips its queued
 * chunks (chunks already in a pread finish), and must still be waited for, which frees its handle.
 * Kinds: 0 = pread into base + bufoff; 1 = touch (mmap mode: madvise WILLNEED + read one byte per
 * page of base + bufoff, after checking the file still covers the range).
 * State (process-global): the threads, the job table (handle = gen * HB_IO_MAX_JOBS + index),
 * the chunk queue, busy-time/bytes counters and the fault injector (the n-th chunk read from now
 * fails: hb_io_fail, or env HB_IO_FAIL="n[:errno]" read at start; errno 0 = a short read).
 * Also: O_DIRECT open, posix_fadvise (page-cache drop for cold benches), mmap/madvise helpers.
 *
 * API (bun:ffi symbols, see src/native/hb.ts):
 *   int     hb_io_start(int nthreads);   0 = env HB_IO_THREADS or 8; returns the thread count
 *   int64_t hb_io_submit(int n, const int32_t *fds, const int64_t *offs, const int64_t *lens,
 *                        const int64_t *needs, void *base, const int64_t *bufoffs, int kind);
 *           part i: read lens[i] bytes at offs[i] of fds[i] into base + bufoffs[i]; at least
 *           needs[i] of them must arrive (O_DIRECT reads round up past EOF); kind 1 may pass base NULL
 *           and absolute addresses in bufoffs. -> handle > 0 or -errno
 *   int     hb_io_poll(int64_t h);       1 done, 0 pending, -ESTALE unknown handle
 *   int64_t hb_io_wait(int64_t h);       bytes read, or -errno (-HB_IO_ESHORT = short read); frees h
 *   int     hb_io_cancel(int64_t h);     queued chunks of h are skipped; 0 or -ESTALE
 *   void    hb_io_stats(double *out8);   busy s, bytes, chunks, jobs done, errors, in flight, threads, queued
 *   int     hb_io_fail(int64_t nth, int err);  arm the injector (nth 0 disarms); returns 0
 *   int     hb_io_open(const char *path, int direct);  O_RDONLY|O_CLOEXEC[|O_DIRECT] -> fd or -errno
 *   int     hb_io_close(int fd);
 *   int     hb_io_fadvise(int fd, int64_t off, int64_t len, int advice);  0 or -errno (4 = DONTNEED)
 *   void   *hb_io_mmap(int fd, int64_t len);  read-only shared mapping, NULL on failure
 *   int     hb_io_munmap(void *p, int64_t len);
 *   int     hb_io_madvise(void *p, int64_t len, int advice);  advice: 3 WILLNEED, 4 DONTNEED
 *   int64_t hb_io_blksize(int fd);        st_blksize (O_DIRECT alignment hint) or -errno */
#include "hb.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HB_IO_MAX_JOBS 4096
#define HB_IO_MAX_PARTS 16
#define HB_IO_MAX_THREADS 64
#define HB_IO_ESHORT 10000          /* returned negated: the file ended before the needed bytes */
#define HB_IO_CHUNK_DEFAULT (2 << 20)

int hb_io_start(int nthreads);
int64_t hb_io_submit(int n, const int32_t *fds, const int64_t *offs, const int64_t *lens,
                     const int64_t *needs, void *base, const int64_t *bufoffs, int kind);
int hb_io_poll(int64_t h);
int64_t hb_io_wait(int64_t h);
int hb_io_cancel(int64_t h);
void hb_io_stats(double *out);
int hb_io_fail(int64_t nth, int err);
int hb_io_open(const char *path, int direct);
int hb_io_close(int fd);
int hb_io_fadvise(int fd, int64_t off, int64_t len, int advice);
void *hb_io_mmap(int fd, int64_t len);
int hb_io_munmap(void *p, int64_t len);
int hb_io_madvise(void *p, int64_t len, int advice);
int64_t hb_io_blksize(int fd);

typedef struct { int fd; char *buf; int64_t off, len, need; } part_t;
typedef struct {
  uint32_t gen;                  /* 0 = free */
  int kind, nparts, done;
  atomic_int cancel;
  atomic_int left;               /* chunks not yet finished */
  atomic_llong bytes;
  int64_t err;                   /* first error (under mu) */
  part_t parts[HB_IO_MAX_PARTS];
} job_t;
typedef struct { int job; int part; int64_t lo, hi; } chunk_t;   /* [lo, hi) within the part */

static struct {
  pthread_mutex_t mu;            /* jobs, queue, counters */
  pthread_cond_t work_cv, done_cv;
  pthread_t tid[HB_IO_MAX_THREADS];
  int nthreads, stop;
  int64_t chunk;
  job_t jobs[HB_IO_MAX_JOBS];
  int free_list[HB_IO_MAX_JOBS], nfree, inited;
  uint32_t next_gen;
  chunk_t *q; int64_t qcap, qhead, qlen;
  int inflight;                  /* jobs submitted and not done */
  int64_t busy_ns, busy_t0, chunks_done, jobs_done, errors, bytes;
  atomic_llong fail_at;          /* chunk reads left before the injected failure (0 = off) */
  atomic_int fail_err;
} IO = { .mu = PTHREAD_MUTEX_INITIALIZER, .work_cv = PTHREAD_COND_INITIALIZER, .done_cv = PTHREAD_COND_INITIALIZER };

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static job_t *job_of(int64_t h) {               /* mu held */
  if (h <= 0) return NULL;
  int64_t idx = h % HB_IO_MAX_JOBS;
  uint32_t gen = (uint32_t)(h / HB_IO_MAX_JOBS);
  job_t *j = &IO.jobs[idx];
  return j->gen != 0 && j->gen == gen ? j : NULL;
}

/* one injected fault? returns 0 (none) or the errno to fake (-1 = short read) */
static int injected(void) {
  long long v = atomic_load(&IO.fail_at);
  while (v > 0) {
    if (atomic_compare_exchange_weak(&IO.fail_at, &v, v - 1)) {
      if (v != 1) return 0;
      int e = atomic_load(&IO.fail_err);
      return e ? e : -1;
    }
  }
  return 0;
}

/* run one chunk: -> bytes (>= 0) or -errno / -HB_IO_ESHORT */
static int64_t run_chunk(job_t *j, const chunk_t *c) {
  const part_t *p = &j->parts[c->part];
  int f = injected();
  if (f > 0) return -(int64_t)f;
  if (f < 0) return -HB_IO_ESHORT;
  if (j->kind == 1) {                            /* touch a mapped range */
    struct stat st;
    if (fstat(p->fd, &st) != 0) return -(int64_t)errno;
    if ((int64_t)st.st_size < p->off + (c->hi < p->need ? c->hi : p->need)) return -HB_IO_ESHORT;
    volatile const char *b = (const char *)p->buf + c->lo;
    const int64_t n = c->hi - c->lo;
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)b & ~(uintptr_t)(pg - 1);
    madvise((void *)a, (size_t)((uintptr_t)b + n - a), MADV_WILLNEED);
    unsigned s = 0;
    for (int64_t i = 0; i < n; i += pg) s += b[i];
    if (n > 0) s += b[n - 1];
    (void)s;
    return n;
  }
  int64_t done = 0, want = c->hi - c->lo;
  while (done < want) {
    if (atomic_load(&j->cancel)) return done;
    ssize_t r = pread(p->fd, p->buf + c->lo + done, (size_t)(want - done), (off_t)(p->off + c->lo + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -(int64_t)errno;
    }
    if (r == 0) break;                           /* end of file */
    done += r;
  }
  if (done < want && c->lo + done < p->need) return -HB_IO_ESHORT;
  return done;
}

static void *io_worker(void *arg) {
  (void)arg;
  pthread_mutex_lock(&IO.mu);
  for (;;) {
    while (IO.qlen == 0 && !IO.stop) pthread_cond_wait(&IO.work_cv, &IO.mu);
    if (IO.stop) break;
    chunk_t c = IO.q[IO.qhead];
    IO.qhead = (IO.qhead + 1) % IO.qcap;
    IO.qlen--;
    job_t *j = &IO.jobs[c.job];
    pthread_mutex_unlock(&IO.mu);
    int64_t r = atomic_load(&j->cancel) ? 0 : run_chunk(j, &c);
    if (r > 0) atomic_fetch_add(&j->bytes, r);
    pthread_mutex_lock(&IO.mu);
    IO.chunks_done++;
    if (r < 0) { if (j->err == 0) j->err = r; IO.errors++; }
    else IO.bytes += r;
    if (atomic_fetch_sub(&j->left, 1) == 1) {
      j->done = 1;
      IO.jobs_done++;
      if (--IO.inflight == 0) IO.busy_ns += now_ns() - IO.busy_t0;
      pthread_cond_broadcast(&IO.done_cv);
    }
  }
  pthread_mutex_unlock(&IO.mu);
  return NULL;
}

static void init_once(void) {                    /* mu held */
  if (IO.inited) return;
  IO.nfree = 0;
  for (int i = HB_IO_MAX_JOBS - 1; i >= 1; i--) IO.free_list[IO.nfree++] = i;   /* index 0 unused */
  IO.next_gen = 1;
  const char *c = getenv("HB_IO_CHUNK");
  IO.chunk = c && atoll(c) >= 4096 ? (atoll(c) / 4096) * 4096 : HB_IO_CHUNK_DEFAULT;
  const char *f = getenv("HB_IO_FAIL");
  if (f && atoll(f) > 0) {
    const char *colon = strchr(f, ':');
    atomic_store(&IO.fail_err, colon ? atoi(colon + 1) : EIO);
    atomic_store(&IO.fail_at, atoll(f));
  }
  IO.inited = 1;
}

int hb_io_start(int nthreads) {
  pthread_mutex_lock(&IO.mu);
  init_once();
  if (IO.nthreads == 0) {
    int want = nthreads;
    const char *e = getenv("HB_IO_THREADS");
    if (want <= 0) want = e && atoi(e) > 0 ? atoi(e) : 8;
    if (want > HB_IO_MAX_THREADS) want = HB_IO_MAX_THREADS;
    for (int i = 0; i < want; i++) {
      if (pthread_create(&IO.tid[i], NULL, io_worker, NULL) != 0) break;
      IO.nthreads++;
    }
  }
  int n = IO.nthreads;
  pthread_mutex_unlock(&IO.mu);
  return n;
}

static int grow_queue(int64_t need) {            /* mu held */
  if (IO.qlen + need <= IO.qcap) return 0;
  int64_t cap = IO.qcap ? IO.qcap : 1024;
  while (cap < IO.qlen + need) cap *= 2;
  chunk_t *q = malloc((size_t)cap * sizeof *q);
  if (!q) return -ENOMEM;
  for (int64_t i = 0; i < IO.qlen; i++) q[i] = IO.q[(IO.qhead + i) % IO.qcap];
  free(IO.q);
  IO.q = q; IO.qcap = cap; IO.qhead = 0;
  return 0;
}

int64_t hb_io_submit(int n, const int32_t *fds, const int64_t *offs, const int64_t *lens,
                     const int64_t *needs, void *base, const int64_t *bufoffs, int kind) {
  if (n < 1 || n > HB_IO_MAX_PARTS || !fds || !offs || !lens || !needs || !bufoffs || (!base && kind == 0)) return -EINVAL;
  if (kind != 0 && kind != 1) return -EINVAL;
  if (hb_io_start(0) <= 0) return -EAGAIN;
  pthread_mutex_lock(&IO.mu);
  int64_t nchunks = 0;
  for (int i = 0; i < n; i++) {
    if (lens[i] < 0 || offs[i] < 0 || needs[i] < 0 || needs[i] > lens[i] || bufoffs[i] < 0) { pthread_mutex_unlock(&IO.mu); return -EINVAL; }
    nchunks += lens[i] == 0 ? 1 : (lens[i] + IO.chunk - 1) / IO.chunk;
  }
  if (IO.nfree == 0) { pthread_mutex_unlock(&IO.mu); return -EAGAIN; }
  int r = grow_queue(nchunks);
  if (r) { pthread_mutex_unlock(&IO.mu); return r; }
  int idx = IO.free_list[--IO.nfree];
  job_t *j = &IO.jobs[idx];
  if (++IO.next_gen == 0 || IO.next_gen > (UINT32_MAX >> 1)) IO.next_gen = 1;
  j->gen = IO.next_gen;
  j->kind = kind; j->nparts = n; j->done = 0; j->err = 0;
  atomic_store(&j->cancel, 0);
  atomic_store(&j->bytes, 0);
  atomic_store(&j->left, (int)nchunks);
  for (int i = 0; i < n; i++) {
    j->parts[i] = (part_t){ fds[i], base ? (char *)base + bufoffs[i] : (char *)(uintptr_t)bufoffs[i], offs[i], lens[i], needs[i] };
    int64_t lo = 0;
    do {
      int64_t hi = lens[i] - lo > IO.chunk ? lo + IO.chunk : lens[i];
      IO.q[(IO.qhead + IO.qlen++) % IO.qcap] = (chunk_t){ idx, i, lo, hi };
      lo = hi;
    } while (lo < lens[i]);
  }
  if (IO.inflight++ == 0) IO.busy_t0 = now_ns();
  pthread_cond_broadcast(&IO.work_cv);
  int64_t h = (int64_t)j->gen * HB_IO_MAX_JOBS + idx;
  pthread_mutex_unlock(&IO.mu);
  return h;
}

int hb_io_poll(int64_t h) {
  pthread_mutex_lock(&IO.mu);
  job_t *j = job_of(h);
  int r = j ? j->done : -ESTALE;
  pthread_mutex_unlock(&IO.mu);
  return r;
}

int64_t hb_io_wait(int64_t h) {
  pthread_mutex_lock(&IO.mu);
  job_t *j = job_of(h);
  if (!j) { pthread_mutex_unlock(&IO.mu); return -ESTALE; }
  while (!j->done) pthread_cond_wait(&IO.done_cv, &IO.mu);
  int64_t r = j->err ? j->err : (int64_t)atomic_load(&j->bytes);
  if (!j->err && atomic_load(&j->cancel)) r = -ECANCELED;
  j->gen = 0;
  IO.free_list[IO.nfree++] = (int)(h % HB_IO_MAX_JOBS);
  pthread_mutex_unlock(&IO.mu);
  return r;
}

int hb_io_cancel(int64_t h) {
  pthread_mutex_lock(&IO.mu);
  job_t *j = job_of(h);
  if (j) atomic_store(&j->cancel, 1);
  pthread_mutex_unlock(&IO.mu);
  return j ? 0 : -ESTALE;
}

void hb_io_stats(double *out) {
  if (!out) return;
  pthread_mutex_lock(&IO.mu);
  int64_t busy = IO.busy_ns + (IO.inflight > 0 ? now_ns() - IO.busy_t0 : 0);
  out[0] = (double)busy / 1e9; out[1] = (double)IO.bytes; out[2] = (double)IO.chunks_done;
  out[3] = (double)IO.jobs_done; out[4] = (double)IO.errors; out[5] = IO.inflight;
  out[6] = IO.nthreads; out[7] = (double)IO.qlen;
  pthread_mutex_unlock(&IO.mu);
}

int hb_io_fail(int64_t nth, int err) {
  atomic_store(&IO.fail_err, err < 0 ? -err : err);
  atomic_store(&IO.fail_at, nth > 0 ? nth : 0);
  return 0;
}

int hb_io_open(const char *path, int direct) {
  if (!path) return -EINVAL;
  int flags = O_RDONLY | O_CLOEXEC;
#ifdef O_DIRECT
  if (direct) flags |= O_DIRECT;
#else
  if (direct) return -EINVAL;
#endif
  int fd = open(path, flags);
  return fd < 0 ? -errno : fd;
}

int hb_io_close(int fd) { return close(fd) == 0 ? 0 : -errno; }

int hb_io_fadvise(int fd, int64_t off, int64_t len, int advice) {
#ifdef POSIX_FADV_DONTNEED
  int a = advice == 4 ? POSIX_FADV_DONTNEED : advice == 3 ? POSIX_FADV_WILLNEED : advice == 2 ? POSIX_FADV_SEQUENTIAL
        : advice == 1 ? POSIX_FADV_RANDOM : POSIX_FADV_NORMAL;
  return -posix_fadvise(fd, (off_t)off, (off_t)len, a);
#else
  (void)fd; (void)off; (void)len; (void)advice;
  return -ENOSYS;
#endif
}

void *hb_io_mmap(int fd, int64_t len) {
  if (len <= 0) return NULL;
  void *p = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? NULL : p;
}

int hb_io_munmap(void *p, int64_t len) { return p && munmap(p, (size_t)len) == 0 ? 0 : -errno; }

int hb_io_madvise(void *p, int64_t len, int advice) {
  if (!p || len <= 0) return -EINVAL;
  long pg = sysconf(_SC_PAGESIZE);
  uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
  int adv = advice == 4 ? MADV_DONTNEED : advice == 3 ? MADV_WILLNEED : MADV_NORMAL;
  return madvise((void *)a, (size_t)((uintptr_t)p + len - a), adv) == 0 ? 0 : -errno;
}

int64_t hb_io_blksize(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? (int64_t)st.st_blksize : -(int64_t)errno;
}
