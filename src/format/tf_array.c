/*
 * tf_array.c - files of a TileDB array and how to decode each (FORMAT.md
 * §7-§9, array_directory.cc for the layout of the directory).
 */
#include "config.h"

#include "format/tf_array.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/tf_clock.h"
#include "util/tf_fanout.h"
#include "util/tf_hash.h"
#include "util/tf_locked.h"
#include "util/tf_lru.h"
#include "format/tf_array_path.h"
#include "format/tf_tile.h"

#define NBUCKETS 256			/* to start: the table doubles */
#define MAX_FRAGMENTS 1024		/* idle fragments kept, least recently used out */
#define IDLE_BYTES ((size_t)16 << 20)	/* ...and their metadata's bytes, by default */
#define RETRY_NS 1000000000LL		/* a failed schema or fragment is read again after this */

/*
 * Schemas and fragment metadata are read with no lock held and then
 * published under the lock (a racing reader's copy is dropped), so one slow
 * read never stalls readers of other files.  A failure is remembered for
 * RETRY_NS only: a fragment seen mid-commit, before TileDB wrote its last
 * file, reads once it is complete.  Schemas live as long as the array (they
 * are few and callers keep pointers to them); fragments beyond
 * MAX_FRAGMENTS are freed when idle.
 *
 * Fragments are a tf_lru set (util/tf_lru.h) keyed by name; failures stay
 * in its table, on no list.
 * Only idle fragments are on the LRU list (a fragment in use leaves it), so
 * trimming takes the oldest idle one each time: O(1) per fragment given
 * back.  A snapshot reading the metadata of 200,000 fragments walked a list
 * of 200,000 busy ones at every release before (O(n^2): a minute).
 */
typedef struct schema_slot {
	char *name;
	tf_schema *schema;	/* NULL: it failed, see error */
	bool encrypted;		/* its generic tile was: so is all the array (§9) */
	tf_error error;
	int64_t failed_at;
	bool loading;		/* a reader is reading it: others wait (schema_read) */
} schema_slot;

typedef struct frag_slot {
	char *name;
	tf_fragment *fr;	/* NULL: it failed, see error */
	tf_error error;
	int64_t failed_at;
	tf_lru_node node;	/* keyed by name; refs: describers using fr;
				 * listed: loaded and idle */
	size_t bytes;		/* fr's, when it went idle */
} frag_slot;

#define FRAG_OF(n) TF_LRU_ENTRY(n, frag_slot, node)

struct tf_array {
	tf_source *src;		/* borrowed */
	char *dir;		/* the array's root in src */
	const tf_key *key;
	pthread_mutex_t lock;	/* guards everything below; held for no I/O */
	schema_slot **schemas;
	size_t nschemas;
	tf_lru *frags;			/* by name; its list: idle loaded fragments */
	size_t nfrags;			/* loaded fragments, idle or not */
	size_t idle_bytes, idle_limit;	/* the idle ones' metadata; its bound */
	int legacy;			/* __array_schema.tdb: -1 not known, 0 absent, 1 present */
	int64_t legacy_ns;		/* when that was found */
	bool batched, batching;		/* read_batch: done (or begun); running */
	pthread_cond_t batch_done;	/* ... and over */
	pthread_cond_t schema_read;	/* a schema being read is published */
};

static void frag_free(frag_slot *s)
{
	tf_fragment_free(s->fr);
	free(s->name);
	free(s);
}

static void frag_free_node(tf_lru_node *n, void *ctx)
{
	(void)ctx;
	frag_free(FRAG_OF(n));
}

bool tf_array_detect(tf_source *src, const char *dir)
{
	char path[4096];
	tf_stat st;

	if (tf_path_join(path, sizeof(path), dir, "__schema") &&
	    tf_source_stat(src, path, &st, NULL) == TF_OK && st.kind == TF_ENT_DIR)
		return true;
	return tf_path_join(path, sizeof(path), dir, LEGACY_SCHEMA) &&
	       tf_source_stat(src, path, &st, NULL) == TF_OK && st.kind == TF_ENT_REG;
}

