/*
 * tf_snapshot.c - the fragments and delete conditions a read sees
 * (array_directory.cc, fragment_identifier.cc of TileDB 2.29), and cells of
 * their fields read through the cache.
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

#include "views/tf_snapshot.h"
#include "util/tf_fanout.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format/tf_tile.h"

#define LIST_LIMIT ((size_t)16 << 20)	/* .vac / .con / .ign lists */
/* consolidation_with_timestamps_min_version (constants.cc): fragments of
 * this format or later are seen once their start is past. */
#define PARTIAL_OVERLAP_VERSION 15

enum { META_UNREAD, META_LOADING, META_READ, META_FAILED };

/* A column is held (refs > 0: its files open), idle (open, on the idle
 * list), or dormant (its files' indexes kept, their descriptors closed, on
 * the dormant list). */
typedef enum { COL_HELD, COL_IDLE, COL_DORMANT } col_state;

typedef struct col_slot {
	size_t frag;
	tf_col_kind kind;
	char *name;
	tf_col *col;
	int refs;			/* readers holding col */
	size_t bytes;			/* its files' indexes */
	col_state state;
	bool opening;			/* a reader opens its files again */
	struct col_slot *next;		/* its hash chain */
	struct col_slot *older, *newer;	/* its list, least recently used first */
} col_slot;

typedef struct col_list {
	col_slot *old, *new;
	size_t n, bytes;
} col_list;

typedef struct enum_slot {
	char *path;
	tf_enum *e;
	struct enum_slot *next;
} enum_slot;

typedef struct failure {
	size_t frag;
	tf_error error;
	struct failure *next;
} failure;

typedef enum { LAYOUT_PLAIN, LAYOUT_UNZIPPED, LAYOUT_ZIPPED } col_layout;

struct tf_col {
	bool missing, var, nullable;
	tf_datatype type;
	unsigned cell_size;	/* bytes of one cell of this field (8: var offsets) */
	unsigned stored;	/* bytes per cell in the data file (legacy
				 * __coords: every dimension's value) */
	col_layout layout;	/* legacy __coords: dimension `dim` of `ndims` */
	unsigned dim, ndims, value_size;
	/* each file as the version indexed when the column was first opened
	 * (a fragment's files never change): its index, and while the column
	 * is held or idle, one open of it (a dormant column reopens its files
	 * at that version, and keeps its place in the cache) */
	tf_file *fdata, *fvar, *fvalid;
	tf_handle *data, *vfile, *validity;
	tf_cache *cache;
	col_slot *slot;
};

/* A listing: NUL-terminated names back to back in one buffer, each after
 * a byte saying whether it is a directory; sorted once complete. */
typedef struct names {
	char *buf;
	size_t len, cap;
	size_t *off;		/* where each name starts in buf */
	size_t n, ncap;
	bool failed, sorted;
} names;

struct tf_snapshot {
	atomic_int refs;
	tf_array *a;
	tf_cache *cache;
	const tf_schema *schema;
	uint64_t now, fingerprint;
	names root, fdir;	/* the listings: fragment names point into them */
	tf_snap_frag *frags;
	size_t nfrags;
	_Atomic uint8_t *meta;	/* per fragment: META_* */
	failure *failures;	/* fragments whose metadata failed (under load_lock) */
	pthread_mutex_t load_lock;	/* guards failures, facts; waiting for a LOADING one */
	pthread_cond_t loaded;
	uint8_t *facts;		/* boxes and corners: chunks of FACTS_CHUNK, linked */
	size_t facts_used;
	_Atomic size_t charged;	/* bytes charged to the cache's budget */
	uint32_t *visible;	/* fragment indexes, in read order */
	size_t nvisible;
	tf_snap_delete *dels;
	size_t ndels;
	pthread_mutex_t lock;	/* guards columns and enumerations */
	col_slot **cols;	/* hash of (fragment, field): ncols_b buckets */
	size_t ncols_b;
	col_list idle, dormant;
	size_t nopen, kept_limit;	/* columns in the table; bytes of idle and dormant ones */
	pthread_cond_t reopened;	/* a dormant column's files are open again */
	enum_slot *enums;
};

bool tf_cancelled(const tf_cancel *c)
{
	return c && c->fn && c->fn(c->ctx);
}

/* ---- names ---------------------------------------------------------------------------------- */

static const char *name_at(const names *l, size_t i)
{
	return l->buf + l->off[i];
}

static bool dir_at(const names *l, size_t i)
{
	return l->buf[l->off[i] - 1] == 'd';
}

static bool grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 64;
	void *v;

	if (need <= *cap)
		return true;
	while (c < need)
		c *= 2;
	if (!(v = realloc(*p, c * size)))
		return false;
	*p = v;
	*cap = c;
	return true;
}

static int collect(void *ctx, const char *name, bool is_dir)
{
	names *l = ctx;
	size_t k = strlen(name) + 2;

	if (l->failed || !grow((void **)&l->buf, &l->cap, l->len + k, 1) ||
	    !grow((void **)&l->off, &l->ncap, l->n + 1, sizeof(size_t))) {
		l->failed = true;
		return 1;
	}
	l->buf[l->len] = is_dir ? 'd' : 'f';
	memcpy(l->buf + l->len + 1, name, k - 1);
	l->off[l->n++] = l->len + 1;
	l->len += k;
	l->sorted = false;
	return 0;
}

static void names_free(names *l)
{
	free(l->buf);
	free(l->off);
	memset(l, 0, sizeof(*l));
}

static int cmp_off(const void *pa, const void *pb, void *ctx)
{
	const char *buf = ctx;

	return strcmp(buf + *(const size_t *)pa, buf + *(const size_t *)pb);
}

static void names_sort(names *l)
{
	if (l->n)
		qsort_r(l->off, l->n, sizeof(size_t), cmp_off, l->buf);
	l->sorted = true;
}

