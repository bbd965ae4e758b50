/*
 * source_s3.c - an S3-compatible bucket (or a prefix of one) as a source:
 * its operations (stat, list, open, the reserved prefix) and its life.
 *
 * Names.  Source path "a/b" is key PREFIX "a/b"; directory "a" is every key
 * under "PREFIX a/", listed with ListObjectsV2 and delimiter '/' (common
 * prefixes are the subdirectories); but a directory named "__*" (TileDB's
 * __fragments, __commits, __schema) is listed whole, without a delimiter,
 * and the listing of every directory beneath it is made from those keys
 * and cached (see "Listing a subtree whole" in source_s3_list.c); so is its parent when
 * that is an array's directory (its subdirectories all "__*"), and a
 * directory such a listing does not name is empty without a LIST.  Keys
 * that cannot be a path component (".", "..", "a//b", a NUL, a '/' or a
 * bad escape once decoded, over 255 bytes) are not shown, and the listing warns once (tf_source_warn),
 * naming the first few; a folder marker ("dir/" itself) is not shown
 * either, silently.  Where a key and a prefix share a name, the directory
 * wins.  Files are 0444, directories 0555, both owned by the user who
 * opened the source.  There are no symlinks.
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
 * Files.  The source is five files, with their types and shared functions
 * in source_s3_int.h (included by those five alone), each using only the
 * ones named after it: this one; source_s3_read.c, stored bytes: GETs,
 * the disk cache, parts, fetch-ahead and reads; source_s3_cache.c, the
 * listing cache and what stat, list and open see through it;
 * source_s3_list.c, listings made from ListObjectsV2 pages, of one
 * directory or of a subtree whole; source_s3_names.c, a request's bound,
 * keys, names and the stat of an object.
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

#include "sources/source_s3_int.h"
#include "cache/tf_cache.h"
#include "config/tf_s3.h"

#define HASH_BUCKETS 1024		/* to start: the table doubles */

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

/* ---- names -------------------------------------------------------------------------------- */

/* Whether rel goes through the reserved prefix (a ".tilefs" component). */
static bool reserved_rel(const char *rel)
{
	size_t n = strlen(TF_SOURCE_RESERVED);

	for (const char *c = rel; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
		if (!strncmp(c, TF_SOURCE_RESERVED, n) && (c[n] == '/' || !c[n]))
			return true;
	return false;
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
		*st = s3_dir_stat(s);
		return TF_OK;
	}
	if (!s3_split_rel(rel, parent, sizeof(parent), &name))
		return tf_err(err, TF_E_INVAL, "%s: name too long", rel);
	if ((rc = s3_listing_get(s, b, parent, &l, err)) != TF_OK)
		return rc;
	if ((d = s3_listing_lookup(l, name)))
		*st = s3_dent_stat(s, l, d);
	s3_listing_put(s, l);
	if (!d)	/* a directory gone (a fragment vacuumed) may have left its listing behind */
		s3_forget_listing(s, rel);
	return d ? TF_OK : tf_err(err, TF_E_NOTFOUND, "%s: no such file or directory", rel);
}

static tf_status s3_stat(tf_source *base, const char *rel, tf_stat *st, tf_error *err)
{
	s3_bound b = s3_bound_of((s3_source *)base);

	if (reserved_rel(rel))
		return tf_err(err, TF_E_NOTFOUND, "%s: no such file or directory", rel);

	return lookup((s3_source *)base, &b, rel, st, err);
}

static tf_status s3_list(tf_source *base, const char *rel, bool want_stat, tf_list_fn fn, void *ctx,
			 tf_error *err)
{
	s3_source *s = (s3_source *)base;
	s3_bound b = s3_bound_of(s);
	listing *l;
	tf_stat st;
	tf_status rc;

	(void)want_stat;	/* sizes come with the listing: always full */
	if (reserved_rel(rel))
		return tf_err(err, TF_E_NOTFOUND, "%s: no such file or directory", rel);
	if ((rc = s3_listing_get(s, &b, rel, &l, err)) != TF_OK)
		return rc;
	/* An empty prefix is no directory, unless it is the top. */
	if (!l->n && strcmp(rel, ".")) {
		s3_listing_put(s, l);
		rc = lookup(s, &b, rel, &st, err);
		return rc != TF_OK ? rc : st.kind == TF_ENT_DIR ? TF_OK
		       : tf_err(err, TF_E_INVAL, "%s: not a directory", rel);
	}
	for (size_t i = 0; i < l->n; i++) {
		st = s3_dent_stat(s, l, &l->ents[i]);
		if (fn(ctx, l->text + l->ents[i].name, &st))
			break;
	}
	s3_listing_put(s, l);
	return TF_OK;
}

