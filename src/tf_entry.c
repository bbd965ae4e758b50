/*
 * tf_entry.c - entries and readers: what every kind shares, and the calls
 * a driver makes, each handed to the entry's kind through its ops table
 * (src/entries/).
 *
 * The set keeps each path's current entry (while anybody holds it), so a
 * lookup of a name that still shows the same thing gives the same entry;
 * an entry leaves the table when its last holder lets go.
 */
#include "config.h"

#include "entries/entry_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/tf_hash.h"

#define BUCKETS 1024

/* ---- the set ------------------------------------------------------------------------------- */

tf_entries *tf_entries_new(tf_catalog *c, tf_source *src)
{
	tf_entries *s = calloc(1, sizeof(*s));

	if (!s || tf_lru_new(BUCKETS, &s->lru, NULL) != TF_OK) {
		free(s);
		return NULL;
	}
	s->catalog = c;
	s->src = src;
	s->index_budget = SIZE_MAX;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->indexed, NULL);
	return s;
}

/* Every entry has been let go by now (the driver's table first). */
void tf_entries_free(tf_entries *s)
{
	if (!s)
		return;
	tf_lru_free(s->lru);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->indexed);
	free(s);
}

static uint64_t hash_rel(const char *rel)
{
	return tf_hash_str(rel);
}

static bool same_rel(const tf_lru_node *n, const void *rel)
{
	return !strcmp(TF_LRU_ENTRY(n, tf_entry, node)->rel, rel);
}

/* e is no longer its path's current entry (lock held).  An index it
 * holds stays on the budget's list, as the most recent. */
static void unhash(tf_entries *s, tf_entry *e)
{
	bool listed = tf_lru_listed(&e->node);

	tf_lru_remove(s->lru, &e->node);
	if (listed)
		tf_lru_use(s->lru, &e->node, 0);
}

tf_entry *tf_entries_current(tf_entries *s, const char *rel)
{
	tf_lru_node *n;
	tf_entry *e = NULL;

	pthread_mutex_lock(&s->lock);
	if ((n = tf_lru_find(s->lru, hash_rel(rel), same_rel, rel))) {
		e = TF_LRU_ENTRY(n, tf_entry, node);
		e->refs++;
	}
	pthread_mutex_unlock(&s->lock);
	return e;
}

void tf_entries_install(tf_entries *s, tf_entry *e)
{
	uint64_t h = hash_rel(e->rel);
	tf_lru_node *old;

	pthread_mutex_lock(&s->lock);
	if (!e->node.keyed) {
		if ((old = tf_lru_find(s->lru, h, same_rel, e->rel)))
			unhash(s, TF_LRU_ENTRY(old, tf_entry, node));	/* it stays for who holds it */
		tf_lru_insert(s->lru, &e->node, h);
	}
	pthread_mutex_unlock(&s->lock);
}

tf_entry *tf_entry_make(tf_entries *s, const tf_entry_ops *ops, size_t size, const char *rel, const tf_stat *st,
			unsigned gen)
{
	tf_entry *e = calloc(1, size);

	if (!e || !(e->rel = strdup(rel))) {
		free(e);
		return NULL;
	}
	e->ops = ops;
	e->set = s;
	e->refs = 1;
	e->st = *st;
	e->kind = st->kind;
	e->gen = gen;
	return e;
}

tf_entry *tf_entry_ref(tf_entry *e)
{
	pthread_mutex_lock(&e->set->lock);
	e->refs++;
	pthread_mutex_unlock(&e->set->lock);
	return e;
}

void tf_entry_unref(tf_entry *e)
{
	bool last;

	if (!e)
		return;
	pthread_mutex_lock(&e->set->lock);
	if ((last = !--e->refs) && e->node.keyed)
		tf_lru_remove(e->set->lru, &e->node);	/* off the indexes' list too: its kind frees the index */
	pthread_mutex_unlock(&e->set->lock);
	if (!last)
		return;
	e->ops->free(e);
	free(e->error);
	free(e->rel);
	free(e);
}

/* Whether entry e still shows what st describes. */
static bool same_thing(const tf_entry *e, const tf_stat *st)
{
	if (e->kind != st->kind)
		return false;
	if (st->kind == TF_ENT_REG || st->kind == TF_ENT_LNK)
		return tf_version_equal(&e->st.v, &st->v);
	return e->st.v.dev == st->v.dev && e->st.v.ino == st->v.ino && !strcmp(e->st.v.etag, st->v.etag);
}

