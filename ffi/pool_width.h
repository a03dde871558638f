/* libhb pool width: how many threads a job admits (pool.c), chosen from how well jobs ran in parallel. A pool thread that
 * another thread or process keeps off its core stalls each job it holds a chunk of, and a job it never joins is the
 * caller's alone: on 2 cores beside one busy thread, 2 pool threads decoded at 0.37x their speed, one at 0.55x. So
 * the caller judges windows of jobs by their gain, the time the jobs would have taken on the caller alone (at its rate
 * in them) over the time they took. Two bad windows in a row (gain under 1.3) drop the width by one (at 1 the caller
 * runs jobs alone and the workers park); after a stay it tries one more thread, keeps it when that window is good,
 * and otherwise drops back and doubles the stay. A pool of many threads gains far more than 1.3 even where memory
 * bounds it, so the width moves only where parallel work has all but stopped paying.
 * State: one pool_width per pool (the caller's, under pool.c's call mutex). */
#ifndef HB_POOL_WIDTH_H
#define HB_POOL_WIDTH_H

#define WIDTH_WINDOW 512               /* jobs judged together (~7 decode steps of the bench preset) */
#define WIDTH_STAY 4096                /* jobs before trying one more thread (~60 decode steps) */
#define WIDTH_STAY_MAX (1 << 20)
#define WIDTH_GAIN 1.3                 /* a window is bad where its jobs ran under 1.3x the caller's rate alone */

typedef struct {
  int on, full, width;                 /* adapting; the pool's threads; the width jobs run at */
  int trying, bad, stay, left;         /* trying: this window runs at a width just raised; bad: the last window was;
                                          the stay before the next try and the jobs left of it */
  int jobs;                            /* this window's jobs */
  double took, alone;                  /* their ns, and the ns on the caller alone */
  long narrowed, drops;                /* jobs run below the full width; times the width dropped */
} pool_width;

void width_reset(pool_width *w, int full, int on);
/* before a job: the width it runs at (raised for a try once the stay is over) */
int width_begin(pool_width *w);
/* after a job judged (no worker was parked when it was published): took ns in all, own of them until the caller's
 * last item, which ran mine of the job's n items */
void width_end(pool_width *w, long took, long own, int n, long mine);

#endif