/* Whether s is in the listing: a binary search once sorted. */
static bool contains(const names *l, const char *s)
{
	size_t lo = 0, hi = l->n;

	if (!l->sorted) {
		for (size_t i = 0; i < l->n; i++)
			if (!strcmp(name_at(l, i), s))
				return true;
		return false;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = strcmp(name_at(l, mid), s);

		if (!r)
			return true;
		*(r < 0 ? &lo : &hi) = mid + (r < 0);
	}
	return false;
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !memcmp(s + n - m, suffix, m);
}

static bool contains_with(const names *l, const char *name, const char *suffix)
{
	char buf[600];

	return snprintf(buf, sizeof(buf), "%s%s", name, suffix) < (int)sizeof(buf) && contains(l, buf);
}

/* A listing kept (fragment names point into it): no slack. */
static void names_fit(names *l)
{
	void *p;

	if (l->len && l->len < l->cap && (p = realloc(l->buf, l->len)))
		l->buf = p, l->cap = l->len;
	if (l->n && l->n < l->ncap && (p = realloc(l->off, l->n * sizeof(size_t))))
		l->off = p, l->ncap = l->n;
}

static tf_status list_dir(tf_array *a, const char *rel, names *out, tf_error *err)
{
	tf_status rc = tf_array_list(a, rel, collect, out, err);

	if (rc == TF_OK && out->failed)
		rc = tf_err(err, TF_E_NOMEM, "out of memory listing %s", rel);
	if (rc == TF_OK)
		names_sort(out);
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
	names con;		/* fragment names committed by .con lists */
	names vacuumed;		/* fragment names in vacuum lists */
	names ignored;		/* .ign: commit lines to skip in .con */
	names del_seen;		/* delete markers already read */
} commits;

static void commits_free(commits *c)
{
	names_free(&c->con);
	names_free(&c->vacuumed);
	names_free(&c->ignored);
	names_free(&c->del_seen);
}

/* Each '\n'-terminated line of a text file into `into`. */
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
			collect(&c->con, base, false);
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
		if (has_suffix(name_at(cdir, i), ".ign") &&
		    snprintf(rel, sizeof(rel), "__commits/%s", name_at(cdir, i)) < (int)sizeof(rel))
			rc = read_lines(s->a, rel, &c->ignored, false, err);
	names_sort(&c->ignored);
	for (size_t i = 0; i < cdir->n && rc == TF_OK; i++) {
		const char *n = name_at(cdir, i);

		snprintf(rel, sizeof(rel), "__commits/%s", n);
		if (has_suffix(n, ".con"))
			rc = read_con(s, c, rel, err);
		else if (has_suffix(n, ".vac"))
			rc = read_lines(s->a, rel, &c->vacuumed, true, err);
	}
	for (size_t i = 0; i < root->n && rc == TF_OK; i++)	/* before format 12 */
		if (has_suffix(name_at(root, i), ".vac"))
			rc = read_lines(s->a, name_at(root, i), &c->vacuumed, true, err);
	/* Delete commits not already read from a .con list. */
	for (size_t i = 0; i < cdir->n && rc == TF_OK; i++) {
		if (!has_suffix(name_at(cdir, i), ".del") || contains(&c->del_seen, name_at(cdir, i)))
			continue;
		snprintf(rel, sizeof(rel), "__commits/%s", name_at(cdir, i));
		if ((rc = tf_array_read_generic(s->a, rel, &payload, err)) == TF_OK)
			rc = add_delete(s, rel, tf_span_of(payload.p, payload.len), err);
	}
	tf_buf_free(&payload);
	if (rc == TF_OK && (c->con.failed || c->vacuumed.failed || c->del_seen.failed || c->ignored.failed))
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	names_sort(&c->con);
	names_sort(&c->vacuumed);
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