tf_status tf_array_open(tf_source *src, const char *dir, const tf_key *key, tf_array **out,
			tf_error *err)
{
	tf_array *a = calloc(1, sizeof(*a));

	if (!a || !(a->dir = strdup(dir)) || tf_lru_new(NBUCKETS, &a->frags, NULL) != TF_OK) {
		if (a)
			free(a->dir);
		free(a);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	a->src = src;
	a->key = key;
	a->legacy = -1;
	a->idle_limit = IDLE_BYTES;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->batch_done, NULL);
	pthread_cond_init(&a->schema_read, NULL);
	*out = a;
	return TF_OK;
}

void tf_array_free(tf_array *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nschemas; i++) {
		free(a->schemas[i]->name);
		tf_schema_free(a->schemas[i]->schema);
		free(a->schemas[i]);
	}
	tf_lru_clear(a->frags, frag_free_node, NULL);
	tf_lru_free(a->frags);
	free(a->schemas);
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->batch_done);
	pthread_cond_destroy(&a->schema_read);
	free(a->dir);
	free(a);
}

/* ---- schemas (lock held) ---------------------------------------------------------------- */

static tf_status read_whole(tf_source *src, const char *path, tf_buf *out, tf_error *err)
{
	tf_object *o;
	uint64_t size;
	tf_stat st;
	tf_status rc;

	out->len = 0;
	/* Looked up first: an object store then lists the directory (every
	 * schema, one request) rather than asking for this one alone. */
	tf_source_stat(src, path, &st, NULL);
	if ((rc = tf_object_open(src, path, NULL, &o, err)) != TF_OK)
		return rc;
	size = tf_object_stat(o)->v.size;
	if (size > out->limit)
		rc = tf_err(err, TF_E_CORRUPT, "%s: %llu bytes, more than any schema", path,
			    (unsigned long long)size);
	else if ((rc = tf_buf_reserve(out, (size_t)size, err)) == TF_OK &&
		 (rc = tf_object_read(o, 0, out->p, (size_t)size, err)) == TF_OK)
		out->len = (size_t)size;
	tf_object_close(o);
	return rc;
}

static tf_status parse_schema_file(tf_array *a, const char *name, tf_schema **out, bool *encrypted,
				   tf_error *err)
{
	tf_buf raw = TF_BUF_INIT((size_t)64 << 20), payload = TF_BUF_INIT((size_t)256 << 20);
	tf_workspace *ws = tf_workspace_new();
	char path[4096], file[4096];
	tf_status rc;

	if (!ws)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	snprintf(file, sizeof(file), strcmp(name, LEGACY_SCHEMA) ? "__schema/%s" : "%s", name);
	if (!tf_path_join(path, sizeof(path), a->dir, file))
		rc = tf_err(err, TF_E_INVAL, "path too long");
	else if ((rc = read_whole(a->src, path, &raw, err)) == TF_OK && raw.len > 30 &&
		 tf_le64(raw.p) == raw.len - 30)
		rc = tf_err(err, TF_E_UNSUPPORTED, "a TileDB 1.3 (pre-format 1) array: not supported, "
			    "as by TileDB 2.x");
	else if (rc == TF_OK &&
		 (rc = tf_generic_decode(tf_span_of(raw.p, raw.len), a->key, ws, &payload, NULL, err)) == TF_OK)
		rc = tf_schema_parse(tf_span_of(payload.p, payload.len), out, err);
	/* The header's encryption byte (offset 29, §6) tells how the array was written. */
	*encrypted = raw.len > 29 && raw.p[29] != 0;
	tf_buf_free(&raw);
	tf_buf_free(&payload);
	tf_workspace_free(ws);
	return rc == TF_OK ? rc : tf_err_prefix(err, "schema %s", name);
}

static schema_slot *find_schema(tf_array *a, const char *name)
{
	for (size_t i = 0; i < a->nschemas; i++)
		if (!strcmp(a->schemas[i]->name, name))
			return a->schemas[i];
	return NULL;
}

/* Schema `name`'s slot, made if new (lock held); NULL: no memory. */
static schema_slot *schema_slot_of(tf_array *a, const char *name)
{
	schema_slot *s = find_schema(a, name), **v;

	if (s)
		return s;
	if (!(v = realloc(a->schemas, (a->nschemas + 1) * sizeof(*v))))
		return NULL;
	a->schemas = v;
	if (!(s = calloc(1, sizeof(*s))) || !(s->name = strdup(name))) {
		free(s);
		return NULL;
	}
	a->schemas[a->nschemas++] = s;
	return s;
}

