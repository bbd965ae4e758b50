/*
 * tf_fanout.h - many blocking system calls in flight at once.
 *
 * Work that is a long list of small, independent, blocking steps (a stat
 * of every file of 200,000 fragment directories; a read of each one's
 * metadata) is bound by how many requests the storage and the kernel
 * have in flight, not by CPUs: a cold walk of 200,000 fragment
 * directories took 21.9 s on one thread, 13.7 s on 4, 8.4 s on 64 (a
 * 2-CPU virtio guest; tf_fanout.c has the figures).  tf_fanout runs such a
 * list on the calling thread and on threads of its own, started for the
 * call and joined before it returns, so nothing outlives it and no other
 * work (the cache's decoding) waits behind it.
 */
#ifndef TF_FANOUT_H
#define TF_FANOUT_H

#include <stdbool.h>
#include <stddef.h>

/* Threads (the caller's included) for work bound by blocking I/O. */
#define TF_FANOUT_IO 48u

/*
 * Items [lo, hi) of the list, on the thread numbered slot (0: the caller,
 * 1 .. threads - 1: the others), for results kept per thread without a
 * lock.  Returning true stops the whole run: no thread takes another step
 * (steps already taken finish).
 */
typedef bool (*tf_fanout_fn)(void *ctx, size_t lo, size_t hi, unsigned slot);

/*
 * Items [0, n) in steps of `step`, each step taken by the first thread
 * free, on up to `threads` threads (fewer when there are fewer steps, or
 * when a thread cannot be started: the caller alone still does it all).
 * Returns the number of slots used (>= 1, at most threads), so the caller
 * knows which per-slot results to gather; false in *stopped unless some
 * call of fn returned true.
 */
unsigned tf_fanout(size_t n, size_t step, unsigned threads, tf_fanout_fn fn, void *ctx, bool *stopped);

#endif