static tf_status add_frag(tf_snapshot *s, size_t *cap, const char *name, bool in_root, tf_error *err)
{
	tf_snap_frag *f;
	uint64_t t1, t2;
	uint32_t version;

	if (!parse_name(name, &t1, &t2, &version) || strchr(name, '.'))
		return TF_OK;	/* not a fragment */
	if (!grow((void **)&s->frags, cap, s->nfrags + 1, sizeof(*s->frags)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	f = &s->frags[s->nfrags++];
	memset(f, 0, sizeof(*f));
	f->name = name;
	f->in_root = in_root;
	f->t1 = t1, f->t2 = t2, f->version = version;
	return TF_OK;
}

/* The fragment's directory, relative to the array. */
static bool frag_rel(const tf_snap_frag *f, char *buf, size_t n)
{
	return snprintf(buf, n, "%s%s", f->in_root ? "" : "__fragments/", f->name) < (int)n;
}

/* Whether a fragment is committed (fragment_uris_v1_v11, _v12_or_higher). */
static bool committed(tf_snapshot *s, const tf_snap_frag *f, const commits *c, const names *cdir)
{
	char rel[600];
	names inside = { 0 };
	bool found;

	if (contains_with(cdir, f->name, ".wrt") || contains(&c->con, f->name) ||
	    contains_with(&s->root, f->name, ".ok") || contains_with(&s->fdir, f->name, ".ok"))
		return true;
	if (f->version >= 5 || !f->in_root || !frag_rel(f, rel, sizeof(rel)))
		return false;
	/* Formats before 5 commit nothing: a fragment directory with metadata is one. */
	found = tf_array_list(s->a, rel, collect, &inside, NULL) == TF_OK &&
		contains(&inside, "__fragment_metadata.tdb");
	names_free(&inside);
	return found;
}

static int cmp_visible(const void *pa, const void *pb, void *ctx)
{
	const tf_snapshot *s = ctx;
	const tf_snap_frag *a = &s->frags[*(const uint32_t *)pa], *b = &s->frags[*(const uint32_t *)pb];

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

static tf_status list_fragments(tf_snapshot *s, tf_error *err)
{
	size_t cap = s->fdir.n + s->root.n + 1;	/* at most: no slack to double */
	tf_status rc = TF_OK;

	if (!(s->frags = malloc(cap * sizeof(*s->frags))))
		return tf_err(err, TF_E_NOMEM, "out of memory");

	for (size_t i = 0; i < s->fdir.n && rc == TF_OK; i++)
		if (dir_at(&s->fdir, i))
			rc = add_frag(s, &cap, name_at(&s->fdir, i), false, err);
	for (size_t i = 0; i < s->root.n && rc == TF_OK; i++)	/* formats before 12 */
		if (dir_at(&s->root, i) && !is_internal(name_at(&s->root, i)))
			rc = add_frag(s, &cap, name_at(&s->root, i), true, err);
	if (rc == TF_OK && s->nfrags)
		qsort(s->frags, s->nfrags, sizeof(*s->frags), cmp_frag_name);
	return rc;
}

static tf_status choose_visible(tf_snapshot *s, const commits *c, const names *cdir, tf_error *err)
{
	if (s->nfrags >= UINT32_MAX)
		return tf_err(err, TF_E_UNSUPPORTED, "%zu fragments", s->nfrags);
	if (!(s->visible = malloc((s->nfrags ? s->nfrags : 1) * sizeof(*s->visible))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (size_t i = 0; i < s->nfrags; i++) {
		tf_snap_frag *f = &s->frags[i];
		bool in_time = f->version >= PARTIAL_OVERLAP_VERSION ? f->t1 <= s->now : f->t2 <= s->now;

		f->visible = in_time && !contains(&c->vacuumed, f->name) && committed(s, f, c, cdir);
		if (f->visible)
			s->visible[s->nvisible++] = (uint32_t)i;
	}
	if (s->nvisible)
		qsort_r(s->visible, s->nvisible, sizeof(*s->visible), cmp_visible, s);
	return TF_OK;
}

/* ---- metadata, on demand ------------------------------------------------------------------- */

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

/*
 * Boxes and corners live in chunks of the snapshot's (a malloc of 12 bytes
 * per fragment costs 32, and 200,000 of them count): 8-aligned pieces, the
 * chunks linked through their first 8 bytes, freed with the snapshot.
 */
#define FACTS_CHUNK ((size_t)64 << 10)

/* Memory the snapshot holds, charged to the cache's budget (given back
 * when it goes): 200,000 fragments are 30 MB a snapshot keeps as long as
 * the views live, which the cache makes room for. */
static void charge(tf_snapshot *s, size_t n)
{
	atomic_fetch_add(&s->charged, n);
	tf_cache_charge(s->cache, (ptrdiff_t)n);
}

static void *facts_alloc(tf_snapshot *s, size_t n)
{
	uint8_t *chunk, *p = NULL;
	size_t got = 0;

	n = (n + 7) & ~(size_t)7;
	pthread_mutex_lock(&s->load_lock);
	if (n + 8 > FACTS_CHUNK) {	/* a huge one: a chunk of its own, linked second */
		if ((chunk = malloc(n + 8))) {
			uint8_t *after = NULL;

			if (s->facts) {
				memcpy(&after, s->facts, sizeof(after));
				memcpy(s->facts, &chunk, sizeof(chunk));
			} else {
				s->facts = chunk;
				s->facts_used = FACTS_CHUNK;	/* full: the next gets a chunk */
			}
			memcpy(chunk, &after, sizeof(after));
			p = chunk + 8;
			got = n + 8;
		}
	} else {
		if (!s->facts || s->facts_used + n > FACTS_CHUNK) {
			if ((chunk = malloc(FACTS_CHUNK))) {
				memcpy(chunk, &s->facts, sizeof(s->facts));
				s->facts = chunk;
				s->facts_used = 8;
				got = FACTS_CHUNK;
			}
		}
		if (s->facts && s->facts_used + n <= FACTS_CHUNK) {
			p = s->facts + s->facts_used;
			s->facts_used += n;
		}
	}
	pthread_mutex_unlock(&s->load_lock);
	if (p)
		memset(p, 0, n);
	if (got)
		charge(s, got);
	return p;
}

/* Dense fragments: the non-empty domain and its tiles, per dimension. */
static tf_status dense_box(tf_snapshot *s, tf_snap_frag *f, const tf_fragment *fr, tf_error *err)
{
	const tf_schema *sc = f->schema;
	size_t n = sc->ndims;
	uint64_t *lo, *hi, *tlo, *tn;
	tf_span l, h;
	tf_status rc;

	if (!(f->box = facts_alloc(s, (4 * n + 1) * sizeof(uint64_t))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	lo = f->box, hi = lo + n, tlo = hi + n, tn = tlo + n;
	f->ntiles = 1;
	for (size_t d = 0; d < n; d++) {
		const tf_field *dim = &sc->dims[d];
		unsigned size = tf_datatype_size(dim->type);
		uint64_t ext = tf_schema_dim_extent(dim);

		if ((rc = tf_fragment_ned(fr, d, &l, &h, err)) != TF_OK)
			return rc;
		if (!dim->has_extent || ext == 0 || tf_datatype_is_real(dim->type) || l.n != size || h.n != size)
			return tf_err(err, TF_E_UNSUPPORTED, "fragment %s: dimension %s is not an integer "
				      "dimension with a tile extent", f->name, dim->name);
		lo[d] = dim_offset(dim->type, l.p, dim->domain);
		hi[d] = dim_offset(dim->type, h.p, dim->domain);
		if (lo[d] > hi[d] || hi[d] > dim_offset(dim->type, dim->domain + size, dim->domain))
			return tf_err(err, TF_E_CORRUPT, "fragment %s: non-empty domain of %s outside the "
				      "domain", f->name, dim->name);
		tlo[d] = lo[d] / ext;
		tn[d] = hi[d] / ext - tlo[d] + 1;
		if (f->ntiles > UINT64_MAX / tn[d])
			return tf_err(err, TF_E_CORRUPT, "fragment %s: too many tiles", f->name);
		f->ntiles *= tn[d];
	}
	return TF_OK;
}

/* Sparse fragments: the lower corner of the non-empty domain, packed (see
 * tf_snap_frag.corner); none when the metadata has no usable domain (formats
 * 1-2, a null domain, or formats 1-4 storing every dimension in the first
 * one's type when the types differ). */
static void sparse_corner(tf_snapshot *s, tf_snap_frag *f, const tf_fragment *fr)
{
	const tf_schema *sc = f->schema;
	size_t total = 0, at = 0;
	tf_span lo, hi;

	for (size_t d = 0; d < sc->ndims; d++) {
		const tf_field *dim = &sc->dims[d];

		if (tf_fragment_ned(fr, d, &lo, &hi, NULL) != TF_OK || lo.n > UINT32_MAX ||
		    (dim->cell_val_num != TF_CELL_VAR && lo.n != tf_datatype_size(dim->type)))
			return;
		total += 4 + ((lo.n + 3) & ~(size_t)3);
	}
	if (!sc->ndims || !(f->corner = facts_alloc(s, total)))
		return;
	for (size_t d = 0; d < sc->ndims; d++) {
		tf_fragment_ned(fr, d, &lo, &hi, NULL);
		tf_put_le32(f->corner + at, (uint32_t)lo.n);
		memcpy(f->corner + at + 4, lo.p, lo.n);
		at += 4 + ((lo.n + 3) & ~(size_t)3);
	}
}

static tf_status read_facts(tf_snapshot *s, tf_snap_frag *f, tf_error *err)
{
	char rel[600];
	tf_fragment *fr;
	tf_status rc;

	if (!frag_rel(f, rel, sizeof(rel)))
		return tf_err(err, TF_E_INVAL, "fragment %s: name too long", f->name);
	if ((rc = tf_array_fragment(s->a, rel, &fr, err)) != TF_OK)
		return rc;
	f->schema = tf_fragment_schema(fr);
	f->dense = tf_fragment_dense(fr);
	f->has_ts = tf_fragment_has_timestamps(fr);
	f->has_dm = tf_fragment_has_delete_meta(fr);
	if (f->dense) {
		rc = dense_box(s, f, fr, err);
	} else {
		f->ntiles = tf_fragment_sparse_tiles(fr);
		f->last_cells = f->ntiles ? tf_fragment_tile_cells(fr, f->ntiles - 1, f->ntiles) : 0;
		sparse_corner(s, f, fr);
	}
	tf_array_fragment_put(s->a, fr);
	return rc;
}

static tf_status failure_of(tf_snapshot *s, size_t frag, tf_error *err)
{
	tf_status rc = TF_E_CORRUPT;

	pthread_mutex_lock(&s->load_lock);
	for (failure *f = s->failures; f; f = f->next)
		if (f->frag == frag) {
			rc = f->error.code ? f->error.code : TF_E_CORRUPT;
			if (err)
				*err = f->error;
			break;
		}
	pthread_mutex_unlock(&s->load_lock);
	return rc;
}

/* Read fragment frag's facts: the reader that moved it from UNREAD to
 * LOADING does, with no lock held; others wanting it wait. */
static void load_one(tf_snapshot *s, size_t frag)
{
	tf_snap_frag *f = &s->frags[frag];
	failure *fl = NULL;
	tf_error e;
	bool ok = read_facts(s, f, &e) == TF_OK;

	if (!ok) {
		f->box = NULL;	/* its piece of the chunks stays unused */
		if ((fl = calloc(1, sizeof(*fl)))) {
			fl->frag = frag;
			fl->error = e;
		}
	}
	pthread_mutex_lock(&s->load_lock);
	if (fl) {
		fl->next = s->failures;
		s->failures = fl;
	}
	atomic_store_explicit(&s->meta[frag], ok ? META_READ : META_FAILED, memory_order_release);
	pthread_cond_broadcast(&s->loaded);
	pthread_mutex_unlock(&s->load_lock);
}

tf_status tf_snapshot_load(tf_snapshot *s, size_t frag, tf_error *err)
{
	uint8_t st = atomic_load_explicit(&s->meta[frag], memory_order_acquire), unread = META_UNREAD;

	if (st == META_UNREAD && atomic_compare_exchange_strong(&s->meta[frag], &unread, META_LOADING))
		load_one(s, frag);
	if ((st = atomic_load_explicit(&s->meta[frag], memory_order_acquire)) == META_LOADING) {
		pthread_mutex_lock(&s->load_lock);
		while ((st = atomic_load_explicit(&s->meta[frag], memory_order_acquire)) == META_LOADING)
			pthread_cond_wait(&s->loaded, &s->load_lock);
		pthread_mutex_unlock(&s->load_lock);
	}
	return st == META_READ ? TF_OK : failure_of(s, frag, err);
}

/*
 * Reading every visible fragment's metadata is an open and a read or two
 * per fragment (200,000 fragments: 600,000 system calls, and as many
 * blocks from the disk when cold), so it runs on TF_FANOUT_IO threads:
 * on the cache's 3 workers and the caller, the first record of
 * 200,000 one-cell fragments' cells.csv took 5.9 s once their
 * directories were walked (cold data), 3.3 s on 48 threads.  The
 * caller's thread asks whether to stop between steps.
 */
#define LOAD_STEP 64

typedef struct bulk_load {
	tf_snapshot *s;
	const tf_cancel *cancel;
} bulk_load;

static bool bulk_step(void *ctx, size_t lo, size_t hi, unsigned slot)
{
	bulk_load *b = ctx;

	for (size_t i = lo; i < hi; i++)
		tf_snapshot_load(b->s, b->s->visible[i], NULL);
	return slot == 0 && tf_cancelled(b->cancel);
}

tf_status tf_snapshot_load_visible(tf_snapshot *s, const tf_cancel *cancel, tf_error *err)
{
	bulk_load b = { s, cancel };
	unsigned threads = s->nvisible > 4 * LOAD_STEP ? TF_FANOUT_IO : 1;
	bool stopped;
	tf_status rc = TF_OK;

	tf_fanout(s->nvisible, LOAD_STEP, threads, bulk_step, &b, &stopped);
	if (stopped)
		return tf_err(err, TF_E_INTR, "interrupted reading fragment metadata");
	for (size_t i = 0; i < s->nvisible && rc == TF_OK; i++)
		rc = tf_snapshot_load(s, s->visible[i], err);	/* every answer, in order */
	return rc;
}

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
		hash_one(d, name_at(l, i), false);
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

		if (keep[i] && (rc = list_dir(a, dirs[i], keep[i], err)) == TF_OK)
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
		names_fit(&s->root), names_fit(&s->fdir);
	if (rc == TF_OK && (rc = tf_array_latest_schema(s->a, &s->schema, NULL, err)) == TF_OK &&
	    (rc = read_commits(s, &cdir, &s->root, &c, err)) == TF_OK &&
	    (rc = list_fragments(s, err)) == TF_OK)
		rc = choose_visible(s, &c, &cdir, err);
	if (rc == TF_OK && s->ndels)
		qsort(s->dels, s->ndels, sizeof(*s->dels), cmp_delete);
	/* The listings' names stay (fragments point into them), their index
	 * goes: 8 bytes a fragment. */
	free(s->root.off), free(s->fdir.off);
	s->root.off = s->fdir.off = NULL;
	s->root.n = s->fdir.n = s->root.ncap = s->fdir.ncap = 0;
	if (rc == TF_OK)
		charge(s, s->root.cap + s->fdir.cap + s->nfrags * (sizeof(*s->frags) + sizeof(*s->visible) + 1));
	if (rc == TF_OK && (!(s->meta = calloc(s->nfrags + 1, sizeof(*s->meta))) ||
			    !(s->cols = calloc(s->ncols_b = 64, sizeof(*s->cols)))))
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	commits_free(&c);
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

static void col_close(tf_col *c)
{
	tf_handle_close(c->data);
	tf_handle_close(c->vfile);
	tf_handle_close(c->validity);
	c->data = c->vfile = c->validity = NULL;
}

static void col_free(tf_col *c)
{
	if (!c)
		return;
	col_close(c);
	tf_file_unref(c->fdata);
	tf_file_unref(c->fvar);
	tf_file_unref(c->fvalid);
	free(c);
}

void tf_snapshot_unref(tf_snapshot *s)
{
	if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	for (size_t i = 0; s->cols && i < s->ncols_b; i++)
		for (col_slot *c = s->cols[i], *next; c; c = next) {
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
	names_free(&s->root);
	names_free(&s->fdir);
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

tf_array *tf_snapshot_array(const tf_snapshot *s) { return s->a; }
tf_cache *tf_snapshot_cache(const tf_snapshot *s) { return s->cache; }
const tf_schema *tf_snapshot_schema(const tf_snapshot *s) { return s->schema; }
uint64_t tf_snapshot_time(const tf_snapshot *s) { return s->now; }
uint64_t tf_snapshot_fingerprint(const tf_snapshot *s) { return s->fingerprint; }
size_t tf_snapshot_nfrags(const tf_snapshot *s) { return s->nfrags; }
const tf_snap_frag *tf_snapshot_frag(const tf_snapshot *s, size_t i) { return &s->frags[i]; }
size_t tf_snapshot_nvisible(const tf_snapshot *s) { return s->nvisible; }
size_t tf_snapshot_visible(const tf_snapshot *s, size_t k) { return s->visible[k]; }
size_t tf_snapshot_ndeletes(const tf_snapshot *s) { return s->ndels; }
const tf_snap_delete *tf_snapshot_delete(const tf_snapshot *s, size_t i) { return &s->dels[i]; }

bool tf_snapshot_frag_dir(const tf_snapshot *s, size_t i, char *buf, size_t n)
{
	return frag_rel(&s->frags[i], buf, n);
}

size_t tf_snapshot_find(const tf_snapshot *s, const char *name)
{
	size_t lo = 0, hi = s->nfrags;

	while (lo < hi) {	/* frags are sorted by name */
		size_t mid = lo + (hi - lo) / 2;
		int r = strcmp(s->frags[mid].name, name);

		if (!r)
			return mid;
		*(r < 0 ? &lo : &hi) = mid + (r < 0);
	}
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

/* Open the file once indexed as f: a handle on that version. */
static tf_status open_handle(tf_file *f, bool dense, tf_handle **out, tf_error *err)
{
	tf_status rc;

	*out = NULL;
	if (!f)
		return TF_OK;
	rc = tf_handle_open(f, out, err);
	/* Sparse fragments are read a window at a time, many at once (tf_merge). */
	if (rc == TF_OK && !dense)
		tf_handle_set_ahead(*out, false);
	return rc;
}

static tf_status open_role(tf_snapshot *s, const tf_snap_frag *f, const tf_fragment *fr, const char *field,
			   tf_role role, tf_file **out, tf_error *err)
{
	char file[1100], dir[600], rel[2048];

	if (!tf_fragment_field_file(fr, field, role, file, sizeof(file)) || !frag_rel(f, dir, sizeof(dir)) ||
	    snprintf(rel, sizeof(rel), "%s/%s", dir, file) >= (int)sizeof(rel))
		return tf_err(err, TF_E_CORRUPT, "fragment %s has no file for %s", f->name, field);
	return tf_array_open_file(s->a, rel, out, err);
}

/* The column's files opened (again), at the versions first indexed. */
static tf_status col_open(tf_col *c, bool dense, tf_error *err)
{
	tf_status rc;

	if ((rc = open_handle(c->fdata, dense, &c->data, err)) == TF_OK &&
	    (rc = open_handle(c->fvar, dense, &c->vfile, err)) == TF_OK)
		rc = open_handle(c->fvalid, dense, &c->validity, err);
	if (rc != TF_OK)
		col_close(c);
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
static tf_status resolve_col(tf_snapshot *s, const tf_snap_frag *f, const tf_fragment *fr, tf_col_kind kind,
			     const char *name, tf_col *c, const char **file_field, tf_error *err)
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
	if (kind == TF_COL_DIM && tf_fragment_version(fr) < 5) {	/* legacy __coords (§8.3) */
		c->layout = tf_fragment_version(fr) == 1 && !compressed(fs->coords) ? LAYOUT_ZIPPED
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
	tf_col *c;
	tf_fragment *fr = NULL;
	const char *field;
	char rel[600];
	tf_status rc;

	if ((rc = tf_snapshot_load(s, frag, err)) != TF_OK)
		return rc;
	if (!(c = calloc(1, sizeof(*c))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	c->cache = s->cache;
	/* The metadata again, from the array (which keeps the recent ones):
	 * it says how each file is laid out. */
	rc = frag_rel(f, rel, sizeof(rel)) ? tf_array_fragment(s->a, rel, &fr, err)
					   : tf_err(err, TF_E_INVAL, "name too long");
	if (rc == TF_OK)
		rc = resolve_col(s, f, fr, kind, name, c, &field, err);
	c->cell_size = c->var ? 8 : c->value_size;
	/* A parsed schema's cells are at most TF_CELL_BYTES_MAX bytes, and
	 * legacy coordinates as many values as it has dimensions. */
	if (rc == TF_OK && !c->var && (kind == TF_COL_ATTR || kind == TF_COL_OWN_ATTR) && !c->missing)
		c->cell_size = (unsigned)tf_field_cell_bytes(tf_schema_attr(f->schema, name));
	c->stored = c->layout != LAYOUT_PLAIN ? (unsigned)tf_u64_mul_sat(c->value_size, c->ndims) : c->cell_size;
	if (rc == TF_OK && (c->cell_size == 0 || c->stored == 0 || c->stored > TF_CELL_BYTES_MAX))
		rc = tf_err(err, TF_E_CORRUPT, "cells of %u bytes", c->stored);
	if (rc == TF_OK && !c->missing) {
		rc = open_role(s, f, fr, field, c->var ? TF_ROLE_OFFSETS : TF_ROLE_DATA, &c->fdata, err);
		if (rc == TF_OK && c->var)
			rc = open_role(s, f, fr, field, TF_ROLE_VAR, &c->fvar, err);
		if (rc == TF_OK && c->nullable)
			rc = open_role(s, f, fr, field, TF_ROLE_VALIDITY, &c->fvalid, err);
		if (rc == TF_OK)
			rc = col_open(c, f->dense, err);
	}
	tf_array_fragment_put(s->a, fr);
	if (rc != TF_OK) {
		col_free(c);
		return tf_err_prefix(err, "fragment %s, field %s", f->name, name);
	}
	*out = c;
	return TF_OK;
}

/* What a column keeps: its files' indexes, and what tf_file_index_bytes
 * does not count (the file's names, spec and pipeline copies: ~1.5 KiB
 * each under massif). */
#define FILE_COST ((size_t)2 << 10)

static size_t col_bytes(const tf_col *c)
{
	tf_file *f[3] = { c->fdata, c->fvar, c->fvalid };
	size_t n = sizeof(*c) + sizeof(col_slot) + 64;

	for (int i = 0; i < 3; i++)
		n += f[i] ? FILE_COST + tf_file_index_bytes(f[i]) : 0;
	return n;
}

static size_t col_hash(const tf_snapshot *s, size_t frag, tf_col_kind kind, const char *name)
{
	uint64_t h = (uint64_t)frag * 0x9e3779b97f4a7c15ull ^ (uint64_t)kind;

	for (const char *c = name; *c; c++)
		h = (h ^ (uint8_t)*c) * 1099511628211ull;
	return (size_t)(h ^ h >> 29) & (s->ncols_b - 1);
}

static col_slot *find_col(tf_snapshot *s, size_t frag, tf_col_kind kind, const char *name)
{
	col_slot *c = s->cols[col_hash(s, frag, kind, name)];

	while (c && (c->frag != frag || c->kind != kind || strcmp(c->name, name)))
		c = c->next;
	return c;
}

/* Two columns per bucket at most: double the table (lock held; a failed
 * growth leaves longer chains). */
static void cols_grow(tf_snapshot *s)
{
	size_t n = s->ncols_b * 2;
	col_slot **b, **old = s->cols;

	if (s->nopen < 2 * s->ncols_b || !(b = calloc(n, sizeof(*b))))
		return;
	s->cols = b;
	s->ncols_b = n;
	for (size_t i = 0; i < n / 2; i++)
		for (col_slot *c = old[i], *next; c; c = next) {
			size_t h = col_hash(s, c->frag, c->kind, c->name);
			next = c->next;
			c->next = b[h];
			b[h] = c;
		}
	free(old);
}

/* ---- the idle and dormant lists (lock held) ---- */

static col_list *list_of(tf_snapshot *s, col_slot *c)
{
	return c->state == COL_IDLE ? &s->idle : c->state == COL_DORMANT ? &s->dormant : NULL;
}

static void list_unlink(tf_snapshot *s, col_slot *c)
{
	col_list *l = list_of(s, c);

	if (!l)
		return;
	*(c->older ? &c->older->newer : &l->old) = c->newer;
	*(c->newer ? &c->newer->older : &l->new) = c->older;
	c->older = c->newer = NULL;
	l->n--;
	l->bytes -= c->bytes;
	c->state = COL_HELD;
}

static void list_push(tf_snapshot *s, col_slot *c, col_state state)
{
	col_list *l;

	c->state = state;
	l = list_of(s, c);
	c->older = l->new;
	c->newer = NULL;
	*(l->new ? &l->new->newer : &l->old) = c;
	l->new = c;
	l->n++;
	l->bytes += c->bytes;
}

/*
 * Beyond TF_SNAPSHOT_IDLE_COLS idle columns, the oldest become dormant
 * (their handles, returned in *shut, are closed by the caller after the
 * lock); beyond kept_limit bytes of idle and dormant indexes, the oldest
 * dormant ones (then idle) leave the table, returned in *gone.
 */
static void evict_kept(tf_snapshot *s, size_t limit, col_slot **gone);

static void trim_cols(tf_snapshot *s, col_slot **shut, size_t *nshut, col_slot **gone)
{
	while (s->idle.n > TF_SNAPSHOT_IDLE_COLS && *nshut < 4) {
		col_slot *c = s->idle.old;

		list_unlink(s, c);
		list_push(s, c, COL_DORMANT);
		c->opening = true;	/* being closed: a reader waits */
		shut[(*nshut)++] = c;
	}
	evict_kept(s, s->kept_limit, gone);
}

/* Idle and dormant columns beyond limit bytes leave the table, the oldest
 * dormant ones first (lock held). */
static void evict_kept(tf_snapshot *s, size_t limit, col_slot **gone)
{
	while (s->idle.n + s->dormant.n && s->idle.bytes + s->dormant.bytes > limit) {
		col_slot *c = s->dormant.old ? s->dormant.old : s->idle.old;
		col_slot **p = &s->cols[col_hash(s, c->frag, c->kind, c->name)];

		if (c->opening)
			break;	/* being closed just now: next time */
		list_unlink(s, c);
		while (*p != c)
			p = &(*p)->next;
		*p = c->next;
		s->nopen--;
		c->next = *gone;
		*gone = c;
	}
}

static void close_slots(col_slot *c)
{
	for (col_slot *next; c; c = next) {
		next = c->next;
		col_free(c->col);
		free(c->name);
		free(c);
	}
}

/* Hold slot (lock held, released on return): a dormant one has its files
 * opened again by this reader, others wait for that. */
static tf_status hold_slot(tf_snapshot *s, col_slot *slot, const tf_col **out, tf_error *err)
{
	bool reopen;
	tf_status rc = TF_OK;

	while (slot->opening)
		pthread_cond_wait(&s->reopened, &s->lock);
	reopen = slot->state == COL_DORMANT;
	list_unlink(s, slot);
	slot->refs++;
	slot->opening = reopen;
	pthread_mutex_unlock(&s->lock);
	if (reopen) {
		rc = col_open(slot->col, s->frags[slot->frag].dense, err);
		pthread_mutex_lock(&s->lock);
		slot->opening = false;
		pthread_cond_broadcast(&s->reopened);
		pthread_mutex_unlock(&s->lock);
		if (rc != TF_OK) {
			tf_snapshot_col_put(s, slot->col);
			return rc;
		}
	}
	*out = slot->col;
	return TF_OK;
}

tf_status tf_snapshot_col(tf_snapshot *s, size_t frag, tf_col_kind kind, const char *name,
			  const tf_col **out, tf_error *err)
{
	col_slot *slot, *mine;
	tf_col *c = NULL;
	tf_status rc;

	*out = NULL;
	pthread_mutex_lock(&s->lock);
	if ((slot = find_col(s, frag, kind, name)))
		return hold_slot(s, slot, out, err);
	pthread_mutex_unlock(&s->lock);
	/* Opened with no lock held: reading metadata and opening files. */
	if ((rc = open_col(s, frag, kind, name, &c, err)) != TF_OK)
		return rc;
	if (!(mine = calloc(1, sizeof(*mine))) || !(mine->name = strdup(name))) {
		free(mine);
		col_free(c);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	mine->frag = frag, mine->kind = kind, mine->col = c;
	mine->bytes = col_bytes(c);
	c->slot = mine;
	pthread_mutex_lock(&s->lock);
	if ((slot = find_col(s, frag, kind, name))) {	/* a racing reader opened it first */
		rc = hold_slot(s, slot, out, err);
		close_slots(mine);
		return rc;
	}
	mine->refs = 1;
	cols_grow(s);
	mine->next = s->cols[col_hash(s, frag, kind, name)];
	s->cols[col_hash(s, frag, kind, name)] = mine;
	s->nopen++;
	pthread_mutex_unlock(&s->lock);
	*out = mine->col;
	return TF_OK;
}

void tf_snapshot_col_put(tf_snapshot *s, const tf_col *c)
{
	col_slot *slot, *gone = NULL, *shut[4];
	size_t nshut = 0;

	if (!c)
		return;
	slot = c->slot;
	pthread_mutex_lock(&s->lock);
	if (--slot->refs == 0) {
		/* Idle, the most recent; a failed reopen leaves it closed. */
		list_push(s, slot, slot->col->data || slot->col->missing ? COL_IDLE : COL_DORMANT);
		trim_cols(s, shut, &nshut, &gone);
	}
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < nshut; i++)
		col_close(shut[i]->col);
	if (nshut) {
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < nshut; i++)
			shut[i]->opening = false;
		pthread_cond_broadcast(&s->reopened);
		pthread_mutex_unlock(&s->lock);
	}
	close_slots(gone);
}

void tf_snapshot_shrink(tf_snapshot *s)
{
	col_slot *gone = NULL;

	pthread_mutex_lock(&s->lock);
	evict_kept(s, 0, &gone);
	pthread_mutex_unlock(&s->lock);
	close_slots(gone);
	tf_array_trim_idle(tf_snapshot_array(s), 0);
}

size_t tf_snapshot_open_cols(tf_snapshot *s)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = s->nopen;
	pthread_mutex_unlock(&s->lock);
	return n;
}

bool tf_col_missing(const tf_col *c) { return c->missing; }
bool tf_col_var(const tf_col *c) { return c->var; }
bool tf_col_nullable(const tf_col *c) { return c->nullable; }
unsigned tf_col_cell_size(const tf_col *c) { return c->cell_size; }

/* Exactly len bytes at off of h's decoded bytes (once: tf_col_fixed). */
static tf_status read_exact(const tf_col *c, tf_handle *h, tf_workspace *ws, uint64_t off, uint64_t len,
			    uint8_t *dst, bool once, tf_error *err)
{
	const tf_file *f = tf_handle_file(h);
	size_t got = 0;
	tf_status rc;

	if (len == 0)
		return TF_OK;
	if (len > SIZE_MAX)
		return tf_err(err, TF_E_NOMEM, "read too large");
	rc = once ? tf_handle_read_scan(h, c->cache, ws, off, (size_t)len, dst, &got, err)
		  : tf_handle_read(h, c->cache, ws, off, (size_t)len, dst, &got, err);
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
			     bool once, tf_error *err)
{
	uint64_t cell = c->stored, bytes;
	uint8_t *tmp = tf_u64_mul(n, cell, &bytes) && bytes <= SIZE_MAX ? malloc(bytes ? (size_t)bytes : 1) : NULL;
	tf_status rc;

	if (!tmp)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	rc = read_exact(c, c->data, ws, off, bytes, tmp, once, err);
	for (uint64_t i = 0; rc == TF_OK && i < n; i++)
		memcpy(dst + i * c->value_size, tmp + i * cell + (uint64_t)c->dim * c->value_size, c->value_size);
	free(tmp);
	return rc;
}

tf_status tf_col_fixed(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell, uint64_t n,
		       uint8_t *dst, bool once, tf_error *err)
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
		return read_exact(c, c->data, ws, off + ((uint64_t)c->dim * ncells + cell) * vs, n * vs, dst, once, err);
	case LAYOUT_ZIPPED:
		return read_zipped(c, ws, off + cell * c->stored, n, dst, once, err);
	default:
		return read_exact(c, c->data, ws, off + cell * c->cell_size, n * c->cell_size, dst, once, err);
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
	tf_handle_close(ps->p[i].h);	/* its column may be closed meanwhile */
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
	ps->p[i].h = tf_handle_ref(h);
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
		return tf_col_fixed(c, ws, tile, cell, n, dst, false, err);
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

tf_status tf_col_var_starts(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell, uint64_t n,
			    uint64_t *starts, uint64_t *vbase, bool once, tf_error *err)
{
	uint64_t off, size, voff, vsize, end;
	tf_status rc;

	if (c->missing || !c->var)
		return tf_err(err, TF_E_INVAL, "not a var-sized column");
	if ((rc = tile_range(c->data, tile, &off, &size, err)) != TF_OK ||
	    (rc = tile_range(c->vfile, tile, &voff, &vsize, err)) != TF_OK ||
	    (rc = cells_in(c->data, size, 8, cell, n, err)) != TF_OK)
		return rc;
	/* Offsets are relative to the tile's var data; the cell after the
	 * last one starts where the next offset says, or at the tile's end. */
	if ((rc = read_exact(c, c->data, ws, off + cell * 8, n * 8, (uint8_t *)starts, once, err)) != TF_OK)
		return rc;
	end = vsize;
	if (cell + n < size / 8 && (rc = read_exact(c, c->data, ws, off + (cell + n) * 8, 8, (uint8_t *)&end, once, err)) != TF_OK)
		return rc;
	for (uint64_t i = 0; i < n; i++)
		starts[i] = tf_le64((const uint8_t *)&starts[i]);
	starts[n] = tf_le64((const uint8_t *)&end);
	for (uint64_t i = 0; i < n; i++)
		if (starts[i] > starts[i + 1] || starts[i + 1] > vsize)
			return tf_err(err, TF_E_CORRUPT, "%s: tile %llu: cell offsets out of order",
				      tf_file_name(tf_handle_file(c->data)), (unsigned long long)tile);
	if (n == 0 && starts[0] > vsize)
		return tf_err(err, TF_E_CORRUPT, "%s: tile %llu: cell offset past the tile",
			      tf_file_name(tf_handle_file(c->data)), (unsigned long long)tile);
	*vbase = starts[0];
	for (uint64_t i = 0; i <= n; i++)
		starts[i] -= *vbase;
	return TF_OK;
}

tf_status tf_col_var_bytes(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t vbase, uint64_t len,
			   uint8_t *dst, bool once, tf_error *err)
{
	uint64_t voff, vsize;
	tf_status rc;

	if (c->missing || !c->var)
		return tf_err(err, TF_E_INVAL, "not a var-sized column");
	if ((rc = tile_range(c->vfile, tile, &voff, &vsize, err)) != TF_OK)
		return rc;
	if (vbase > vsize || len > vsize - vbase)
		return tf_err(err, TF_E_CORRUPT, "%s: tile %llu: %llu var bytes at %llu of %llu",
			      tf_file_name(tf_handle_file(c->vfile)), (unsigned long long)tile,
			      (unsigned long long)len, (unsigned long long)vbase, (unsigned long long)vsize);
	return read_exact(c, c->vfile, ws, voff + vbase, len, dst, once, err);
}

tf_status tf_col_var_cells(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell,
			   uint64_t n, uint64_t *starts, tf_buf *data, bool once, tf_error *err)
{
	uint64_t vbase, base = data->len;
	uint8_t *at;
	tf_status rc;

	if ((rc = tf_col_var_starts(c, ws, tile, cell, n, starts, &vbase, once, err)) != TF_OK)
		return rc;
	if (starts[n] > SIZE_MAX)
		return tf_err(err, TF_E_NOMEM, "cells too large");
	if ((rc = tf_buf_grow(data, (size_t)starts[n], &at, err)) != TF_OK ||
	    (rc = tf_col_var_bytes(c, ws, tile, vbase, starts[n], at, once, err)) != TF_OK)
		return rc;
	data->len += (size_t)starts[n];
	for (uint64_t i = 0; i <= n; i++)
		starts[i] += base;
	return TF_OK;
}

tf_status tf_col_validity(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell,
			  uint64_t n, uint8_t *dst, bool once, tf_error *err)
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
	return read_exact(c, c->validity, ws, off + cell, n, dst, once, err);
}