/* Publish what reading schema `name` gave (lock held). */
static void publish_schema(tf_array *a, const char *name, tf_schema *sc, bool encrypted,
			   const tf_error *e)
{
	schema_slot *s = schema_slot_of(a, name);

	if (!s || s->schema) {	/* no room, or a racing reader published first */
		tf_schema_free(sc);
		return;
	}
	s->schema = sc;
	s->encrypted = encrypted;
	if (!sc) {
		s->error = *e;
		s->failed_at = tf_now_ns();
	}
}

/*
 * A schema by file name, read once; a failure is the answer for RETRY_NS.
 * One reader reads it while the others wanting it wait (loading): the
 * fragments of a batch (read_batch), on many threads at once, each
 * fetched it otherwise.
 */
static tf_status get_schema(void *ctx, const char *name, const tf_schema **out, tf_error *err)
{
	tf_array *a = ctx;
	tf_schema *sc = NULL;
	schema_slot *s;
	bool encrypted;
	tf_error e;
	tf_status rc;

	if (strchr(name, '/') || !strcmp(name, "..") || !*name)
		return tf_err(err, TF_E_CORRUPT, "bad schema name '%s'", name);
	pthread_mutex_lock(&a->lock);
	while ((s = find_schema(a, name)) && s->loading)
		pthread_cond_wait(&a->schema_read, &a->lock);
	if (s && (s->schema || tf_now_ns() - s->failed_at < RETRY_NS)) {
		*out = s->schema;
		rc = s->schema ? TF_OK : s->error.code;
		if (rc != TF_OK && err)
			*err = s->error;
		pthread_mutex_unlock(&a->lock);
		return rc;
	}
	if ((s = schema_slot_of(a, name)))
		s->loading = true;
	pthread_mutex_unlock(&a->lock);
	if (parse_schema_file(a, name, &sc, &encrypted, &e) != TF_OK)
		sc = NULL;
	pthread_mutex_lock(&a->lock);
	publish_schema(a, name, sc, encrypted, &e);
	if ((s = find_schema(a, name))) {
		s->loading = false;
		pthread_cond_broadcast(&a->schema_read);
	}
	*out = s ? s->schema : NULL;
	rc = *out ? TF_OK : s ? s->error.code : TF_E_NOMEM;
	if (rc != TF_OK)
		tf_err(err, rc, "%s", s ? s->error.msg : "out of memory");
	pthread_mutex_unlock(&a->lock);
	return rc;
}

bool tf_array_schema_encrypted(tf_array *a, const tf_schema *sc)
{
	bool enc = false;

	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->nschemas; i++)
		if (a->schemas[i]->schema == sc)
			enc = a->schemas[i]->encrypted;
	pthread_mutex_unlock(&a->lock);
	return enc;
}

/* ---- fragments ------------------------------------------------------------------------------- */

static bool same_name(const tf_lru_node *n, const void *name)
{
	return !strcmp(FRAG_OF(n)->name, name);
}

/* (lock held) */
static frag_slot *find_fragment(tf_array *a, const char *name)
{
	tf_lru_node *n = tf_lru_find(a->frags, tf_hash_str(name), same_name, name);

	return n ? FRAG_OF(n) : NULL;
}

static void lru_unlink(tf_array *a, frag_slot *s)
{
	if (!tf_lru_listed(&s->node))
		return;
	a->idle_bytes -= s->bytes;
	tf_lru_unlist(a->frags, &s->node);
}

static void lru_push(tf_array *a, frag_slot *s)
{
	lru_unlink(a, s);
	tf_lru_use(a->frags, &s->node, 0);
	a->idle_bytes += s->bytes;
}

/* Idle fragments beyond MAX_FRAGMENTS, or beyond idle_limit bytes of
 * metadata (a fragment of a million tiles has 8 MB of offsets per field),
 * go, oldest first (lock held).  The list holds idle ones only: each step
 * frees one. */
static void trim_fragments_to(tf_array *a, size_t limit)
{
	tf_lru_node *n;

	while ((a->nfrags > MAX_FRAGMENTS || a->idle_bytes > limit) && (n = tf_lru_oldest(a->frags, 0))) {
		frag_slot *s = FRAG_OF(n);

		lru_unlink(a, s);
		tf_lru_remove(a->frags, n);
		a->nfrags--;
		frag_free(s);
	}
}

static void trim_fragments(tf_array *a)
{
	trim_fragments_to(a, a->idle_limit);
}

