/*
 * tf_catalog.c - paths to decoders: [match] rules, TileDB arrays, raw.
 *
 * Directories are remembered in one table (a tf_lru): array roots with
 * their opened tf_array (list 0, least recently used first: at most
 * TF_CATALOG_ARRAYS kept, freed when no caller holds them), and
 * directories that are not arrays with the time they were found so (list
 * 1; asked again after NOT_ARRAY_TTL, all forgotten beyond MAX_DIRS).
 */
#include "config.h"

#include "tf_catalog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format/tf_array.h"
#include "util/tf_clock.h"
#include "util/tf_fanout.h"
#include "util/tf_hash.h"
#include "util/tf_lru.h"
#include "cache/tf_index.h"
#include "sources/tf_perm.h"

#define NOT_ARRAY_TTL_NS 1000000000LL	/* the mount's entry timeout */
#define MAX_DIRS 65536			/* then forget every non-array directory */
#define NBUCKETS 1024
#define WARM_ARRAYS 4			/* views kept warm: the most recently used */
#define COOL_AT_ONCE 16

typedef struct dir_slot {
	char *rel;
	tf_array *array;		/* NULL: not an array root */
	int64_t checked_ns;		/* when found not to be one */
	int refs;			/* callers using array (views holders too) */
	tf_views *views;		/* its views as last seen, or NULL */
	int64_t views_ns;		/* when they were last found current */
	/* who may read its views (tf_catalog_views_perm), as last examined */
	tf_perm base, whole;		/* its own inputs; with the fragments `views` reads */
	const tf_views *whole_of;	/* views whole was taken for (NULL: none) */
	int64_t base_ns, base_cost;	/* when examined, and how long that took */
	int64_t whole_ns, whole_cost;
	bool walking;			/* a thread is examining whole (the others wait) */
	bool enc_known, encrypted;	/* its newest schema is encrypted */
	bool cooled;			/* its views shrunk since last used */
	bool retired;			/* out of the table (a reload): freed by its last holder */
	tf_lru_node node;		/* in the table; on list ARRAYS or NOT_ARRAYS */
} dir_slot;

enum { ARRAYS, NOT_ARRAYS };	/* the table's lists */

struct tf_catalog {
	tf_source *src;
	_Atomic(const tf_config *) cfg;	/* replaced by a reload; the old one outlives us */
	unsigned gen;			/* reloads (under the lock) */
	struct tf_index *store;		/* persisted indexes, or NULL */
	pthread_mutex_t lock;
	pthread_cond_t walked;		/* a slot's walk ended */
	tf_lru *dirs;			/* every directory remembered */
};

static uint64_t hash(const char *rel)
{
	return tf_hash_str(rel);
}

static bool same_rel(const tf_lru_node *n, const void *rel)
{
	return !strcmp(TF_LRU_ENTRY(n, dir_slot, node)->rel, rel);
}

static dir_slot *slot_of(tf_lru_node *n)
{
	return n ? TF_LRU_ENTRY(n, dir_slot, node) : NULL;
}

tf_status tf_catalog_new(tf_source *src, const tf_config *cfg, tf_catalog **out, tf_error *err)
{
	tf_catalog *c = calloc(1, sizeof(*c));

	if (!c)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	c->src = src;
	c->cfg = cfg;
	if (tf_lru_new(NBUCKETS, &c->dirs, err) != TF_OK) {
		free(c);
		return tf_err_prefix(err, "catalog");
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->walked, NULL);
	*out = c;
	return TF_OK;
}

static void slot_free(dir_slot *d);

static void free_node(tf_lru_node *n, void *ctx)
{
	(void)ctx;
	slot_free(slot_of(n));
}

static void slot_free(dir_slot *d)
{
	tf_perm_clear(&d->base);
	tf_perm_clear(&d->whole);
	tf_views_unref(d->views);	/* the last reference: holders hold the slot */
	tf_array_free(d->array);
	free(d->rel);
	free(d);
}

void tf_catalog_free(tf_catalog *c)
{
	if (!c)
		return;
	tf_lru_clear(c->dirs, free_node, NULL);
	tf_lru_free(c->dirs);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->walked);
	free(c);
}

