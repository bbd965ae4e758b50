/*
 * source_s3.c - an S3-compatible bucket (or a prefix of one) as a source.
 *
 * Names.  Source path "a/b" is key PREFIX "a/b"; directory "a" is every key
 * under "PREFIX a/", listed with ListObjectsV2 and delimiter '/' (common
 * prefixes are the subdirectories).  Keys that cannot be a path component
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
 * Reads.  A read of RA_DIRECT bytes or more is fetched as it is, in up to
 * PARTS_MAX ranged GETs in parallel.  Smaller reads are where per-request
 * cost hurts: a reader going forward (each read starting within SEQ_GAP
 * of where the last ended, as chunk after chunk of a tile does) gets a
 * read-ahead block instead, 1 MiB at first and doubling up to 16 MiB, and
 * the next block is fetched in the background once the reader is half way
 * through the current one.  A reader jumping about gets exactly the bytes
 * it asked for, and so does every read of an object advised
 * TF_ACCESS_PLANNED (a tf_handle, which reads ahead itself in runs from
 * several workers: blocks of ours would overlap their ranges and fetch
 * those bytes twice).  Read-ahead memory is at most RA_SLOTS blocks per object
 * and RA_BUDGET per source; a block that failed to load is never served:
 * the reader fetches its range itself and gets that error if it persists.
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
#include "tf_s3.h"

#define LIST_PAGE 1000
#define CACHE_LISTINGS 4096
#define CACHE_BYTES ((size_t)64 << 20)
#define HASH_BUCKETS 1024

#define RA_DIRECT ((size_t)1 << 20)
#define RA_FIRST ((size_t)1 << 20)
#define RA_MAX ((size_t)16 << 20)
#define RA_SLOTS 3
#define RA_BUDGET ((int64_t)256 << 20)
#define SEQ_GAP ((uint64_t)256 << 10)
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
	bool immutable, cached;
	unsigned refs;
	struct listing *prev, *next;	/* LRU: head is the most recent */
	struct listing *hnext;
} listing;

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
	listing *hash[HASH_BUCKETS];
	listing *head, *tail;
	size_t nlist, bytes;
	_Atomic int64_t ra_bytes;
	atomic_bool told;		/* where the credentials come from, logged */
	char *early;			/* the client's first line before the hooks were set */
	tf_disk_cache *disk;		/* cache_dir's blocks, or NULL */
	struct { uint64_t h; int64_t at_ns; } misses[MISS_SLOTS];	/* reserved names not there (mu) */
} s3_source;

typedef enum { B_LOADING, B_READY, B_FAILED } block_state;

typedef struct ra_block {
	uint64_t off;
	size_t len;
	uint8_t *data;
	block_state state;
	uint64_t used;			/* the object's tick when last read */
} ra_block;

typedef struct s3_object {
	tf_object base;
	s3_source *src;
	char *key;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	ra_block *blocks[RA_SLOTS];
	uint64_t seq_end, tick;		/* where the last read ended */
	bool streaming;
	bool planned;			/* TF_ACCESS_PLANNED: no read-ahead */
	size_t window;
	unsigned jobs;			/* background loads running */
	_Atomic int64_t mtime_ns;	/* the Last-Modified of every answer (0 until one) */
	pthread_mutex_t pin_mu;		/* the first answer, which pins mtime_ns: */
	pthread_cond_t pin_cv;
	_Atomic int pin;		/* PIN_NONE, PIN_BUSY (one GET awaits it), PIN_DONE */
} s3_object;

enum { PIN_NONE, PIN_BUSY, PIN_DONE };

static const tf_object_ops s3_object_ops;

static int64_t now_ns(void)
{
	return s3_now_ns();
}

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
	return (s3_bound){ now_ns() + s->deadline_ns, NULL, NULL };
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

static uint64_t hash_token(const char *t)
{
	uint64_t h = 14695981039346656037ull;

	for (; *t; t++)
		h = (h ^ (unsigned char)*t) * 1099511628211ull;
	return h;
}

/* Whether the store's page pg leads on: a token never followed before,
 * and (when it has names) a greatest name past the page before's, as
 * pages in key order do.  A store looping or standing still is an error. */
