/*
 * tf_cache.h - decoded chunks shared by every reader.
 *
 * One cache holds decoded chunks under a byte budget.  Entries are keyed by
 * (owner, index): an owner is one version of one source file, so a changed
 * file gets a new owner and can never be answered with the old bytes.
 *
 *  - LRU eviction of unpinned entries keeps the total under the budget;
 *    pinned entries (being copied out) are never freed under a reader.
 *  - Single flight: concurrent misses on one chunk decode it once; the
 *    others wait for that result.  Misses on different chunks decode in
 *    parallel (no lock is held while decoding).
 *  - A small worker pool decodes ahead of sequential readers
 *    (tf_cache_prefetch), each worker with its own workspace.
 * All functions are thread-safe.
 */
#ifndef TF_CACHE_H
#define TF_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "tf_pipeline.h"
#include "tf_status.h"

typedef struct tf_cache tf_cache;
typedef struct tf_cache_entry tf_cache_entry;

/* How to fill an entry: decode chunk `index` of ctx into dst[len]. */
typedef struct tf_cache_source {
	void *ctx;
	tf_status (*load)(void *ctx, uint64_t index, uint8_t *dst, tf_workspace *ws, tf_error *err);
	void (*hold)(void *ctx);	/* keep ctx alive while a prefetch is queued */
	void (*release)(void *ctx);
} tf_cache_source;

typedef struct tf_cache_stats {
	size_t budget, used, entries, pinned;
	uint64_t hits, misses, evictions, prefetches;
} tf_cache_stats;

tf_status tf_cache_new(size_t budget, unsigned workers, tf_cache **out, tf_error *err);
void tf_cache_free(tf_cache *c);

/* A fresh owner id (never 0). */
uint64_t tf_cache_owner(tf_cache *c);
/* Forget every entry of owner (pinned ones go when released). */
void tf_cache_drop(tf_cache *c, uint64_t owner);

/*
 * Return chunk (owner, index) of len bytes, decoding it with src on a miss
 * (ws is the caller's workspace).  A len larger than the whole budget is
 * refused (TF_E_CORRUPT) before anything is evicted or allocated: lengths
 * come from chunk headers.  On success *e is pinned: read it with
 * tf_cache_data() and give it back with tf_cache_release().
 */
tf_status tf_cache_get(tf_cache *c, uint64_t owner, uint64_t index, uint32_t len,
		       const tf_cache_source *src, tf_workspace *ws, tf_cache_entry **e,
		       tf_error *err);
const uint8_t *tf_cache_data(const tf_cache_entry *e);
void tf_cache_release(tf_cache *c, tf_cache_entry *e);
/* Release, and make the chunk the first to be evicted: for a reader that
 * passed all of it on (to the kernel's page cache, which answers the next
 * read of it).  A long sequential scan then evicts its own chunks before
 * anything other readers use. */
void tf_cache_release_done(tf_cache *c, tf_cache_entry *e);

/* Queue a background decode of (owner, index) unless it is cached, being
 * decoded, or the queue is full.  Never blocks on a decode. */
void tf_cache_prefetch(tf_cache *c, uint64_t owner, uint64_t index, uint32_t len,
		       const tf_cache_source *src);
unsigned tf_cache_workers(const tf_cache *c);

void tf_cache_get_stats(tf_cache *c, tf_cache_stats *s);

#endif
