/*
 * source_s3.c - an S3-compatible bucket (or a prefix of one) as a source.
 *
 * Names.  Source path "a/b" is key PREFIX "a/b"; directory "a" is every key
 * under "PREFIX a/", listed with ListObjectsV2 and delimiter '/' (common
 * prefixes are the subdirectories); but a directory named "__*" (TileDB's
 * __fragments, __commits, __schema) is listed whole, without a delimiter,
 * and the listing of every directory beneath it is made from those keys
 * and cached (see "Listing a subtree whole" below); so is its parent when
 * that is an array's directory (its subdirectories all "__*"), and a
 * directory such a listing does not name is empty without a LIST.  Keys that cannot be a path component
 * (".", "..", "a//b", a NUL, a '/' or a bad escape once decoded, over 255
 * bytes) are not shown, and the listing warns once (tf_source_warn),
 * naming the first few; a folder marker ("dir/" itself) is not shown
 * either, silently.  Where a key and a prefix share a name, the directory
 * wins.  Files are 0444, directories 0555, both owned by the user who
 * opened the source.  There are no symlinks.
 *
 * Listings are fetched whole, page after page, within list_max_pages,
 * list_max_bytes (an entry is 32 bytes and its name and ETag) and the
 * request's deadline; a store that repeats a continuation token, or whose
 * page does not advance past the names of the page before, is refused.
 * Listings are cached: sizes, ETags and mtimes come from them, so stat and
 * open cost no request of their own while a listing is fresh (list_ttl).
 * A TileDB fragment directory (one holding __fragment_metadata.tdb, which
 * TileDB writes last) never changes once written: its listing is kept until
 * the store says otherwise (a 404 or 412 for a file in it: vacuumed, its
 * directory's listing is dropped too), or a fresh listing of its directory
 * no longer holds it.  The cache holds at most CACHE_LISTINGS listings
 * and CACHE_BYTES of them, least recently used out first.
 *
 * The reserved prefix.  "PREFIX/.tilefs/" holds what tiletool index
 * --publish wrote (tf_source.h): a name ".tilefs" is never listed, at any
 * depth, and no path through one is looked up or opened.  Its objects are
 * read whole, one GET each; a 404 (or 403) is remembered for list_ttl in a table of
 * MISS_SLOTS names (a name's slot is its hash's: a collision forgets the
 * older name, which costs one more GET).
 *
 * Versions.  An object is its ETag and size; every GET of it sends
 * If-Match with that ETag, so an object replaced while open answers 412
 * and the read fails TF_E_STALE (and the cached listing of its directory
 * is dropped, so the next open sees the new object).  A store ignoring
 * If-Match is caught by the answer: it must carry the ETag, the size and
 * the Last-Modified of the object's answers before (s3_client_get).  An
 * object listed without an ETag is refused at open (TF_E_IO).  Mtimes
 * are whole seconds, as HEAD gives them, so a version from a listing
 * equals the same version from a HEAD.
 *
 * Reads: stored bytes in parts.  What is fetched is kept in parts: ranges
 * of one version of one object (keyed by key and ETag), held by the
 * source, not by an open, so the walk of a loose tile file at its first
 * open leaves the bytes its cat reads next, and each byte is fetched once.
 * A read takes what parts hold, waits for a part in flight rather than
 * fetching its bytes again, fetches a part still queued itself, and
 * fetches a gap before the next part (as a part of its own when it is
 * PART_KEEP bytes or more and there is room, else straight into the
 * caller's buffer, in up to PARTS_MAX ranged GETs at once).
 *
 * Fetch-ahead.  A reader going forward (each read starting within SEQ_GAP
 * of where the last ended, as a walk's windows do), or one telling where it
 * goes (tf_object_prefetch: a tf_handle, advised TF_ACCESS_PLANNED, passes
 * the stored offset of its position, as its decode-ahead workers read
 * their runs exactly), gets the window after its position queued as parts
 * for the source's fetcher threads (max_requests of them, so that many
 * ranged GETs in flight).  The window starts at W_FIRST and grows with the
 * distance read (twice it) up to max_requests x W_PER_REQUEST, in parts of
 * the window over max_requests (W_PART_MIN to W_PART_MAX: adjacent wanted
 * ranges coalesced; ending at multiples of W_ALIGN, so that the disk
 * cache's blocks are fetched whole by one part); a short read fetches
 * little, a long one fills the pipe.  A reader jumping about fetches only the ranges it reads.
 *
 * Memory.  Parts (queued, in flight, loaded) are at most `cap` bytes per
 * source: half the decoded cache's budget once it is attached
 * (tf_source_set_cache, which charges them to it), else STORED_DEFAULT;
 * the least recently used loaded part goes first, and a window that finds
 * no room is not fetched ahead (its reader then fetches what it reads).
 * Closing an open cancels its parts still queued; those in flight finish
 * (nobody waits for them) and stay for the next open.  A part that failed
 * to load is never served: whoever waited fetches that range itself and
 * gets the error if it persists.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sources/disk_cache.h"
#include "sources/s3_client.h"
#include "sources/source_impl.h"
#include "cache/tf_cache.h"
#include "config/tf_s3.h"
#include "util/tf_clock.h"
#include "util/tf_hash.h"
#include "util/tf_lru.h"

#define LIST_PAGE 1000
#define CACHE_LISTINGS 4096
#define CACHE_BYTES ((size_t)64 << 20)
#define HASH_BUCKETS 1024		/* to start: the table doubles */

#define IO_SIZE ((size_t)16 << 20)
#define W_FIRST ((uint64_t)1 << 20)
#define W_PART_MIN ((size_t)1 << 20)
#define W_ALIGN ((uint64_t)1 << 20)	/* parts end at multiples: the disk cache's blocks */
#define W_PART_MAX ((size_t)8 << 20)
#define W_PER_REQUEST ((uint64_t)4 << 20)
#define PART_KEEP ((size_t)64 << 10)
#define STORED_DEFAULT ((size_t)64 << 20)
#define STORED_MIN ((size_t)4 << 20)
#define STORED_PARTS 2048		/* parts listed at most: a read scans them */
#define SEQ_GAP ((uint64_t)256 << 10)
#define SEQ_SLACK ((uint64_t)4 << 20)
#define PART_MIN ((size_t)4 << 20)
#define PARTS_MAX 4
#define MISS_SLOTS 4096

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
	uint64_t fetched, served, evicted, cancelled;
	atomic_bool told;		/* where the credentials come from, logged */
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
	uint64_t s_start, s_pos;	/* the stream fetched ahead: where it began, is */
	bool streaming;
	bool planned;			/* TF_ACCESS_PLANNED: its reader says where it goes */
	bool walked;			/* TF_ACCESS_HEADERS: a walk, which reads it to the end */
	_Atomic int64_t mtime_ns;	/* the Last-Modified of every answer (0 until one) */
	pthread_mutex_t pin_mu;		/* the first answer, which pins mtime_ns: */
	pthread_cond_t pin_cv;
	_Atomic int pin;		/* PIN_NONE, PIN_BUSY (one GET awaits it), PIN_DONE */
} s3_object;

enum { PIN_NONE, PIN_BUSY, PIN_DONE };

static const tf_object_ops s3_object_ops;

/* Once the source has somewhere to say it (its hooks set), where its
 * credentials come from: once, never a secret; but not keys the caller's
 * own environment gave, which the caller knows (and tiletool's output
 * stays free of a line on every run). */
static void tell_origin(s3_source *s)
{
	const char *o;

	if (!s->base.hooks.warn || atomic_load(&s->told) || atomic_exchange(&s->told, true))
		return;
	if ((o = s3_client_auth_origin(s->client)) && strncmp(o, "the environment", 15))
		tf_source_warn(&s->base, "%s: credentials from %s", s3_client_where(s->client), o);
	if (s->early)
		tf_source_warn(&s->base, "%s", s->early);
}

/* A line of the client's; one said while the source was being opened
 * (a region followed by the probe) waits for the hooks. */
static void client_warn(void *arg, const char *msg)
{
	s3_source *s = arg;

	if (s->base.hooks.warn || atomic_load(&s->told))
		tf_source_warn(&s->base, "%s", msg);
	else if (!s->early)
		s->early = strdup(msg);
}

/* The bound of the work done now for the calling thread's request. */
static s3_bound bound_of(s3_source *s)
{
	tf_call c;

	tell_origin(s);

	tf_source_call(&s->base, &c);
	return (s3_bound){ c.start_ns + s->deadline_ns, c.gone, c.arg };
}

/* Work nobody waits for (read-ahead): bounded from now, never cancelled. */
static s3_bound bound_now(const s3_source *s)
{
	return (s3_bound){ tf_now_ns() + s->deadline_ns, NULL, NULL };
}

/* ---- names -------------------------------------------------------------------------------- */

/* The key of file rel, or the listing prefix of directory rel. */
static char *key_of(const s3_source *s, const char *rel, bool dir)
{
	char *k = NULL;

	if (!strcmp(rel, "."))
		return strdup(s->prefix);
	if (asprintf(&k, "%s%s%s", s->prefix, rel, dir ? "/" : "") < 0)
		return NULL;
	return k;
}