/* Publish a fragment read with no lock held (lock held); returns the slot. */
static frag_slot *publish_fragment(tf_array *a, frag_slot *mine)
{
	frag_slot *s = find_fragment(a, mine->name);

	if (s && (s->fr || !mine->fr)) {	/* a racing reader published first */
		if (!s->fr)
			s->error = mine->error, s->failed_at = mine->failed_at;
		frag_free(mine);
		return s;
	}
	if (s) {	/* replaces a failure */
		s->fr = mine->fr;
		mine->fr = NULL;
		frag_free(mine);
		s->bytes = tf_fragment_bytes(s->fr);
		lru_push(a, s);
		a->nfrags++;
		return s;
	}
	tf_lru_insert(a->frags, &mine->node, tf_hash_str(mine->name));
	if (mine->fr) {
		mine->bytes = tf_fragment_bytes(mine->fr);
		lru_push(a, mine);
		a->nfrags++;
	}
	return mine;
}

/* Whether the array has __array_schema.tdb, asked at most once per
 * RETRY_NS (a stat per fragment read was a third of reading 200,000
 * fragments' metadata). */
static bool has_legacy_schema(tf_array *a)
{
	char path[4096];
	tf_stat st;
	int64_t now = tf_now_ns();
	int known;

	pthread_mutex_lock(&a->lock);
	known = a->legacy >= 0 && now - a->legacy_ns < RETRY_NS ? a->legacy : -1;
	pthread_mutex_unlock(&a->lock);
	if (known >= 0)
		return known;
	known = tf_path_join(path, sizeof(path), a->dir, LEGACY_SCHEMA) &&
		tf_source_stat(a->src, path, &st, NULL) == TF_OK;
	pthread_mutex_lock(&a->lock);
	a->legacy = known;
	a->legacy_ns = now;
	pthread_mutex_unlock(&a->lock);
	return known;
}

/* Read fragment `name` (directory fdir) into a new slot, no lock held. */
static frag_slot *read_fragment(tf_array *a, const char *name, const char *fdir)
{
	frag_slot *s = calloc(1, sizeof(*s));
	const tf_schema *legacy = NULL;
	tf_error legacy_err = { TF_OK, "" };

	if (!s || !(s->name = strdup(name))) {
		free(s);
		return NULL;
	}
	/* Fragments before format 10 use the array's one old schema. */
	if (has_legacy_schema(a))
		get_schema(a, LEGACY_SCHEMA, &legacy, &legacy_err);
	if (tf_fragment_open(a->src, fdir, name, legacy, get_schema, a, a->key, &s->fr, &s->error) != TF_OK) {
		if (legacy_err.code != TF_OK)
			s->error = legacy_err;	/* the real cause */
		s->failed_at = tf_now_ns();
	}
	return s;
}

/*
 * Many fragments at once.  From an object store each fragment's metadata
 * is a round trip, and a listing of the array or the first record of a
 * view wants every one: one after another, 100 fragments took 7 s at 20 ms
 * of round trip.  So the first fragment an array reads from a source that
 * keeps requests in flight (tf_source_in_flight) is read with the metadata
 * of every fragment in its __fragments directory (listed: an object store
 * lists the directory whole, source_s3_cache.c), up to BATCH_MAX, on that
 * many threads (tf_fanout), itself first.  Their schema is read once, by
 * the first of them to want it, the others waiting (get_schema), and the
 * newest schemas are read in the batch itself (batch_schema): reading
 * the first fragment alone to bring the schema cost a round trip before
 * the others.  Once per array: fragments written later, or trimmed since,
 * are read one by one as before.  A reader missing a fragment while the
 * batch runs waits for it rather than fetch the same object again.
 */
#define BATCH_MAX (MAX_FRAGMENTS / 2)
#define BATCH_SCHEMAS 4

typedef struct batch {
	tf_array *a;
	const char *dir;		/* the __fragments directory in the source */
	const char *first;		/* the one wanted: names[0] */
	frag_slot *got;			/* first's slot once read (held if loaded) */
	char **names;			/* fragments */
	size_t n;
	char *schemas[BATCH_SCHEMAS];	/* read as items 1 .. nschemas */
	size_t nschemas;
} batch;

static bool batch_add(batch *b, const char *name)
{
	char **p = realloc(b->names, (b->n + 1) * sizeof(*b->names));

	if (!p || !(p[b->n] = strdup(name)))
		return p ? (b->names = p, false) : false;
	b->names = p;
	b->n++;
	return true;
}

