/*
 * tf_cache.h - decoded chunks shared by every reader.
 *
 * One cache holds decoded chunks under a byte budget.  Entries are keyed by
 * (owner, index): an owner is one version of one stored file, so a changed
 * file gets a new owner and can never be answered with the old bytes.
 *
 *  - Budget: what an entry costs is its buffer plus its bookkeeping, so a
 *    file of millions of tiny chunks cannot grow the daemon past the budget.
 *  - LRU eviction of unpinned entries keeps the total under the budget;
 *    pinned entries (being filled, or read by a reply) are never freed.
 *  - Single flight: the first thread to want an absent chunk claims it and
 *    fills it; others wanting it wait for that result.  Claims on different
 *    chunks are filled in parallel; no lock is held while filling.
 *  - Done chunks: a chunk a reader passed on whole (to the kernel's page
 *    cache, which answers the next read of it) is recycled first, so a long
 *    scan reuses a few hot buffers instead of touching fresh memory and
 *    never pushes out what random readers use.
 *  - A small worker pool runs jobs (decode-ahead of whole runs of chunks),
 *    each worker with its own workspace.
 * All functions are thread-safe.
 */
#ifndef TF_CACHE_H
#define TF_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/tf_pipeline.h"
#include "util/tf_status.h"

typedef struct tf_cache tf_cache;
typedef struct tf_cache_entry tf_cache_entry;

typedef struct tf_cache_stats {
	size_t budget, used, entries, pinned;
	uint64_t hits, misses, evictions, prefetches, recycled;
	size_t charged;		/* of used: tf_cache_charge's */
} tf_cache_stats;

tf_status tf_cache_new(size_t budget, unsigned workers, tf_cache **out, tf_error *err);
void tf_cache_free(tf_cache *c);

/* A fresh owner id (never 0).  Owners are never reused, so nothing needs
 * dropping when a file goes: no reader asks for its chunks again, and they
 * drift to the cold end of the LRU and go first (no scan, no lock held). */
uint64_t tf_cache_owner(tf_cache *c);

/* ---- claiming and filling ---------------------------------------------------------------- */

typedef enum {
	TF_CACHE_READY,		/* the bytes are there */
	TF_CACHE_LOADING,	/* another thread fills it: tf_cache_wait() */
	TF_CACHE_CLAIMED,	/* yours to fill: tf_cache_fill_buffer(), tf_cache_publish() */
} tf_cache_state;

/*
 * Find chunk (owner, index) of len bytes, or claim it.  The entry comes
 * back pinned in *e with its state in *state.  A len larger than the whole
 * budget is refused (TF_E_CORRUPT) before anything is evicted or
 * allocated: lengths come from chunk headers.
 */
tf_status tf_cache_acquire(tf_cache *c, uint64_t owner, uint64_t index, uint32_t len,
			   tf_cache_entry **e, tf_cache_state *state, tf_error *err);
/* Entry (owner, index) pinned if it is there and READY, else NULL (and
 * nothing claimed): for a holder taking back many entries of its own, so
 * that none it still has is evicted to make room for one it lost. */
tf_cache_entry *tf_cache_lookup(tf_cache *c, uint64_t owner, uint64_t index);
/* Where a claimed entry's len bytes go (allocated on first call, outside
 * any lock); NULL when out of memory. */
uint8_t *tf_cache_fill_buffer(tf_cache *c, tf_cache_entry *e);
/* Make a claimed entry READY (rc TF_OK) or failed (err says why; failures
 * are not kept: the next reader tries again).  It stays pinned. */
void tf_cache_publish(tf_cache *c, tf_cache_entry *e, tf_status rc, const tf_error *err);
/* Wait for a LOADING entry (pinned) to be published: its status. */
tf_status tf_cache_wait(tf_cache *c, tf_cache_entry *e, tf_error *err);

const uint8_t *tf_cache_data(const tf_cache_entry *e);
uint32_t tf_cache_len(const tf_cache_entry *e);
/* Unpin.  done: the caller passed the whole chunk on (see above). */
void tf_cache_release(tf_cache *c, tf_cache_entry *e, bool done);

/* ---- the simple way: fill with a callback --------------------------------------------------- */

typedef struct tf_cache_source {
	void *ctx;
	tf_status (*load)(void *ctx, uint64_t index, uint8_t *dst, tf_workspace *ws, tf_error *err);
} tf_cache_source;

/* Acquire, and fill with src->load (in this thread, with ws) if claimed, or
 * wait if another thread is filling it.  On success *e is pinned. */
tf_status tf_cache_get(tf_cache *c, uint64_t owner, uint64_t index, uint32_t len,
		       const tf_cache_source *src, tf_workspace *ws, tf_cache_entry **e,
		       tf_error *err);

/* ---- workers ------------------------------------------------------------------------------ */

/* A job runs once on a worker (run), or, if the cache is freed first, is
 * dropped (drop); exactly one of the two is called. */
typedef struct tf_cache_job {
	void (*run)(void *ctx, tf_cache *c, tf_workspace *ws);
	void (*drop)(void *ctx);
	void *ctx;
} tf_cache_job;

/* Queue a job; false (and nothing called) when there are no workers or the
 * queue is full: decode-ahead is best effort. */
bool tf_cache_submit(tf_cache *c, const tf_cache_job *job);
unsigned tf_cache_workers(const tf_cache *c);
size_t tf_cache_budget(const tf_cache *c);
/* Jobs queued or running: a reader's hint that workers are busy. */
unsigned tf_cache_backlog(tf_cache *c);

void tf_cache_get_stats(tf_cache *c, tf_cache_stats *s);

/* Charge (bytes > 0) or give back (< 0) memory held outside the cache by
 * one of its readers (a snapshot's fragments, a merge's cursors, a CSV's
 * index): counted in `used`, so the cache evicts to keep the whole within
 * the budget.  What is charged is given back exactly, before the cache is
 * freed. */
void tf_cache_charge(tf_cache *c, ptrdiff_t bytes);

#endif