static tf_status s3_statfs(tf_source *base, tf_source_fsstat *out, tf_error *err)
{
	(void)base, (void)err;
	*out = (tf_source_fsstat){ .bsize = 4096, .namemax = 255 };
	return TF_OK;
}

/* The version rel is now: cached if fresh, else asked; checked against expect. */
static tf_status current_stat(s3_source *s, const s3_bound *b, const char *rel, const tf_version *expect,
			      tf_stat *st, tf_error *err)
{
	bool cached = s3_peek(s, rel, st);
	tf_status rc;

	if (cached && st->kind != TF_ENT_REG)
		return tf_err(err, TF_E_INVAL, "%s: not a regular file", rel);
	/* A cached version unlike the one expected may be the stale one. */
	if (!cached || (expect && !s3_same_version(expect, &st->v))) {
		if ((rc = s3_head_stat(s, b, rel, st, err)) != TF_OK) {
			if (cached && rc == TF_E_NOTFOUND)
				s3_forget_parent(s, rel);
			return rc;
		}
	}
	if (expect && !s3_same_version(expect, &st->v)) {
		s3_forget_parent(s, rel);
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
	s3_bound b = s3_bound_of(s);
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
	if (!(o = calloc(1, sizeof(*o))) || !(o->base.name = strdup(rel)) || !(o->key = s3_key_of(s, rel, false)) ||
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
		s3_queue_remove(s, p);
		s3_part_free(s, p);
	}
	for (tf_lru_node *at; s->parts && (at = tf_lru_oldest(s->parts, 0));)
		s3_part_free(s, PART_OF(at));
	pthread_mutex_unlock(&s->pmu);
	free(s->fetchers);
	pthread_cond_destroy(&s->pcv);
	pthread_cond_destroy(&s->fcv);
	pthread_mutex_destroy(&s->pmu);
	for (tf_lru_node *at; s->listings && (at = tf_lru_oldest(s->listings, 0));)
		s3_cache_drop(s, LISTING_OF(at));
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
	s3_bound b = s3_bound_of(s);
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
	s3_bound b = s3_bound_of(s);
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
	s3_stored_bound(s, c ? tf_cache_budget(c) / 2 : STORED_DEFAULT);
	s3_make_room(s, 0);
	pthread_mutex_unlock(&s->pmu);
}

static void s3_stored_stats(tf_source *base, tf_source_stored *out)
{
	s3_source *s = (s3_source *)base;

	pthread_mutex_lock(&s->pmu);
	*out = (tf_source_stored){ .held = s->held, .bound = s->cap, .in_flight = s->inflight,
				   .queued = s->queued, .fetched = s->fetched, .served = s->served,
				   .evicted = s->evicted, .cancelled = s->cancelled, .aborted = s->aborted };
	out->parts = s3_nparts(s);
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

/*
 * One listing page of the top: the bucket answers and takes our signature,
 * and the prefix holds something.  It is the page the top's listing asks
 * first (source_s3_list.c's page of keys, delimiter '/'): when it is all of
 * the top, it is kept as its listing, so that the mount and its first
 * listing cost one round trip, not two.
 */
static tf_status probe(s3_source *s, tf_error *err)
{
	s3_list_page pg;
	s3_bound b = s3_bound_of(s);
	tf_status rc = s3_client_list(s->client, &b, s->prefix, NULL, S3_LIST_PAGE, false, &pg, err);
	bool empty = rc == TF_OK && !pg.nobjects && !pg.nprefixes;
	listing *top;

	if (rc != TF_OK)
		return rc;
	if (empty && *s->prefix)
		rc = tf_err(err, TF_E_NOTFOUND, "%s: nothing under prefix '%s'", s3_client_where(s->client),
			    s->prefix);
	else if ((top = s3_listing_of_page(s, ".", &pg)))
		s3_listing_offer(s, top);
	s3_list_page_free(&pg);
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
	atomic_init(&s->listed, LISTED_UNKNOWN);
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
	s3_stored_bound(s, STORED_DEFAULT);
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