static int batch_name(void *ctx, const char *name, const tf_stat *st)
{
	batch *b = ctx;
	bool known;

	if (st->kind != TF_ENT_DIR || strncmp(name, "__", 2) || !strcmp(name, b->first))
		return 0;
	pthread_mutex_lock(&b->a->lock);
	known = find_fragment(b->a, name) != NULL;
	pthread_mutex_unlock(&b->a->lock);
	if (!known)
		batch_add(b, name);
	return b->n >= BATCH_MAX;
}

/* The newest schemas of the array (at most BATCH_SCHEMAS, listed: no
 * request of their own) join the batch right after the fragment wanted,
 * read beside the fragments' metadata rather than after the first of them
 * names one: a round trip less. */
static int batch_schema(void *ctx, const char *name, const tf_stat *st)
{
	batch *b = ctx;
	size_t oldest = 0;
	char *copy;

	if (st->kind != TF_ENT_REG || strncmp(name, "__", 2))
		return 0;
	if (b->nschemas == BATCH_SCHEMAS) {	/* keep the newest: names begin with their times */
		for (size_t i = 1; i < b->nschemas; i++)
			if (strcmp(b->schemas[i], b->schemas[oldest]) < 0)
				oldest = i;
		if (strcmp(name, b->schemas[oldest]) <= 0)
			return 0;
		free(b->schemas[oldest]);
		b->schemas[oldest] = b->schemas[--b->nschemas];
	}
	if ((copy = strdup(name)))
		b->schemas[b->nschemas++] = copy;
	return 0;
}

static bool batch_step(void *ctx, size_t lo, size_t hi, unsigned slot)
{
	batch *b = ctx;
	char fdir[4096];
	frag_slot *mine, *s;
	const tf_schema *sc;

	(void)slot;
	for (size_t item = lo; item < hi; item++) {
		size_t i = item <= b->nschemas ? 0 : item - b->nschemas;
		if (item && item <= b->nschemas) {
			get_schema(b->a, b->schemas[item - 1], &sc, NULL);	/* published for the fragments */
			continue;
		}
		if (!tf_path_join(fdir, sizeof(fdir), b->dir, b->names[i]) ||
		    !(mine = read_fragment(b->a, b->names[i], fdir)))
			continue;
		pthread_mutex_lock(&b->a->lock);
		s = publish_fragment(b->a, mine);
		if (i == 0) {	/* the one wanted: busy through the batch's trimming too */
			b->got = s;
			if (s->fr) {
				lru_unlink(b->a, s);
				tf_lru_hold(b->a->frags, &s->node);
			}
		}
		trim_fragments(b->a);
		pthread_mutex_unlock(&b->a->lock);
	}
	return false;
}

/* Fragment `first` (directory fdir) and those beside it, read at once;
 * first's slot (held if loaded), or NULL if it could not be read. */
static frag_slot *read_batch(tf_array *a, const char *fdir, const char *first)
{
	char dir[4096], sdir[4096];
	const char *slash = strrchr(fdir, '/');
	batch b = { .a = a, .dir = dir, .first = first };
	unsigned threads = tf_source_in_flight(a->src);
	size_t items;

	if (!slash || (size_t)(slash - fdir) >= sizeof(dir) || !batch_add(&b, first))
		return NULL;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - fdir), fdir);
	tf_source_list(a->src, dir, true, batch_name, &b, NULL);
	if (tf_path_join(sdir, sizeof(sdir), a->dir, "__schema"))
		tf_source_list(a->src, sdir, true, batch_schema, &b, NULL);
	items = b.n + b.nschemas;
	tf_fanout(items, 1, threads < items ? threads : (unsigned)items, batch_step, &b, NULL);
	for (size_t i = 0; i < b.nschemas; i++)
		free(b.schemas[i]);
	for (size_t i = 0; i < b.n; i++)
		free(b.names[i]);
	free(b.names);
	return b.got;
}

/* Whether fdir's fellows are to be read at once with it (lock held). */
static bool batch_worthy(tf_array *a, const char *fdir)
{
	const char *slash = strrchr(fdir, '/');
	size_t n = strlen("/__fragments/");

	return !a->batched && tf_source_in_flight(a->src) > 1 && slash && slash - fdir >= (ptrdiff_t)n - 1 &&
	       !strncmp(slash - (n - 1), "/__fragments/", n);
}

