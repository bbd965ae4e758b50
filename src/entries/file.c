/*
 * file.c - a file decoded: its index (tf_file), built at lookup for its
 * size and at open, and its reader (tf_handle: pinned slices of the cache).
 *
 * Indexes of files nobody has open are dropped, least recently used first,
 * beyond the set's index budget, and rebuilt for the same version when
 * opened again; whoever uses one holds a reference, so an index is never
 * freed under its user.  A failed index is tried again after RETRY_NS: a
 * fragment seen mid-commit, before TileDB wrote its last file, reads once
 * complete.  A file whose bytes come from another stored file too (folded
 * offsets: the data file, tf_file_dep) shows one version of both: its
 * owner and modes let in nobody who may not read both, and an index of
 * another version of the data file is another entry's.
 */
#include "config.h"

#include "entry_int.h"
#include "util/tf_clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_NS 1000000000LL

typedef struct file_entry {
	tf_entry e;
	uint64_t size;		/* decoded size, kept when the index is dropped */
	tf_file *file;		/* NULL: not built, dropped, or failed */
	size_t bytes;		/* its index memory */
	bool indexing;
	tf_status index_rc;	/* the last build failed (TF_OK: did not) */
	int64_t failed_at;
	unsigned opens;
	tf_facts facts;
	char *dep_rel;		/* the other file the bytes come from, */
	tf_version dep_v;	/* its version shown, */
	tf_perm dep_perm;	/* who may read it (empty: no dep known) */
} file_entry;		/* on the set's list 0 while it holds an index */

typedef struct file_reader {
	tf_entry_reader r;
	tf_handle *h;
} file_reader;

/* ---- the indexes kept (lock held) ----------------------------------------------------------- */

static void drop_index(tf_entries *s, file_entry *f)
{
	tf_lru_unlist(s->lru, &f->e.node);
	tf_file_unref(f->file);
	f->file = NULL;
	s->index_bytes -= f->bytes;
	f->bytes = 0;
}

/* Indexes of idle files (none open, none being built) go, oldest first,
 * beyond the budget.  Called wherever a file stops being used. */
void tf_file_entry_trim(tf_entries *s)
{
	for (tf_lru_node *n = tf_lru_oldest(s->lru, 0), *next; n && s->index_bytes > s->index_budget; n = next) {
		file_entry *f = (file_entry *)TF_LRU_ENTRY(n, tf_entry, node);

		next = tf_lru_newer(s->lru, n);
		if (!f->opens && !f->indexing)
			drop_index(s, f);
	}
}

/* ---- building the index ------------------------------------------------------------------- */

/* Who may read the other file index x decodes from, if any (lock not held:
 * a stat).  A dep that cannot be stat'ed now is root's alone. */
static void dep_inputs(tf_entries *s, const tf_file *x, tf_perm *out)
{
	const tf_version *v;
	const char *rel = tf_file_dep(x, &v);
	tf_stat st;

	if (!rel)
		return;
	if (tf_source_stat(s->src, rel, &st, NULL) == TF_OK)
		tf_perm_add_stat(out, &st);
	else
		tf_perm_close(out);
}

/* Whether index x decodes from the versions f shows (recording them on
 * f's first index, with who may read the dep: dp, taken over). */
static bool same_dep(file_entry *f, const tf_file *x, tf_perm *dp)
{
	const tf_version *v;
	const char *rel = tf_file_dep(x, &v);

	if (!rel)
		return true;
	if (!f->dep_rel) {
		f->dep_rel = strdup(rel);
		f->dep_v = *v;
		tf_perm_clear(&f->dep_perm);
		f->dep_perm = *dp;
		*dp = (tf_perm)TF_PERM_INIT;
		return f->dep_rel != NULL;
	}
	return !strcmp(f->dep_rel, rel) && tf_version_equal(&f->dep_v, v);
}

/*
 * Build f's index unless it has one, or failed recently (lock held;
 * released while the catalog works).  On TF_OK f->file is there until the
 * caller releases the lock.  flags: TF_OPEN_METADATA for a lookup.
 * TF_E_STALE: the source is no longer f's version; TF_E_IO for every other
 * failure (a file that cannot be indexed is a damaged file, whatever the
 * cause), err saying why when a build failed now (else empty).
 */
