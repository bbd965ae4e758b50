/*
 * tf_snapshot.c - opening a snapshot: the fragments and delete conditions a
 * read sees and cells of their fields read through the cache; here its state
 * fingerprint, its life cycle and the enumerations it keeps.  Listing it:
 * tf_snapshot_list.c; its fragments' facts: tf_snapshot_facts.c; columns:
 * tf_snapshot_cols.c.
 *
 * Scale.  An array may hold hundreds of thousands of fragments (TileDB
 * writes one per write; 200,000 one-cell fragments is a test case).  So:
 *  - directory listings are kept as one arena of names each (a 58-byte
 *    fragment name costs 67 bytes, not a malloc'd string and a pointer),
 *    sorted once, and searched: commit and vacuum checks are O(log n) per
 *    fragment (they were linear: 200,000 fragments compared 4e10 names);
 *  - what a snapshot keeps per fragment is its name (in the listing), its
 *    tf_snap_frag (about 150 bytes with its facts) and a state byte; the
 *    metadata is read on demand (tf_snapshot_load) and given back to the
 *    array, which keeps 1,024 idle fragments: 200,000 fragments' metadata
 *    held by a snapshot was 700 MB;
 *  - columns (open files) are per fragment, held by readers while in use;
 *    of the idle ones TF_SNAPSHOT_IDLE_COLS keep their files open, older
 *    ones close them but keep their indexes (so their decoded units stay
 *    theirs in the cache: 300 fragments of 4 fields are 1,200 columns, read
 *    in turn), and beyond a 32nd of the budget of indexes they go,
 *    least recently used first.  One open column per (fragment, field) for
 *    the snapshot's life was 800,000 open files and their indexes.
 *  - whether the array changed (tf_snapshot_current, asked each second a
 *    view is looked up) hashes the listings as they stream by: nothing is
 *    kept.
 */
#include "config.h"

#include "views/tf_snapshot_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the state fingerprint ----------------------------------------------------------------- */

/* Order-independent: listings come in directory order. */
static uint64_t name_hash(const char *name)
{
	uint64_t x = 1469598103934665603ull;

	for (const char *c = name; *c; c++)
		x = (x ^ (uint8_t)*c) * 1099511628211ull;
	return x * 0x9e3779b97f4a7c15ull ^ (x >> 29);
}

typedef struct dir_hash {
	uint64_t sum, n;
} dir_hash;

static int hash_one(void *ctx, const char *name, bool is_dir)
{
	dir_hash *h = ctx;

	(void)is_dir;
	h->sum += name_hash(name);
	h->n++;
	return 0;
}

static uint64_t mix(uint64_t h, const dir_hash *d)
{
	return (h ^ d->sum ^ d->n) * 1099511628211ull;
}

static void hash_names(dir_hash *d, const names *l)
{
	for (size_t i = 0; i < l->n; i++)
		hash_one(d, snap_name_at(l, i), false);
}

/* The hash of the array's directories, listing them as they are now;
 * root, fdir and cdir (when given) keep their listings. */
static tf_status fingerprint(tf_array *a, uint64_t *out, names *root, names *fdir, names *cdir,
			     tf_error *err)
{
	static const char *const dirs[] = { ".", "__fragments", "__commits", "__schema",
					    "__schema/__enumerations" };
	names *keep[] = { root, fdir, cdir, NULL, NULL };
	uint64_t h = 0;
	tf_status rc = TF_OK;

	for (size_t i = 0; i < 5 && rc == TF_OK; i++) {
		dir_hash d = { 0, 0 };

		if (keep[i] && (rc = snap_list_dir(a, dirs[i], keep[i], err)) == TF_OK)
			hash_names(&d, keep[i]);
		else if (!keep[i])
			rc = tf_array_list(a, dirs[i], hash_one, &d, err);
		h = mix(h, &d);
	}
	*out = h;
	return rc;
}

bool tf_snapshot_current(tf_snapshot *s)
{
	uint64_t now;

	return fingerprint(s->a, &now, NULL, NULL, NULL, NULL) == TF_OK && now == s->fingerprint;
}

/* ---- life cycle ------------------------------------------------------------------------------ */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int cmp_delete(const void *pa, const void *pb)
{
	const tf_snap_delete *a = pa, *b = pb;

	return a->t != b->t ? (a->t < b->t ? -1 : 1) : strcmp(a->marker, b->marker);
}

