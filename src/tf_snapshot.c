/*
 * tf_snapshot.c - the fragments and delete conditions a read sees
 * (array_directory.cc, fragment_identifier.cc of TileDB 2.29), and cells of
 * their fields read through the cache.
 */
#include "config.h"

#include "tf_snapshot.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tf_tile.h"

#define NBUCKETS 64
#define LIST_LIMIT ((size_t)16 << 20)	/* .vac / .con / .ign lists */
/* consolidation_with_timestamps_min_version (constants.cc): fragments of
 * this format or later are seen once their start is past. */
#define PARTIAL_OVERLAP_VERSION 15

typedef struct col_slot {
	size_t frag;
	tf_col_kind kind;
	char *name;
	tf_col *col;
	struct col_slot *next;
} col_slot;

typedef struct enum_slot {
	char *path;
	tf_enum *e;
	struct enum_slot *next;
} enum_slot;

typedef enum { LAYOUT_PLAIN, LAYOUT_UNZIPPED, LAYOUT_ZIPPED } col_layout;

struct tf_col {
	bool missing, var, nullable;
	tf_datatype type;
	unsigned cell_size;	/* bytes of one cell of this field (8: var offsets) */
	unsigned stored;	/* bytes per cell in the data file (legacy
				 * __coords: every dimension's value) */
	col_layout layout;	/* legacy __coords: dimension `dim` of `ndims` */
	unsigned dim, ndims, value_size;
	/* each file as the version first indexed: one open per column, kept
	 * while the snapshot lives (a fragment's files never change) */
	tf_handle *data, *vfile, *validity;
	tf_cache *cache;
};

struct tf_snapshot {
	atomic_int refs;
	tf_array *a;
	tf_cache *cache;
	const tf_schema *schema;
	uint64_t now, fingerprint;
	tf_snap_frag *frags;
	size_t nfrags;
	size_t *visible, nvisible;
	tf_snap_delete *dels;
	size_t ndels;
	pthread_mutex_t lock;	/* guards cols and enums */
	col_slot *cols[NBUCKETS];
	enum_slot *enums;
};

/* ---- names ---------------------------------------------------------------------------------- */

typedef struct names {
	char **v;
	bool *dir;
	size_t n, cap;
	bool failed;
} names;

static int collect(void *ctx, const char *name, bool is_dir)
{
	names *l = ctx;

	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		char **v = realloc(l->v, cap * sizeof(*v));
		bool *d = v ? realloc(l->dir, cap * sizeof(*d)) : NULL;
		if (v)
			l->v = v;
		if (!d) {
			l->failed = true;
			return 1;
		}
		l->dir = d;
		l->cap = cap;
	}
	if (!(l->v[l->n] = strdup(name))) {
		l->failed = true;
		return 1;
	}
	l->dir[l->n++] = is_dir;
	return 0;
}

static void names_free(names *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	free(l->dir);
	memset(l, 0, sizeof(*l));
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !memcmp(s + n - m, suffix, m);
}

static bool contains(const names *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], s))
			return true;
	return false;
}

static tf_status list_dir(tf_array *a, const char *rel, names *out, tf_error *err)
{
	tf_status rc = tf_array_list(a, rel, collect, out, err);

	if (rc == TF_OK && out->failed)
		rc = tf_err(err, TF_E_NOMEM, "out of memory listing %s", rel);
	return rc;
}

/*
 * Timestamps and format version of a fragment (or commit) name, as
 * FragmentID reads them: "__t1_t2_uuid_v" (5 '_'), "__t1_t2_uuid" (format
 * 4, a 32-digit last part), "__uuid_t" (formats 1-2).  Extensions are
 * ignored.  False if the name is none of these.
 */
static bool parse_name(const char *name, uint64_t *t1, uint64_t *t2, uint32_t *version)
{
	char stem[512], *last;
	size_t underscores = 0;
	unsigned long long a, b, v;

	if (strncmp(name, "__", 2) || snprintf(stem, sizeof(stem), "%s", name) >= (int)sizeof(stem))
		return false;
	if (strchr(stem, '.'))
		*strrchr(stem, '.') = '\0';
	for (const char *c = stem; *c; c++)
		underscores += *c == '_';
	if (!(last = strrchr(stem, '_')))
		return false;
	if (underscores == 5 && sscanf(stem, "__%llu_%llu_", &a, &b) == 2 && sscanf(last + 1, "%llu", &v) == 1) {
		*version = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	} else if (strlen(last + 1) == 32 && sscanf(stem, "__%llu_%llu_", &a, &b) == 2) {
		*version = 4;
	} else if (underscores == 3 && sscanf(last + 1, "%llu", &a) == 1) {
		b = a;
		*version = 2;
	} else {
		return false;
	}
	*t1 = a, *t2 = b;
	return a <= b;
}

/* The fragment name in a vacuum-list line ("/__fragments/NAME", a full
 * URI ending that way, or ".../NAME" before format 12). */
static const char *vac_name(const char *line)
{
	const char *f = strstr(line, "__fragments/"), *slash = strrchr(line, '/');

	return f ? f + strlen("__fragments/") : slash ? slash + 1 : line;
}

/* ---- what is committed, vacuumed, deleted --------------------------------------------------- */

typedef struct commits {
	names committed;	/* fragment names with a commit */
	names vacuumed;		/* fragment names in vacuum lists */
	names ignored;		/* .ign: commit lines to skip in .con */
	names del_seen;		/* delete markers already read */
} commits;

static void commits_free(commits *c)
{
	names_free(&c->committed);
	names_free(&c->vacuumed);
	names_free(&c->ignored);
	names_free(&c->del_seen);
}

