/*
 * tf_snapshot_list.c - listing a snapshot: the names of its directories,
 * what is committed, vacuumed and deleted, its fragments and which of them
 * a read sees (array_directory.cc, fragment_identifier.cc of TileDB 2.29),
 * and what it holds, asked (tf_snapshot_nfrags, tf_snapshot_find...).
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

bool tf_cancelled(const tf_cancel *c)
{
	return c && c->fn && c->fn(c->ctx);
}

/* ---- names ---------------------------------------------------------------------------------- */

const char *snap_name_at(const names *l, size_t i)
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

void snap_names_free(names *l)
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
			if (!strcmp(snap_name_at(l, i), s))
				return true;
		return false;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = strcmp(snap_name_at(l, mid), s);

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
void snap_names_fit(names *l)
{
	void *p;

	if (l->len && l->len < l->cap && (p = realloc(l->buf, l->len)))
		l->buf = p, l->cap = l->len;
	if (l->n && l->n < l->ncap && (p = realloc(l->off, l->n * sizeof(size_t))))
		l->off = p, l->ncap = l->n;
}

tf_status snap_list_dir(tf_array *a, const char *rel, names *out, tf_error *err)
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

void snap_commits_free(commits *c)
{
	snap_names_free(&c->con);
	snap_names_free(&c->vacuumed);
	snap_names_free(&c->ignored);
	snap_names_free(&c->del_seen);
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

tf_status snap_read_commits(tf_snapshot *s, const names *cdir, const names *root, commits *c,
			      tf_error *err)
{
	char rel[1024];
	tf_buf payload = TF_BUF_INIT((size_t)64 << 20);
	tf_status rc = TF_OK;

	for (size_t i = 0; i < cdir->n && rc == TF_OK; i++)
		if (has_suffix(snap_name_at(cdir, i), ".ign") &&
		    snprintf(rel, sizeof(rel), "__commits/%s", snap_name_at(cdir, i)) < (int)sizeof(rel))
			rc = read_lines(s->a, rel, &c->ignored, false, err);
	names_sort(&c->ignored);
	for (size_t i = 0; i < cdir->n && rc == TF_OK; i++) {
		const char *n = snap_name_at(cdir, i);

		snprintf(rel, sizeof(rel), "__commits/%s", n);
		if (has_suffix(n, ".con"))
			rc = read_con(s, c, rel, err);
		else if (has_suffix(n, ".vac"))
			rc = read_lines(s->a, rel, &c->vacuumed, true, err);
	}
	for (size_t i = 0; i < root->n && rc == TF_OK; i++)	/* before format 12 */
		if (has_suffix(snap_name_at(root, i), ".vac"))
			rc = read_lines(s->a, snap_name_at(root, i), &c->vacuumed, true, err);
	/* Delete commits not already read from a .con list. */
	for (size_t i = 0; i < cdir->n && rc == TF_OK; i++) {
		if (!has_suffix(snap_name_at(cdir, i), ".del") || contains(&c->del_seen, snap_name_at(cdir, i)))
			continue;
		snprintf(rel, sizeof(rel), "__commits/%s", snap_name_at(cdir, i));
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
bool snap_frag_rel(const tf_snap_frag *f, char *buf, size_t n)
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
	if (f->version >= 5 || !f->in_root || !snap_frag_rel(f, rel, sizeof(rel)))
		return false;
	/* Formats before 5 commit nothing: a fragment directory with metadata is one. */
	found = tf_array_list(s->a, rel, collect, &inside, NULL) == TF_OK &&
		contains(&inside, "__fragment_metadata.tdb");
	snap_names_free(&inside);
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

tf_status snap_list_fragments(tf_snapshot *s, tf_error *err)
{
	size_t cap = s->fdir.n + s->root.n + 1;	/* at most: no slack to double */
	tf_status rc = TF_OK;

	if (!(s->frags = malloc(cap * sizeof(*s->frags))))
		return tf_err(err, TF_E_NOMEM, "out of memory");

	for (size_t i = 0; i < s->fdir.n && rc == TF_OK; i++)
		if (dir_at(&s->fdir, i))
			rc = add_frag(s, &cap, snap_name_at(&s->fdir, i), false, err);
	for (size_t i = 0; i < s->root.n && rc == TF_OK; i++)	/* formats before 12 */
		if (dir_at(&s->root, i) && !is_internal(snap_name_at(&s->root, i)))
			rc = add_frag(s, &cap, snap_name_at(&s->root, i), true, err);
	if (rc == TF_OK && s->nfrags)
		qsort(s->frags, s->nfrags, sizeof(*s->frags), cmp_frag_name);
	return rc;
}

tf_status snap_choose_visible(tf_snapshot *s, const commits *c, const names *cdir, tf_error *err)
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
	return snap_frag_rel(&s->frags[i], buf, n);
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
