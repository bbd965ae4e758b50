/*
 * source_s3_int.h - what the files of the S3 source share: its types (the
 * source, its listings, parts and objects) and the functions one of them
 * calls in another.  Included by source_s3.c, source_s3_names.c,
 * source_s3_list.c, source_s3_cache.c and source_s3_read.c only; nothing outside
 * src/sources/ knows these (tf_source_s3, source_impl.h, is the door).
 */
#ifndef TF_SOURCE_S3_INT_H
#define TF_SOURCE_S3_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sources/disk_cache.h"
#include "sources/s3_client.h"
#include "sources/source_impl.h"
#include "util/tf_clock.h"
#include "util/tf_hash.h"
#include "util/tf_lru.h"

#define IO_SIZE ((size_t)16 << 20)
#define STORED_DEFAULT ((size_t)64 << 20)
#define PART_MIN ((size_t)4 << 20)
#define MISS_SLOTS 4096
#define S3_LIST_PAGE 1000		/* keys a listing asks for a page */

/* ---- types -------------------------------------------------------------------------------- */

/* One entry of a listing (32 bytes); its strings are in the listing's text. */
typedef struct s3_dent {
	uint32_t name, etag;		/* offsets in text; a directory's ETag is "" (at 0) */
	uint64_t size;
	int64_t mtime_ns;		/* whole seconds */
	bool dir;
} s3_dent;

typedef struct listing {
	char *rel;
	s3_dent *ents;			/* sorted by name, one per name */
	size_t n, cap;
	char *text;			/* names and ETags, each NUL-terminated */
	size_t tlen, tcap;
	size_t bytes;			/* memory held */
	int64_t at_ns;			/* when fetched */
	bool immutable;
	bool whole;			/* built from its subtree's keys, all of them: a
					 * subdirectory it does not name has none */
	tf_lru_node node;		/* keyed: cached (and listed); refs: its users */
} listing;

#define LISTING_OF(n) TF_LRU_ENTRY(n, listing, node)

typedef struct s3_source {
	tf_source base;
	s3_client *client;
	char *prefix;			/* "" or "some/prefix/" */
	int64_t ttl_ns;
	int64_t deadline_ns;		/* of everything done for one request */
	uint32_t list_max_pages;
	uint64_t list_max_bytes;	/* of one listing's entries and names */
	uint32_t uid, gid;
	pthread_mutex_t mu;
	tf_lru *listings;		/* the cache: by rel, least recent first */
	size_t bytes;
	/* Stored bytes (pmu): parts, most recently used first; the queue of
	 * those the fetchers are to load; the bound; the cache charged. */
	pthread_mutex_t pmu;
	pthread_cond_t pcv;		/* a part loaded (or failed) */
	pthread_cond_t fcv;		/* a part queued, or stopping */
	tf_lru *parts;			/* listed parts, least recent first (no keys) */
	struct s3_part *q_head, *q_tail;
	size_t held, cap;
	uint64_t wmax;			/* fetch-ahead window of one reader, at most */
	struct tf_cache *cache;
	ptrdiff_t charged;
	pthread_t *fetchers;
	unsigned nfetchers, max_fetchers, idle, queued, inflight;
	bool stopping;
	uint64_t fetched, served, evicted, cancelled, aborted;
	atomic_bool told;		/* where the credentials come from, logged */
	_Atomic int listed;		/* LISTED_*: do answers carry listings' Last-Modified */
	char *early;			/* the client's first line before the hooks were set */
	tf_disk_cache *disk;		/* cache_dir's blocks, or NULL */
	struct { uint64_t h; int64_t at_ns; } misses[MISS_SLOTS];	/* reserved names not there (mu) */
} s3_source;

typedef enum { P_QUEUED, P_LOADING, P_READY, P_FAILED } part_state;

/* Stored bytes [off, off+len) of one version of one object (id: its key
 * and ETag), kept across opens within the source's bound. */
typedef struct s3_part {
	char *id;
	uint64_t idh;
	uint64_t off;
	size_t len;
	uint8_t *data;
	part_state state;
	tf_lru_node node;		/* listed: findable; refs: its pins (readers
					 * copying or waiting, its loader) */
	struct s3_object *o;		/* queued: the open it is fetched through (a reference) */
	atomic_bool abandoned;		/* loading for a fetcher, its open closed: cut short */
	int64_t mtime_ns;		/* ready: the Last-Modified its answers carried (0: none) */
	struct s3_part *qnext;
} s3_part;

