/*
 * source_s3_cache.c - the listing cache of an S3 source, and what stat,
 * list and open see through it (s3_listing_get: cached, known empty, or
 * fetched, alone or with its array's subtree).
 *
 * Listings are cached: sizes, ETags and mtimes come from them, so stat and
 * open cost no request of their own while a listing is fresh (list_ttl).
 * A TileDB fragment directory (one holding __fragment_metadata.tdb, which
 * TileDB writes last) never changes once written: its listing is kept until
 * the store says otherwise (a 404 or 412 for a file in it: vacuumed, its
 * directory's listing is dropped too), or a fresh listing of its directory
 * no longer holds it.  The cache holds at most CACHE_LISTINGS listings
 * and CACHE_BYTES of them, least recently used out first.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/source_s3_int.h"

#define CACHE_LISTINGS 4096
#define CACHE_BYTES ((size_t)64 << 20)

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
void s3_cache_drop(s3_source *s, listing *l)
{
	tf_lru_remove(s->listings, &l->node);
	s->bytes -= l->bytes;
	if (!l->node.refs)
		s3_listing_free(l);
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
		s3_cache_drop(s, old);
	if (l->bytes > CACHE_BYTES / 4 || (s->ttl_ns == 0 && !l->immutable))
		return;		/* served once, not kept */
	while ((tf_lru_count(s->listings) >= CACHE_LISTINGS || s->bytes + l->bytes > CACHE_BYTES) &&
	       (n = tf_lru_oldest(s->listings, 0)))
		s3_cache_drop(s, LISTING_OF(n));
	tf_lru_insert(s->listings, &l->node, tf_hash_str(l->rel));
	tf_lru_use(s->listings, &l->node, 0);
	s->bytes += l->bytes;
}

/* ---- using listings ------------------------------------------------------------------------ */

/*
 * Whether the directory parent, whose listing is cached and fresh, is a
 * TileDB array's: two subdirectories or more, every one named "__*"
 * (__fragments, __commits, __schema, ...).  Its "__*" subdirectories are
 * then listed in one go, its subtree whole (s3_listing_get): opening the array
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

/* Listings ls[0..n) into the cache but ls[skip], the last first (ls[0]
 * stays the most recent of them); those not kept freed.  s->mu held. */