/* Whether e, rel's current entry, may answer a lookup finding st: a
 * directory's stays (its stat refreshed); a file's made under an older
 * configuration does not (its bytes may decode otherwise now), nor one
 * the catalog now shows otherwise, nor a decoded file whose other file
 * (folded offsets: the data file) changed since it was indexed. */
bool tf_entry_still(tf_entries *s, tf_entry *e, const tf_stat *st, bool decoded, unsigned gen)
{
	bool same;

	if (e->ops->decoded != decoded)
		return false;
	pthread_mutex_lock(&s->lock);	/* a directory's st is refreshed by others */
	same = same_thing(e, st);
	if (same && e->kind == TF_ENT_DIR)
		e->st = *st;	/* fresh mode and times */
	pthread_mutex_unlock(&s->lock);
	return same && (e->kind == TF_ENT_DIR || e->gen >= gen);
}

/* ---- what every kind answers -------------------------------------------------------------- */

void tf_entries_set_cache(tf_entries *s, tf_cache *cache, size_t index_budget)
{
	pthread_mutex_lock(&s->lock);
	s->cache = cache;
	s->index_budget = index_budget;	/* held from the next let-go on */
	pthread_mutex_unlock(&s->lock);
}

void tf_entries_stats(tf_entries *s, tf_entry_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = (tf_entry_stats){ tf_lru_count(s->lru), tf_lru_length(s->lru, 0), s->index_bytes, s->open_files };
	pthread_mutex_unlock(&s->lock);
}