#define PART_OF(n) TF_LRU_ENTRY(n, s3_part, node)

typedef struct s3_object {
	tf_object base;
	s3_source *src;
	char *key;
	char *id;			/* key and ETag: its parts' */
	uint64_t idh;
	unsigned refs;			/* the open, and its parts queued (src->pmu) */
	uint64_t seq_end, tick;		/* where the last read ended (src->pmu) */
	uint64_t s_start, s_pos, s_end;	/* the stream fetched ahead: where it began, is, was queued to */
	bool streaming;
	bool planned;			/* TF_ACCESS_PLANNED: its reader says where it goes */
	bool walked;			/* TF_ACCESS_HEADERS: a walk, which reads it to the end */
	_Atomic int64_t mtime_ns;	/* the Last-Modified of every answer (0 until one) */
	pthread_mutex_t pin_mu;		/* the first answer, which pins mtime_ns: */
	pthread_cond_t pin_cv;
	_Atomic int pin;		/* PIN_NONE, PIN_BUSY (one GET awaits it), PIN_DONE */
} s3_object;

enum { PIN_NONE, PIN_BUSY, PIN_DONE };
enum { LISTED_UNKNOWN, LISTED_AGREE, LISTED_DIFFER };

/* What fetching one listing keeps: the listing growing, and what proves
 * the store's pages lead somewhere. */
typedef struct builder {
	s3_source *s;
	listing *l;
	const char *prefix;
	size_t plen;
	uint64_t *tokens;		/* hashes of the continuation tokens followed */
	size_t ntokens;
	char *last;			/* the greatest name of the page before */
	size_t nskipped;		/* keys that are no name here, ... */
	char skipped[3][120];		/* ... the first few, escaped, and why */
} builder;

extern const tf_object_ops s3_object_ops;

/* ---- source_s3.c: the bound of a request, names, versions ---- */
s3_bound s3_bound_of(s3_source *s);
s3_bound s3_bound_now(const s3_source *s);
char *s3_key_of(const s3_source *s, const char *rel, bool dir);
const char *s3_bad_name(const char *n);
tf_stat s3_dir_stat(const s3_source *s);
tf_status s3_head_stat(s3_source *s, const s3_bound *b, const char *rel, tf_stat *st, tf_error *err);
bool s3_same_version(const tf_version *a, const tf_version *b);

/* ---- source_s3_list.c: listings made from pages ---- */
void s3_listing_free(listing *l);
tf_stat s3_dent_stat(const s3_source *s, const listing *l, const s3_dent *d);
const s3_dent *s3_listing_lookup(const listing *l, const char *name);
void s3_listing_finish(listing *l);
tf_status s3_listing_reserve(builder *bd, size_t len, tf_error *err);
uint32_t s3_listing_text(listing *l, const char *t, size_t n);
tf_status s3_fetch_listing(s3_source *s, const s3_bound *b, const char *rel, listing **out, tf_error *err);
listing *s3_listing_of_page(s3_source *s, const char *rel, const s3_list_page *pg);
bool s3_tree_worthy(const char *rel);
tf_status s3_fetch_tree(s3_source *s, const s3_bound *b, const char *rel, listing ***ls, size_t *n,
			tf_error *err);

/* ---- source_s3_cache.c: the listing cache (s3_cache_drop: s->mu held) ---- */
void s3_cache_drop(s3_source *s, listing *l);
tf_status s3_listing_get(s3_source *s, const s3_bound *b, const char *rel, listing **out, tf_error *err);
void s3_listing_offer(s3_source *s, listing *l);
void s3_listing_put(s3_source *s, listing *l);
bool s3_split_rel(const char *rel, char *buf, size_t n, const char **name);
void s3_forget_parent(s3_source *s, const char *rel);
void s3_forget_listing(s3_source *s, const char *rel);
bool s3_gone_status(tf_status rc);
bool s3_peek(s3_source *s, const char *rel, tf_stat *st);

/* ---- source_s3_read.c: stored bytes (src->pmu held) ---- */
void s3_stored_bound(s3_source *s, size_t cap);
unsigned s3_nparts(const s3_source *s);
void s3_part_free(s3_source *s, s3_part *p);
bool s3_make_room(s3_source *s, size_t n);
void s3_queue_remove(s3_source *s, s3_part *p);

#endif