static tf_status snapshot_fill(tf_snapshot *s, tf_error *err)
{
	names cdir = { 0 };
	commits c = { 0 };
	tf_status rc;

	if ((rc = fingerprint(s->a, &s->fingerprint, &s->root, &s->fdir, &cdir, err)) == TF_OK)
		snap_names_fit(&s->root), snap_names_fit(&s->fdir);
	if (rc == TF_OK && (rc = tf_array_latest_schema(s->a, &s->schema, NULL, err)) == TF_OK &&
	    (rc = snap_read_commits(s, &cdir, &s->root, &c, err)) == TF_OK &&
	    (rc = snap_list_fragments(s, err)) == TF_OK)
		rc = snap_choose_visible(s, &c, &cdir, err);
	if (rc == TF_OK && s->ndels)
		qsort(s->dels, s->ndels, sizeof(*s->dels), cmp_delete);
	/* The listings' names stay (fragments point into them), their index
	 * goes: 8 bytes a fragment. */
	free(s->root.off), free(s->fdir.off);
	s->root.off = s->fdir.off = NULL;
	s->root.n = s->fdir.n = s->root.ncap = s->fdir.ncap = 0;
	if (rc == TF_OK)
		snap_charge(s, s->root.cap + s->fdir.cap + s->nfrags * (sizeof(*s->frags) + sizeof(*s->visible) + 1));
	if (rc == TF_OK && (!(s->meta = calloc(s->nfrags + 1, sizeof(*s->meta))) ||
			    !(s->cols = calloc(s->ncols_b = 64, sizeof(*s->cols)))))
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	snap_commits_free(&c);
	snap_names_free(&cdir);
	return rc;
}

tf_status tf_snapshot_open(tf_array *a, tf_cache *cache, tf_snapshot **out, tf_error *err)
{
	tf_snapshot *s = calloc(1, sizeof(*s));
	tf_status rc;

	if (!s)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	atomic_init(&s->refs, 1);
	atomic_init(&s->charged, 0);
	s->a = a;
	s->cache = cache;
	s->now = now_ms();
	/* Idle columns' indexes: a 32nd of the budget, 1 MiB at least. */
	s->kept_limit = tf_cache_budget(cache) / 32 > ((size_t)1 << 20) ? tf_cache_budget(cache) / 32
									  : (size_t)1 << 20;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->reopened, NULL);
	pthread_mutex_init(&s->load_lock, NULL);
	pthread_cond_init(&s->loaded, NULL);
	if ((rc = snapshot_fill(s, err)) != TF_OK) {
		tf_snapshot_unref(s);
		return rc;
	}
	*out = s;
	return TF_OK;
}

tf_snapshot *tf_snapshot_ref(tf_snapshot *s)
{
	atomic_fetch_add(&s->refs, 1);
	return s;
}

void tf_snapshot_unref(tf_snapshot *s)
{
	if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	for (size_t i = 0; s->cols && i < s->ncols_b; i++)
		for (col_slot *c = s->cols[i], *next; c; c = next) {
			next = c->next;
			snap_col_free(c->col);
			free(c->name);
			free(c);
		}
	for (enum_slot *e = s->enums, *next; e; e = next) {
		next = e->next;
		tf_enum_free(e->e);
		free(e->path);
		free(e);
	}
	for (failure *f = s->failures, *next; f; f = next) {
		next = f->next;
		free(f);
	}
	for (uint8_t *c = s->facts, *next; c; c = next) {
		memcpy(&next, c, sizeof(next));
		free(c);
	}
	for (size_t i = 0; i < s->ndels; i++) {
		tf_cond_free(s->dels[i].cond);
		free(s->dels[i].marker);
	}
	snap_names_free(&s->root);
	snap_names_free(&s->fdir);
	free(s->cols);
	free((void *)s->meta);
	free(s->frags);
	free(s->visible);
	free(s->dels);
	tf_cache_charge(s->cache, -(ptrdiff_t)atomic_load(&s->charged));
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->load_lock);
	pthread_cond_destroy(&s->loaded);
	pthread_cond_destroy(&s->reopened);
	free(s);
}

/* ---- enumerations ------------------------------------------------------------------------------ */

tf_status tf_snapshot_enum(tf_snapshot *s, const tf_schema *schema, const tf_field *attr,
			   const tf_enum **out, tf_error *err)
{
	const char *path = tf_schema_enum_path(schema, attr->enumeration);
	char rel[1024];
	tf_buf payload = TF_BUF_INIT((size_t)1 << 30);
	enum_slot *e;
	tf_status rc = TF_OK;

	*out = NULL;
	if (!attr->enumeration)
		return TF_OK;
	if (!path || strchr(path, '/') || !strcmp(path, "..") || !*path)
		return tf_err(err, TF_E_CORRUPT, "attribute %s: enumeration %s not in the schema", attr->name,
			      attr->enumeration);
	pthread_mutex_lock(&s->lock);
	for (e = s->enums; e && strcmp(e->path, path); e = e->next)
		;
	if (!e) {
		snprintf(rel, sizeof(rel), "__schema/__enumerations/%s", path);
		if (!(e = calloc(1, sizeof(*e))) || !(e->path = strdup(path)))
			rc = tf_err(err, TF_E_NOMEM, "out of memory");
		else if ((rc = tf_array_read_generic(s->a, rel, &payload, err)) == TF_OK)
			rc = tf_enum_parse(tf_span_of(payload.p, payload.len), &e->e, err);
		if (rc == TF_OK) {
			e->next = s->enums;
			s->enums = e;
		} else if (e) {
			free(e->path);
			free(e);
			e = NULL;
		}
	}
	pthread_mutex_unlock(&s->lock);
	tf_buf_free(&payload);
	if (e)
		*out = e->e;
	return rc == TF_OK ? rc : tf_err_prefix(err, "enumeration %s", attr->enumeration);
}