static void cache_all(s3_source *s, listing **ls, size_t n, size_t skip)
{
	for (size_t i = n; i-- > 0;) {
		if (i == skip)
			continue;
		cache_insert(s, ls[i]);
		if (!ls[i]->node.keyed)
			s3_listing_free(ls[i]);
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
	empty = s3_split_rel(rel, parent, sizeof(parent), &name) && (p = cache_find(s, parent)) && p->whole &&
		fresh(s, p) && (!(d = s3_listing_lookup(p, name)) || !d->dir);
	pthread_mutex_unlock(&s->mu);
	if (!empty)
		return TF_OK;
	if (!(bd.l = calloc(1, sizeof(listing))) || !(bd.l->rel = strdup(rel))) {
		free(bd.l);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	if ((rc = s3_listing_reserve(&bd, 1, err)) != TF_OK) {
		s3_listing_free(bd.l);
		return rc;
	}
	s3_listing_text(bd.l, "", 0);
	s3_listing_finish(bd.l);
	bd.l->at_ns = tf_now_ns();
	bd.l->whole = true;
	*out = bd.l;
	return TF_OK;
}

/* The listings of rel's parent's subtree when that is an array's (array_dir)
 * and small enough (s3_fetch_tree), rel's own in *at; else none (*n 0): also
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
	up = s3_split_rel(rel, parent, sizeof(parent), &name) && array_dir(s, parent);
	pthread_mutex_unlock(&s->mu);
	if (!up)
		return TF_OK;
	if ((rc = s3_fetch_tree(s, b, parent, ls, n, NULL)) != TF_OK) {
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

/* Directory rel's listing, referenced (s3_listing_put when done). */
tf_status s3_listing_get(s3_source *s, const s3_bound *b, const char *rel, listing **out, tf_error *err)
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
	if (!l && s3_tree_worthy(rel) && (rc = fetch_array_tree(s, b, rel, &ls, &n, &at)) != TF_OK)
		return rc;
	if (!l && !n && s3_tree_worthy(rel) && (rc = known_empty(s, rel, &l, err)) != TF_OK)
		return rc;	/* the array's subtree, listed whole, has no rel */
	if (!l && s3_tree_worthy(rel) && !n && (rc = s3_fetch_tree(s, b, rel, &ls, &n, err)) != TF_OK)
		return rc;
	if (!l && !n && (rc = s3_fetch_listing(s, b, rel, &l, err)) != TF_OK)
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

/* A listing fetched on the way (the mount's probe gave the top's): into
 * the cache, as if listed (not kept: freed). */
void s3_listing_offer(s3_source *s, listing *l)
{
	pthread_mutex_lock(&s->mu);
	cache_insert(s, l);
	if (!l->node.keyed)
		s3_listing_free(l);
	pthread_mutex_unlock(&s->mu);
}

void s3_listing_put(s3_source *s, listing *l)
{
	pthread_mutex_lock(&s->mu);
	if (tf_lru_release(&l->node) && !l->node.keyed)
		s3_listing_free(l);
	pthread_mutex_unlock(&s->mu);
}

/* rel's parent directory ("." at the top) into buf, its last name into *name. */
bool s3_split_rel(const char *rel, char *buf, size_t n, const char **name)
{
	const char *slash = strrchr(rel, '/');

	*name = slash ? slash + 1 : rel;
	if (snprintf(buf, n, "%.*s", slash ? (int)(slash - rel) : 1, slash ? rel : ".") >= (int)n)
		return false;
	return true;
}

/*
 * Forget the listing of rel's directory: the store has just said rel is
 * not the version listed (HTTP 412, another ETag) or not there at all
 * (404).  A fragment directory's listing too, although such a directory
 * never changes: it may have been vacuumed whole, so its own directory's
 * listing goes as well, and the next lookup asks the store whether it is
 * still there (ENOENT, not EIO, for what vacuuming removed).
 */
void s3_forget_parent(s3_source *s, const char *rel)
{
	char parent[4096], up[4096];
	const char *name;
	listing *l;

	if (!s3_split_rel(rel, parent, sizeof(parent), &name))
		return;
	pthread_mutex_lock(&s->mu);
	if ((l = cache_find(s, parent))) {
		if (l->immutable && strcmp(parent, ".") && s3_split_rel(parent, up, sizeof(up), &name) &&
		    (l = cache_find(s, up)))
			s3_cache_drop(s, l);
		if ((l = cache_find(s, parent)))
			s3_cache_drop(s, l);
	}
	pthread_mutex_unlock(&s->mu);
}

/* Forget directory rel's own listing (its directory no longer lists it). */
void s3_forget_listing(s3_source *s, const char *rel)
{
	listing *l;

	pthread_mutex_lock(&s->mu);
	if ((l = cache_find(s, rel)))
		s3_cache_drop(s, l);
	pthread_mutex_unlock(&s->mu);
}

/* Whether a failure of rc says rel's listed version is gone. */
bool s3_gone_status(tf_status rc)
{
	return rc == TF_E_STALE || rc == TF_E_NOTFOUND;
}

/* rel's stat from a fresh cached listing, without asking the store. */
bool s3_peek(s3_source *s, const char *rel, tf_stat *st)
{
	char parent[4096];
	const char *name;
	const s3_dent *d = NULL;
	listing *l;

	if (!s3_split_rel(rel, parent, sizeof(parent), &name))
		return false;
	pthread_mutex_lock(&s->mu);
	if ((l = cache_find(s, parent)) && fresh(s, l) && (d = s3_listing_lookup(l, name)))
		*st = s3_dent_stat(s, l, d);
	pthread_mutex_unlock(&s->mu);
	return d != NULL;
}