static tf_status ensure_index(file_entry *f, unsigned flags, tf_error *err)
{
	tf_entries *s = f->e.set;
	tf_perm dp = TF_PERM_INIT;
	tf_file *x = NULL;
	tf_version v;
	tf_facts fx;
	tf_status rc;

	while (f->indexing)
		pthread_cond_wait(&s->indexed, &s->lock);
	if (f->file)
		return TF_OK;
	if (f->index_rc && tf_now_ns() - f->failed_at < RETRY_NS) {
		if (err)
			err->code = f->index_rc, err->msg[0] = '\0';
		return f->index_rc;
	}
	f->indexing = true;
	v = f->e.st.v;
	pthread_mutex_unlock(&s->lock);
	rc = tf_catalog_open_for(s->catalog, f->e.rel, &v, flags, &x, &fx, err);
	if (rc == TF_OK)
		dep_inputs(s, x, &dp);
	pthread_mutex_lock(&s->lock);
	f->indexing = false;
	pthread_cond_broadcast(&s->indexed);
	if (rc != TF_OK) {
		f->index_rc = rc == TF_E_STALE ? TF_E_STALE : TF_E_IO;
		f->failed_at = tf_now_ns();
		free(f->e.error);
		f->e.error = strdup(err ? err->msg : "cannot be indexed");
		if (err)
			err->code = f->index_rc;
		return f->index_rc;
	}
	/* An index of another version of the data file is another entry's. */
	if (!same_dep(f, x, &dp)) {
		tf_perm_clear(&dp);
		tf_file_unref(x);
		tf_facts_clear(&fx);
		f->index_rc = TF_E_STALE;
		f->failed_at = tf_now_ns();
		return tf_err(err, TF_E_STALE, "%s: its data file changed", f->e.rel);
	}
	tf_perm_clear(&dp);
	tf_facts_clear(&f->facts);
	f->facts = fx;
	/* Plaintext is known from the catalog before any index; the index
	 * can only add to that (never take it back). */
	f->e.keyed |= fx.keyed;
	f->file = x;
	f->size = tf_file_size(x);
	f->bytes = tf_file_index_bytes(x);
	f->index_rc = TF_OK;
	s->index_bytes += f->bytes;
	tf_lru_use(s->lru, &f->e.node, 0);
	return TF_OK;
}

/* Whether the data file f's bytes also come from changed since f was
 * indexed: a stat, with the lock released. */
static bool dep_changed(file_entry *f)
{
	tf_entries *s = f->e.set;
	tf_version was = { 0 };
	char *dep = NULL;
	tf_stat st;
	bool changed;

	pthread_mutex_lock(&s->lock);
	if (f->dep_rel) {
		dep = strdup(f->dep_rel);
		was = f->dep_v;
	}
	pthread_mutex_unlock(&s->lock);
	if (!dep)
		return false;
	changed = tf_source_stat(s->src, dep, &st, NULL) != TF_OK || !tf_version_equal(&st.v, &was);
	free(dep);
	return changed;
}