/* Call fn for each '\n'-terminated line of a text file. */
static tf_status read_lines(tf_array *a, const char *rel, names *into, bool vac, tf_error *err)
{
	tf_buf b = TF_BUF_INIT(LIST_LIMIT + 1);
	tf_status rc = tf_array_read(a, rel, LIST_LIMIT, &b, err);
	size_t pos = 0;

	while (rc == TF_OK && pos < b.len) {
		const uint8_t *nl = memchr(b.p + pos, '\n', b.len - pos);
		size_t end = nl ? (size_t)(nl - b.p) : b.len;
		char line[1024];

		if (end > pos && end - pos < sizeof(line)) {
			memcpy(line, b.p + pos, end - pos);
			line[end - pos] = '\0';
			collect(into, vac ? vac_name(line) : line, false);
		}
		pos = end + 1;
	}
	if (rc == TF_OK && into->failed)
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	tf_buf_free(&b);
	return rc;
}

static tf_status add_delete(tf_snapshot *s, const char *marker, tf_span payload, tf_error *err)
{
	uint64_t t1, t2;
	uint32_t v;
	tf_snap_delete *d;
	tf_status rc;

	if (!parse_name(strrchr(marker, '/') ? strrchr(marker, '/') + 1 : marker, &t1, &t2, &v))
		return tf_err(err, TF_E_CORRUPT, "%s: not a commit name", marker);
	if (!(d = realloc(s->dels, (s->ndels + 1) * sizeof(*d))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	s->dels = d;
	d = &s->dels[s->ndels];
	memset(d, 0, sizeof(*d));
	if ((rc = tf_cond_parse(payload, &d->cond, err)) != TF_OK)
		return tf_err_prefix(err, "%s", marker);
	if (!(d->marker = strdup(marker))) {
		tf_cond_free(d->cond);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	d->t = t1;
	s->ndels++;
	return TF_OK;
}

/* A consolidated commits list (.con): lines "__commits/NAME.wrt" and
 * "__commits/NAME.del" each followed by u64 size + the .del generic tile
 * (array_directory.cc load_consolidated_commit_uris). */
static tf_status read_con(tf_snapshot *s, commits *c, const char *rel, tf_error *err)
{
	tf_buf b = TF_BUF_INIT(LIST_LIMIT + 1), payload = TF_BUF_INIT((size_t)64 << 20);
	tf_workspace *ws = tf_workspace_new();
	tf_status rc = ws ? tf_array_read(s->a, rel, LIST_LIMIT, &b, err) : tf_err(err, TF_E_NOMEM, "out of memory");
	size_t pos = 0;

	while (rc == TF_OK && pos < b.len) {
		const uint8_t *nl = memchr(b.p + pos, '\n', b.len - pos);
		size_t end = nl ? (size_t)(nl - b.p) : b.len;
		char line[1024], *base;
		uint64_t size = 0;

		if (end - pos >= sizeof(line)) {
			rc = tf_err(err, TF_E_CORRUPT, "line too long");
			break;
		}
		memcpy(line, b.p + pos, end - pos);
		line[end - pos] = '\0';
		pos = end + 1;
		base = strrchr(line, '/') ? strrchr(line, '/') + 1 : line;
		if (has_suffix(line, ".wrt") && !contains(&c->ignored, line)) {
			base[strlen(base) - 4] = '\0';
			collect(&c->committed, base, false);
		} else if (has_suffix(line, ".del")) {
			if (pos > b.len || b.len - pos < 8 || (size = tf_le64(b.p + pos)) > b.len - pos - 8)
				rc = tf_err(err, TF_E_CORRUPT, "%s: delete tile of %s cut short", rel, line);
			else if (!contains(&c->ignored, line) && !contains(&c->del_seen, base) &&
				 (rc = tf_generic_decode(tf_span_of(b.p + pos + 8, (size_t)size), tf_array_key(s->a),
							 ws, &payload, NULL, err)) == TF_OK) {
				collect(&c->del_seen, base, false);
				rc = add_delete(s, line, tf_span_of(payload.p, payload.len), err);
				payload.len = 0;
			}
			pos += 8 + (size_t)size;
		}
	}
	tf_buf_free(&b);
	tf_buf_free(&payload);
	tf_workspace_free(ws);
	return rc == TF_OK ? rc : tf_err_prefix(err, "%s", rel);
}

static tf_status read_commits(tf_snapshot *s, const names *cdir, const names *root, commits *c,
			      tf_error *err)
{
	char rel[1024];
	tf_buf payload = TF_BUF_INIT((size_t)64 << 20);
	tf_status rc = TF_OK;

	for (size_t i = 0; i < cdir->n && rc == TF_OK; i++)
		if (has_suffix(cdir->v[i], ".ign") && snprintf(rel, sizeof(rel), "__commits/%s", cdir->v[i]) < (int)sizeof(rel))
			rc = read_lines(s->a, rel, &c->ignored, false, err);
	for (size_t i = 0; i < cdir->n && rc == TF_OK; i++) {
		const char *n = cdir->v[i];

		snprintf(rel, sizeof(rel), "__commits/%s", n);
		if (has_suffix(n, ".con"))
			rc = read_con(s, c, rel, err);
		else if (has_suffix(n, ".vac"))
			rc = read_lines(s->a, rel, &c->vacuumed, true, err);
		else if (has_suffix(n, ".wrt") && strlen(n) < 512) {
			char stem[512];
			snprintf(stem, sizeof(stem), "%.*s", (int)(strlen(n) - 4), n);
			collect(&c->committed, stem, false);
		}
	}
	for (size_t i = 0; i < root->n && rc == TF_OK; i++)	/* before format 12 */
		if (has_suffix(root->v[i], ".vac"))
			rc = read_lines(s->a, root->v[i], &c->vacuumed, true, err);
	/* Delete commits not already read from a .con list. */
	for (size_t i = 0; i < cdir->n && rc == TF_OK; i++) {
		if (!has_suffix(cdir->v[i], ".del") || contains(&c->del_seen, cdir->v[i]))
			continue;
		snprintf(rel, sizeof(rel), "__commits/%s", cdir->v[i]);
		if ((rc = tf_array_read_generic(s->a, rel, &payload, err)) == TF_OK)
			rc = add_delete(s, rel, tf_span_of(payload.p, payload.len), err);
	}
	tf_buf_free(&payload);
	if (rc == TF_OK && (c->committed.failed || c->vacuumed.failed || c->del_seen.failed))
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	return rc;
}

/* ---- fragments -------------------------------------------------------------------------------- */

static bool is_internal(const char *name)
{
	static const char *const dirs[] = { "__schema", "__meta", "__commits", "__fragment_meta",
					    "__labels", "__fragments" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (!strcmp(name, dirs[i]))
			return true;
	return false;
}

static tf_status add_frag(tf_snapshot *s, const char *dir, const char *name, tf_error *err)
{
	tf_snap_frag *v, *f;
	uint64_t t1, t2;
	uint32_t version;

	if (!parse_name(name, &t1, &t2, &version) || strchr(name, '.'))
		return TF_OK;	/* not a fragment */
	if (!(v = realloc(s->frags, (s->nfrags + 1) * sizeof(*v))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	s->frags = v;
	f = &v[s->nfrags];
	memset(f, 0, sizeof(*f));
	if (!(f->name = strdup(name)) || asprintf(&f->rel, "%s%s", dir, name) < 0) {
		free(f->name);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	f->t1 = t1, f->t2 = t2, f->version = version;
	s->nfrags++;
	return TF_OK;
}

/* Whether a fragment is committed (fragment_uris_v1_v11, _v12_or_higher). */
static bool committed(tf_snapshot *s, const tf_snap_frag *f, const commits *c, const names *root,
		      const names *fdir)
{
	char ok[600];
	names inside = { 0 };
	bool found;

	snprintf(ok, sizeof(ok), "%s.ok", f->name);
	if (contains(&c->committed, f->name) || contains(root, ok) || contains(fdir, ok))
		return true;
	if (f->version >= 5 || strncmp(f->rel, f->name, strlen(f->name)))
		return false;
	/* Formats before 5 commit nothing: a fragment directory with metadata is one. */
	found = tf_array_list(s->a, f->rel, collect, &inside, NULL) == TF_OK &&
		contains(&inside, "__fragment_metadata.tdb");
	names_free(&inside);
	return found;
}

static int cmp_visible(const void *pa, const void *pb, void *ctx)
{
	const tf_snapshot *s = ctx;
	const tf_snap_frag *a = &s->frags[*(const size_t *)pa], *b = &s->frags[*(const size_t *)pb];

	if (a->t1 != b->t1)	/* TimestampedURI::operator< : start timestamps */
		return a->t1 < b->t1 ? -1 : 1;
	if (a->t2 != b->t2)
		return a->t2 < b->t2 ? -1 : 1;
	return strcmp(a->name, b->name);
}

static int cmp_frag_name(const void *pa, const void *pb)
{
	return strcmp(((const tf_snap_frag *)pa)->name, ((const tf_snap_frag *)pb)->name);
}

/* A domain value (integer or date/time type t) minus the domain's lower
 * bound, as the unsigned distance. */
static uint64_t dim_offset(tf_datatype t, const uint8_t *v, const uint8_t *lo)
{
	unsigned size = tf_datatype_size(t);
	uint64_t a = tf_le_n(v, size), b = tf_le_n(lo, size);

	if ((tf_datatype_is_signed(t) || tf_datatype_is_datetime(t)) && size < 8) {
		a = (uint64_t)((int64_t)(a << (64 - 8 * size)) >> (64 - 8 * size));
		b = (uint64_t)((int64_t)(b << (64 - 8 * size)) >> (64 - 8 * size));
	}
	return a - b;
}

/* Dense fragments: the non-empty domain and its tiles, per dimension. */
static tf_status dense_box(tf_snap_frag *f, tf_error *err)
{
	const tf_schema *sc = f->schema;
	size_t n = sc->ndims;
	tf_span lo, hi;
	tf_status rc;

	if (!(f->lo = calloc(4 * n, sizeof(uint64_t))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	f->hi = f->lo + n, f->tlo = f->hi + n, f->tn = f->tlo + n;
	f->ntiles = 1;
	for (size_t d = 0; d < n; d++) {
		const tf_field *dim = &sc->dims[d];
		unsigned size = tf_datatype_size(dim->type);
		uint64_t ext = tf_schema_dim_extent(dim);

		if ((rc = tf_fragment_ned(f->fr, d, &lo, &hi, err)) != TF_OK)
			return rc;
		if (!dim->has_extent || ext == 0 || tf_datatype_is_real(dim->type) || lo.n != size || hi.n != size)
			return tf_err(err, TF_E_UNSUPPORTED, "fragment %s: dimension %s is not an integer "
				      "dimension with a tile extent", f->name, dim->name);
		f->lo[d] = dim_offset(dim->type, lo.p, dim->domain);
		f->hi[d] = dim_offset(dim->type, hi.p, dim->domain);
		if (f->lo[d] > f->hi[d] || f->hi[d] > dim_offset(dim->type, dim->domain + size, dim->domain))
			return tf_err(err, TF_E_CORRUPT, "fragment %s: non-empty domain of %s outside the "
				      "domain", f->name, dim->name);
		f->tlo[d] = f->lo[d] / ext;
		f->tn[d] = f->hi[d] / ext - f->tlo[d] + 1;
		if (f->ntiles > UINT64_MAX / f->tn[d])
			return tf_err(err, TF_E_CORRUPT, "fragment %s: too many tiles", f->name);
		f->ntiles *= f->tn[d];
	}
	return TF_OK;
}

static void load_metadata(tf_snapshot *s, tf_snap_frag *f)
{
	tf_status rc = tf_array_fragment(s->a, f->rel, &f->fr, &f->error);

	if (rc != TF_OK) {
		f->fr = NULL;
		return;
	}
	f->schema = tf_fragment_schema(f->fr);
	f->dense = tf_fragment_dense(f->fr);
	f->has_ts = tf_fragment_has_timestamps(f->fr);
	f->has_dm = tf_fragment_has_delete_meta(f->fr);
	if (!f->dense)
		f->ntiles = tf_fragment_sparse_tiles(f->fr);
	else if (dense_box(f, &f->error) != TF_OK) {
		tf_array_fragment_put(s->a, f->fr);
		f->fr = NULL;
	}
}

static tf_status list_fragments(tf_snapshot *s, const names *root, const names *fdir, tf_error *err)
{
	tf_status rc = TF_OK;

	for (size_t i = 0; i < fdir->n && rc == TF_OK; i++)
		if (fdir->dir[i])
			rc = add_frag(s, "__fragments/", fdir->v[i], err);
	for (size_t i = 0; i < root->n && rc == TF_OK; i++)	/* formats before 12 */
		if (root->dir[i] && !is_internal(root->v[i]))
			rc = add_frag(s, "", root->v[i], err);
	if (rc == TF_OK && s->nfrags)
		qsort(s->frags, s->nfrags, sizeof(*s->frags), cmp_frag_name);
	return rc;
}

static tf_status choose_visible(tf_snapshot *s, const commits *c, const names *root, const names *fdir,
				tf_error *err)
{
	if (!(s->visible = malloc((s->nfrags ? s->nfrags : 1) * sizeof(size_t))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (size_t i = 0; i < s->nfrags; i++) {
		tf_snap_frag *f = &s->frags[i];
		bool in_time = f->version >= PARTIAL_OVERLAP_VERSION ? f->t1 <= s->now : f->t2 <= s->now;

		f->visible = in_time && !contains(&c->vacuumed, f->name) && committed(s, f, c, root, fdir);
		load_metadata(s, f);
		if (f->visible)
			s->visible[s->nvisible++] = i;
	}
	if (s->nvisible)
		qsort_r(s->visible, s->nvisible, sizeof(size_t), cmp_visible, s);
	return TF_OK;
}

/* ---- the state fingerprint ----------------------------------------------------------------- */

static uint64_t hash_names(uint64_t h, const names *l)
{
	/* Order-independent: listings come in directory order. */
	uint64_t sum = 0;

	for (size_t i = 0; i < l->n; i++) {
		uint64_t x = 1469598103934665603ull;
		for (const char *c = l->v[i]; *c; c++)
			x = (x ^ (uint8_t)*c) * 1099511628211ull;
		sum += x * 0x9e3779b97f4a7c15ull ^ (x >> 29);
	}
	return (h ^ sum ^ l->n) * 1099511628211ull;
}

static tf_status fingerprint(tf_array *a, uint64_t *out, names *root, names *fdir, names *cdir,
			     tf_error *err)
{
	names schemas = { 0 }, enums = { 0 };
	tf_status rc;

	if ((rc = list_dir(a, ".", root, err)) == TF_OK && (rc = list_dir(a, "__fragments", fdir, err)) == TF_OK &&
	    (rc = list_dir(a, "__commits", cdir, err)) == TF_OK &&
	    (rc = list_dir(a, "__schema", &schemas, err)) == TF_OK)
		rc = list_dir(a, "__schema/__enumerations", &enums, err);
	*out = hash_names(hash_names(hash_names(hash_names(hash_names(0, root), fdir), cdir), &schemas),
			  &enums);
	names_free(&schemas);
	names_free(&enums);
	return rc;
}

bool tf_snapshot_current(tf_snapshot *s)
{
	names root = { 0 }, fdir = { 0 }, cdir = { 0 };
	uint64_t now;
	bool same = fingerprint(s->a, &now, &root, &fdir, &cdir, NULL) == TF_OK && now == s->fingerprint;

	names_free(&root);
	names_free(&fdir);
	names_free(&cdir);
	return same;
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
	names root = { 0 }, fdir = { 0 }, cdir = { 0 };
	commits c = { 0 };
	tf_status rc;

	if ((rc = fingerprint(s->a, &s->fingerprint, &root, &fdir, &cdir, err)) == TF_OK &&
	    (rc = tf_array_latest_schema(s->a, &s->schema, NULL, err)) == TF_OK &&
	    (rc = read_commits(s, &cdir, &root, &c, err)) == TF_OK &&
	    (rc = list_fragments(s, &root, &fdir, err)) == TF_OK)
		rc = choose_visible(s, &c, &root, &fdir, err);
	if (rc == TF_OK && s->ndels)
		qsort(s->dels, s->ndels, sizeof(*s->dels), cmp_delete);
	commits_free(&c);
	names_free(&root);
	names_free(&fdir);
	names_free(&cdir);
	return rc;
}

tf_status tf_snapshot_open(tf_array *a, tf_cache *cache, tf_snapshot **out, tf_error *err)
{
	tf_snapshot *s = calloc(1, sizeof(*s));
	tf_status rc;

	if (!s)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	atomic_init(&s->refs, 1);
	s->a = a;
	s->cache = cache;
	s->now = now_ms();
	pthread_mutex_init(&s->lock, NULL);
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

static void col_free(tf_col *c)
{
	if (!c)
		return;
	tf_handle_close(c->data);
	tf_handle_close(c->vfile);
	tf_handle_close(c->validity);
	free(c);
}

void tf_snapshot_unref(tf_snapshot *s)
{
	if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	for (size_t b = 0; b < NBUCKETS; b++)
		for (col_slot *c = s->cols[b], *next; c; c = next) {
			next = c->next;
			col_free(c->col);
			free(c->name);
			free(c);
		}
	for (enum_slot *e = s->enums, *next; e; e = next) {
		next = e->next;
		tf_enum_free(e->e);
		free(e->path);
		free(e);
	}
	for (size_t i = 0; i < s->nfrags; i++) {
		tf_array_fragment_put(s->a, s->frags[i].fr);
		free(s->frags[i].name);
		free(s->frags[i].rel);
		free(s->frags[i].lo);
	}
	for (size_t i = 0; i < s->ndels; i++) {
		tf_cond_free(s->dels[i].cond);
		free(s->dels[i].marker);
	}
	free(s->frags);
	free(s->visible);
	free(s->dels);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

tf_array *tf_snapshot_array(const tf_snapshot *s) { return s->a; }
tf_cache *tf_snapshot_cache(const tf_snapshot *s) { return s->cache; }
const tf_schema *tf_snapshot_schema(const tf_snapshot *s) { return s->schema; }
uint64_t tf_snapshot_time(const tf_snapshot *s) { return s->now; }
size_t tf_snapshot_nfrags(const tf_snapshot *s) { return s->nfrags; }
const tf_snap_frag *tf_snapshot_frag(const tf_snapshot *s, size_t i) { return &s->frags[i]; }
size_t tf_snapshot_nvisible(const tf_snapshot *s) { return s->nvisible; }
size_t tf_snapshot_visible(const tf_snapshot *s, size_t k) { return s->visible[k]; }
size_t tf_snapshot_ndeletes(const tf_snapshot *s) { return s->ndels; }
const tf_snap_delete *tf_snapshot_delete(const tf_snapshot *s, size_t i) { return &s->dels[i]; }

size_t tf_snapshot_find(const tf_snapshot *s, const char *name)
{
	for (size_t i = 0; i < s->nfrags; i++)
		if (!strcmp(s->frags[i].name, name))
			return i;
	return SIZE_MAX;
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

/* ---- columns ------------------------------------------------------------------------------------ */

static tf_status open_role(tf_snapshot *s, const tf_snap_frag *f, const char *field, tf_role role,
			   tf_handle **out, tf_error *err)
{
	char file[1100], rel[2048];
	tf_file *tf;
	tf_status rc;

	if (!tf_fragment_field_file(f->fr, field, role, file, sizeof(file)) ||
	    snprintf(rel, sizeof(rel), "%s/%s", f->rel, file) >= (int)sizeof(rel))
		return tf_err(err, TF_E_CORRUPT, "fragment %s has no file for %s", f->name, field);
	if ((rc = tf_array_open_file(s->a, rel, &tf, err)) != TF_OK)
		return rc;
	rc = tf_handle_open(tf, out, err);
	tf_file_unref(tf);
	return rc;
}

/* Format 1 stored coordinates zipped unless compressed (§8.3). */
static bool compressed(const tf_pipeline *p)
{
	for (size_t i = 0; p && i < tf_pipeline_count(p); i++) {
		const tf_filter_class *fc = tf_pipeline_class(p, i);
		if (fc && (fc->id == TF_F_GZIP || fc->id == TF_F_ZSTD || fc->id == TF_F_LZ4 || fc->id == TF_F_RLE ||
			   fc->id == TF_F_BZIP2 || fc->id == TF_F_DOUBLE_DELTA || fc->id == TF_F_DICTIONARY ||
			   fc->id == TF_F_DELTA))
			return true;
	}
	return false;
}

/* Which field of the fragment's own schema the column reads. */
static tf_status resolve_col(tf_snapshot *s, const tf_snap_frag *f, tf_col_kind kind, const char *name,
			     tf_col *c, const char **file_field, tf_error *err)
{
	const tf_schema *fs = f->schema;
	const tf_field *want = NULL, *have = NULL;
	bool attr = kind == TF_COL_ATTR || kind == TF_COL_OWN_ATTR;

	*file_field = name;
	c->value_size = 8;
	if (kind == TF_COL_TIMESTAMPS || kind == TF_COL_DELETE_TS) {
		c->type = TF_DT_UINT64;
		c->missing = kind == TF_COL_TIMESTAMPS ? !f->has_ts : !f->has_dm;
		*file_field = kind == TF_COL_TIMESTAMPS ? "__timestamps" : "__delete_timestamps";
		return TF_OK;
	}
	for (size_t i = 0; kind == TF_COL_DIM && i < fs->ndims; i++)
		if (!strcmp(fs->dims[i].name, name))
			have = want = &fs->dims[i], c->dim = (unsigned)i;
	if (attr) {
		have = tf_schema_attr(fs, name);
		want = kind == TF_COL_ATTR ? tf_schema_attr(s->schema, name) : have;
		if (!want)
			want = have;	/* a fragment's own attribute (per-fragment views) */
	}
	if (!want)
		return tf_err(err, TF_E_INVAL, "no field %s", name);
	c->type = want->type;
	c->var = want->cell_val_num == TF_CELL_VAR;
	c->nullable = attr && want->nullable;
	c->value_size = tf_datatype_size(want->type);
	c->missing = !have || have->type != want->type || have->cell_val_num != want->cell_val_num ||
		     have->nullable != want->nullable;
	if (kind == TF_COL_DIM && tf_fragment_version(f->fr) < 5) {	/* legacy __coords (§8.3) */
		c->layout = tf_fragment_version(f->fr) == 1 && !compressed(fs->coords) ? LAYOUT_ZIPPED
										       : LAYOUT_UNZIPPED;
		c->ndims = (unsigned)fs->ndims;
		c->value_size = tf_datatype_size(fs->dims[0].type);
		*file_field = "__coords";
	}
	return TF_OK;
}

static tf_status open_col(tf_snapshot *s, size_t frag, tf_col_kind kind, const char *name, tf_col **out,
			  tf_error *err)
{
	const tf_snap_frag *f = &s->frags[frag];
	tf_col *c = calloc(1, sizeof(*c));
	const char *field;
	tf_status rc;

	if (!c)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	c->cache = s->cache;
	if (!f->fr) {
		free(c);
		if (err)
			*err = f->error;
		return f->error.code ? f->error.code : TF_E_CORRUPT;
	}
	rc = resolve_col(s, f, kind, name, c, &field, err);
	c->cell_size = c->var ? 8 : c->value_size;
	/* A parsed schema's cells are at most TF_CELL_BYTES_MAX bytes, and
	 * legacy coordinates as many values as it has dimensions. */
	if (rc == TF_OK && !c->var && (kind == TF_COL_ATTR || kind == TF_COL_OWN_ATTR) && !c->missing)
		c->cell_size = (unsigned)tf_field_cell_bytes(tf_schema_attr(f->schema, name));
	c->stored = c->layout != LAYOUT_PLAIN ? (unsigned)tf_u64_mul_sat(c->value_size, c->ndims) : c->cell_size;
	if (rc == TF_OK && (c->cell_size == 0 || c->stored == 0 || c->stored > TF_CELL_BYTES_MAX))
		rc = tf_err(err, TF_E_CORRUPT, "cells of %u bytes", c->stored);
	if (rc == TF_OK && !c->missing) {
		rc = open_role(s, f, field, c->var ? TF_ROLE_OFFSETS : TF_ROLE_DATA, &c->data, err);
		if (rc == TF_OK && c->var)
			rc = open_role(s, f, field, TF_ROLE_VAR, &c->vfile, err);
		if (rc == TF_OK && c->nullable)
			rc = open_role(s, f, field, TF_ROLE_VALIDITY, &c->validity, err);
	}
	if (rc != TF_OK) {
		col_free(c);
		return tf_err_prefix(err, "fragment %s, field %s", f->name, name);
	}
	*out = c;
	return TF_OK;
}

tf_status tf_snapshot_col(tf_snapshot *s, size_t frag, tf_col_kind kind, const char *name,
			  const tf_col **out, tf_error *err)
{
	size_t h = frag * 31 + (size_t)kind;
	col_slot *slot;
	tf_status rc = TF_OK;

	for (const char *c = name; *c; c++)
		h = h * 33 + (unsigned char)*c;
	pthread_mutex_lock(&s->lock);
	for (slot = s->cols[h % NBUCKETS]; slot; slot = slot->next)
		if (slot->frag == frag && slot->kind == kind && !strcmp(slot->name, name))
			break;
	if (!slot) {
		if (!(slot = calloc(1, sizeof(*slot))) || !(slot->name = strdup(name))) {
			free(slot);
			slot = NULL;
			rc = tf_err(err, TF_E_NOMEM, "out of memory");
		} else if ((rc = open_col(s, frag, kind, name, &slot->col, err)) != TF_OK) {
			free(slot->name);
			free(slot);
			slot = NULL;
		} else {
			slot->frag = frag, slot->kind = kind;
			slot->next = s->cols[h % NBUCKETS];
			s->cols[h % NBUCKETS] = slot;
		}
	}
	pthread_mutex_unlock(&s->lock);
	*out = slot ? slot->col : NULL;
	return rc;
}

bool tf_col_missing(const tf_col *c) { return c->missing; }
bool tf_col_var(const tf_col *c) { return c->var; }
bool tf_col_nullable(const tf_col *c) { return c->nullable; }
unsigned tf_col_cell_size(const tf_col *c) { return c->cell_size; }

/* Exactly len bytes at off of h's decoded bytes. */
static tf_status read_exact(const tf_col *c, tf_handle *h, tf_workspace *ws, uint64_t off, uint64_t len,
			    uint8_t *dst, tf_error *err)
{
	const tf_file *f = tf_handle_file(h);
	size_t got = 0;
	tf_status rc;

	if (len == 0)
		return TF_OK;
	if (len > SIZE_MAX)
		return tf_err(err, TF_E_NOMEM, "read too large");
	rc = tf_handle_read(h, c->cache, ws, off, (size_t)len, dst, &got, err);
	if (rc == TF_OK && got != len)
		rc = tf_err(err, TF_E_CORRUPT, "%s: %llu bytes wanted at %llu, the file decodes to %llu",
			    tf_file_name(f), (unsigned long long)len, (unsigned long long)off,
			    (unsigned long long)tf_file_size(f));
	return rc;
}

/* Tile t of h's file: where it starts in the decoded file and how long it
 * is.  The length the fragment metadata gives is proven first: the tile's
 * stored chunk headers must add up to it (read once per tile; nothing is
 * decoded), so no caller sizes a buffer by a claim alone. */
static tf_status tile_range(tf_handle *h, uint64_t t, uint64_t *off, uint64_t *size, tf_error *err)
{
	const tf_file *f = tf_handle_file(h);
	size_t units;
	tf_status rc;

	if (t >= tf_file_ntiles(f))
		return tf_err(err, TF_E_CORRUPT, "%s: tile %llu of %zu", tf_file_name(f), (unsigned long long)t,
			      tf_file_ntiles(f));
	if ((rc = tf_handle_tile_units(h, (size_t)t, &units, err)) != TF_OK)
		return rc;
	tf_file_tile_range(f, (size_t)t, off, size);
	return TF_OK;
}

/* Cells [cell, cell + n) of cell_size bytes are in a tile of size bytes. */
static tf_status cells_in(const tf_handle *h, uint64_t size, uint64_t cell_size, uint64_t cell, uint64_t n,
			  tf_error *err)
{
	if (cell_size == 0 || size % cell_size || cell > size / cell_size || n > size / cell_size - cell)
		return tf_err(err, TF_E_CORRUPT, "%s: cells %llu+%llu of a tile of %llu bytes (%llu per cell)",
			      tf_file_name(tf_handle_file(h)), (unsigned long long)cell, (unsigned long long)n,
			      (unsigned long long)size, (unsigned long long)cell_size);
	return TF_OK;
}

tf_status tf_col_check_cells(const tf_col *c, uint64_t tile, uint64_t cell, uint64_t n, tf_error *err)
{
	uint64_t off, size;
	tf_status rc = TF_OK;

	if (c->missing)
		return TF_OK;
	if ((rc = tile_range(c->data, tile, &off, &size, err)) != TF_OK ||
	    (rc = cells_in(c->data, size, c->var ? 8 : c->stored, cell, n, err)) != TF_OK)
		return rc;
	if (c->var && (rc = tile_range(c->vfile, tile, &off, &size, err)) != TF_OK)
		return rc;
	if (c->validity && ((rc = tile_range(c->validity, tile, &off, &size, err)) != TF_OK ||
			    (rc = cells_in(c->validity, size, 1, cell, n, err)) != TF_OK))
		return rc;
	return TF_OK;
}

/* Legacy zipped coordinates: dimension c->dim of each cell. */
static tf_status read_zipped(const tf_col *c, tf_workspace *ws, uint64_t off, uint64_t n, uint8_t *dst,
			     tf_error *err)
{
	uint64_t cell = c->stored, bytes;
	uint8_t *tmp = tf_u64_mul(n, cell, &bytes) && bytes <= SIZE_MAX ? malloc(bytes ? (size_t)bytes : 1) : NULL;
	tf_status rc;

	if (!tmp)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	rc = read_exact(c, c->data, ws, off, bytes, tmp, err);
	for (uint64_t i = 0; rc == TF_OK && i < n; i++)
		memcpy(dst + i * c->value_size, tmp + i * cell + (uint64_t)c->dim * c->value_size, c->value_size);
	free(tmp);
	return rc;
}

tf_status tf_col_fixed(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell, uint64_t n,
		       uint8_t *dst, tf_error *err)
{
	uint64_t off, size, vs = c->value_size, ncells;
	tf_status rc;

	if (c->missing || c->var)
		return tf_err(err, TF_E_INVAL, "not a fixed-size column");
	if ((rc = tile_range(c->data, tile, &off, &size, err)) != TF_OK ||
	    (rc = cells_in(c->data, size, c->stored, cell, n, err)) != TF_OK)
		return rc;
	switch (c->layout) {
	case LAYOUT_UNZIPPED:	/* all of dimension 0, then all of 1, ... (§8.3) */
		ncells = size / c->stored;
		return read_exact(c, c->data, ws, off + ((uint64_t)c->dim * ncells + cell) * vs, n * vs, dst, err);
	case LAYOUT_ZIPPED:
		return read_zipped(c, ws, off + cell * c->stored, n, dst, err);
	default:
		return read_exact(c, c->data, ws, off + cell * c->cell_size, n * c->cell_size, dst, err);
	}
}

void tf_pinset_init(tf_pinset *ps, tf_cache *cache)
{
	memset(ps, 0, sizeof(*ps));
	ps->cache = cache;
}

static void unpin_slot(tf_pinset *ps, size_t i)
{
	tf_cache_release(ps->cache, ps->p[i].unit.e, ps->p[i].taken >= ps->p[i].unit.n);
}

void tf_pinset_release(tf_pinset *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		unpin_slot(ps, i);
	ps->n = 0;
	tf_slices_free(&ps->scratch);
}

/*
 * Pin the decode unit of h holding byte off into slot i.  A one-byte pin
 * gives one slice of that unit's cache entry, which holds the whole unit's
 * decoded bytes: where the slice points into it says where the unit
 * starts.  The entry stays pinned (the slice is the set's) until released.
 */
static tf_status pin_unit_at(tf_pinset *ps, size_t i, tf_handle *h, tf_workspace *ws, uint64_t off,
			     tf_error *err)
{
	tf_slice *sl;
	tf_status rc = tf_handle_pin(h, ps->cache, ws, off, 1, &ps->scratch, err);

	if (rc != TF_OK)
		return rc;
	if (ps->scratch.n != 1) {
		tf_handle_unpin(ps->cache, &ps->scratch, false);
		return tf_err(err, TF_E_CORRUPT, "%s: no unit holds byte %llu", tf_file_name(tf_handle_file(h)),
			      (unsigned long long)off);
	}
	sl = &ps->scratch.v[0];
	ps->p[i].h = h;
	ps->p[i].unit = (tf_slice){ tf_cache_data(sl->e), tf_cache_len(sl->e), sl->e, true };
	ps->p[i].off = off - (uint64_t)(sl->p - ps->p[i].unit.p);
	ps->p[i].taken = 0;
	ps->scratch.n = 0;	/* the entry is ours now: not unpinned with the scratch */
	ps->scratch.bytes = 0;
	return TF_OK;
}

/* The held unit of h holding byte off, pinning it (and letting the least
 * recently used one go) if none does. */
static tf_status pinned_at(tf_pinset *ps, tf_handle *h, tf_workspace *ws, uint64_t off, size_t *slot,
			   tf_error *err)
{
	size_t i, lru = 0;
	tf_status rc;

	for (i = 0; i < ps->n; i++) {
		if (ps->p[i].h == h && off >= ps->p[i].off && off - ps->p[i].off < ps->p[i].unit.n)
			break;
		if (ps->p[i].used < ps->p[lru].used)
			lru = i;
	}
	if (i == ps->n) {
		if (ps->n == TF_PINSET_MAX)
			unpin_slot(ps, i = lru);
		else
			i = ps->n++;
		if ((rc = pin_unit_at(ps, i, h, ws, off, err)) != TF_OK) {
			ps->p[i] = ps->p[--ps->n];
			return rc;
		}
	}
	ps->p[i].used = ++ps->clock;
	*slot = i;
	return TF_OK;
}

tf_status tf_col_fixed_pinned(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell, uint64_t n,
			      uint8_t *dst, tf_pinset *ps, tf_error *err)
{
	uint64_t off, size, len;
	size_t i;
	tf_status rc;

	if (c->missing || c->var || c->layout != LAYOUT_PLAIN || c->cache != ps->cache)
		return tf_col_fixed(c, ws, tile, cell, n, dst, err);
	if ((rc = tile_range(c->data, tile, &off, &size, err)) != TF_OK ||
	    (rc = cells_in(c->data, size, c->stored, cell, n, err)) != TF_OK)
		return rc;
	off += cell * c->stored;
	for (len = n * c->stored; len > 0 && rc == TF_OK;) {
		if ((rc = pinned_at(ps, c->data, ws, off, &i, err)) == TF_OK) {
			uint64_t end = ps->p[i].off + ps->p[i].unit.n;
			uint64_t take = end - off < len ? end - off : len;

			memcpy(dst, ps->p[i].unit.p + (off - ps->p[i].off), (size_t)take);
			ps->p[i].taken += take;
			dst += take, off += take, len -= take;
		}
	}
	return rc;
}

tf_status tf_col_var_cells(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell,
			   uint64_t n, uint64_t *starts, tf_buf *data, tf_error *err)
{
	uint64_t off, size, voff, vsize, end, base = data->len;
	uint8_t *at;
	tf_status rc;

	if (c->missing || !c->var)
		return tf_err(err, TF_E_INVAL, "not a var-sized column");
	if ((rc = tile_range(c->data, tile, &off, &size, err)) != TF_OK ||
	    (rc = tile_range(c->vfile, tile, &voff, &vsize, err)) != TF_OK ||
	    (rc = cells_in(c->data, size, 8, cell, n, err)) != TF_OK)
		return rc;
	/* Offsets are relative to the tile's var data; the cell after the
	 * last one starts where the next offset says, or at the tile's end. */
	if ((rc = read_exact(c, c->data, ws, off + cell * 8, n * 8, (uint8_t *)starts, err)) != TF_OK)
		return rc;
	end = vsize;
	if (cell + n < size / 8 && (rc = read_exact(c, c->data, ws, off + (cell + n) * 8, 8, (uint8_t *)&end, err)) != TF_OK)
		return rc;
	for (uint64_t i = 0; i < n; i++)
		starts[i] = tf_le64((const uint8_t *)&starts[i]);
	starts[n] = tf_le64((const uint8_t *)&end);
	for (uint64_t i = 0; i < n; i++)
		if (starts[i] > starts[i + 1] || starts[i + 1] > vsize)
			return tf_err(err, TF_E_CORRUPT, "%s: tile %llu: cell offsets out of order",
				      tf_file_name(tf_handle_file(c->data)), (unsigned long long)tile);
	if ((rc = tf_buf_grow(data, (size_t)(starts[n] - starts[0]), &at, err)) != TF_OK ||
	    (rc = read_exact(c, c->vfile, ws, voff + starts[0], starts[n] - starts[0], at, err)) != TF_OK)
		return rc;
	data->len += (size_t)(starts[n] - starts[0]);
	for (uint64_t i = 0, first = starts[0]; i <= n; i++)
		starts[i] = starts[i] - first + base;
	return TF_OK;
}

tf_status tf_col_validity(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell,
			  uint64_t n, uint8_t *dst, tf_error *err)
{
	uint64_t off, size;
	tf_status rc;

	if (!c->validity) {
		memset(dst, 1, (size_t)n);
		return TF_OK;
	}
	if ((rc = tile_range(c->validity, tile, &off, &size, err)) != TF_OK ||
	    (rc = cells_in(c->validity, size, 1, cell, n, err)) != TF_OK)
		return rc;
	return read_exact(c, c->validity, ws, off + cell, n, dst, err);
}