/* Fragment `name` in directory fdir, its metadata read once (a failure is
 * the answer for RETRY_NS); the slot comes back referenced. */
static tf_status get_fragment(tf_array *a, const char *name, const char *fdir, frag_slot **out,
			      tf_error *err)
{
	frag_slot *s, *mine = NULL;
	bool lead = false, held = false;

	pthread_mutex_lock(&a->lock);
	while (!(s = find_fragment(a, name)) && a->batching)
		pthread_cond_wait(&a->batch_done, &a->lock);
	if (!s || (!s->fr && tf_now_ns() - s->failed_at >= RETRY_NS)) {
		if ((lead = batch_worthy(a, fdir)))
			a->batched = a->batching = true;
		pthread_mutex_unlock(&a->lock);
		s = lead ? read_batch(a, fdir, name) : NULL;
		if (!s && (mine = read_fragment(a, name, fdir))) {
			pthread_mutex_lock(&a->lock);
			s = publish_fragment(a, mine);
			if (s->fr) {
				lru_unlink(a, s);
				tf_lru_hold(a->frags, &s->node);
			}
			pthread_mutex_unlock(&a->lock);
		}
		pthread_mutex_lock(&a->lock);
		if (lead) {
			a->batching = false;
			pthread_cond_broadcast(&a->batch_done);
		}
		if (!s) {
			pthread_mutex_unlock(&a->lock);
			return tf_err(err, TF_E_NOMEM, "out of memory");
		}
		held = s->fr != NULL;
	}
	if (!held && !s->fr) {
		tf_status rc = s->error.code;
		if (err)
			*err = s->error;
		pthread_mutex_unlock(&a->lock);
		return rc;
	}
	if (!held) {
		lru_unlink(a, s);	/* busy: off the list of idle ones */
		tf_lru_hold(a->frags, &s->node);
	}
	pthread_mutex_unlock(&a->lock);
	*out = s;
	return TF_OK;
}

/* Give a fragment back (lock held): idle again, the most recent. */
static void release_fragment(tf_array *a, frag_slot *s)
{
	if (tf_lru_release(&s->node) && s->fr) {
		s->bytes = tf_fragment_bytes(s->fr);	/* no one loads its lists now */
		lru_push(a, s);
	}
	trim_fragments(a);
}

static void put_fragment(tf_array *a, frag_slot *s)
{
	pthread_mutex_lock(&a->lock);
	release_fragment(a, s);
	pthread_mutex_unlock(&a->lock);
}

/* ---- descriptions ------------------------------------------------------------------------------- */

