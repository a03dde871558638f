/* libhb I/O: positional reads for weight loading (one pread per expert block). Holds no state. */
#include "hb.h"
#include <errno.h>
#include <unistd.h>

/* read len bytes at file offset off into buf; retries short reads and EINTR.
 * Returns the bytes read (< len only at end of file) or −errno. */
int64_t hb_pread(int fd, void *buf, int64_t len, int64_t off) {
  if (len < 0 || off < 0) return -EINVAL;
  if (!buf && len > 0) return -EFAULT;
  int64_t done = 0;
  while (done < len) {
    size_t want = (size_t)(len - done);
    if (want > ((size_t)1 << 30)) want = (size_t)1 << 30;   /* Linux caps one read near 2 GiB */
    ssize_t r = pread(fd, (char *)buf + done, want, (off_t)(off + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -(int64_t)errno;
    }
    if (r == 0) break;                                     /* end of file */
    done += r;
  }
  return done;
}
