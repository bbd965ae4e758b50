/*
 * tf_lru.h - a keyed, refcounted, least-recently-used set of entries: the
 * one table-and-lists of the library.
 *
 * What it is for.  Every cache of the daemon is the same shape: entries
 * found by a key, held by readers while in use, and, once idle, let go
 * least recently used first when a bound (a count, bytes) is passed.  The
 * decoded chunks (cache/tf_cache.c: owner and index), the fragments'
 * metadata of an array (format/tf_array.c: the fragment's name), the
 * listings of an object store (sources/source_s3_cache.c: the directory)
 * and its stored-bytes parts (source_s3_read.c, a list only: found by
 * range, not by key).  What
 * differs between them is only policy: what an entry costs, which bound,
 * whether an entry in use may be let go.  That stays with the user; the
 * mechanics are here, once.
 *
 * Shape.  Intrusive, as SQLite's pcache1 and the kernel's lists: an entry
 * embeds a tf_lru_node and the set never allocates per entry, so an insert
 * cannot fail and an eviction frees nothing the user did not decide to.
 *  - A table: chains of entries by a 64-bit hash the user computes (its key
 *    stays the user's: tf_lru_find compares with the user's `same`).  It
 *    starts at the buckets asked for and doubles when it holds two entries
 *    a bucket (re-chaining from the stored hashes, no key read): finding is
 *    O(1) whatever the count, a miss walks ~1-2 nodes.  A table that cannot
 *    grow (no memory) keeps longer chains, still correct.
 *  - TF_LRU_LISTS lists, each least recent first: a list is what can be let
 *    go, so eviction takes the first of one, never walks past entries that
 *    may not go (the decoded cache's pinned chunks made every claim walk
 *    200,000 of them before: tf_cache.c).  Two, because the decoded cache
 *    lets chunks already passed to the kernel ("done") go before those
 *    merely idle.  An entry is on one list or none.
 *  - A reference count: tf_lru_hold takes an entry off its list (in use: not
 *    to be let go) and tf_lru_release says when the last holder let go (the
 *    user then lists it again, or frees it if it left the table meanwhile).
 *    A user whose entries in use may be let go (a listing in use is dropped
 *    from the cache and freed by its last reader) counts with tf_lru_ref.
 *
 * The numbers.  A node is 40 bytes (three links, the hash, the count, two
 * flags); a bucket 8 bytes, 16 per entry at most after doubling.  Every
 * operation is O(1) but tf_lru_clear (O(buckets + entries), at the end).
 *
 * Threads.  None of its own and no lock: the caller's lock guards the set,
 * as it guards the entries' own state (a chunk's loading state, a
 * fragment's bytes, the bound's counters), which every operation here
 * reads or changes in the same critical section.  A lock inside would be
 * taken twice per operation and still not make the pair atomic.
 */
#ifndef TF_LRU_H
#define TF_LRU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/tf_status.h"

#define TF_LRU_LISTS 2

/* Embedded in each entry; its fields are read-only to the user (tf_lru_*
 * change them). */
typedef struct tf_lru_node {
	struct tf_lru_node *hnext;	/* its table chain */
	struct tf_lru_node *prev, *next;	/* its list (circular, with the set's head) */
	uint64_t hash;
	unsigned refs;			/* holders */
	uint8_t list;			/* 0: on no list; else 1 + which */
	bool keyed;			/* in the table: findable */
} tf_lru_node;

typedef struct tf_lru tf_lru;

/* The user's key test: whether entry n has the key `key`. */
typedef bool (*tf_lru_same_fn)(const tf_lru_node *n, const void *key);

/* A set with `buckets` chains to start (rounded up to a power of two). */
tf_status tf_lru_new(size_t buckets, tf_lru **out, tf_error *err);
/* Frees the set only: its entries are the user's (tf_lru_clear first). */
void tf_lru_free(tf_lru *l);

/* The entry of `key` (hash h), or NULL. */
tf_lru_node *tf_lru_find(const tf_lru *l, uint64_t h, tf_lru_same_fn same, const void *key);
/* Make n findable by hash h (n on no list, no holder: a new entry). */
void tf_lru_insert(tf_lru *l, tf_lru_node *n, uint64_t h);
/* Take n out of the table and off its list; its holders keep it (it is
 * no longer keyed: the last to let go frees it). */
void tf_lru_remove(tf_lru *l, tf_lru_node *n);
/* Call fn on every keyed entry, each taken out first (for freeing all). */
void tf_lru_clear(tf_lru *l, void (*fn)(tf_lru_node *n, void *ctx), void *ctx);
/* Entries in the table. */
size_t tf_lru_count(const tf_lru *l);

/* n, keyed or not, the most recent of list `which` (moved if on one). */
void tf_lru_use(tf_lru *l, tf_lru_node *n, unsigned which);
/* n off its list, if on one. */
void tf_lru_unlist(tf_lru *l, tf_lru_node *n);
/* Whether n is on list `which`; on any list. */
static inline bool tf_lru_on(const tf_lru_node *n, unsigned which) { return n->list == which + 1; }
static inline bool tf_lru_listed(const tf_lru_node *n) { return n->list != 0; }
/* Entries on list `which`. */
size_t tf_lru_length(const tf_lru *l, unsigned which);
/* The least and most recent of list `which`, and walking it: NULL at its ends. */
tf_lru_node *tf_lru_oldest(const tf_lru *l, unsigned which);
tf_lru_node *tf_lru_newest(const tf_lru *l, unsigned which);
tf_lru_node *tf_lru_newer(const tf_lru *l, const tf_lru_node *n);
tf_lru_node *tf_lru_older(const tf_lru *l, const tf_lru_node *n);

/* A holder more; the first takes n off its list (in use: not let go). */
void tf_lru_hold(tf_lru *l, tf_lru_node *n);
/* A holder more, n left where it is (entries in use may be let go). */
static inline void tf_lru_ref(tf_lru_node *n) { n->refs++; }
/* A holder less; true when it was the last (the user lists or frees n). */
static inline bool tf_lru_release(tf_lru_node *n) { return --n->refs == 0; }

/* The entry of type T holding node n as its member m. */
#define TF_LRU_ENTRY(n, T, m) ((T *)(void *)((char *)(n) - offsetof(T, m)))

#endif