static tf_status set_paths(tf_array *a, const char *rel, const path_info *pi, tf_array_file *out,
			   tf_error *err)
{
	char path[4096];

	if (!tf_path_join(path, sizeof(path), a->dir, rel))
		return tf_err(err, TF_E_INVAL, "path too long");
	if (!(out->path = strdup(path)) ||
	    (pi->kind != P_RAW && pi->frag[0] && !(out->fragment = strdup(pi->frag))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	return TF_OK;
}

static tf_status describe_in(tf_array *a, tf_fragment *fr, const path_info *pi, const char *fdir,
			     tf_array_file *out, tf_error *err);

static tf_status describe_fragment_file(tf_array *a, const path_info *pi, tf_array_file *out,
					tf_error *err)
{
	char fdir[4096], sub[512];
	frag_slot *slot = NULL;
	tf_fragment *fr;
	tf_status rc;

	snprintf(sub, sizeof(sub), pi->in_fragments_dir ? "__fragments/%s" : "%s", pi->frag);
	if (!tf_path_join(fdir, sizeof(fdir), a->dir, sub))
		return tf_err(err, TF_E_INVAL, "path too long");
	if ((rc = get_fragment(a, pi->frag, fdir, &slot, err)) != TF_OK)
		return rc;
	fr = slot->fr;
	rc = describe_in(a, fr, pi, fdir, out, err);
	put_fragment(a, slot);
	return rc;
}

static tf_status describe_in(tf_array *a, tf_fragment *fr, const path_info *pi, const char *fdir,
			     tf_array_file *out, tf_error *err)
{
	tf_status rc;

	out->format_version = tf_fragment_version(fr);
	if (pi->kind == P_FRAG_META) {	/* generic tiles, then the footer as it is */
		out->kind = "fragment metadata";
		out->spec.generic = true;
		out->spec.generic_end = tf_fragment_footer_offset(fr);
		out->spec.key = a->key;
		return TF_OK;
	}
	if ((rc = tf_fragment_describe(fr, pi->file, &out->ff, err)) != TF_OK)
		return rc;
	out->spec = out->ff.spec;
	/* Data tiles get AES appended only in an encrypted array (§9). */
	out->spec.key = tf_array_schema_encrypted(a, tf_fragment_schema(fr)) ? a->key : NULL;
	out->kind = tf_role_name(out->ff.role);
	if (!(out->field = strdup(out->ff.field)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if (out->ff.var_file) {
		char var[4096];
		if (!tf_path_join(var, sizeof(var), fdir, out->ff.var_file) || !(out->var_path = strdup(var)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		out->spec.var_data = out->var_path;
	}
	return TF_OK;
}

tf_status tf_array_describe(tf_array *a, const char *rel, tf_array_file *out, tf_error *err)
{
	path_info pi;
	tf_status rc;

	memset(out, 0, sizeof(*out));
	tf_array_classify(rel, &pi);
	if (pi.kind == P_RAW)
		return tf_err(err, TF_E_INVAL, "%s is not decoded", rel);
	if ((rc = set_paths(a, rel, &pi, out, err)) != TF_OK) {
		tf_array_file_clear(out);
		return rc;
	}
	if (pi.kind == P_GENERIC) {
		out->kind = pi.what;
		out->spec.generic = true;
		out->spec.key = a->key;
		return TF_OK;
	}
	rc = describe_fragment_file(a, &pi, out, err);
	if (rc != TF_OK)
		tf_array_file_clear(out);
	return rc;
}

void tf_array_file_clear(tf_array_file *f)
{
	free(f->path);
	free(f->field);
	free(f->fragment);
	free(f->var_path);
	tf_fragment_file_clear(&f->ff);
	memset(f, 0, sizeof(*f));
}

/* The greatest schema file name (names start with timestamps). */
static int pick_latest(void *ctx, const char *name, const tf_stat *st)
{
	char *best = ctx;

	if (st->kind != TF_ENT_DIR && name[0] != '.' && strcmp(name, "__enumerations") &&
	    strlen(name) < 256 && strcmp(name, best) > 0)
		snprintf(best, 256, "%s", name);
	return 0;
}

tf_status tf_array_latest_schema(tf_array *a, const tf_schema **out, char **name, tf_error *err)
{
	char path[4096], best[256] = "";
	tf_status rc;

	if (tf_path_join(path, sizeof(path), a->dir, "__schema"))
		tf_source_list(a->src, path, false, pick_latest, best, NULL);
	if (!best[0])
		snprintf(best, sizeof(best), "%s", LEGACY_SCHEMA);
	rc = get_schema(a, best, out, err);
	if (rc == TF_OK && name && !(*name = strdup(best)))
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	return rc;
}

/* ---- reading beneath the array, for views (tf_snapshot) ------------------------------------- */

/* rel must stay beneath the array: no absolute path, no "." or ".." component. */
static bool rel_ok(const char *rel)
{
	const char *c = rel;

	if (!*rel || rel[0] == '/')
		return false;
	while (*c) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return !strcmp(rel, ".");
		c += n + (c[n] == '/');
	}
	return true;
}

/* rel beneath the array as a path in the array's source. */
static tf_status source_path(const tf_array *a, const char *rel, char *buf, size_t n, tf_error *err)
{
	if (!rel_ok(rel))
		return tf_err(err, TF_E_INVAL, "'%s': not a path beneath the array", rel);
	if (!strcmp(rel, ".") ? snprintf(buf, n, "%s", a->dir) >= (int)n : !tf_path_join(buf, n, a->dir, rel))
		return tf_err(err, TF_E_INVAL, "path too long");
	return TF_OK;
}

typedef struct list_ctx {
	tf_array_list_fn fn;
	void *ctx;
} list_ctx;

static int list_one(void *ctx, const char *name, const tf_stat *st)
{
	list_ctx *l = ctx;

	return l->fn(l->ctx, name, st->kind == TF_ENT_DIR);
}

tf_status tf_array_list(tf_array *a, const char *rel, tf_array_list_fn fn, void *ctx, tf_error *err)
{
	char path[4096];
	list_ctx l = { fn, ctx };
	tf_error e;
	tf_status rc = source_path(a, rel, path, sizeof(path), err);

	if (rc != TF_OK)
		return rc;
	rc = tf_source_list(a->src, path, false, list_one, &l, &e);
	if (rc == TF_E_NOTFOUND)	/* a directory the array does not have (yet) */
		return TF_OK;
	if (rc != TF_OK && err)
		*err = e;
	return rc;
}

tf_status tf_array_read(tf_array *a, const char *rel, size_t limit, tf_buf *out, tf_error *err)
{
	char path[4096];
	tf_object *o = NULL;
	uint64_t size;
	tf_status rc = source_path(a, rel, path, sizeof(path), err);

	out->len = 0;
	if (rc != TF_OK || (rc = tf_object_open(a->src, path, NULL, &o, err)) != TF_OK)
		return rc;
	size = tf_object_stat(o)->v.size;
	if (size > limit || size > out->limit)
		rc = tf_err(err, TF_E_CORRUPT, "%s: %llu bytes, more than the %zu expected", rel,
			    (unsigned long long)size, limit < out->limit ? limit : out->limit);
	else if ((rc = tf_buf_reserve(out, (size_t)size, err)) == TF_OK &&
		 (rc = tf_object_read(o, 0, out->p, (size_t)size, err)) == TF_OK)
		out->len = (size_t)size;
	tf_object_close(o);
	return rc;
}

tf_status tf_array_read_generic(tf_array *a, const char *rel, tf_buf *payload, tf_error *err)
{
	tf_buf raw = TF_BUF_INIT((size_t)64 << 20);
	tf_workspace *ws = tf_workspace_new();
	tf_status rc;

	payload->len = 0;
	if (!ws)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	rc = tf_array_read(a, rel, (size_t)64 << 20, &raw, err);
	if (rc == TF_OK && (rc = tf_generic_decode(tf_span_of(raw.p, raw.len), a->key, ws, payload, NULL,
						   err)) != TF_OK)
		tf_err_prefix(err, "%s", rel);
	tf_buf_free(&raw);
	tf_workspace_free(ws);
	return rc;
}

tf_status tf_array_fragment(tf_array *a, const char *rel_dir, tf_fragment **out, tf_error *err)
{
	const char *name = strrchr(rel_dir, '/') ? strrchr(rel_dir, '/') + 1 : rel_dir;
	char fdir[4096];
	frag_slot *slot;
	tf_status rc = source_path(a, rel_dir, fdir, sizeof(fdir), err);

	if (rc != TF_OK || (rc = get_fragment(a, name, fdir, &slot, err)) != TF_OK)
		return rc;
	*out = slot->fr;
	return TF_OK;
}

void tf_array_fragment_put(tf_array *a, const tf_fragment *fr)
{
	frag_slot *s;

	if (!fr)
		return;
	pthread_mutex_lock(&a->lock);
	s = find_fragment(a, tf_fragment_name(fr));
	if (s && s->fr == fr && s->node.refs > 0)
		release_fragment(a, s);
	pthread_mutex_unlock(&a->lock);
}

tf_status tf_array_open_file(tf_array *a, const char *rel, tf_file **out, tf_error *err)
{
	tf_array_file af;
	tf_status rc = tf_array_describe(a, rel, &af, err);

	if (rc != TF_OK)
		return rc;
	rc = tf_file_open(a->src, af.path, rel, NULL, &af.spec, out, err);
	tf_array_file_clear(&af);
	return rc;
}

size_t tf_array_idle_bytes(tf_array *a)
{
	return tf_locked_size(&a->lock, &a->idle_bytes);
}

void tf_array_trim_idle(tf_array *a, size_t bytes)
{
	pthread_mutex_lock(&a->lock);
	trim_fragments_to(a, bytes < a->idle_limit ? bytes : a->idle_limit);
	pthread_mutex_unlock(&a->lock);
}

void tf_array_set_idle_limit(tf_array *a, size_t bytes)
{
	pthread_mutex_lock(&a->lock);
	a->idle_limit = bytes;
	trim_fragments(a);
	pthread_mutex_unlock(&a->lock);
}

const tf_key *tf_array_key(const tf_array *a)
{
	return a->key;
}

const char *tf_array_dir(const tf_array *a)
{
	return a->dir;
}

tf_source *tf_array_source(const tf_array *a)
{
	return a->src;
}