static tf_status page_advances(builder *bd, const s3_list_page *pg, unsigned page, tf_error *err)
{
	const char *max = NULL;
	uint64_t h = pg->truncated ? hash_token(pg->next_token) : 0;
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

/* List directory rel from the store, every page, within b and the bounds
 * on pages and bytes. */
static tf_status fetch_listing(s3_source *s, const s3_bound *b, const char *rel, listing **out, tf_error *err)
{
	char *prefix = key_of(s, rel, true), *token = NULL;
	builder bd = { .s = s, .l = calloc(1, sizeof(listing)), .prefix = prefix };
	s3_list_page pg = { 0 };
	tf_status rc = bd.l && prefix && (bd.l->rel = strdup(rel)) ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");

	bd.plen = prefix ? strlen(prefix) : 0;
	if (rc == TF_OK && (rc = reserve(&bd, 1, err)) == TF_OK)
		add_text(bd.l, "", 0);	/* "" at 0: every directory's ETag */
	for (unsigned page = 0; rc == TF_OK; page++) {
		if (page == s->list_max_pages) {
			rc = tf_err(err, TF_E_IO, "%s list '%s': more than %u pages (list_max_pages)",
				    s3_client_where(s->client), prefix, s->list_max_pages);
			break;
		}
		if ((rc = s3_client_list(s->client, b, prefix, token, LIST_PAGE, &pg, err)) != TF_OK ||
		    (rc = page_advances(&bd, &pg, page, err)) != TF_OK || (rc = add_page(&bd, &pg, err)) != TF_OK)
			break;
		free(token);
		token = pg.truncated ? pg.next_token : NULL;
		pg.next_token = NULL;
		s3_list_page_free(&pg);
		if (!token)
			break;
	}
	s3_list_page_free(&pg);
	if (rc == TF_OK && bd.nskipped)
		tf_source_warn(&s->base, "%s list '%s': %zu key%s skipped, no file name here: %s%s%s%s%s%s",
			       s3_client_where(s->client), prefix, bd.nskipped, bd.nskipped > 1 ? "s" : "",
			       bd.skipped[0], bd.nskipped > 1 ? ", " : "", bd.nskipped > 1 ? bd.skipped[1] : "",
			       bd.nskipped > 2 ? ", " : "", bd.nskipped > 2 ? bd.skipped[2] : "",
			       bd.nskipped > 3 ? ", ..." : "");
	free(token), free(prefix), free(bd.tokens), free(bd.last);
	if (rc != TF_OK) {
		listing_free(bd.l);
		return rc;
	}
	listing_finish(bd.l);
	bd.l->at_ns = now_ns();
	*out = bd.l;
	return TF_OK;
}

/* ---- the listing cache (s->mu held) ------------------------------------------------------ */

static unsigned hash_rel(const char *rel)
{
	unsigned h = 2166136261u;

	for (; *rel; rel++)
		h = (h ^ (unsigned char)*rel) * 16777619u;
	return h % HASH_BUCKETS;
}

static void lru_unlink(s3_source *s, listing *l)
{
	*(l->prev ? &l->prev->next : &s->head) = l->next;
	*(l->next ? &l->next->prev : &s->tail) = l->prev;
	l->prev = l->next = NULL;
}

static void lru_push(s3_source *s, listing *l)
{
	l->prev = NULL;
	l->next = s->head;
	*(s->head ? &s->head->prev : &s->tail) = l;
	s->head = l;
}

/* Take l out of the cache; freed now or by its last user. */
static void cache_drop(s3_source *s, listing *l)
{
	listing **p = &s->hash[hash_rel(l->rel)];

	while (*p != l)
		p = &(*p)->hnext;
	*p = l->hnext;
	lru_unlink(s, l);
	s->nlist--;
	s->bytes -= l->bytes;
	l->cached = false;
	if (!l->refs)
		listing_free(l);
}

static listing *cache_find(s3_source *s, const char *rel)
{
	for (listing *l = s->hash[hash_rel(rel)]; l; l = l->hnext)
		if (!strcmp(l->rel, rel))
			return l;
	return NULL;
}

static bool fresh(const s3_source *s, const listing *l)
{
	return l->immutable || now_ns() - l->at_ns < s->ttl_ns;
}

static void cache_insert(s3_source *s, listing *l)
{
	listing *old = cache_find(s, l->rel);

	if (old)
		cache_drop(s, old);
	if (l->bytes > CACHE_BYTES / 4 || (s->ttl_ns == 0 && !l->immutable))
		return;		/* served once, not kept */
	while (s->tail && (s->nlist >= CACHE_LISTINGS || s->bytes + l->bytes > CACHE_BYTES))
		cache_drop(s, s->tail);
	l->hnext = s->hash[hash_rel(l->rel)];
	s->hash[hash_rel(l->rel)] = l;
	lru_push(s, l);
	s->nlist++;
	s->bytes += l->bytes;
	l->cached = true;
}

/* ---- using listings ------------------------------------------------------------------------ */

/* Directory rel's listing, referenced (listing_put when done). */
static tf_status listing_get(s3_source *s, const s3_bound *b, const char *rel, listing **out, tf_error *err)
{
	listing *l;
	tf_status rc;

	pthread_mutex_lock(&s->mu);
	if ((l = cache_find(s, rel)) && fresh(s, l)) {
		lru_unlink(s, l);
		lru_push(s, l);
		l->refs++;
		pthread_mutex_unlock(&s->mu);
		*out = l;
		return TF_OK;
	}
	pthread_mutex_unlock(&s->mu);
	if ((rc = fetch_listing(s, b, rel, &l, err)) != TF_OK)
		return rc;
	pthread_mutex_lock(&s->mu);
	cache_insert(s, l);
	l->refs++;
	pthread_mutex_unlock(&s->mu);
	*out = l;
	return TF_OK;
}

static void listing_put(s3_source *s, listing *l)
{
	pthread_mutex_lock(&s->mu);
	if (--l->refs == 0 && !l->cached)
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
	if (!(o = calloc(1, sizeof(*o))) || !(o->base.name = strdup(rel)) || !(o->key = key_of(s, rel, false))) {
		if (o)
			free(o->base.name), free(o->key);
		free(o);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	o->base.ops = &s3_object_ops;
	o->base.st = st;
	/* Callers that can choose read RA_MAX at a time: four PART_MIN GETs
	 * in parallel, where one 64 KiB chunk per request would cost a round
	 * trip each. */
	o->base.io_size = RA_MAX;
	o->src = s;
	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cv, NULL);
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
		int64_t until = now_ns() + 200000000;
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

/* ---- read-ahead blocks (o->mu held unless said) ------------------------------------------- */

static ra_block *block_at(s3_object *o, uint64_t off)
{
	for (int i = 0; i < RA_SLOTS; i++) {
		ra_block *b = o->blocks[i];
		if (b && off >= b->off && off - b->off < b->len)
			return b;
	}
	return NULL;
}

static void block_free(s3_object *o, int i)
{
	atomic_fetch_sub(&o->src->ra_bytes, (int64_t)o->blocks[i]->len);
	free(o->blocks[i]->data);
	free(o->blocks[i]);
	o->blocks[i] = NULL;
}

/* A new loading block for [off, off+len), or NULL when no slot or memory
 * is free (the caller then reads without read-ahead). */
static ra_block *block_new(s3_object *o, uint64_t off, size_t len)
{
	int slot = -1;
	ra_block *b;

	for (int i = 0; i < RA_SLOTS && slot < 0; i++)
		if (!o->blocks[i])
			slot = i;
	/* All taken: the least recently read block that is not loading. */
	for (int i = 0; i < RA_SLOTS && !(slot >= 0 && !o->blocks[slot]); i++)
		if (o->blocks[i]->state != B_LOADING && (slot < 0 || o->blocks[i]->used < o->blocks[slot]->used))
			slot = i;
	if (slot < 0)
		return NULL;
	if (o->blocks[slot])
		block_free(o, slot);
	if (atomic_fetch_add(&o->src->ra_bytes, (int64_t)len) + (int64_t)len > RA_BUDGET) {
		atomic_fetch_sub(&o->src->ra_bytes, (int64_t)len);
		return NULL;
	}
	if (!(b = calloc(1, sizeof(*b))) || !(b->data = malloc(len))) {
		free(b);
		atomic_fetch_sub(&o->src->ra_bytes, (int64_t)len);
		return NULL;
	}
	b->off = off, b->len = len, b->state = B_LOADING, b->used = ++o->tick;
	o->blocks[slot] = b;
	return b;
}

/* Load blk within b (o->mu not held: blk is LOADING, so nobody else
 * touches its data). */
static tf_status block_load(s3_object *o, const s3_bound *b, ra_block *blk, tf_error *err)
{
	tf_status rc = fetch(o, b, blk->off, blk->data, blk->len, err);

	pthread_mutex_lock(&o->mu);
	blk->state = rc == TF_OK ? B_READY : B_FAILED;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
	return rc;
}

typedef struct bg_job {
	s3_object *o;
	ra_block *b;
} bg_job;

static void *bg_main(void *arg)
{
	bg_job *j = arg;
	s3_object *o = j->o;
	s3_bound b = bound_now(o->src);

	block_load(o, &b, j->b, NULL);
	free(j);
	pthread_mutex_lock(&o->mu);
	o->jobs--;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

/* Load [off, off+len) in the background (o->mu held). */
static void start_bg(s3_object *o, uint64_t off, uint64_t len)
{
	uint64_t size = o->base.st.v.size;
	bg_job *j;
	pthread_t th;
	pthread_attr_t attr;
	ra_block *b;

	len = len < size - off ? len : size - off;
	if (o->jobs || !len || block_at(o, off) || !(b = block_new(o, off, (size_t)len)))
		return;
	if (!(j = malloc(sizeof(*j)))) {
		b->state = B_FAILED;
		return;
	}
	*j = (bg_job){ o, b };
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &attr, bg_main, j) == 0) {
		o->jobs++;
	} else {
		free(j);
		b->state = B_FAILED;
	}
	pthread_attr_destroy(&attr);
}

/* ---- reading ----------------------------------------------------------------------------------- */

/* Whether a read at off continues the last one (o->mu held). */
static bool continues(const s3_object *o, uint64_t off)
{
	if (!o->tick && off == 0)
		return true;	/* a first read from the start */
	return o->tick && off + SEQ_GAP >= o->seq_end && off <= o->seq_end + SEQ_GAP;
}

/* Served from b what it holds of [*off, *off+*len); fetch the next block
 * in the background once the reader is half way through (o->mu held). */
static void take_from(s3_object *o, ra_block *b, uint64_t *off, uint8_t **dst, size_t *len)
{
	size_t n = b->len - (size_t)(*off - b->off);

	n = n < *len ? n : *len;
	memcpy(*dst, b->data + (*off - b->off), n);
	*off += n, *dst += n, *len -= n;
	b->used = ++o->tick;
	o->seq_end = *off;
	if (o->streaming && *off >= b->off + b->len / 2 && b->off + b->len < o->base.st.v.size)
		start_bg(o, b->off + b->len, o->window);
}

/* Forget block b (failed: never served). */
static void block_drop(s3_object *o, ra_block *b)
{
	for (int i = 0; i < RA_SLOTS; i++)
		if (o->blocks[i] == b)
			block_free(o, i);
}

/*
 * One step of a small read: serve from a block, or load one, or say the
 * rest is to be fetched directly (*direct).  A block this reader loaded
 * and that failed is its error (another attempt would only repeat those
 * the load made).  o->mu held.
 */
static tf_status read_step(s3_object *o, const s3_bound *bd, uint64_t *off, uint8_t **dst, size_t *len,
			   bool *direct, tf_error *err)
{
	uint64_t size = o->base.st.v.size;
	ra_block *b;
	tf_status rc;

	while ((b = block_at(o, *off)) && b->state == B_LOADING)
		pthread_cond_wait(&o->cv, &o->mu);
	if (b && b->state == B_READY) {
		take_from(o, b, off, dst, len);
		return TF_OK;
	}
	if (b)	/* failed: dropped, and this reader asks for itself */
		block_drop(o, b);
	if (b || !continues(o, *off)) {	/* a failed block, or a jump */
		o->streaming = false;
		o->window = 0;
		*direct = true;
		return TF_OK;
	}
	o->window = !o->streaming || !o->window ? RA_FIRST : o->window * 2 > RA_MAX ? RA_MAX : o->window * 2;
	o->streaming = true;
	size_t want = o->window > *len ? o->window : *len;
	want = want < size - *off ? want : (size_t)(size - *off);
	if (!(b = block_new(o, *off, want))) {
		*direct = true;
		return TF_OK;
	}
	pthread_mutex_unlock(&o->mu);
	rc = block_load(o, bd, b, err);	/* retakes and drops the lock */
	pthread_mutex_lock(&o->mu);
	if (rc != TF_OK) {	/* b stays, failed, for whoever finds it (it may be gone already) */
		o->streaming = false;
		o->window = 0;
	}
	return rc;
}

static tf_status s3_read(tf_object *base, uint64_t off, void *dst, size_t len, tf_error *err)
{
	s3_object *o = (s3_object *)base;
	s3_bound b = bound_of(o->src);
	uint8_t *p = dst;
	bool direct;
	tf_status rc = TF_OK;

	pthread_mutex_lock(&o->mu);
	direct = o->planned || len >= RA_DIRECT;
	while (len && !direct && rc == TF_OK)
		rc = read_step(o, &b, &off, &p, &len, &direct, err);
	if (rc != TF_OK) {
		pthread_mutex_unlock(&o->mu);
		return rc;
	}
	if (direct) {	/* the reader's own GETs: whatever happens, no block is served */
		o->tick++;
		o->seq_end = off + len;
	}
	pthread_mutex_unlock(&o->mu);
	return len ? fetch(o, &b, off, p, len, err) : TF_OK;
}

static void s3_prefetch(tf_object *base, uint64_t off, uint64_t len)
{
	s3_object *o = (s3_object *)base;

	pthread_mutex_lock(&o->mu);
	if (!o->planned)	/* blocks are never served to a planned reader */
		start_bg(o, off, len < RA_MAX ? len : RA_MAX);
	pthread_mutex_unlock(&o->mu);
}

static bool s3_advise(tf_object *base, tf_access how)
{
	s3_object *o = (s3_object *)base;

	if (how != TF_ACCESS_PLANNED)
		return false;	/* headers: a round trip each, so large runs stay */
	pthread_mutex_lock(&o->mu);
	o->planned = true;
	for (int i = 0; i < RA_SLOTS; i++)	/* never served again: free them */
		if (o->blocks[i] && o->blocks[i]->state != B_LOADING)
			block_free(o, i);
	pthread_mutex_unlock(&o->mu);
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

static void s3_close(tf_object *base)
{
	s3_object *o = (s3_object *)base;

	pthread_mutex_lock(&o->mu);
	while (o->jobs)
		pthread_cond_wait(&o->cv, &o->mu);
	for (int i = 0; i < RA_SLOTS; i++)
		if (o->blocks[i])
			block_free(o, i);
	pthread_mutex_unlock(&o->mu);
	pthread_mutex_destroy(&o->mu);
	pthread_mutex_destroy(&o->pin_mu);
	pthread_cond_destroy(&o->pin_cv);
	pthread_cond_destroy(&o->cv);
	free(o->key), free(o->base.name);
	free(o);
}

static const tf_object_ops s3_object_ops = {
	.close = s3_close, .read = s3_read, .prefetch = s3_prefetch, .check = s3_check,
	.advise = s3_advise,
};

/* ---- the source ------------------------------------------------------------------------------ */

static void s3_free(tf_source *base)
{
	s3_source *s = (s3_source *)base;

	while (s->head)
		cache_drop(s, s->head);
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
	return hash_token(name) | 1;	/* 0 marks a free slot */
}

/* Whether name was not there less than list_ttl ago. */
static bool missing(s3_source *s, const char *name)
{
	uint64_t h = miss_hash(name);
	bool m;

	pthread_mutex_lock(&s->mu);
	m = s->misses[h % MISS_SLOTS].h == h && now_ns() - s->misses[h % MISS_SLOTS].at_ns < s->ttl_ns;
	pthread_mutex_unlock(&s->mu);
	return m;
}

static void set_missing(s3_source *s, const char *name, bool m)
{
	uint64_t h = miss_hash(name);

	pthread_mutex_lock(&s->mu);
	if (m)
		s->misses[h % MISS_SLOTS].h = h, s->misses[h % MISS_SLOTS].at_ns = now_ns();
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
	.disk_cache_text = s3_disk_cache_text,
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
	tf_status rc = s3_client_list(s->client, &b, s->prefix, NULL, 1, &pg, err);
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
	char *bucket = NULL;
	tf_status rc;

	if (!s || !(s->base.name = strdup(spec))) {
		free(s);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	s->base.ops = &s3_source_ops;
	s->base.local_fd = -1;
	s->ttl_ns = (int64_t)set->list_ttl * 1000000000;
	s->deadline_ns = (int64_t)set->deadline_ms * 1000000;
	s->list_max_pages = set->list_max_pages;
	s->list_max_bytes = set->list_max_bytes < UINT32_MAX ? set->list_max_bytes : UINT32_MAX;
	s->uid = (uint32_t)getuid(), s->gid = (uint32_t)getgid();
	pthread_mutex_init(&s->mu, NULL);
	atomic_init(&s->ra_bytes, 0);
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
