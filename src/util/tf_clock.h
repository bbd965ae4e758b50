/*
 * tf_clock.h - the one monotonic clock of the library.
 *
 * Every "how long ago" in src/ (retry after a failure, a listing's time to
 * live, a request's deadline, a credential's refresh) is a difference of
 * two tf_now_ns() readings.  CLOCK_MONOTONIC: it never steps back when the
 * wall clock is set, and it is a vDSO call (~20 ns), cheap enough under a
 * lock.  What must survive the process (the disk cache's block times,
 * written to files) uses the wall clock instead, and says so.
 */
#ifndef TF_CLOCK_H
#define TF_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds since some fixed point in the past (boot). */
static inline int64_t tf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#endif
