/*
 * tf_locked.h - a count read under the lock that guards it: the statistics
 * the mount reports (open columns, idle metadata bytes, arrays known) are
 * changed by other threads under their owner's lock, so a reader takes it
 * too (a torn or stale read would be a data race, which TSan reports).
 */
#ifndef TF_LOCKED_H
#define TF_LOCKED_H

#include <pthread.h>
#include <stddef.h>

static inline size_t tf_locked_size(pthread_mutex_t *lock, const size_t *count)
{
	size_t n;

	pthread_mutex_lock(lock);
	n = *count;
	pthread_mutex_unlock(lock);
	return n;
}

#endif
