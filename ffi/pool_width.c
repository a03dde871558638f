/* libhb pool width policy (pool_width.h): pure functions on a pool_width, driven by pool.c and by its self-check.
 * Holds no state of its own. */
#include "pool_width.h"
#include <stdio.h>
#include <stdlib.h>

void width_reset(pool_width *w, int full, int on) {
  *w = (pool_width){ .on = on, .full = full > 0 ? full : 1, .width = full > 0 ? full : 1, .stay = WIDTH_STAY,
                     .left = WIDTH_STAY };
}

static void window_clear(pool_width *w) { w->jobs = 0; w->took = w->alone = 0.0; }

int width_begin(pool_width *w) {
  if (w->on && w->width < w->full && --w->left <= 0) {
    w->width++;
    w->trying = 1;
    w->bad = 0;
    window_clear(w);
  }
  if (w->width < w->full) w->narrowed++;
  return w->width;
}

void width_end(pool_width *w, long took, long own, int n, long mine) {
  if (!w->on || w->width <= 1) return;
  w->took += (double)took;
  w->alone += mine > 0 ? (double)own * n / (double)mine : (double)took;
  if (++w->jobs < WIDTH_WINDOW) return;
  const int bad = w->alone < WIDTH_GAIN * w->took;
  if (getenv("HB_POOL_DEBUG"))
    fprintf(stderr, "libhb pool: width %d%s, gain %.2f\n", w->width, w->trying ? " (a try)" : "", w->alone / w->took);
  if (bad && (w->trying || w->bad)) {  /* a try that failed, or a second bad window in a row */
    w->stay = w->trying ? (w->stay < WIDTH_STAY_MAX / 2 ? 2 * w->stay : WIDTH_STAY_MAX) : WIDTH_STAY;
    w->width--;
    w->drops++;
    w->left = w->stay;
    w->bad = 0;
  } else {
    if (!bad && w->trying) w->left = w->stay = WIDTH_STAY;   /* kept: any next try after the base stay */
    w->bad = bad;
  }
  w->trying = 0;
  window_clear(w);
}

/* ---- self-check used by test/kernels.test.ts: a scripted run of windows; returns the number of wrong states ---- */
static int expect(const pool_width *w, int width, int *bad) { if (w->width != width) (*bad)++; return w->width; }
static void windows(pool_width *w, int k, double gain) {   /* k windows of jobs at this gain (the caller ran 1/gain) */
  for (int i = 0; i < k * WIDTH_WINDOW; i++) { width_begin(w); width_end(w, 1000, 1000, 1000, (long)(1000 / gain)); }
}
int hb_pool_width_check(void) {
  pool_width w;
  int bad = 0;
  width_reset(&w, 2, 1);
  windows(&w, 3, 1.9); expect(&w, 2, &bad);          /* good windows: all threads */
  windows(&w, 1, 1.0); expect(&w, 2, &bad);          /* one bad window alone: kept */
  windows(&w, 1, 1.9); windows(&w, 1, 1.0); expect(&w, 2, &bad);
  windows(&w, 1, 1.0); expect(&w, 1, &bad);          /* two in a row: one thread */
  if (w.drops != 1) bad++;
  for (int i = 0; i < WIDTH_STAY - 1; i++) if (width_begin(&w) != 1) { bad++; break; }   /* the stay */
  if (width_begin(&w) != 2 || !w.trying) bad++;      /* then a try */
  width_end(&w, 1000, 1000, 1000, 1000);             /* (its first job) */
  for (int i = 1; i < WIDTH_WINDOW; i++) { width_begin(&w); width_end(&w, 1000, 1000, 1000, 1000); }
  expect(&w, 1, &bad);                               /* a failed try drops back at once, the stay doubled */
  if (w.stay != 2 * WIDTH_STAY) bad++;
  for (int i = 0; i < 2 * WIDTH_STAY - 1; i++) if (width_begin(&w) != 1) { bad++; break; }
  if (width_begin(&w) != 2) bad++;
  for (int i = 0; i < WIDTH_WINDOW; i++) { if (i) width_begin(&w); width_end(&w, 1000, 1000, 1000, 500); }
  expect(&w, 2, &bad);                               /* a good try is kept, the stay back to its base */
  if (w.stay != WIDTH_STAY || w.trying) bad++;
  width_reset(&w, 4, 1);                             /* wider pools step down one thread at a time */
  windows(&w, 2, 1.1); expect(&w, 3, &bad);
  width_reset(&w, 2, 0);                             /* HB_POOL_ADAPT=0 */
  windows(&w, 4, 1.0); expect(&w, 2, &bad);
  return bad;
}