/* Whether rel goes through the reserved prefix (a ".tilefs" component). */
static bool reserved_rel(const char *rel)
{
	size_t n = strlen(TF_SOURCE_RESERVED);

	for (const char *c = rel; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
		if (!strncmp(c, TF_SOURCE_RESERVED, n) && (c[n] == '/' || !c[n]))
			return true;
	return false;
}

/* Why n (a name within its directory) can be no file name, or NULL. */
static const char *bad_name(const char *n)
{
	return !*n ? "an empty name" : !strcmp(n, ".") || !strcmp(n, "..") ? "'.' or '..'"
	     : strchr(n, '/') ? "a '/' in a name" : strlen(n) > 255 ? "a name over 255 bytes" : NULL;
}

static tf_stat dir_stat(const s3_source *s)
{
	return (tf_stat){ .kind = TF_ENT_DIR, .mode = 0555, .uid = s->uid, .gid = s->gid, .nlink = 2 };
}

static tf_stat file_stat(const s3_source *s, const s3_entry *e)
{
	tf_stat st = { .kind = TF_ENT_REG, .mode = 0444, .uid = s->uid, .gid = s->gid, .nlink = 1 };

	st.v.size = e->size;
	st.v.mtime_ns = e->mtime_ns - e->mtime_ns % 1000000000;
	memcpy(st.v.etag, e->etag, sizeof(st.v.etag) < sizeof(e->etag) ? sizeof(st.v.etag) : sizeof(e->etag));
	st.v.etag[sizeof(st.v.etag) - 1] = '\0';
	return st;
}

/* ---- listings ------------------------------------------------------------------------------- */

static void listing_free(listing *l)
{
	if (l)
		free(l->ents), free(l->text), free(l->rel);
	free(l);
}

static tf_stat dent_stat(const s3_source *s, const listing *l, const s3_dent *d)
{
	tf_stat st = { .kind = TF_ENT_REG, .mode = 0444, .uid = s->uid, .gid = s->gid, .nlink = 1 };

	if (d->dir)
		return dir_stat(s);
	st.v.size = d->size;
	st.v.mtime_ns = d->mtime_ns;
	snprintf(st.v.etag, sizeof(st.v.etag), "%s", l->text + d->etag);
	return st;
}

static int cmp_dent(const void *a, const void *b, void *text)
{
	const s3_dent *x = a, *y = b;
	int c = strcmp((const char *)text + x->name, (const char *)text + y->name);

	return c ? c : (int)y->dir - (int)x->dir;	/* same name: the directory first (it wins) */
}

/* The entry named name (ents sorted, one per name), or NULL. */
static const s3_dent *listing_lookup(const listing *l, const char *name)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(l->text + l->ents[mid].name, name);
		if (!c)
			return &l->ents[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Sort, drop duplicate names (the directory stays), give back spare room,
 * decide immutability. */
static void listing_finish(listing *l)
{
	size_t o = 0;
	void *p;

	qsort_r(l->ents, l->n, sizeof(*l->ents), cmp_dent, l->text);
	for (size_t i = 0; i < l->n; i++)
		if (!o || strcmp(l->text + l->ents[o - 1].name, l->text + l->ents[i].name))
			l->ents[o++] = l->ents[i];
	l->n = o;
	if (l->n && (p = realloc(l->ents, l->n * sizeof(*l->ents))))
		l->ents = p, l->cap = l->n;
	if ((p = realloc(l->text, l->tlen)))
		l->text = p, l->tcap = l->tlen;
	l->bytes = sizeof(*l) + strlen(l->rel) + 1 + l->cap * sizeof(*l->ents) + l->tcap;
	/* A TileDB fragment directory: "__<t1>_<t2>_<uuid>[_<v>]" holding its
	 * metadata file, which TileDB writes after every data file. */
	const char *base = strrchr(l->rel, '/');
	const s3_dent *md = listing_lookup(l, "__fragment_metadata.tdb");
	base = base ? base + 1 : l->rel;
	l->immutable = !strncmp(base, "__", 2) && strchr(base + 2, '_') && md && !md->dir;
}

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

/* Note a key skipped (one warning for the listing names the first few). */
static void skip(builder *bd, const char *key, const char *why)
{
	char *o;
	size_t i = 0;

	if (bd->nskipped < sizeof(bd->skipped) / sizeof(bd->skipped[0])) {
		o = bd->skipped[bd->nskipped];
		*o++ = '\'';
		for (; key[i] && o - bd->skipped[bd->nskipped] < 64; i++) {
			unsigned char c = (unsigned char)key[i];
			o += c >= 0x20 && c < 0x7f && c != '\\' ? sprintf(o, "%c", c) : sprintf(o, "\\x%02x", c);
		}
		snprintf(o, sizeof(bd->skipped[0]) - (size_t)(o - bd->skipped[bd->nskipped]), "%s' (%s)",
			 key[i] ? "..." : "", why);
	}
	bd->nskipped++;
}

/* Room for one more entry and len more bytes of text; what both arrays
 * hold (their capacity, not only what is used) stays within the bound. */
static tf_status reserve(builder *bd, size_t len, tf_error *err)
{
	listing *l = bd->l;
	size_t max = (size_t)bd->s->list_max_bytes, room, nc;
	void *p;

	if (l->n == l->cap) {
		room = (max - l->tcap) / sizeof(*l->ents);
		nc = l->cap ? l->cap * 2 : 64;
		if ((nc = nc < room ? nc : room) <= l->n)
			goto full;
		if (!(p = realloc(l->ents, nc * sizeof(*l->ents))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		l->ents = p, l->cap = nc;
	}
	if (l->tlen + len > l->tcap) {
		room = max - l->cap * sizeof(*l->ents);
		nc = l->tcap ? l->tcap * 2 : 4096;
		nc = nc > l->tlen + len ? nc : l->tlen + len;
		if ((nc = nc < room ? nc : room) < l->tlen + len)
			goto full;
		if (!(p = realloc(l->text, nc)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		l->text = p, l->tcap = nc;
	}
	return TF_OK;
full:
	return tf_err(err, TF_E_IO, "%s list '%s': more than %zu bytes of entries (list_max_bytes)",
		      s3_client_where(bd->s->client), bd->prefix, max);
}

static uint32_t add_text(listing *l, const char *t, size_t n)
{
	uint32_t at = (uint32_t)l->tlen;

	memcpy(l->text + l->tlen, t, n);
	l->text[l->tlen + n] = '\0';
	l->tlen += n + 1;
	return at;
}

/* Add the entry name[0..n) (already checked): a file of e, or a directory. */
static tf_status listing_add(builder *bd, const char *name, size_t n, const s3_entry *e, tf_error *err)
{
	listing *l = bd->l;
	size_t elen = e ? strlen(e->etag) : 0;
	tf_status rc = reserve(bd, n + 1 + (elen ? elen + 1 : 0), err);
	s3_dent *d;

	if (rc != TF_OK)
		return rc;
	d = &l->ents[l->n];
	*d = (s3_dent){ .dir = !e };
	d->name = add_text(l, name, n);
	if (e) {
		d->size = e->size;
		d->mtime_ns = e->mtime_ns - e->mtime_ns % 1000000000;
		d->etag = elen ? add_text(l, e->etag, elen) : 0;
	}
	l->n++;
	return TF_OK;
}

/*
 * The entries of one page, named relative to the prefix.  A key that can
 * be no name here (one that does not decode, lies outside the prefix, or
 * whose name is empty, '.', '..', holds a '/' or runs past 255 bytes) is
 * skipped and noted; but an object named by the prefix itself ("dir/", a
 * folder marker) is skipped silently.
 */
static tf_status add_page(builder *bd, const s3_list_page *pg, tf_error *err)
{
	const char *prefix = bd->prefix, *why;
	size_t plen = bd->plen;
	tf_status rc = TF_OK;

	for (size_t i = 0; i < pg->nbad; i++)
		skip(bd, pg->bad[i], "a NUL or a bad escape");
	for (size_t i = 0; i < pg->nobjects && rc == TF_OK; i++) {
		const s3_entry *e = &pg->objects[i];
		if (strncmp(e->key, prefix, plen))
			skip(bd, e->key, "outside the prefix");
		else if (!strcmp(e->key + plen, TF_SOURCE_RESERVED))
			continue;	/* reserved: never shown */
		else if (!(why = bad_name(e->key + plen)))
			rc = listing_add(bd, e->key + plen, strlen(e->key + plen), e, err);
		else if (e->key[plen])	/* not the folder marker */
			skip(bd, e->key, why);
	}
	for (size_t i = 0; i < pg->nprefixes && rc == TF_OK; i++) {
		char *p = pg->prefixes[i];
		size_t n = strlen(p);
		if (strncmp(p, prefix, plen) || n <= plen || p[n - 1] != '/') {
			skip(bd, p, "not a directory of the prefix");
			continue;
		}
		p[n - 1] = '\0';
		if (!strcmp(p + plen, TF_SOURCE_RESERVED))
			why = NULL;	/* reserved: never shown */
		else if (!(why = bad_name(p + plen)))
			rc = listing_add(bd, p + plen, n - 1 - plen, NULL, err);
		p[n - 1] = '/';
		if (why)
			skip(bd, p, why);
	}
	return rc;
}

/* Whether the store's page pg leads on: a token never followed before,
 * and (when it has names) a greatest name past the page before's, as
 * pages in key order do.  A store looping or standing still is an error. */
static tf_status page_advances(builder *bd, const s3_list_page *pg, unsigned page, tf_error *err)
{
	const char *max = NULL;
	uint64_t h = pg->truncated ? tf_hash_str(pg->next_token) : 0;
	void *p;

	for (size_t i = 0; i < bd->ntokens && pg->truncated; i++)
		if (bd->tokens[i] == h)
			return tf_err(err, TF_E_IO, "%s list '%s': page %u repeats a continuation token "
				      "(not followed again)", s3_client_where(bd->s->client), bd->prefix, page + 1);
	for (size_t i = 0; i < pg->nobjects; i++)
		if (!max || strcmp(pg->objects[i].key, max) > 0)
			max = pg->objects[i].key;
	for (size_t i = 0; i < pg->nprefixes; i++)
		if (!max || strcmp(pg->prefixes[i], max) > 0)
			max = pg->prefixes[i];
	if (max && bd->last && strcmp(max, bd->last) <= 0)
		return tf_err(err, TF_E_IO, "%s list '%s': page %u does not advance (names up to '%.100s' again)",
			      s3_client_where(bd->s->client), bd->prefix, page + 1, max);
	if (max) {
		free(bd->last);
		if (!(bd->last = strdup(max)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	if (!pg->truncated)
		return TF_OK;
	if (!(p = realloc(bd->tokens, (bd->ntokens + 1) * sizeof(*bd->tokens))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	bd->tokens = p;
	bd->tokens[bd->ntokens++] = h;
	return TF_OK;
}

typedef tf_status (*page_fn)(void *ctx, const s3_list_page *pg, tf_error *err);

/*
 * Every page of bd's prefix listed (flat: no delimiter), each checked to
 * advance and given to fn, within b and max pages; *stop set (TF_OK) at
 * max with more to come, and set by fn ends the listing as well.
 */
static tf_status list_pages(builder *bd, const s3_bound *b, bool flat, unsigned max, page_fn fn, void *ctx,
			    bool *stop, tf_error *err)
{
	s3_list_page pg = { 0 };
	char *token = NULL;
	tf_status rc = TF_OK;

	for (unsigned page = 0; !*stop; page++) {
		if (page == max) {
			*stop = true;
			break;
		}
		if ((rc = s3_client_list(bd->s->client, b, bd->prefix, token, LIST_PAGE, flat, &pg, err)) != TF_OK ||
		    (rc = page_advances(bd, &pg, page, err)) != TF_OK || (rc = fn(ctx, &pg, err)) != TF_OK)
			break;
		free(token);
		token = pg.truncated ? pg.next_token : NULL;
		pg.next_token = NULL;
		s3_list_page_free(&pg);
		if (!token)
			break;
	}
	s3_list_page_free(&pg);
	free(token);
	return rc;
}

/* Warn once of the keys a listing skipped, naming the first few. */
static void warn_skipped(const builder *bd)
{
	if (!bd->nskipped)
		return;
	tf_source_warn(&bd->s->base, "%s list '%s': %zu key%s skipped, no file name here: %s%s%s%s%s%s",
		       s3_client_where(bd->s->client), bd->prefix, bd->nskipped, bd->nskipped > 1 ? "s" : "",
		       bd->skipped[0], bd->nskipped > 1 ? ", " : "", bd->nskipped > 1 ? bd->skipped[1] : "",
		       bd->nskipped > 2 ? ", " : "", bd->nskipped > 2 ? bd->skipped[2] : "",
		       bd->nskipped > 3 ? ", ..." : "");
}

static tf_status dir_page(void *bd, const s3_list_page *pg, tf_error *err)
{
	return add_page(bd, pg, err);
}

/* List directory rel from the store, every page, within b and the bounds
 * on pages and bytes. */
static tf_status fetch_listing(s3_source *s, const s3_bound *b, const char *rel, listing **out, tf_error *err)
{
	char *prefix = key_of(s, rel, true);
	builder bd = { .s = s, .l = calloc(1, sizeof(listing)), .prefix = prefix };
	tf_status rc = bd.l && prefix && (bd.l->rel = strdup(rel)) ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");
	bool more = false;

	bd.plen = prefix ? strlen(prefix) : 0;
	if (rc == TF_OK && (rc = reserve(&bd, 1, err)) == TF_OK)
		add_text(bd.l, "", 0);	/* "" at 0: every directory's ETag */
	if (rc == TF_OK && (rc = list_pages(&bd, b, false, s->list_max_pages, dir_page, &bd, &more, err)) == TF_OK &&
	    more)
		rc = tf_err(err, TF_E_IO, "%s list '%s': more than %u pages (list_max_pages)",
			    s3_client_where(s->client), prefix, s->list_max_pages);
	if (rc == TF_OK)
		warn_skipped(&bd);
	free(prefix), free(bd.tokens), free(bd.last);
	if (rc != TF_OK) {
		listing_free(bd.l);
		return rc;
	}
	listing_finish(bd.l);
	bd.l->at_ns = tf_now_ns();
	*out = bd.l;
	return TF_OK;
}

/*
 * Listing a subtree whole.  Opening a TileDB array lists its __commits,
 * __schema and __fragments and then every fragment directory: one
 * ListObjectsV2 per directory, one round trip after another.  A directory
 * whose name starts with "__" (TileDB's own: those, and fragment
 * directories of older formats) is listed without a delimiter instead:
 * every key beneath it, in as few pages as it takes, and the listing of
 * each of its subdirectories is built from them and cached, so an array's
 * hundreds of fragment directories cost a page per 1,000 keys, not a LIST
 * each.  The same rules hold as for one directory (names that can be none
 * skipped and warned of, ".tilefs" never shown, folder markers silent,
 * the directory winning a shared name, list_max_bytes).  A subtree of
 * more than TREE_PAGES pages, TREE_DIRS directories or list_max_bytes is
 * listed the ordinary way (delimiter '/'): past that the pages spent on
 * deeper keys outweigh the LISTs saved.  Opening an array then lists its
 * __fragments, __commits and __schema one after another, a round trip
 * each, and __schema/__enumerations, mostly absent, one more: so the first
 * of them whose parent is an array's directory (array_dir) lists that
 * parent whole instead, and a listing made from a whole subtree answers
 * for a subdirectory it does not name (known_empty): one LIST for all.
 */
#define TREE_PAGES 8
#define TREE_DIRS 1024

static bool tree_worthy(const char *rel)
{
	const char *base = strrchr(rel, '/');

	return !strncmp(base ? base + 1 : rel, "__", 2);
}

/* A key beneath the listed prefix (or a common prefix a store sent anyway). */
typedef struct tree_key {
	char *path;
	s3_entry e;			/* e.key unused */
	bool is_dir;
} tree_key;

/* An entry of one subdirectory: name in directory dir ("" the listed one). */
typedef struct tree_ent {
	const char *dir, *name;		/* name NULL: only that dir exists (a folder marker) */
	uint32_t dlen, nlen;
	const tree_key *k;		/* a file's key, or NULL: a directory */
} tree_ent;

typedef struct tree {
	builder bd;			/* the pages' proof of progress and the skipped keys */
	tree_key *keys;
	size_t nkeys, ckeys;
	tree_ent *ents;
	size_t nents, cents;
	uint64_t bytes;			/* held, against list_max_bytes */
	bool too_big;
} tree;

static int cmp_span(const char *a, size_t an, const char *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);

	return c ? c : an < bn ? -1 : an > bn;
}

static int cmp_tree_ent(const void *pa, const void *pb)
{
	const tree_ent *a = pa, *b = pb;
	int c = cmp_span(a->dir, a->dlen, b->dir, b->dlen);

	if (c || !a->name || !b->name)
		return c ? c : (int)!!a->name - (int)!!b->name;
	if ((c = cmp_span(a->name, a->nlen, b->name, b->nlen)))
		return c;
	return (int)!!a->k - (int)!!b->k;	/* the directory first (it wins) */
}

static bool tree_charge(tree *t, uint64_t n)
{
	if ((t->bytes += n) > t->bd.s->list_max_bytes)
		t->too_big = true;
	return !t->too_big;
}

static tf_status tree_ent_add(tree *t, const char *dir, size_t dlen, const char *name, size_t nlen,
			      const tree_key *k, tf_error *err)
{
	void *p;

	if (!tree_charge(t, sizeof(tree_ent)))
		return TF_OK;
	if (t->nents == t->cents) {
		size_t nc = t->cents ? t->cents * 2 : 256;
		if (!(p = realloc(t->ents, nc * sizeof(*t->ents))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		t->ents = p, t->cents = nc;
	}
	t->ents[t->nents++] = (tree_ent){ dir, name, (uint32_t)dlen, (uint32_t)nlen, k };
	return TF_OK;
}

/* Why component c[0..n) can be no file name, or NULL. */
static const char *bad_component(const char *c, size_t n)
{
	return !n ? "an empty name" : (n == 1 && c[0] == '.') || (n == 2 && !strncmp(c, "..", 2)) ? "'.' or '..'"
	     : n > 255 ? "a name over 255 bytes" : NULL;
}

/* The entries key k gives: a directory in each directory above it, then
 * itself; none past a name that can be none (noted, as the whole key) or
 * ".tilefs". */
static tf_status tree_entries(tree *t, const tree_key *k, tf_error *err)
{
	char whole[S3_MAX_NAME + 1];

	const char *p = k->path, *c = p, *slash, *why;
	size_t rn = strlen(TF_SOURCE_RESERVED);
	tf_status rc = TF_OK;

	for (; rc == TF_OK; c = slash + 1) {
		size_t dlen = c > p ? (size_t)(c - p - 1) : 0, n;
		if (!(slash = strchr(c, '/')) && !*c)		/* "dir/": a folder marker */
			return tree_ent_add(t, p, dlen, NULL, 0, NULL, err);
		n = slash ? (size_t)(slash - c) : strlen(c);
		if (n == rn && !strncmp(c, TF_SOURCE_RESERVED, n))
			return TF_OK;			/* reserved: never shown */
		if ((why = bad_component(c, n))) {
			snprintf(whole, sizeof(whole), "%s%s", t->bd.prefix, p);
			skip(&t->bd, whole, why);
			return TF_OK;
		}
		rc = tree_ent_add(t, p, dlen, c, n, slash || k->is_dir ? NULL : k, err);
		if (!slash)
			break;
	}
	return rc;
}

/* Keep one page's keys (their entries come once every page is in). */
static tf_status tree_page(tree *t, const s3_list_page *pg, tf_error *err)
{
	const char *prefix = t->bd.prefix;
	size_t plen = t->bd.plen, total = pg->nobjects + pg->nprefixes;
	void *q;

	for (size_t i = 0; i < pg->nbad; i++)
		skip(&t->bd, pg->bad[i], "a NUL or a bad escape");
	if (t->nkeys + total > t->ckeys) {
		size_t nc = t->ckeys * 2 > t->nkeys + total ? t->ckeys * 2 : t->nkeys + total;
		if (!(q = realloc(t->keys, nc * sizeof(*t->keys))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		t->keys = q, t->ckeys = nc;
	}
	for (size_t i = 0; i < total && !t->too_big; i++) {
		const char *key = i < pg->nobjects ? pg->objects[i].key : pg->prefixes[i - pg->nobjects];
		tree_key *k = &t->keys[t->nkeys];
		if (strncmp(key, prefix, plen)) {
			skip(&t->bd, key, "outside the prefix");
			continue;
		}
		if (!tree_charge(t, sizeof(*k) + strlen(key + plen) + 1))
			break;
		*k = (tree_key){ .is_dir = i >= pg->nobjects };
		if (!k->is_dir)
			k->e = pg->objects[i], k->e.key = NULL;
		else if (!*key || key[strlen(key) - 1] != '/') {
			skip(&t->bd, key, "not a directory of the prefix");
			continue;
		}
		if (!(k->path = strdup(key + plen)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		if (k->is_dir)
			k->path[strlen(k->path) - 1] = '\0';	/* "d/" is directory d */
		t->nkeys++;
	}
	return TF_OK;
}

static tf_status tree_page_of(void *t, const s3_list_page *pg, tf_error *err)
{
	return tree_page(t, pg, err);
}

/* The listing of directory dir[0..dlen) beneath rel from ents [lo, hi). */
static tf_status tree_listing(tree *t, const char *rel, size_t lo, size_t hi, listing **out, tf_error *err)
{
	const tree_ent *e = &t->ents[lo];
	builder bd = { .s = t->bd.s, .l = calloc(1, sizeof(listing)), .prefix = t->bd.prefix, .plen = t->bd.plen };
	tf_status rc = TF_OK;
	int n;

	if (!bd.l)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if (!e->dlen)
		n = -!(bd.l->rel = strdup(rel));
	else if (!strcmp(rel, "."))	/* the top: its subdirectories' rels have no "./" */
		n = asprintf(&bd.l->rel, "%.*s", (int)e->dlen, e->dir);
	else
		n = asprintf(&bd.l->rel, "%s/%.*s", rel, (int)e->dlen, e->dir);
	if (n < 0) {
		bd.l->rel = NULL;
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	}
	if (rc == TF_OK && (rc = reserve(&bd, 1, err)) == TF_OK)
		add_text(bd.l, "", 0);
	for (size_t i = lo; i < hi && rc == TF_OK; i++) {
		e = &t->ents[i];
		if (!e->name || (i > lo && !cmp_tree_ent(&t->ents[i - 1], e)))
			continue;	/* a marker, or a directory named again */
		rc = listing_add(&bd, e->name, e->nlen, e->k ? &e->k->e : NULL, err);
	}
	if (rc != TF_OK) {
		listing_free(bd.l);
		return rc;
	}
	listing_finish(bd.l);
	bd.l->at_ns = tf_now_ns();
	bd.l->whole = true;
	*out = bd.l;
	return TF_OK;
}

/* Build every directory's listing from the keys; none (*n 0) past TREE_DIRS. */
static tf_status tree_listings(tree *t, const char *rel, listing ***out, size_t *n, tf_error *err)
{
	listing **ls = NULL;
	size_t nl = 0, lo = 0;
	tf_status rc = TF_OK;

	/* The listed directory has a listing even when nothing is beneath it. */
	if ((rc = tree_ent_add(t, "", 0, NULL, 0, NULL, err)) != TF_OK)
		return rc;
	for (size_t i = 0; i < t->nkeys && rc == TF_OK && !t->too_big; i++)
		rc = tree_entries(t, &t->keys[i], err);
	if (rc != TF_OK || t->too_big)
		return rc;
	qsort(t->ents, t->nents, sizeof(*t->ents), cmp_tree_ent);
	for (size_t i = 1; i <= t->nents && rc == TF_OK; i++) {
		if (i < t->nents && !cmp_span(t->ents[i].dir, t->ents[i].dlen, t->ents[lo].dir, t->ents[lo].dlen))
			continue;
		if (nl == TREE_DIRS) {
			t->too_big = true;
			break;
		}
		if (!nl && !(ls = calloc(TREE_DIRS, sizeof(*ls))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		rc = tree_listing(t, rel, lo, i, &ls[nl], err);
		if (rc == TF_OK)
			nl++;
		else if (rc == TF_E_IO)		/* a directory past list_max_bytes */
			t->too_big = true, rc = TF_OK;
		lo = i;
	}
	if (rc != TF_OK || t->too_big) {
		for (size_t i = 0; i < nl; i++)
			listing_free(ls[i]);
		free(ls);
		return rc;
	}
	*out = ls;
	*n = nl;
	return TF_OK;
}

/*
 * Every listing of the subtree rel, listed whole (ls[0] is rel's own;
 * malloc'd, each listing the caller's), or none (*n 0): the subtree is
 * too big for it, list rel the ordinary way.
 */
static tf_status fetch_tree(s3_source *s, const s3_bound *b, const char *rel, listing ***ls, size_t *n,
			    tf_error *err)
{
	char *prefix = key_of(s, rel, true);
	tree t = { .bd = { .s = s, .prefix = prefix, .plen = prefix ? strlen(prefix) : 0 } };
	tf_status rc = prefix ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");
	unsigned max = TREE_PAGES < s->list_max_pages ? TREE_PAGES : s->list_max_pages;

	*n = 0;
	if (rc == TF_OK)
		rc = list_pages(&t.bd, b, true, max, tree_page_of, &t, &t.too_big, err);
	if (rc == TF_OK && !t.too_big && (rc = tree_listings(&t, rel, ls, n, err)) == TF_OK && *n)
		warn_skipped(&t.bd);
	for (size_t i = 0; i < t.nkeys; i++)
		free(t.keys[i].path);
	free(t.keys), free(t.ents), free(prefix), free(t.bd.tokens), free(t.bd.last);
	return rc;
}

/* ---- the listing cache (s->mu held) ------------------------------------------------------ */

/*
 * The cache is a tf_lru set (util/tf_lru.h) keyed by rel: a cached listing
 * is in its table and on its list, used or not (tf_lru_ref: a listing in
 * use may be let go, and is freed by its last user).
 */
static bool same_rel(const tf_lru_node *n, const void *rel)
{
	return !strcmp(LISTING_OF(n)->rel, rel);
}

/* Take l out of the cache; freed now or by its last user. */
static void cache_drop(s3_source *s, listing *l)
{
	tf_lru_remove(s->listings, &l->node);
	s->bytes -= l->bytes;
	if (!l->node.refs)
		listing_free(l);
}

static listing *cache_find(s3_source *s, const char *rel)
{
	tf_lru_node *n = tf_lru_find(s->listings, tf_hash_str(rel), same_rel, rel);

	return n ? LISTING_OF(n) : NULL;
}

static bool fresh(const s3_source *s, const listing *l)
{
	return l->immutable || tf_now_ns() - l->at_ns < s->ttl_ns;
}

static void cache_insert(s3_source *s, listing *l)
{
	listing *old = cache_find(s, l->rel);
	tf_lru_node *n;

	if (old)
		cache_drop(s, old);
	if (l->bytes > CACHE_BYTES / 4 || (s->ttl_ns == 0 && !l->immutable))
		return;		/* served once, not kept */
	while ((tf_lru_count(s->listings) >= CACHE_LISTINGS || s->bytes + l->bytes > CACHE_BYTES) &&
	       (n = tf_lru_oldest(s->listings, 0)))
		cache_drop(s, LISTING_OF(n));
	tf_lru_insert(s->listings, &l->node, tf_hash_str(l->rel));
	tf_lru_use(s->listings, &l->node, 0);
	s->bytes += l->bytes;
}

/* ---- using listings ------------------------------------------------------------------------ */

/*
 * Whether the directory parent, whose listing is cached and fresh, is a
 * TileDB array's: two subdirectories or more, every one named "__*"
 * (__fragments, __commits, __schema, ...).  Its "__*" subdirectories are
 * then listed in one go, its subtree whole (listing_get): opening the array
 * lists __fragments, __commits, __schema and __schema/__enumerations one
 * after another, a round trip each, otherwise.  s->mu held.
 */
static bool array_dir(s3_source *s, const char *parent)
{
	listing *l = cache_find(s, parent);
	unsigned dirs = 0;

	if (!l || !fresh(s, l))
		return false;
	for (size_t i = 0; i < l->n; i++) {
		if (!l->ents[i].dir)
			continue;
		if (strncmp(l->text + l->ents[i].name, "__", 2))
			return false;
		dirs++;
	}
	return dirs >= 2;
}

static bool split_rel(const char *rel, char *buf, size_t n, const char **name);

/* Listings ls[0..n) into the cache but ls[skip], the last first (ls[0]
 * stays the most recent of them); those not kept freed.  s->mu held. */
static void cache_all(s3_source *s, listing **ls, size_t n, size_t skip)
{
	for (size_t i = n; i-- > 0;) {
		if (i == skip)
			continue;
		cache_insert(s, ls[i]);
		if (!ls[i]->node.keyed)
			listing_free(ls[i]);
	}
}

/* An empty listing of rel, without a request, when its parent's cached
 * listing came from its subtree listed whole and names no directory rel
 * (an array without __schema/__enumerations: no LIST to learn it). */
static tf_status known_empty(s3_source *s, const char *rel, listing **out, tf_error *err)
{
	char parent[4096];
	const char *name;
	const s3_dent *d;
	listing *p;
	builder bd = { .s = s };
	bool empty;
	tf_status rc;

	*out = NULL;
	pthread_mutex_lock(&s->mu);
	empty = split_rel(rel, parent, sizeof(parent), &name) && (p = cache_find(s, parent)) && p->whole &&
		fresh(s, p) && (!(d = listing_lookup(p, name)) || !d->dir);
	pthread_mutex_unlock(&s->mu);
	if (!empty)
		return TF_OK;
	if (!(bd.l = calloc(1, sizeof(listing))) || !(bd.l->rel = strdup(rel))) {
		free(bd.l);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	if ((rc = reserve(&bd, 1, err)) != TF_OK) {
		listing_free(bd.l);
		return rc;
	}
	add_text(bd.l, "", 0);
	listing_finish(bd.l);
	bd.l->at_ns = tf_now_ns();
	bd.l->whole = true;
	*out = bd.l;
	return TF_OK;
}

/* The listings of rel's parent's subtree when that is an array's (array_dir)
 * and small enough (fetch_tree), rel's own in *at; else none (*n 0): also
 * when listing the parent failed (a store or a policy may refuse that
 * prefix and grant rel's), then rel is listed alone, and its error told. */
static tf_status fetch_array_tree(s3_source *s, const s3_bound *b, const char *rel, listing ***ls, size_t *n,
				  size_t *at)
{
	char parent[4096];
	const char *name;
	bool up;
	tf_status rc;

	*n = 0;
	pthread_mutex_lock(&s->mu);
	up = split_rel(rel, parent, sizeof(parent), &name) && array_dir(s, parent);
	pthread_mutex_unlock(&s->mu);
	if (!up)
		return TF_OK;
	if ((rc = fetch_tree(s, b, parent, ls, n, NULL)) != TF_OK) {
		*n = 0;		/* rel listed alone: its own error, if any, is the one to say */
		return TF_OK;
	}
	for (*at = 0; *at < *n && strcmp((*ls)[*at]->rel, rel); ++*at)
		;
	if (*at == *n) {	/* rel is not there: the others cached, rel empty (known_empty) */
		pthread_mutex_lock(&s->mu);
		cache_all(s, *ls, *n, SIZE_MAX);
		pthread_mutex_unlock(&s->mu);
		free(*ls);
		*ls = NULL, *n = 0, *at = 0;
	}
	return TF_OK;
}

/* Directory rel's listing, referenced (listing_put when done). */
static tf_status listing_get(s3_source *s, const s3_bound *b, const char *rel, listing **out, tf_error *err)
{
	listing *l = NULL, **ls = NULL;
	size_t n = 0, at = 0;
	tf_status rc;

	pthread_mutex_lock(&s->mu);
	if ((l = cache_find(s, rel)) && fresh(s, l)) {
		tf_lru_use(s->listings, &l->node, 0);
		tf_lru_ref(&l->node);
		pthread_mutex_unlock(&s->mu);
		*out = l;
		return TF_OK;
	}
	pthread_mutex_unlock(&s->mu);
	if ((rc = known_empty(s, rel, &l, err)) != TF_OK)
		return rc;
	if (!l && tree_worthy(rel) && (rc = fetch_array_tree(s, b, rel, &ls, &n, &at)) != TF_OK)
		return rc;
	if (!l && !n && tree_worthy(rel) && (rc = known_empty(s, rel, &l, err)) != TF_OK)
		return rc;	/* the array's subtree, listed whole, has no rel */
	if (!l && tree_worthy(rel) && !n && (rc = fetch_tree(s, b, rel, &ls, &n, err)) != TF_OK)
		return rc;
	if (!l && !n && (rc = fetch_listing(s, b, rel, &l, err)) != TF_OK)
		return rc;
	pthread_mutex_lock(&s->mu);
	cache_all(s, ls, n, at);	/* rel's is inserted last: the most recent */
	if (n)
		l = ls[at];
	free(ls);
	cache_insert(s, l);
	tf_lru_ref(&l->node);
	pthread_mutex_unlock(&s->mu);
	*out = l;
	return TF_OK;
}

static void listing_put(s3_source *s, listing *l)
{
	pthread_mutex_lock(&s->mu);
	if (tf_lru_release(&l->node) && !l->node.keyed)
		listing_free(l);
	pthread_mutex_unlock(&s->mu);
}

/* rel's parent directory ("." at the top) into buf, its last name into *name. */
static bool split_rel(const char *rel, char *buf, size_t n, const char **name)
{
	const char *slash = strrchr(rel, '/');

	*name = slash ? slash + 1 : rel;
	if (snprintf(buf, n, "%.*s", slash ? (int)(slash - rel) : 1, slash ? rel : ".") >= (int)n)
		return false;
	return true;
}

/* Forget the listing of rel's directory (it changed under us). */
/*
 * Forget the listing of rel's directory: the store has just said rel is
 * not the version listed (HTTP 412, another ETag) or not there at all
 * (404).  A fragment directory's listing too, although such a directory
 * never changes: it may have been vacuumed whole, so its own directory's
 * listing goes as well, and the next lookup asks the store whether it is
 * still there (ENOENT, not EIO, for what vacuuming removed).
 */
static void forget_parent(s3_source *s, const char *rel)
{
	char parent[4096], up[4096];
	const char *name;
	listing *l;

	if (!split_rel(rel, parent, sizeof(parent), &name))
		return;
	pthread_mutex_lock(&s->mu);
	if ((l = cache_find(s, parent))) {
		if (l->immutable && strcmp(parent, ".") && split_rel(parent, up, sizeof(up), &name) &&
		    (l = cache_find(s, up)))
			cache_drop(s, l);
		if ((l = cache_find(s, parent)))
			cache_drop(s, l);
	}
	pthread_mutex_unlock(&s->mu);
}

/* Forget directory rel's own listing (its directory no longer lists it). */
static void forget_listing(s3_source *s, const char *rel)
{
	listing *l;

	pthread_mutex_lock(&s->mu);
	if ((l = cache_find(s, rel)))
		cache_drop(s, l);
	pthread_mutex_unlock(&s->mu);
}

/* Whether a failure of rc says rel's listed version is gone. */
static bool gone_status(tf_status rc)
{
	return rc == TF_E_STALE || rc == TF_E_NOTFOUND;
}

/* ---- stat, list ------------------------------------------------------------------------------ */

/* rel's entry in its directory's listing (copied), or TF_E_NOTFOUND. */
static tf_status lookup(s3_source *s, const s3_bound *b, const char *rel, tf_stat *st, tf_error *err)
{
	char parent[4096];
	const char *name;
	const s3_dent *d;
	listing *l;
	tf_status rc;

	if (!strcmp(rel, ".")) {
		*st = dir_stat(s);
		return TF_OK;
	}
	if (!split_rel(rel, parent, sizeof(parent), &name))
		return tf_err(err, TF_E_INVAL, "%s: name too long", rel);
	if ((rc = listing_get(s, b, parent, &l, err)) != TF_OK)
		return rc;
	if ((d = listing_lookup(l, name)))
		*st = dent_stat(s, l, d);
	listing_put(s, l);
	if (!d)	/* a directory gone (a fragment vacuumed) may have left its listing behind */
		forget_listing(s, rel);
	return d ? TF_OK : tf_err(err, TF_E_NOTFOUND, "%s: no such file or directory", rel);
}

static tf_status s3_stat(tf_source *base, const char *rel, tf_stat *st, tf_error *err)
{
	s3_bound b = bound_of((s3_source *)base);

	if (reserved_rel(rel))
		return tf_err(err, TF_E_NOTFOUND, "%s: no such file or directory", rel);

	return lookup((s3_source *)base, &b, rel, st, err);
}

static tf_status s3_list(tf_source *base, const char *rel, bool want_stat, tf_list_fn fn, void *ctx,
			 tf_error *err)
{
	s3_source *s = (s3_source *)base;
	s3_bound b = bound_of(s);
	listing *l;
	tf_stat st;
	tf_status rc;

	(void)want_stat;	/* sizes come with the listing: always full */
	if (reserved_rel(rel))
		return tf_err(err, TF_E_NOTFOUND, "%s: no such file or directory", rel);
	if ((rc = listing_get(s, &b, rel, &l, err)) != TF_OK)
		return rc;
	/* An empty prefix is no directory, unless it is the top. */
	if (!l->n && strcmp(rel, ".")) {
		listing_put(s, l);
		rc = lookup(s, &b, rel, &st, err);
		return rc != TF_OK ? rc : st.kind == TF_ENT_DIR ? TF_OK
		       : tf_err(err, TF_E_INVAL, "%s: not a directory", rel);
	}
	for (size_t i = 0; i < l->n; i++) {
		st = dent_stat(s, l, &l->ents[i]);
		if (fn(ctx, l->text + l->ents[i].name, &st))
			break;
	}
	listing_put(s, l);
	return TF_OK;
}

static tf_status s3_statfs(tf_source *base, tf_source_fsstat *out, tf_error *err)
{
	(void)base, (void)err;
	*out = (tf_source_fsstat){ .bsize = 4096, .namemax = 255 };
	return TF_OK;
}

/* ---- opening objects ------------------------------------------------------------------------- */

/* rel's stat from a fresh cached listing, without asking the store. */
static bool peek(s3_source *s, const char *rel, tf_stat *st)
{
	char parent[4096];
	const char *name;
	const s3_dent *d = NULL;
	listing *l;

	if (!split_rel(rel, parent, sizeof(parent), &name))
		return false;
	pthread_mutex_lock(&s->mu);
	if ((l = cache_find(s, parent)) && fresh(s, l) && (d = listing_lookup(l, name)))
		*st = dent_stat(s, l, d);
	pthread_mutex_unlock(&s->mu);
	return d != NULL;
}

static tf_status head_stat(s3_source *s, const s3_bound *b, const char *rel, tf_stat *st, tf_error *err)
{
	char *key = key_of(s, rel, false);
	s3_entry e;
	tf_status rc = key ? s3_client_head(s->client, b, key, &e, err) : tf_err(err, TF_E_NOMEM, "out of memory");

	free(key);
	if (rc == TF_OK)
		*st = file_stat(s, &e);
	return rc;
}

static bool same_version(const tf_version *a, const tf_version *b)
{
	return a->size == b->size && !strcmp(a->etag, b->etag);
}

/* The version rel is now: cached if fresh, else asked; checked against expect. */
static tf_status current_stat(s3_source *s, const s3_bound *b, const char *rel, const tf_version *expect,
			      tf_stat *st, tf_error *err)
{
	bool cached = peek(s, rel, st);
	tf_status rc;

	if (cached && st->kind != TF_ENT_REG)
		return tf_err(err, TF_E_INVAL, "%s: not a regular file", rel);
	/* A cached version unlike the one expected may be the stale one. */
	if (!cached || (expect && !same_version(expect, &st->v))) {
		if ((rc = head_stat(s, b, rel, st, err)) != TF_OK) {
			if (cached && rc == TF_E_NOTFOUND)
				forget_parent(s, rel);
			return rc;
		}
	}
	if (expect && !same_version(expect, &st->v)) {
		forget_parent(s, rel);
		return tf_err(err, TF_E_STALE, "%s: replaced in the object store", rel);
	}
	if (expect)
		st->v.mtime_ns = expect->mtime_ns;
	return TF_OK;
}

static tf_status s3_open(tf_source *base, const char *rel, const tf_version *expect, tf_object **out,
			 tf_error *err)
{
	s3_source *s = (s3_source *)base;
	s3_bound b = bound_of(s);
	s3_object *o;
	pthread_condattr_t ca;
	tf_stat st;
	tf_status rc;

	if (reserved_rel(rel))
		return tf_err(err, TF_E_NOTFOUND, "%s: no such file or directory", rel);
	if ((rc = current_stat(s, &b, rel, expect, &st, err)) != TF_OK)
		return rc;
	/* A GET's answer proves its version by its ETag: without one, no read
	 * could tell the version opened from one written since. */
	if (!st.v.etag[0])
		return tf_err(err, TF_E_IO, "%s key '%s%s': the store gives it no ETag: its version cannot be "
			      "pinned", s3_client_where(s->client), s->prefix, rel);
	if (!(o = calloc(1, sizeof(*o))) || !(o->base.name = strdup(rel)) || !(o->key = key_of(s, rel, false)) ||
	    asprintf(&o->id, "%s\n%s", o->key, st.v.etag) < 0) {
		if (o)
			free(o->base.name), free(o->key), free(o->id);
		free(o);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	o->base.ops = &s3_object_ops;
	o->base.st = st;
	/* Callers that can choose read IO_SIZE at a time: four PART_MIN GETs
	 * in parallel, where one 64 KiB chunk per request would cost a round
	 * trip each. */
	o->base.io_size = IO_SIZE;
	o->src = s;
	o->idh = tf_hash_str(o->id);
	o->refs = 1;
	atomic_init(&o->mtime_ns, 0);
	atomic_init(&o->pin, PIN_NONE);
	pthread_mutex_init(&o->pin_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);	/* waits end at a monotonic deadline */
	pthread_cond_init(&o->pin_cv, &ca);
	pthread_condattr_destroy(&ca);
	*out = &o->base;
	return TF_OK;
}

/* ---- fetching ------------------------------------------------------------------------------------ */

/*
 * Whether this GET is to bring the object's first answer, which pins its
 * Last-Modified for every later one.  Until one has, GETs go one at a
 * time: two at once could be answered by two versions (a store ignoring
 * If-Match), and the later one's, checked first, would be pinned and
 * served.  A wait ends at b (the GET then fails at once, as b is over).
 */
static bool pin_begin(s3_object *o, const s3_bound *b)
{
	bool mine;

	if (atomic_load(&o->pin) == PIN_DONE)
		return false;
	pthread_mutex_lock(&o->pin_mu);
	while (atomic_load(&o->pin) == PIN_BUSY && !s3_bound_over(b)) {
		int64_t until = tf_now_ns() + 200000000;
		struct timespec ts;
		until = until < b->at_ns ? until : b->at_ns;
		ts = (struct timespec){ (time_t)(until / 1000000000), (long)(until % 1000000000) };
		pthread_cond_timedwait(&o->pin_cv, &o->pin_mu, &ts);
	}
	if ((mine = atomic_load(&o->pin) == PIN_NONE))
		atomic_store(&o->pin, PIN_BUSY);
	pthread_mutex_unlock(&o->pin_mu);
	return mine;
}

static void pin_end(s3_object *o, bool pinned)
{
	pthread_mutex_lock(&o->pin_mu);
	atomic_store(&o->pin, pinned ? PIN_DONE : PIN_NONE);
	pthread_cond_broadcast(&o->pin_cv);
	pthread_mutex_unlock(&o->pin_mu);
}

static tf_status get_store(s3_object *o, const s3_bound *b, uint64_t off, void *dst, size_t len, tf_error *err)
{
	s3_version v = { o->base.st.v.etag, o->base.st.v.size, &o->mtime_ns };
	bool first = pin_begin(o, b);
	tf_status rc = s3_client_get(o->src->client, b, o->key, &v, off, dst, len, err);

	if (first)
		pin_end(o, rc == TF_OK);
	if (gone_status(rc))
		forget_parent(o->src, o->base.name);
	return rc;
}

/*
 * The disk cache (cache_dir): blocks of DB bytes at multiples of DB, keyed
 * by endpoint, bucket, key, ETag and size, so a replaced object is another
 * key.  A range is served from disk as far as its blocks, from either end,
 * are there and verify; what is left is fetched widened to whole blocks
 * (within the object) and its blocks kept.
 */
#define DB TF_DISK_CACHE_BLOCK

static bool disk_key(const s3_object *o, char *buf, size_t n)
{
	char where[512];
	int len;

	if (!s3_client_id(o->src->client, where, sizeof(where)))
		return false;
	len = snprintf(buf, n, "%s/%s\n%s\n%" PRIu64, where, o->key, o->base.st.v.etag, o->base.st.v.size);
	return len > 0 && (size_t)len < n;
}

/* Block i of the object, as far as it overlaps [off, off+len), from disk. */
static bool disk_block(s3_object *o, const char *key, uint64_t i, uint64_t off, uint8_t *dst, size_t len,
		       uint8_t **scratch)
{
	uint64_t at = i * DB, size = o->base.st.v.size;
	size_t blen = (size_t)(size - at < DB ? size - at : DB);
	uint64_t from = off > at ? off : at, to = off + len < at + blen ? off + len : at + blen;

	if (from == at && to == at + blen)	/* the whole block: straight into dst */
		return tf_disk_cache_get(o->src->disk, key, i, dst + (at - off), blen);
	if (!*scratch && !(*scratch = malloc(DB)))
		return false;
	if (!tf_disk_cache_get(o->src->disk, key, i, *scratch, blen))
		return false;
	memcpy(dst + (from - off), *scratch + (from - at), (size_t)(to - from));
	return true;
}

static tf_status get(s3_object *o, const s3_bound *b, uint64_t off, void *dst, size_t len, tf_error *err)
{
	char key[TF_DISK_CACHE_KEY_MAX];
	uint64_t first, last, w_off, w_end, size = o->base.st.v.size;
	uint8_t *scratch = NULL, *buf;
	tf_status rc;

	if (!o->src->disk || !len || off + len > size || !disk_key(o, key, sizeof(key)))
		return get_store(o, b, off, dst, len, err);
	first = off / DB, last = (off + len - 1) / DB;
	while (first <= last && disk_block(o, key, first, off, dst, len, &scratch))
		first++;
	while (last > first && disk_block(o, key, last, off, dst, len, &scratch))
		last--;
	free(scratch);
	if (first > last)
		return TF_OK;
	w_off = first * DB, w_end = (last + 1) * DB < size ? (last + 1) * DB : size;
	buf = w_off == off && w_end == off + len ? dst : malloc((size_t)(w_end - w_off));
	if (!buf)	/* no room to widen: the range as asked */
		return get_store(o, b, off, dst, len, err);
	if ((rc = get_store(o, b, w_off, buf, (size_t)(w_end - w_off), err)) == TF_OK) {
		for (uint64_t at = w_off; at < w_end; at += DB)
			tf_disk_cache_put(o->src->disk, key, at / DB, buf + (at - w_off),
					  (size_t)(w_end - at < DB ? w_end - at : DB));
		if (buf != dst) {
			uint64_t from = off > w_off ? off : w_off, to = off + len < w_end ? off + len : w_end;
			memcpy((uint8_t *)dst + (from - off), buf + (from - w_off), (size_t)(to - from));
		}
	}
	if (buf != dst)
		free(buf);
	return rc;
}

typedef struct part {
	s3_object *o;
	const s3_bound *b;
	uint64_t off;
	uint8_t *dst;
	size_t len;
	tf_error err;
	tf_status rc;
	pthread_t th;
	bool started;
} part;

static void *part_main(void *arg)
{
	part *p = arg;

	p->rc = get(p->o, p->b, p->off, p->dst, p->len, &p->err);
	return NULL;
}

/* [off, off+len) in up to PARTS_MAX ranged GETs at once. */
static tf_status fetch(s3_object *o, const s3_bound *b, uint64_t off, void *dst, size_t len, tf_error *err)
{
	size_t n = len / PART_MIN, step;
	part parts[PARTS_MAX];
	tf_status rc = TF_OK;

	n = n < 1 ? 1 : n > PARTS_MAX ? PARTS_MAX : n;
	if (n == 1)
		return get(o, b, off, dst, len, err);
	step = (len / n + 4095) & ~(size_t)4095;
	for (size_t i = 0; i < n; i++) {
		size_t at = i * step;
		parts[i] = (part){ .o = o, .b = b, .off = off + at, .dst = (uint8_t *)dst + at,
				   .len = i + 1 == n ? len - at : step };
		/* The last part runs here; the others in threads of their own. */
		parts[i].started = i + 1 < n && pthread_create(&parts[i].th, NULL, part_main, &parts[i]) == 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (parts[i].started)
			pthread_join(parts[i].th, NULL);
		else
			part_main(&parts[i]);
		if (parts[i].rc != TF_OK && rc == TF_OK) {
			rc = parts[i].rc;
			if (err)
				*err = parts[i].err;
		}
	}
	return rc;
}

/* Bound stored bytes at cap, a reader's window at half of it (pmu held, or
 * the source not yet shared). */
static void stored_bound(s3_source *s, size_t cap)
{
	uint64_t w = (uint64_t)s->max_fetchers * W_PER_REQUEST;

	s->cap = cap < STORED_MIN ? STORED_MIN : cap;
	s->wmax = w < s->cap / 2 ? w : s->cap / 2;
	s->wmax = s->wmax < W_FIRST ? W_FIRST : s->wmax;
}

/* ---- stored bytes: parts (src->pmu held unless said) -------------------------------------- */

static bool part_of(const s3_part *p, const s3_object *o)
{
	return p->idh == o->idh && !strcmp(p->id, o->id);
}

/* Memory held (charged to the cache's budget when one is attached). */
static void held_add(s3_source *s, ptrdiff_t n)
{
	s->held = (size_t)((ptrdiff_t)s->held + n);
	if (s->cache) {
		tf_cache_charge(s->cache, n);
		s->charged += n;
	}
}

/* Parts are the list of a tf_lru set without keys (a read finds its part
 * by range, part_at); pins are their tf_lru_ref counts. */
static void parts_unlink(s3_source *s, s3_part *p)
{
	tf_lru_unlist(s->parts, &p->node);
}

static void parts_front(s3_source *s, s3_part *p)
{
	tf_lru_use(s->parts, &p->node, 0);
}

static unsigned nparts(const s3_source *s)
{
	return (unsigned)tf_lru_length(s->parts, 0);
}

/* Drop a reference to o (a part queued or loading through it holds one). */
static void object_unref(s3_object *o);

static void part_free(s3_source *s, s3_part *p)
{
	parts_unlink(s, p);
	held_add(s, -(ptrdiff_t)p->len);
	if (p->o)
		object_unref(p->o);
	free(p->data);
	free(p->id);
	free(p);
}

/* Unpin p; a part no longer listed goes with its last pin. */
static void part_unpin(s3_source *s, s3_part *p)
{
	if (tf_lru_release(&p->node) && !tf_lru_listed(&p->node))
		part_free(s, p);
}

/* Room for n more bytes and one more part within the bounds: least
 * recently used parts out (ready ones no reader holds). */
static bool make_room(s3_source *s, size_t n)
{
	tf_lru_node *at = tf_lru_oldest(s->parts, 0);

	while ((s->held + n > s->cap || nparts(s) >= STORED_PARTS) && at) {
		s3_part *p = PART_OF(at);
		at = tf_lru_newer(s->parts, at);
		if (p->state == P_READY && !p->node.refs) {
			part_free(s, p);
			s->evicted++;
		}
	}
	return s->held + n <= s->cap && nparts(s) < STORED_PARTS;
}

/* A new part of o for [off, off+len), listed, its memory taken; NULL when
 * the bound leaves no room. */
static s3_part *part_new(s3_object *o, uint64_t off, size_t len, part_state state)
{
	s3_source *s = o->src;
	s3_part *p;

	if (len > s->cap / 4 || !make_room(s, len))
		return NULL;
	if (!(p = calloc(1, sizeof(*p))) || !(p->data = malloc(len))) {
		free(p);
		return NULL;
	}
	if (!(p->id = strdup(o->id))) {
		free(p->data);
		free(p);
		return NULL;
	}
	p->idh = o->idh;
	p->off = off, p->len = len, p->state = state;
	held_add(s, (ptrdiff_t)len);
	parts_front(s, p);
	return p;
}

/* The part of o holding off, or NULL; *next: where the next one starts. */
static s3_part *part_at(s3_object *o, uint64_t off, uint64_t *next)
{
	*next = UINT64_MAX;
	for (tf_lru_node *at = tf_lru_newest(o->src->parts, 0); at; at = tf_lru_older(o->src->parts, at)) {
		s3_part *p = PART_OF(at);
		if (!part_of(p, o))
			continue;
		if (off >= p->off && off - p->off < p->len)
			return p;
		if (p->off > off && p->off < *next)
			*next = p->off;
	}
	return NULL;
}

static void *fetcher_main(void *arg);

/* Queue p for the fetchers, starting one more if all are busy. */
static void part_queue(s3_object *o, s3_part *p)
{
	s3_source *s = o->src;
	pthread_t th;

	p->o = o;
	o->refs++;
	p->qnext = NULL;
	if (s->q_tail)
		s->q_tail->qnext = p;
	else
		s->q_head = p;
	s->q_tail = p;
	s->queued++;
	if (s->idle < s->queued && s->nfetchers < s->max_fetchers &&
	    pthread_create(&th, NULL, fetcher_main, s) == 0)
		s->fetchers[s->nfetchers++] = th;
	pthread_cond_broadcast(&s->fcv);
}

/* Take p off the queue (it is there). */
static void queue_remove(s3_source *s, s3_part *p)
{
	s3_part **pp = &s->q_head, *prev = NULL;

	while (*pp && *pp != p)
		prev = *pp, pp = &(*pp)->qnext;
	if (!*pp)
		return;
	*pp = p->qnext;
	if (s->q_tail == p)
		s->q_tail = prev;
	p->qnext = NULL;
	s->queued--;
}

/* Fetch p (LOADING, pinned by the caller) through o within bd (NULL: a
 * fetcher's, from now), pmu released meanwhile. */
static void part_load(s3_object *o, s3_part *p, const s3_bound *bd, bool parallel)
{
	s3_source *s = o->src;
	s3_bound b = bd ? *bd : bound_now(s);
	tf_status rc;

	s->inflight++;
	pthread_mutex_unlock(&s->pmu);
	rc = parallel ? fetch(o, &b, p->off, p->data, p->len, NULL) : get(o, &b, p->off, p->data, p->len, NULL);
	pthread_mutex_lock(&s->pmu);
	s->inflight--;
	s->fetched += p->len;
	p->state = rc == TF_OK ? P_READY : P_FAILED;
	if (rc != TF_OK)	/* never served: whoever waits fetches for itself */
		parts_unlink(s, p);
	pthread_cond_broadcast(&s->pcv);
}

static void *fetcher_main(void *arg)
{
	s3_source *s = arg;

	pthread_mutex_lock(&s->pmu);
	for (;;) {
		s3_part *p = s->q_head;
		s3_object *o;

		if (s->stopping)
			break;
		if (!p) {
			s->idle++;
			pthread_cond_wait(&s->fcv, &s->pmu);
			s->idle--;
			continue;
		}
		queue_remove(s, p);
		p->state = P_LOADING;
		tf_lru_ref(&p->node);
		o = p->o;
		part_load(o, p, NULL, false);
		p->o = NULL;
		part_unpin(s, p);
		object_unref(o);
	}
	pthread_mutex_unlock(&s->pmu);
	return NULL;
}

/* Fetch-ahead along a forward reader at stored offset off, which will read
 * up to off+len: parts over what is not there yet of a window that starts
 * at W_FIRST and grows with the distance read (doubling), in parts of the
 * window over max_requests (coalesced gaps), W_PART_MIN to W_PART_MAX. */
static void stream_ahead(s3_object *o, uint64_t off, uint64_t len)
{
	s3_source *s = o->src;
	uint64_t size = o->base.st.v.size, window, to, at, next;
	size_t piece;

	if (!o->streaming || off + SEQ_SLACK < o->s_pos || off > o->s_pos + s->wmax + SEQ_SLACK)
		o->s_start = off;	/* a new stream */
	o->streaming = true;
	o->s_pos = off;
	/* A walk of chunk headers reads every stored byte (a header every few
	 * KiB), so it gets the widest window from its first read: ramping up
	 * from W_FIRST cost it a round trip per doubling. */
	window = o->walked ? s->wmax : 2 * (off - o->s_start);
	window = window < W_FIRST ? W_FIRST : window > s->wmax ? s->wmax : window;
	piece = (size_t)(window / s->max_fetchers);
	piece = piece < W_PART_MIN ? W_PART_MIN : piece > W_PART_MAX ? W_PART_MAX : piece;
	to = off + (window < len ? window : len);
	to = to < size ? to : size;
	for (at = off; at < to;) {
		s3_part *p = part_at(o, at, &next);
		if (p) {
			at = p->off + p->len;
			continue;
		}
		next = next < to ? next : to;
		while (at < next) {
			uint64_t end = at + piece;
			size_t n;
			if (end % W_ALIGN && end - end % W_ALIGN > at)
				end -= end % W_ALIGN;	/* whole blocks of the disk cache */
			n = next - at < end - at ? (size_t)(next - at) : (size_t)(end - at);
			if (next - at - n < piece / 2)	/* no sliver at the end */
				n = (size_t)(next - at);
			if (!(p = part_new(o, at, n, P_QUEUED)))
				return;
			part_queue(o, p);
			at += n;
		}
	}
}

/* ---- reading ----------------------------------------------------------------------------------- */

/* Whether a read at off continues the last one (pmu held). */
static bool continues(const s3_object *o, uint64_t off)
{
	if (!o->tick && off == 0)
		return true;	/* a first read from the start */
	return o->tick && off + SEQ_GAP >= o->seq_end && off <= o->seq_end + SEQ_GAP;
}

/* Wait for p (pinned) to leave LOADING, or for bd to be over: whether it did. */
static bool wait_part(s3_source *s, s3_part *p, const s3_bound *bd)
{
	while (p->state == P_LOADING && !s3_bound_over(bd)) {
		int64_t until = tf_now_ns() + 200000000;
		struct timespec ts;
		until = until < bd->at_ns ? until : bd->at_ns;
		ts = (struct timespec){ (time_t)(until / 1000000000), (long)(until % 1000000000) };
		pthread_cond_timedwait(&s->pcv, &s->pmu, &ts);
	}
	return p->state != P_LOADING;
}

/*
 * One step of a read at *off: served from a part (waited for if in flight;
 * one still queued is fetched here), or the gap before the next part
 * fetched here, kept as a part when it is worth one and there is room,
 * else into dst directly.  A failed part is never served: its range is
 * fetched again here, and that error is the read's.  pmu held.
 */
static tf_status read_step(s3_object *o, const s3_bound *bd, uint64_t *off, uint8_t **dst, size_t *len,
			   tf_error *err)
{
	s3_source *s = o->src;
	uint64_t next, end;
	s3_part *p = part_at(o, *off, &next);
	tf_status rc;
	size_t n;

	if (p) {
		tf_lru_ref(&p->node);
		if (p->state == P_QUEUED) {	/* ours now: no waiting behind the queue */
			s3_object *by = p->o;
			queue_remove(s, p);
			p->state = P_LOADING;
			p->o = NULL;
			part_load(o, p, bd, true);
			object_unref(by);
		}
		if (!wait_part(s, p, bd)) {	/* the caller went, or its deadline */
			part_unpin(s, p);
			return tf_err(err, TF_E_IO, "%s: %llu bytes at %llu: not fetched within the request",
				      o->base.name, (unsigned long long)p->len, (unsigned long long)p->off);
		}
	} else {
		n = next - *off < *len ? (size_t)(next - *off) : *len;
		if (n >= PART_KEEP && (p = part_new(o, *off, n, P_LOADING))) {
			tf_lru_ref(&p->node);
			part_load(o, p, bd, true);
		}
	}
	if (p && p->state == P_READY) {
		n = p->len - (size_t)(*off - p->off);
		n = n < *len ? n : *len;
		parts_front(s, p);
		pthread_mutex_unlock(&s->pmu);
		memcpy(*dst, p->data + (*off - p->off), n);
		pthread_mutex_lock(&s->pmu);
		part_unpin(s, p);
		s->served += n;
		*off += n, *dst += n, *len -= n;
		return TF_OK;
	}
	end = p ? p->off + p->len : next;	/* failed, or no room: fetched here, into dst */
	if (p)
		part_unpin(s, p);
	n = end - *off < *len ? (size_t)(end - *off) : *len;
	s->inflight++;
	pthread_mutex_unlock(&s->pmu);
	rc = fetch(o, bd, *off, *dst, n, err);
	pthread_mutex_lock(&s->pmu);
	s->inflight--;
	s->fetched += n;
	if (rc == TF_OK)
		*off += n, *dst += n, *len -= n;
	return rc;
}

static tf_status s3_read(tf_object *base, uint64_t off, void *dst, size_t len, tf_error *err)
{
	s3_object *o = (s3_object *)base;
	s3_source *s = o->src;
	s3_bound b = bound_of(s);
	uint8_t *p = dst;
	tf_status rc = TF_OK;

	pthread_mutex_lock(&s->pmu);
	if (!o->planned && continues(o, off))
		stream_ahead(o, off, o->base.st.v.size - off);
	else if (!o->planned)
		o->streaming = false;
	o->tick++;
	o->seq_end = off + len;
	while (len && rc == TF_OK)
		rc = read_step(o, &b, &off, &p, &len, err);
	pthread_mutex_unlock(&s->pmu);
	return rc;
}

static void s3_prefetch(tf_object *base, uint64_t off, uint64_t len)
{
	s3_object *o = (s3_object *)base;

	pthread_mutex_lock(&o->src->pmu);
	stream_ahead(o, off, len);
	pthread_mutex_unlock(&o->src->pmu);
}

static bool s3_advise(tf_object *base, tf_access how)
{
	s3_object *o = (s3_object *)base;

	if (how == TF_ACCESS_HEADERS) {
		pthread_mutex_lock(&o->src->pmu);
		o->walked = true;	/* see stream_ahead */
		pthread_mutex_unlock(&o->src->pmu);
		return false;	/* headers: a round trip each, so large runs stay */
	}
	if (how != TF_ACCESS_PLANNED)
		return false;
	pthread_mutex_lock(&o->src->pmu);
	o->planned = true;	/* its reader tells us where it goes (s3_prefetch) */
	pthread_mutex_unlock(&o->src->pmu);
	return true;
}

/* One HEAD: whether the object is still the version opened. */
static tf_status s3_check(tf_object *base, tf_error *err)
{
	s3_object *o = (s3_object *)base;
	s3_bound b = bound_of(o->src);
	tf_stat st;
	tf_status rc = head_stat(o->src, &b, o->base.name, &st, err);

	if (rc == TF_OK && !same_version(&st.v, &o->base.st.v)) {
		forget_parent(o->src, o->base.name);
		return tf_err(err, TF_E_STALE, "%s: replaced in the object store while open", o->base.name);
	}
	if (rc == TF_E_NOTFOUND)
		forget_parent(o->src, o->base.name);
	return rc;
}

/* pmu held. */
static void object_unref(s3_object *o)
{
	if (--o->refs)
		return;
	pthread_mutex_destroy(&o->pin_mu);
	pthread_cond_destroy(&o->pin_cv);
	free(o->key), free(o->id), free(o->base.name);
	free(o);
}

/* Parts still queued for this open are cancelled (unless a reader waits on
 * one); those in flight finish without anyone waiting here, and stay as
 * parts for the next open of the same version. */
static void s3_close(tf_object *base)
{
	s3_object *o = (s3_object *)base;
	s3_source *s = o->src;

	pthread_mutex_lock(&s->pmu);
	for (s3_part *p = s->q_head, *nx; p; p = nx) {
		nx = p->qnext;
		if (p->o == o && !p->node.refs) {
			queue_remove(s, p);
			s->cancelled++;
			part_free(s, p);	/* drops its reference to o */
		}
	}
	object_unref(o);
	pthread_mutex_unlock(&s->pmu);
}

static const tf_object_ops s3_object_ops = {
	.close = s3_close, .read = s3_read, .prefetch = s3_prefetch, .check = s3_check,
	.advise = s3_advise,
};

/* ---- the source ------------------------------------------------------------------------------ */

static void s3_free(tf_source *base)
{
	s3_source *s = (s3_source *)base;

	pthread_mutex_lock(&s->pmu);
	s->stopping = true;
	pthread_cond_broadcast(&s->fcv);
	pthread_mutex_unlock(&s->pmu);
	for (unsigned i = 0; i < s->nfetchers; i++)
		pthread_join(s->fetchers[i], NULL);
	pthread_mutex_lock(&s->pmu);
	while (s->q_head) {	/* no open is left: none was */
		s3_part *p = s->q_head;
		queue_remove(s, p);
		part_free(s, p);
	}
	for (tf_lru_node *at; s->parts && (at = tf_lru_oldest(s->parts, 0));)
		part_free(s, PART_OF(at));
	pthread_mutex_unlock(&s->pmu);
	free(s->fetchers);
	pthread_cond_destroy(&s->pcv);
	pthread_cond_destroy(&s->fcv);
	pthread_mutex_destroy(&s->pmu);
	for (tf_lru_node *at; s->listings && (at = tf_lru_oldest(s->listings, 0));)
		cache_drop(s, LISTING_OF(at));
	tf_lru_free(s->listings);
	tf_lru_free(s->parts);
	s3_client_free(s->client);
	tf_disk_cache_free(s->disk);
	pthread_mutex_destroy(&s->mu);
	free(s->prefix), free(s->base.name), free(s->early);
	free(s);
}

/* "s3:" endpoint, bucket and key: the same name at another endpoint is
 * another object (tf_source_object_id). */
static bool s3_object_id(const tf_source *base, const char *rel, char *buf, size_t n)
{
	const s3_source *s = (const s3_source *)base;
	char where[512];
	int len;

	if (!s3_client_id(s->client, where, sizeof(where)))
		return false;
	len = snprintf(buf, n, "s3:%s/%s%s", where, s->prefix, strcmp(rel, ".") ? rel : "");
	return len > 0 && (size_t)len < n;
}

/* "BUCKET/KEY": the same wherever the bucket is reached from. */
static bool s3_bucket_key(const tf_source *base, const char *rel, char *buf, size_t n)
{
	const s3_source *s = (const s3_source *)base;
	int len = snprintf(buf, n, "%s/%s%s", s3_client_bucket(s->client), s->prefix, strcmp(rel, ".") ? rel : "");

	return len > 0 && (size_t)len < n;
}

/* ---- the reserved prefix ------------------------------------------------------------------ */

static char *reserved_key(const s3_source *s, const char *name)
{
	char *k = NULL;

	return asprintf(&k, "%s%s/%s", s->prefix, TF_SOURCE_RESERVED, name) < 0 ? NULL : k;
}

static uint64_t miss_hash(const char *name)
{
	return tf_hash_str(name) | 1;	/* 0 marks a free slot */
}

/* Whether name was not there less than list_ttl ago. */
static bool missing(s3_source *s, const char *name)
{
	uint64_t h = miss_hash(name);
	bool m;

	pthread_mutex_lock(&s->mu);
	m = s->misses[h % MISS_SLOTS].h == h && tf_now_ns() - s->misses[h % MISS_SLOTS].at_ns < s->ttl_ns;
	pthread_mutex_unlock(&s->mu);
	return m;
}

static void set_missing(s3_source *s, const char *name, bool m)
{
	uint64_t h = miss_hash(name);

	pthread_mutex_lock(&s->mu);
	if (m)
		s->misses[h % MISS_SLOTS].h = h, s->misses[h % MISS_SLOTS].at_ns = tf_now_ns();
	else if (s->misses[h % MISS_SLOTS].h == h)
		s->misses[h % MISS_SLOTS].h = 0;
	pthread_mutex_unlock(&s->mu);
}

static tf_status s3_get_reserved(tf_source *base, const char *name, size_t max, char **out, size_t *n,
				 tf_error *err)
{
	s3_source *s = (s3_source *)base;
	s3_bound b = bound_of(s);
	char *key;
	tf_status rc;

	if (missing(s, name))
		return tf_err(err, TF_E_NOTFOUND, "%s: none (a moment ago)", name);
	if (!(key = reserved_key(s, name)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	rc = s3_client_get_whole(s->client, &b, key, max, out, n, err);
	free(key);
	if (rc == TF_E_NOTFOUND || rc == TF_E_ACCESS)	/* a refusal lasts as long */
		set_missing(s, name, true);
	return rc;
}

static tf_status s3_put_reserved(tf_source *base, const char *name, const void *p, size_t n, tf_error *err)
{
	s3_source *s = (s3_source *)base;
	s3_bound b = bound_of(s);
	char *key = reserved_key(s, name);
	tf_status rc = key ? s3_client_put(s->client, &b, key, p, n, err) : tf_err(err, TF_E_NOMEM, "out of memory");

	free(key);
	if (rc == TF_OK)
		set_missing(s, name, false);
	return rc;
}

static void s3_set_cache(tf_source *base, struct tf_cache *c)
{
	s3_source *s = (s3_source *)base;

	pthread_mutex_lock(&s->pmu);
	if (s->cache)
		tf_cache_charge(s->cache, -s->charged);
	s->cache = c;
	s->charged = c ? (ptrdiff_t)s->held : 0;
	if (c)
		tf_cache_charge(c, s->charged);
	stored_bound(s, c ? tf_cache_budget(c) / 2 : STORED_DEFAULT);
	make_room(s, 0);
	pthread_mutex_unlock(&s->pmu);
}

static void s3_stored_stats(tf_source *base, tf_source_stored *out)
{
	s3_source *s = (s3_source *)base;

	pthread_mutex_lock(&s->pmu);
	*out = (tf_source_stored){ .held = s->held, .bound = s->cap, .in_flight = s->inflight,
				   .queued = s->queued, .fetched = s->fetched, .served = s->served,
				   .evicted = s->evicted, .cancelled = s->cancelled };
	out->parts = nparts(s);
	pthread_mutex_unlock(&s->pmu);
}

static bool s3_disk_cache_text(tf_source *base, char *buf, size_t n)
{
	s3_source *s = (s3_source *)base;
	tf_disk_cache_stats d;
	int len;

	if (!s->disk)
		return false;
	tf_disk_cache_get_stats(s->disk, &d);
	len = snprintf(buf, n, "hits=%" PRIu64 " misses=%" PRIu64 " bad=%" PRIu64 " read_bytes=%" PRIu64
		       " written_bytes=%" PRIu64 " evictions=%" PRIu64 " skipped=%" PRIu64 " errors=%" PRIu64
		       " usage=%" PRIu64 " blocks=%" PRIu64 " max=%" PRIu64 " min_free=%" PRIu64 " scanned=%d",
		       d.hits, d.misses, d.bad, d.read_bytes, d.written_bytes, d.evictions, d.skipped, d.errors,
		       d.usage, d.blocks, d.max_bytes, d.min_free, d.scanned);
	return len > 0 && (size_t)len < n;
}

static const tf_source_ops s3_source_ops = {
	.kind = "s3", .free = s3_free, .stat = s3_stat, .list = s3_list, .readlink = NULL,
	.statfs = s3_statfs, .open = s3_open, .object_id = s3_object_id, .bucket_key = s3_bucket_key,
	.get_reserved = s3_get_reserved, .put_reserved = s3_put_reserved,
	.set_cache = s3_set_cache, .stored_stats = s3_stored_stats, .disk_cache_text = s3_disk_cache_text,
};

/* "s3://BUCKET[/PREFIX]" -> bucket and "PREFIX/" ("" for none). */
static tf_status parse_spec(const char *spec, char **bucket, char **prefix, tf_error *err)
{
	const char *b = spec + 5, *slash = strchr(b, '/');
	size_t blen = slash ? (size_t)(slash - b) : strlen(b);
	const char *p = slash ? slash + 1 : "";
	size_t plen = strlen(p);

	while (plen && p[plen - 1] == '/')
		plen--;
	*bucket = *prefix = NULL;
	if (!blen || blen > 255 || strspn(b, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") < blen)
		return tf_err(err, TF_E_INVAL, "%s: not s3://BUCKET[/PREFIX] (a bucket is letters, digits, "
			      "'.', '-' and '_')", spec);
	*bucket = strndup(b, blen);
	*prefix = NULL;
	if (plen && asprintf(prefix, "%.*s/", (int)plen, p) < 0)
		*prefix = NULL;
	else if (!plen)
		*prefix = strdup("");
	if (!*bucket || !*prefix) {
		free(*bucket), free(*prefix);
		*bucket = *prefix = NULL;
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	/* No empty, "." or ".." component: the prefix is a path. */
	if (plen && (strstr(*prefix, "//") || !strcmp(*prefix, "./") || !strncmp(*prefix, "../", 3) ||
		     strstr(*prefix, "/./") || strstr(*prefix, "/../") || !strncmp(*prefix, "./", 2) ||
		     (*prefix)[0] == '/')) {
		free(*bucket), free(*prefix);
		*bucket = *prefix = NULL;
		return tf_err(err, TF_E_INVAL, "%s: the prefix has an empty, '.' or '..' component", spec);
	}
	return TF_OK;
}

/* One small listing: the bucket answers and takes our signature, and the
 * prefix holds something. */
static tf_status probe(s3_source *s, tf_error *err)
{
	s3_list_page pg;
	s3_bound b = bound_of(s);
	tf_status rc = s3_client_list(s->client, &b, s->prefix, NULL, 1, false, &pg, err);
	bool empty = rc == TF_OK && !pg.nobjects && !pg.nprefixes;

	if (rc == TF_OK)
		s3_list_page_free(&pg);
	if (empty && *s->prefix)
		return tf_err(err, TF_E_NOTFOUND, "%s: nothing under prefix '%s'", s3_client_where(s->client),
			      s->prefix);
	return rc;
}

static tf_status s3_new(const char *spec, const tf_s3_settings *set, s3_source **out, tf_error *err)
{
	s3_source *s = calloc(1, sizeof(*s));
	pthread_condattr_t ca;
	char *bucket = NULL;
	tf_status rc;

	if (!s || !(s->base.name = strdup(spec))) {
		free(s);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	s->base.ops = &s3_source_ops;
	s->base.local_fd = -1;
	s->base.in_flight = set->max_requests;
	s->ttl_ns = (int64_t)set->list_ttl * 1000000000;
	s->deadline_ns = (int64_t)set->deadline_ms * 1000000;
	s->list_max_pages = set->list_max_pages;
	s->list_max_bytes = set->list_max_bytes < UINT32_MAX ? set->list_max_bytes : UINT32_MAX;
	s->uid = (uint32_t)getuid(), s->gid = (uint32_t)getgid();
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->pmu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);	/* waits end at a monotonic deadline */
	pthread_cond_init(&s->pcv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&s->fcv, NULL);
	s->max_fetchers = set->max_requests ? set->max_requests : 1;
	if (tf_lru_new(HASH_BUCKETS, &s->listings, NULL) != TF_OK || tf_lru_new(1, &s->parts, NULL) != TF_OK ||
	    !(s->fetchers = calloc(s->max_fetchers, sizeof(*s->fetchers)))) {
		s3_free(&s->base);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	stored_bound(s, STORED_DEFAULT);
	rc = parse_spec(spec, &bucket, &s->prefix, err);
	if (rc == TF_OK)
		rc = s3_client_new(set, bucket, &s->client, err);
	if (rc == TF_OK)
		s3_client_set_warn(s->client, client_warn, s);
	if (rc == TF_OK && set->cache_dir &&
	    tf_disk_cache_open(set->cache_dir, set->cache_dir_size, set->cache_dir_min_free, &s->disk, err) != TF_OK)
		rc = err ? (err->code = TF_E_INVAL) : TF_E_INVAL;	/* a configuration error, whatever the directory's */
	free(bucket);
	if (rc != TF_OK) {
		s3_free(&s->base);
		return rc;
	}
	*out = s;
	return TF_OK;
}

tf_status tf_source_s3(const char *spec, const struct tf_s3_settings *s3, tf_source **out, tf_error *err)
{
	tf_s3_settings set;
	s3_source *s = NULL;
	tf_status rc;

	*out = NULL;
	if (s3)
		rc = tf_s3_settings_copy(&set, s3, err);
	else
		tf_s3_settings_init(&set), rc = TF_OK;
	if (rc == TF_OK)
		rc = tf_s3_settings_resolve(&set, err);
	if (rc == TF_OK)
		rc = s3_new(spec, &set, &s, err);
	tf_s3_settings_clear(&set);
	if (rc == TF_OK && (rc = probe(s, err)) != TF_OK) {
		s3_free(&s->base);
		return rc;
	}
	if (rc == TF_OK)
		*out = &s->base;
	return rc;
}