/* ---- for the entries (src/entries/) ---------------------------------------------------------- */

tf_source *tf_catalog_source(tf_catalog *c) { return c->src; }
const tf_settings *tf_catalog_settings(tf_catalog *c) { return tf_config_settings(atomic_load(&c->cfg)); }

unsigned tf_catalog_gen(tf_catalog *c)
{
	unsigned gen;

	pthread_mutex_lock(&c->lock);
	gen = c->gen;
	pthread_mutex_unlock(&c->lock);
	return gen;
}

void tf_catalog_drop_views(tf_catalog *c)
{
	pthread_mutex_lock(&c->lock);
	for (dir_slot *d = slot_of(tf_lru_oldest(c->dirs, ARRAYS)); d; d = slot_of(tf_lru_newer(c->dirs, &d->node))) {
		tf_views_unref(d->views);	/* only arrays have views */
		d->views = NULL;
	}
	pthread_mutex_unlock(&c->lock);
}

size_t tf_catalog_arrays(tf_catalog *c)
{
	size_t n;

	pthread_mutex_lock(&c->lock);
	n = tf_lru_length(c->dirs, ARRAYS);
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* ---- the directory table (lock held) ------------------------------------------------------ */

static dir_slot *find(tf_catalog *c, const char *rel)
{
	return slot_of(tf_lru_find(c->dirs, hash(rel), same_rel, rel));
}

/* d out of the table (the caller frees it, or its last holder does). */
static void unhash(tf_catalog *c, dir_slot *d)
{
	tf_lru_remove(c->dirs, &d->node);
}

/* Arrays beyond the bound go, least recently used first, if idle; beyond
 * MAX_DIRS directories, every one that is no array is forgotten. */
static void trim(tf_catalog *c)
{
	tf_lru_node *n, *next;

	for (n = tf_lru_oldest(c->dirs, ARRAYS); n && tf_lru_length(c->dirs, ARRAYS) > TF_CATALOG_ARRAYS; n = next) {
		next = tf_lru_newer(c->dirs, n);
		if (!slot_of(n)->refs) {
			unhash(c, slot_of(n));
			slot_free(slot_of(n));
		}
	}
	if (tf_lru_count(c->dirs) <= MAX_DIRS)
		return;
	while ((n = tf_lru_oldest(c->dirs, NOT_ARRAYS))) {
		unhash(c, slot_of(n));
		slot_free(slot_of(n));
	}
}

/* Remember what dir is (array: a, taken over; else not one). */
static dir_slot *remember(tf_catalog *c, const char *rel, tf_array *a)
{
	dir_slot *d = find(c, rel);

	if (d && d->array) {	/* another caller got there first */
		tf_array_free(a);
		return d;
	}
	if (!d) {
		if (!(d = calloc(1, sizeof(*d))) || !(d->rel = strdup(rel))) {
			free(d);
			tf_array_free(a);
			return NULL;
		}
		tf_lru_insert(c->dirs, &d->node, hash(rel));
	}
	d->checked_ns = tf_now_ns();
	d->array = a;
	tf_lru_use(c->dirs, &d->node, a ? ARRAYS : NOT_ARRAYS);
	return d;
}

/* ---- finding the array of a path ---------------------------------------------------------- */

/* Reference array slot d, or NULL if d is not one; then trim the table
 * (lock held). */
static dir_slot *hold_array(tf_catalog *c, dir_slot *d)
{
	if (d && d->array) {
		d->refs++;
		tf_lru_use(c->dirs, &d->node, ARRAYS);
	} else {
		d = NULL;
	}
	trim(c);
	return d;
}

/*
 * The array slot for directory dir, referenced, or NULL if dir is not an
 * array root.  The root is detected (two stats) outside the lock.  A slot
 * is referenced in the same hold of the lock that found or made it: once
 * the lock is released, a trim or a reload may take it out of the table,
 * and an array's file was then shown as no array's (test_reload_race).
 */
static dir_slot *array_at(tf_catalog *c, const char *dir)
{
	dir_slot *d;
	tf_array *a = NULL;
	unsigned gen;

again:
	pthread_mutex_lock(&c->lock);
	d = find(c, dir);
	if (d && d->array) {
		d = hold_array(c, d);
		pthread_mutex_unlock(&c->lock);
		return d;
	}
	gen = c->gen;
	if (d && tf_now_ns() - d->checked_ns < NOT_ARRAY_TTL_NS)
		dir = NULL;	/* known not to be one */
	pthread_mutex_unlock(&c->lock);
	if (!dir)
		return NULL;
	if (tf_array_detect(c->src, dir) &&
	    tf_array_open(c->src, dir, tf_config_array_key(c->cfg, dir), &a, NULL) != TF_OK)
		a = NULL;
	pthread_mutex_lock(&c->lock);
	if (c->gen != gen) {	/* a reload meanwhile: the key may be another */
		pthread_mutex_unlock(&c->lock);
		tf_array_free(a);
		a = NULL;
		goto again;
	}
	d = hold_array(c, remember(c, dir, a));
	pthread_mutex_unlock(&c->lock);
	return d;
}

static void array_release(tf_catalog *c, dir_slot *d)
{
	pthread_mutex_lock(&c->lock);
	if (!--d->refs && d->retired)
		slot_free(d);
	trim(c);
	pthread_mutex_unlock(&c->lock);
}

/* Out of the table: freed now, or by its last holder. */
static void retire_node(tf_lru_node *n, void *ctx)
{
	dir_slot *d = slot_of(n);

	(void)ctx;
	if (d->refs)
		d->retired = true;
	else
		slot_free(d);
}

/*
 * A reload: every path is asked again under cfg.  Arrays go out of the
 * table (their keys may have changed); those in use are freed by their
 * last holder, so open views keep reading what they opened.
 */
void tf_catalog_set_config(tf_catalog *c, const tf_config *cfg)
{
	pthread_mutex_lock(&c->lock);
	atomic_store(&c->cfg, cfg);
	c->gen++;
	tf_lru_clear(c->dirs, retire_node, NULL);
	pthread_mutex_unlock(&c->lock);
}

/* The innermost array root holding rel (referenced), and rel inside it. */
static dir_slot *array_of(tf_catalog *c, const char *rel, const char **inner)
{
	char dir[4096];
	dir_slot *d;

	if (snprintf(dir, sizeof(dir), "%s", rel) >= (int)sizeof(dir))
		return NULL;
	for (char *slash = strrchr(dir, '/');; slash = strrchr(dir, '/')) {
		if (slash)
			*slash = '\0';
		else
			strcpy(dir, ".");
		if ((d = array_at(c, dir))) {
			*inner = rel + (slash ? strlen(dir) + 1 : 0);
			return d;
		}
		if (!slash)
			return NULL;
	}
}

/* ---- answers --------------------------------------------------------------------------------- */

bool tf_catalog_is_array(tf_catalog *c, const char *dir)
{
	dir_slot *d = array_at(c, dir);

	if (d)
		array_release(c, d);
	return d != NULL;
}

/* The slot's views if current, referenced (lock not held: asking whether
 * they are current lists the array's directories). */
static tf_views *current_views(tf_catalog *c, dir_slot *d)
{
	tf_views *v = NULL;
	bool fresh;

	pthread_mutex_lock(&c->lock);
	if (d->views)
		v = tf_views_ref(d->views);
	fresh = tf_now_ns() - d->views_ns < NOT_ARRAY_TTL_NS;
	pthread_mutex_unlock(&c->lock);
	if (v && !fresh && !tf_views_current(v)) {
		tf_views_unref(v);
		return NULL;
	}
	if (v && !fresh) {
		pthread_mutex_lock(&c->lock);
		d->views_ns = tf_now_ns();
		pthread_mutex_unlock(&c->lock);
	}
	return v;
}

/* The views remember their CSVs' sizes in the index store, under the
 * array root's identity (its device and inode; an object store's prefix). */
static void views_store(tf_catalog *c, const char *dir, tf_views *v)
{
	tf_index_key k;
	tf_stat st;

	if (c->store && tf_source_stat(c->src, dir, &st, NULL) == TF_OK && tf_index_key_make(&k, c->src, dir, &st.v))
		tf_views_set_store(v, c->store, k.id);
}

/*
 * Views keep what makes their next read quicker (fragments' CSV states,
 * idle columns with their files' indexes, fragment metadata), each within
 * its own bound, per array; but a mount serves many arrays, and nodes the
 * kernel still knows keep views alive after their arrays are gone: the
 * views campaign's mounts served 100 arrays each, deleted one after
 * another, and the daemon's heap held ~40 MB beyond the cache's budget.
 * Views of arrays beyond the WARM_ARRAYS most recently used let that go
 * once, until they are used again.
 */
static void cool_others(tf_catalog *c)
{
	tf_views *cool[COOL_AT_ONCE];
	size_t n = 0, warm = 0;

	pthread_mutex_lock(&c->lock);
	for (dir_slot *d = slot_of(tf_lru_newest(c->dirs, ARRAYS)); d && n < COOL_AT_ONCE;
	     d = slot_of(tf_lru_older(c->dirs, &d->node))) {
		if (!d->array || warm++ < WARM_ARRAYS || d->cooled || !d->views)
			continue;
		d->cooled = true;
		cool[n++] = tf_views_ref(d->views);
	}
	pthread_mutex_unlock(&c->lock);
	for (size_t i = 0; i < n; i++) {
		tf_views_shrink(cool[i]);
		tf_views_unref(cool[i]);
	}
}

tf_status tf_catalog_views(tf_catalog *c, const char *dir, tf_cache *cache, tf_views **out,
			   tf_catalog_hold **hold, tf_error *err)
{
	dir_slot *d = array_at(c, dir);
	tf_views *v, *old;
	tf_status rc;

	*out = NULL;
	*hold = NULL;
	if (!d)
		return tf_err(err, TF_E_INVAL, "%s: not a TileDB array", dir);
	if (!(v = current_views(c, d))) {
		if ((rc = tf_views_open(d->array, cache, &v, err)) != TF_OK) {
			array_release(c, d);
			return tf_err_prefix(err, "%s", dir);
		}
		views_store(c, dir, v);
		pthread_mutex_lock(&c->lock);
		old = d->views;
		d->views = tf_views_ref(v);
		d->views_ns = tf_now_ns();
		d->whole_of = NULL;	/* old's address may come back */
		pthread_mutex_unlock(&c->lock);
		tf_views_unref(old);
	}
	pthread_mutex_lock(&c->lock);
	d->cooled = false;
	pthread_mutex_unlock(&c->lock);
	cool_others(c);
	*out = v;
	*hold = (tf_catalog_hold *)d;	/* its reference stays with the caller */
	return TF_OK;
}

void tf_catalog_views_put(tf_catalog *c, tf_views *v, tf_catalog_hold *hold)
{
	tf_views_unref(v);
	if (hold)
		array_release(c, (dir_slot *)hold);
}

/* ---- who may read views and plaintext ------------------------------------------------------ */

/*
 * Whether inputs examined at `at`, which took `cost` to examine, are still
 * the answer: for a second (the mount's attribute timeout), longer when
 * examining costs more than a tenth of that (arrays of many fragments),
 * so that checking never takes more than a tenth of the time.
 */
static bool fresh(int64_t at, int64_t cost)
{
	int64_t ttl = 10 * cost > NOT_ARRAY_TTL_NS ? 10 * cost : NOT_ARRAY_TTL_NS;

	return at && tf_now_ns() - at < ttl;
}

/* TileDB's own files at an array's root (legacy schema, commit markers and
 * lists of formats before 12); its subdirectories are added by name. */
static bool root_file(const char *name, const tf_stat *st)
{
	return st->kind != TF_ENT_DIR && !strncmp(name, "__", 2);
}

/* What every view of the array at dir reads: dir, its TileDB files, its
 * schemas (and enumerations) and commits, and the __fragments folder. */
static void add_base(tf_catalog *c, const char *dir, tf_perm *p)
{
	static const char *const subs[] = { "__schema", "__schema/__enumerations", "__commits" };
	char path[4096];

	tf_perm_add_dir(p, c->src, dir, true, root_file);
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (tf_path_join(path, sizeof(path), dir, subs[i]))
			tf_perm_add_dir(p, c->src, path, true, NULL);
		else
			tf_perm_close(p);
	if (tf_path_join(path, sizeof(path), dir, "__fragments"))
		tf_perm_add_path(p, c->src, path);	/* the folder: fragments are added one by one */
	else
		tf_perm_close(p);
}

/* Fragment directory frag (relative to the array at dir) and its files. */
static void add_fragment(tf_catalog *c, const char *dir, const char *frag, tf_perm *p)
{
	char path[4096];

	if (tf_path_join(path, sizeof(path), dir, frag))
		tf_perm_add_dir(p, c->src, path, true, NULL);
	else
		tf_perm_close(p);
}

/* The slot's base inputs into *out, examined again when not fresh. */
static void base_perm(tf_catalog *c, dir_slot *d, tf_perm *out)
{
	tf_perm b = TF_PERM_INIT;
	int64_t t0;

	pthread_mutex_lock(&c->lock);
	if (fresh(d->base_ns, d->base_cost)) {
		tf_perm_copy(out, &d->base);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	pthread_mutex_unlock(&c->lock);
	t0 = tf_now_ns();
	add_base(c, d->rel, &b);
	tf_perm_copy(out, &b);
	pthread_mutex_lock(&c->lock);
	tf_perm_clear(&d->base);
	d->base = b;
	d->base_ns = tf_now_ns();
	d->base_cost = d->base_ns - t0;
	pthread_mutex_unlock(&c->lock);
}

/* The fragments of a walk, one tf_perm per thread (tf_fanout). */
typedef struct walk {
	tf_catalog *c;
	const char *dir;
	const tf_views *v;
	tf_perm *slots;
} walk;

static bool walk_step(void *ctx, size_t lo, size_t hi, unsigned slot)
{
	walk *w = ctx;
	tf_perm *p = &w->slots[slot];
	char frag[600];

	for (size_t k = lo; k < hi && !p->closed; k++)
		if (tf_views_visible_dir(w->v, k, frag, sizeof(frag)))
			add_fragment(w->c, w->dir, frag, p);
		else
			tf_perm_close(p);
	return p->closed;	/* root only, whatever the rest says */
}

/*
 * Base inputs and every fragment a read of v sees, into *w.  The walk is
 * a stat of each fragment directory, a listing of it and a stat of each
 * file: at 200,000 fragments it took 3 s warm and 22 s cold on one thread
 * (the first `stat @views/cells.csv` of a fresh daemon); on TF_FANOUT_IO
 * threads, 1.2 s warm and 8.4 s cold (the kernel building 1.4 million
 * inodes: tf_fanout.c).
 */
static void walk_whole(tf_catalog *c, dir_slot *d, const tf_views *v, tf_perm *w)
{
	size_t n = tf_views_nvisible(v);
	unsigned threads = n > 256 ? TF_FANOUT_IO : 1, used;
	walk wk = { c, d->rel, v, calloc(threads, sizeof(tf_perm)) };

	base_perm(c, d, w);
	if (!wk.slots) {
		tf_perm_close(w);
		return;
	}
	used = tf_fanout(n, 64, threads, walk_step, &wk, NULL);
	for (unsigned i = 0; i < used; i++)
		tf_perm_add_perm(w, &wk.slots[i]);
	for (unsigned i = 0; i < threads; i++)
		tf_perm_clear(&wk.slots[i]);
	free(wk.slots);
}

/* Base inputs and every fragment a read of v sees; kept for the slot's
 * current views.  One thread walks; others asking meanwhile wait for its
 * answer (`ls -la @views` asks for every entry at once). */
static void whole_perm(tf_catalog *c, dir_slot *d, tf_views *v, tf_perm *out)
{
	tf_perm w = TF_PERM_INIT;
	int64_t t0;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		if (d->whole_of == v && d->views == v && fresh(d->whole_ns, d->whole_cost)) {
			tf_perm_copy(out, &d->whole);
			pthread_mutex_unlock(&c->lock);
			return;
		}
		if (!d->walking)
			break;
		pthread_cond_wait(&c->walked, &c->lock);
	}
	d->walking = true;
	pthread_mutex_unlock(&c->lock);
	t0 = tf_now_ns();
	walk_whole(c, d, v, &w);
	tf_perm_copy(out, &w);
	pthread_mutex_lock(&c->lock);
	if (d->views == v) {
		tf_perm_clear(&d->whole);
		d->whole = w;
		d->whole_of = v;
		d->whole_ns = tf_now_ns();
		d->whole_cost = d->whole_ns - t0;
	} else {
		tf_perm_clear(&w);
	}
	d->walking = false;
	pthread_cond_broadcast(&c->walked);
	pthread_mutex_unlock(&c->lock);
}

tf_status tf_catalog_views_perm(tf_catalog *c, tf_catalog_hold *hold, tf_views *v, const char *vrel,
				tf_perm *out, tf_error *err)
{
	dir_slot *d = (dir_slot *)hold;
	tf_view_reads what;
	char frag[600];
	tf_status rc;

	tf_perm_clear(out);
	if ((rc = tf_views_reads(v, vrel, &what, frag, sizeof(frag), err)) != TF_OK)
		return rc;
	if (!tf_source_has_modes(c->src))
		return TF_OK;	/* every file has the same owner and modes */
	if (what == TF_VIEW_READS_VISIBLE) {
		whole_perm(c, d, v, out);
		return TF_OK;
	}
	base_perm(c, d, out);
	if (what == TF_VIEW_READS_ONE)
		add_fragment(c, d->rel, frag, out);
	return TF_OK;
}

/* Whether the array of slot d is encrypted, by its newest schema's
 * header; not known (it cannot be read now) counts as encrypted. */
static bool array_encrypted(tf_catalog *c, dir_slot *d)
{
	const tf_schema *sc;
	bool known, enc;

	pthread_mutex_lock(&c->lock);
	known = d->enc_known, enc = d->encrypted;
	pthread_mutex_unlock(&c->lock);
	if (known)
		return enc;
	if (tf_array_latest_schema(d->array, &sc, NULL, NULL) != TF_OK)
		return true;
	enc = tf_array_schema_encrypted(d->array, sc);
	pthread_mutex_lock(&c->lock);
	d->enc_known = true, d->encrypted = enc;
	pthread_mutex_unlock(&c->lock);
	return enc;
}

bool tf_catalog_keyed(tf_catalog *c, const char *rel)
{
	const tf_rule *r = tf_config_match(c->cfg, rel);
	const char *inner;
	dir_slot *d;
	bool keyed;

	if (r)
		return r->key != NULL;
	if (!(d = array_of(c, rel, &inner)))
		return false;
	keyed = tf_array_key(d->array) && array_encrypted(c, d);
	array_release(c, d);
	return keyed;
}

tf_show tf_catalog_show(tf_catalog *c, const char *rel)
{
	const char *inner;
	dir_slot *d;
	bool decoded;

	if (tf_config_match(c->cfg, rel))
		return TF_SHOW_DECODED;
	if ((d = array_of(c, rel, &inner))) {
		decoded = tf_array_is_decoded_name(inner);
		array_release(c, d);
		if (decoded)
			return TF_SHOW_DECODED;
	}
	return tf_config_settings(c->cfg)->hide_unmatched ? TF_SHOW_HIDDEN : TF_SHOW_RAW;
}

void tf_facts_clear(tf_facts *fx)
{
	if (!fx)
		return;
	free(fx->field);
	free(fx->role);
	free(fx->fragment);
	*fx = (tf_facts){ 0 };
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

void tf_catalog_set_index(tf_catalog *c, struct tf_index *store)
{
	c->store = store;
}

void tf_catalog_prefetch(tf_catalog *c, const char *rel, const tf_version *v)
{
	const tf_rule *r = c->store ? tf_config_match(c->cfg, rel) : NULL;
	tf_index_key k;

	/* The files tf_file_open_how stores: walked by a rule. */
	if (r && !r->generic && !r->var_data && tf_index_key_make(&k, c->src, rel, v))
		tf_index_prefetch(c->store, &k);
}

/* A file no rule matches, inside a TileDB array: its array says how. */
static tf_status open_in_array(tf_catalog *c, const char *rel, const tf_version *v, const tf_file_how *how,
			       tf_file **out, tf_facts *fx, tf_error *err)
{
	const char *inner;
	dir_slot *d = array_of(c, rel, &inner);
	tf_array_file af;
	tf_status rc;

	if (!d)
		return tf_err(err, TF_E_INVAL, "%s: no rule decodes it and no TileDB array holds it", rel);
	if ((rc = tf_array_describe(d->array, inner, &af, err)) != TF_OK) {
		array_release(c, d);
		return tf_err_prefix(err, "%s", rel);
	}
	rc = tf_file_open_how(c->src, af.path, rel, v, &af.spec, how, out, err);
	if (rc == TF_OK && fx)
		*fx = (tf_facts){ dup_or_null(af.field), dup_or_null(af.kind), dup_or_null(af.fragment),
				  af.format_version, af.spec.key != NULL };
	tf_array_file_clear(&af);
	array_release(c, d);
	return rc;
}

/* The sibling data file of an offsets rule with var_data: its path and the
 * rule that decodes it supply the data's pipeline and datatype. */
static tf_status add_var_data(tf_catalog *c, const char *rel, const tf_rule *r, tf_file_spec *spec,
			      char *sibling, size_t n, tf_error *err)
{
	const char *slash = strrchr(rel, '/');
	const tf_rule *dr;

	if (snprintf(sibling, n, "%.*s%s", slash ? (int)(slash - rel + 1) : 0, rel, r->var_data) >= (int)n)
		return tf_err(err, TF_E_INVAL, "var_data path too long");
	if (!(dr = tf_config_match(c->cfg, sibling)))
		return tf_err(err, TF_E_INVAL, "var_data %s: no [match] rule decodes it", sibling);
	spec->var_data = sibling;
	spec->var_pipeline = dr->pipeline;
	spec->var_type = dr->type;
	return TF_OK;
}

tf_status tf_catalog_open(tf_catalog *c, const char *rel, const tf_version *v, tf_file **out,
			  tf_facts *fx, tf_error *err)
{
	return tf_catalog_open_for(c, rel, v, 0, out, fx, err);
}

tf_status tf_catalog_open_for(tf_catalog *c, const char *rel, const tf_version *v, unsigned flags,
			      tf_file **out, tf_facts *fx, tf_error *err)
{
	const tf_rule *r = tf_config_match(c->cfg, rel);
	/* A lookup walks headers alone only when asked to: on local disks the
	 * window is ten times faster (a cold 2 GiB file: 0.2 s against 1.9 s)
	 * and warms the page cache for the read that usually follows; headers
	 * read 1/32 of the bytes, for storage where bytes cost more. */
	tf_file_how how = { c->store, (flags & TF_OPEN_METADATA) && tf_config_settings(c->cfg)->metadata_headers };
	char var_path[4096];
	tf_file_spec spec;
	tf_status rc;

	if (fx)
		*fx = (tf_facts){ 0 };
	if (!r)
		return open_in_array(c, rel, v, &how, out, fx, err);
	spec = (tf_file_spec){ .pipeline = r->pipeline, .type = r->type, .cell_val_num = r->cell_val_num,
			       .version = r->version, .key = r->key, .generic = r->generic };
	if (r->var_data && (rc = add_var_data(c, rel, r, &spec, var_path, sizeof(var_path), err)) != TF_OK)
		return tf_err_prefix(err, "%s", rel);
	if (fx)
		fx->keyed = spec.key != NULL;
	return tf_file_open_how(c->src, rel, rel, v, &spec, &how, out, err);
}