tf_status tf_file_entry_lookup(tf_entries *s, const char *rel, const tf_stat *st, unsigned gen, bool keyed,
			       bool again, tf_entry **out, tf_error *err)
{
	tf_entry *e = tf_entries_current(s, rel);
	tf_status rc;

	if (!e || !tf_entry_still(s, e, st, true, gen) || dep_changed((file_entry *)e)) {
		tf_entry_unref(e);
		if (!(e = tf_entry_make(s, &tf_file_entry_ops, sizeof(file_entry), rel, st, gen)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		tf_entries_install(s, e);
	}
	pthread_mutex_lock(&s->lock);
	e->keyed |= keyed;
	/* A file that cannot be indexed is listed empty; opening it says so. */
	rc = ensure_index((file_entry *)e, TF_OPEN_METADATA, err);
	tf_file_entry_trim(s);	/* its size stays if the index goes */
	pthread_mutex_unlock(&s->lock);
	if (rc == TF_E_STALE && again) {
		tf_entry_unref(e);
		return TF_E_STALE;	/* changed since the stat: the caller looks again */
	}
	*out = e;
	return TF_OK;
}

/* ---- attributes ----------------------------------------------------------------------------- */

/* st restricted to who may also read f's dep: the classes it refuses lose
 * their bits; owners that differ are shown as tf_perm_show says. */
static void restrict_to_dep(const file_entry *f, tf_stat *st)
{
	tf_perm p = TF_PERM_INIT;
	uint32_t uid, gid;
	unsigned classes;

	tf_perm_add_stat(&p, st);
	tf_perm_add_perm(&p, &f->dep_perm);
	tf_perm_show(&p, &uid, &gid, &classes);
	tf_perm_clear(&p);
	if (uid == st->uid && gid == st->gid) {
		st->mode &= 07555 & ~((classes & TF_PERM_OWNER ? 0 : 0700) | (classes & TF_PERM_GROUP ? 0 : 070) |
				      (classes & TF_PERM_OTHER ? 0 : 07));
	} else {
		st->mode = tf_perm_mode(classes, false);
		st->uid = uid;
		st->gid = gid;
	}
}

static void file_attr(tf_entry *e, tf_shown *out)
{
	file_entry *f = (file_entry *)e;

	pthread_mutex_lock(&e->set->lock);
	out->st = e->st;
	out->st.v.size = f->size;
	/* Bytes made from another stored file too are as readable as both. */
	if (f->dep_rel)
		restrict_to_dep(f, &out->st);
	pthread_mutex_unlock(&e->set->lock);
}

static bool file_inputs(tf_entry *e, tf_perm *p)
{
	file_entry *f = (file_entry *)e;
	bool dep;

	tf_perm_clear(p);
	pthread_mutex_lock(&e->set->lock);
	if ((dep = f->dep_rel != NULL)) {
		tf_perm_add_stat(p, &e->st);
		tf_perm_add_perm(p, &f->dep_perm);
	}
	pthread_mutex_unlock(&e->set->lock);
	return dep;
}

/* ---- extended attributes ---------------------------------------------------------------------- */

#define PREFIX "user.tilefs."

static const char *const attr_names[] = {
	"pipeline", "datatype", "tiles", "chunks", "filtered_size", "error",
	"field", "fragment", "format_version", "filter", "codecs",
};

/* The index, referenced, for its attributes (NULL: none). */
static tf_file *attr_index(file_entry *f)
{
	tf_file *x = NULL;

	pthread_mutex_lock(&f->e.set->lock);
	if (ensure_index(f, 0, NULL) == TF_OK)
		x = tf_file_ref(f->file);
	tf_file_entry_trim(f->e.set);
	pthread_mutex_unlock(&f->e.set->lock);
	return x;
}

static char *number(uint64_t v)
{
	char *s;

	return asprintf(&s, "%" PRIu64, v) < 0 ? NULL : s;
}

static char *fact_attr(file_entry *f, const char *name)
{
	tf_facts *fx = &f->facts;
	char *s = NULL;

	pthread_mutex_lock(&f->e.set->lock);
	if (!strcmp(name, "field") && fx->field && asprintf(&s, "%s (%s)", fx->field, fx->role) < 0)
		s = NULL;
	if (!strcmp(name, "fragment") && fx->fragment)
		s = strdup(fx->fragment);
	if (!strcmp(name, "format_version") && fx->format_version && asprintf(&s, "%" PRIu32, fx->format_version) < 0)
		s = NULL;
	pthread_mutex_unlock(&f->e.set->lock);
	return s;
}

/* Attribute `name` (without prefix) of index x. */
static char *index_attr(file_entry *f, const tf_file *x, const char *name)
{
	tf_file_info i;

	tf_file_get_info(x, &i);
	if (!strcmp(name, "pipeline"))
		return tf_file_pipeline_text(x);
	if (!strcmp(name, "filter"))	/* netCDF's _Filter */
		return tf_file_filter_attr(x);
	if (!strcmp(name, "codecs"))	/* netCDF's _Codecs */
		return tf_file_codecs_json(x);
	if (!strcmp(name, "error"))
		return tf_entry_error(&f->e);
	if (!strcmp(name, "field") || !strcmp(name, "fragment") || !strcmp(name, "format_version"))
		return fact_attr(f, name);
	if (!strcmp(name, "datatype"))
		return strdup(tf_datatype_name(i.type));
	if (!strcmp(name, "tiles"))
		return number(i.tiles);
	if (!strcmp(name, "chunks"))
		return number(i.chunks);
	if (!strcmp(name, "filtered_size"))
		return number(i.stored_bytes);
	return NULL;
}

static char *file_getxattr(tf_entry *e, const char *name)
{
	file_entry *f = (file_entry *)e;
	tf_file *x;
	char *v = NULL;

	if (strncmp(name, PREFIX, strlen(PREFIX)))
		return NULL;
	name += strlen(PREFIX);
	if ((x = attr_index(f)))
		v = index_attr(f, x, name);
	else if (!strcmp(name, "error"))
		v = tf_entry_error(e);
	tf_file_unref(x);
	return v;
}

static size_t file_listxattr(tf_entry *e, char *buf, size_t n)
{
	file_entry *f = (file_entry *)e;
	tf_file *x = attr_index(f);
	size_t len = 0;

	for (size_t i = 0; x && i < sizeof(attr_names) / sizeof(attr_names[0]); i++) {
		char *v = index_attr(f, x, attr_names[i]);	/* only those with a value */
		if (v && len < n)
			len += (size_t)snprintf(buf + len, n - len, PREFIX "%s", attr_names[i]) + 1;
		free(v);
	}
	tf_file_unref(x);
	return len < n ? len : n;
}

/* ---- the reader ----------------------------------------------------------------------------- */

static tf_status file_pin(tf_entry_reader *r, tf_pin_scratch *s, uint64_t off, size_t len, const tf_cancel *cancel,
			  tf_error *err)
{
	(void)cancel;
	s->pinned_in = r->entry->set->cache;
	return tf_handle_pin_prefix(((file_reader *)r)->h, s->pinned_in, s->ws, off, len, &s->slices, err);
}


static void file_closed(file_entry *f)
{
	tf_entries *s = f->e.set;

	pthread_mutex_lock(&s->lock);
	f->opens--;
	s->open_files--;
	/* Reads load unit tables lazily (arrays, restored indexes): what the
	 * index holds now is charged, not what it held when it was built. */
	if (!f->opens && f->file) {
		size_t bytes = tf_file_index_bytes(f->file);

		s->index_bytes += bytes - f->bytes;
		f->bytes = bytes;
	}
	tf_file_entry_trim(s);
	pthread_mutex_unlock(&s->lock);
}

static void file_close(tf_entry_reader *r)
{
	tf_handle_close(((file_reader *)r)->h);
	file_closed((file_entry *)r->entry);
	free(r);
}

static const tf_entry_reader_ops file_reader_ops = { file_pin, file_close };

static tf_status file_open(tf_entry *e, tf_pin_scratch *sc, const tf_cancel *cancel, unsigned flags, tf_entry_reader **out,
			   tf_open_how *how, tf_error *err)
{
	file_entry *f = (file_entry *)e;
	tf_entries *s = e->set;
	file_reader *r = calloc(1, sizeof(*r));
	tf_file *x = NULL;
	tf_status rc;

	(void)sc, (void)cancel;
	if (!s->cache) {
		free(r);
		return tf_err(err, TF_E_INVAL, "%s: no cache to read through (tf_entries_set_cache)", e->rel);
	}
	if (!r)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	pthread_mutex_lock(&s->lock);
	/* A failure older than the retry time is tried again; a fresh one is
	 * the answer. */
	if ((rc = ensure_index(f, 0, err)) == TF_OK) {
		x = tf_file_ref(f->file);
		f->opens++;
		s->open_files++;
		tf_lru_use(s->lru, &f->e.node, 0);
	}
	tf_file_entry_trim(s);
	/* A node is one version: its cached pages are always good.  One that
	 * has shown a bad chunk is read without the page cache, so every
	 * intact byte stays readable at any offset beside the bad range. */
	how->direct = (flags & TF_OPEN_DIRECT) || e->failed;
	pthread_mutex_unlock(&s->lock);
	if (rc != TF_OK) {
		free(r);
		return rc;
	}
	rc = tf_handle_open(x, &r->h, err);
	tf_file_unref(x);
	if (rc != TF_OK) {
		file_closed(f);
		free(r);
		return rc;
	}
	r->r = (tf_entry_reader){ &file_reader_ops, tf_entry_ref(e) };
	*out = &r->r;
	return TF_OK;
}

static void file_free(tf_entry *e)
{
	file_entry *f = (file_entry *)e;

	pthread_mutex_lock(&e->set->lock);
	drop_index(e->set, f);
	pthread_mutex_unlock(&e->set->lock);
	tf_facts_clear(&f->facts);
	tf_perm_clear(&f->dep_perm);
	free(f->dep_rel);
}

const tf_entry_ops tf_file_entry_ops = {
	.name = "decoded",
	.decoded = true,
	.attr = file_attr,
	.inputs = file_inputs,
	.getxattr = file_getxattr,
	.listxattr = file_listxattr,
	.open = file_open,
	.free = file_free,
};