tf_status tf_entry_root(tf_entries *s, tf_entry **out, tf_error *err)
{
	tf_stat st;
	tf_status rc;

	*out = NULL;
	if ((rc = tf_source_stat(s->src, ".", &st, err)) != TF_OK)
		return rc;
	if (st.kind != TF_ENT_DIR)
		return tf_err(err, TF_E_INVAL, "the source is not a directory");
	if (!(*out = tf_entry_make(s, &tf_dir_entry_ops, sizeof(tf_entry), ".", &st, tf_catalog_gen(s->catalog))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	tf_entries_install(s, *out);
	return TF_OK;
}

tf_status tf_entry_lookup(tf_entry *dir, const char *name, const tf_stat *known, tf_entry **out, tf_error *err)
{
	*out = NULL;
	if (err)
		err->code = TF_OK, err->msg[0] = '\0';
	if (!dir->ops->lookup)
		return tf_err(err, TF_E_NOTFOUND, "%s: not a directory", dir->rel);
	return dir->ops->lookup(dir, name, known, out, err);
}

const char *tf_entry_rel(const tf_entry *e) { return e->rel; }
tf_ent_kind tf_entry_kind(const tf_entry *e) { return e->kind; }
const char *tf_entry_what(const tf_entry *e) { return e->ops->name; }

void tf_entry_version(tf_entry *e, tf_version *out)
{
	pthread_mutex_lock(&e->set->lock);
	*out = e->st.v;
	pthread_mutex_unlock(&e->set->lock);
}

void tf_entry_attr(tf_entry *e, tf_shown *out)
{
	bool keyed;

	memset(out, 0, sizeof(*out));
	e->ops->attr(e, out);
	pthread_mutex_lock(&e->set->lock);
	keyed = e->keyed;
	pthread_mutex_unlock(&e->set->lock);
	/* Read-only: the source's modes without write bits, which the kernel
	 * enforces for every user (default_permissions). */
	out->st.mode &= 07555;
	/* Plaintext of an encrypted array is the key holder's, whatever the
	 * ciphertext's modes: the user who mounted, and no one else. */
	if (keyed) {
		out->st.mode = e->kind == TF_ENT_DIR ? 0500 : 0400;
		out->st.uid = (uint32_t)geteuid();
		out->st.gid = (uint32_t)getegid();
	}
}

tf_status tf_entry_list(tf_entry *dir, bool plus, tf_entry_list_fn fn, void *ctx, tf_error *err)
{
	if (!dir->ops->list)
		return tf_err(err, TF_E_INVAL, "%s: not a directory", dir->rel);
	return dir->ops->list(dir, plus, fn, ctx, err);
}

tf_status tf_entry_readlink(tf_entry *e, char *buf, size_t n, tf_error *err)
{
	if (e->kind != TF_ENT_LNK)
		return tf_err(err, TF_E_INVAL, "%s: not a symlink", e->rel);
	return tf_source_readlink(e->set->src, e->rel, buf, n, err);
}

bool tf_entry_allows(tf_entry *e, const tf_caller *who)
{
	tf_perm p = TF_PERM_INIT;
	uint32_t *groups = NULL;
	size_t ngroups = 0;
	bool keyed, check, ok = true;

	check = e->ops->inputs && e->ops->inputs(e, &p);
	pthread_mutex_lock(&e->set->lock);
	keyed = e->keyed;
	pthread_mutex_unlock(&e->set->lock);
	if ((check || keyed) && who->uid != 0) {
		if (keyed && who->uid != (uint32_t)geteuid())
			ok = false;	/* plaintext: the key holder's */
		else if (tf_perm_needs_groups(&p, who->uid, who->gid) && who->groups)
			ngroups = who->groups(who->ctx, &groups);
		ok = ok && tf_perm_allows(&p, who->uid, who->gid, groups, ngroups);
	}
	free(groups);
	tf_perm_clear(&p);
	return ok;
}

char *tf_entry_getxattr(tf_entry *e, const char *name)
{
	return e->ops->getxattr ? e->ops->getxattr(e, name) : NULL;
}

size_t tf_entry_listxattr(tf_entry *e, char *buf, size_t n)
{
	return e->ops->listxattr ? e->ops->listxattr(e, buf, n) : 0;
}

void tf_entry_set_error(tf_entry *e, const char *msg, bool failed)
{
	char *m = strdup(msg);

	pthread_mutex_lock(&e->set->lock);
	free(e->error);
	e->error = m;
	e->failed |= failed;
	pthread_mutex_unlock(&e->set->lock);
}

char *tf_entry_error(tf_entry *e)
{
	char *s;

	pthread_mutex_lock(&e->set->lock);
	s = e->error ? strdup(e->error) : NULL;
	pthread_mutex_unlock(&e->set->lock);
	return s;
}

/* ---- readers ---------------------------------------------------------------------------------- */

tf_status tf_entry_open(tf_entry *e, tf_pin_scratch *s, const tf_cancel *cancel, unsigned flags, tf_entry_reader **out,
			tf_open_how *how, tf_error *err)
{
	*out = NULL;
	*how = (tf_open_how){ 0 };
	if (!e->ops->open)
		return tf_err(err, TF_E_INVAL, "%s: not a file", e->rel);
	return e->ops->open(e, s, cancel, flags, out, how, err);
}

tf_status tf_reader_pin(tf_entry_reader *r, tf_pin_scratch *s, uint64_t off, size_t len, const tf_cancel *cancel,
			const tf_slices **out, tf_error *err)
{
	tf_status rc;

	tf_reader_unpin(s, false);	/* nothing, unless a pin was never let go */
	s->last = &s->slices;	/* empty, unless the kind pins or copies */
	rc = r->ops->pin(r, s, off, len, cancel, err);
	*out = s->last;
	if (rc != TF_OK && rc != TF_E_INTR)
		tf_entry_set_error(r->entry, err ? err->msg : "read failed", true);
	return rc;
}

void tf_reader_unpin(tf_pin_scratch *s, bool passed_on)
{
	if (s->pinned_in)
		tf_handle_unpin(s->pinned_in, &s->slices, passed_on);
	s->pinned_in = NULL;
	s->slices.n = 0;
	s->slices.bytes = 0;
	s->copied = (tf_slices){ 0 };
}

void tf_reader_close(tf_entry_reader *r)
{
	tf_entry *e;

	if (!r)
		return;
	e = r->entry;
	r->ops->close(r);
	tf_entry_unref(e);
}

/* ---- scratch ---------------------------------------------------------------------------------- */

tf_pin_scratch *tf_pin_scratch_new(void)
{
	tf_pin_scratch *s = calloc(1, sizeof(*s));

	if (s && !(s->ws = tf_workspace_new())) {
		free(s);
		return NULL;
	}
	return s;
}

void tf_pin_scratch_free(tf_pin_scratch *s)
{
	if (!s)
		return;
	tf_workspace_free(s->ws);
	tf_slices_free(&s->slices);
	free(s->buf);
	free(s);
}

bool tf_pin_scratch_grow(tf_pin_scratch *s, size_t n)
{
	uint8_t *b;

	if (n <= s->cap)
		return true;
	if (!(b = realloc(s->buf, n)))
		return false;
	s->buf = b;
	s->cap = n;
	return true;
}

void tf_pin_scratch_one_slice(tf_pin_scratch *s, size_t n)
{
	s->one = (tf_slice){ .p = s->buf, .n = n };
	s->copied = (tf_slices){ .v = &s->one, .n = 1, .bytes = n };
	s->last = &s->copied;
}
