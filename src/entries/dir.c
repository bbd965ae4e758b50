/*
 * dir.c - a directory of the source: what each name in it shows (a
 * directory, a file decoded or as stored, a symlink, a FIFO or socket, an
 * array's @views folder), and its listing.
 *
 * A name's entry is the one it showed before while that still shows the
 * same thing: the same version of a file (and of the other file its bytes
 * come from), decoded or not as before, under the same configuration; the
 * same directory (its modes and times refreshed).
 */
#include "config.h"

#include "entry_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/*
 * A lookup's stat maps two statuses its own way: a name the source refuses
 * as invalid (not a path inside it, or one an object store cannot hold) is
 * no such name; and "changed", which a stat expecting no version can only
 * get from a source failing under it, is that failure, TF_E_IO: ESTALE
 * from a lookup would have the kernel walk the whole path again and hand
 * ESTALE to the caller of open(2) or stat(2), who holds nothing stale.
 */
static tf_status stat_name(tf_entries *s, const char *rel, tf_stat *st, tf_error *err)
{
	tf_status rc = tf_source_stat(s->src, rel, st, err);

	if (rc == TF_E_INVAL)
		return TF_E_NOTFOUND;
	if (rc == TF_E_STALE)
		return err ? (err->code = TF_E_IO) : TF_E_IO;
	return rc;
}

/* The @views folder of the array at dir, when views are on. */
static bool views_folder(tf_entries *s, const tf_entry *dir, const char *name)
{
	return tf_catalog_settings(s->catalog)->views && !strcmp(name, TF_VIEWS_DIR) &&
	       tf_catalog_is_array(s->catalog, dir->rel);
}

static tf_status dir_lookup(tf_entry *dir, const char *name, const tf_stat *known, tf_entry **out, tf_error *err)
{
	tf_entries *s = dir->set;
	unsigned gen = tf_catalog_gen(s->catalog);	/* before the catalog is asked */
	char rel[PATH_MAX];
	tf_stat st, parent;
	tf_show show;
	tf_entry *e;
	tf_status rc;

	if (!tf_path_join(rel, sizeof(rel), dir->rel, name))
		return tf_err(err, TF_E_INVAL, "%s/%s: name too long", dir->rel, name);
	if (views_folder(s, dir, name)) {
		pthread_mutex_lock(&s->lock);
		parent = dir->st;
		pthread_mutex_unlock(&s->lock);
		return tf_view_entry_lookup(s, rel, dir->rel, "", &parent, out, err);
	}
	for (int tries = 0;; tries++) {
		if (known && !tries)
			st = *known;
		else if ((rc = stat_name(s, rel, &st, err)) != TF_OK)
			return rc;
		/* Device nodes of SOURCE are not shown: through the mount they
		 * would open the device itself. */
		if (st.kind == TF_ENT_OTHER)
			return TF_E_NOTFOUND;
		if (st.kind != TF_ENT_REG)
			break;
		show = tf_catalog_show(s->catalog, rel);
		if (show == TF_SHOW_HIDDEN)
			return TF_E_NOTFOUND;
		if (show != TF_SHOW_DECODED)
			break;
		/* Plaintext is the mounter's whether or not its index can be
		 * built now: decided from the catalog alone.  A file that
		 * changed since the stat is looked at again, once. */
		rc = tf_file_entry_lookup(s, rel, &st, gen, tf_catalog_keyed(s->catalog, rel), tries == 0, out, err);
		if (rc != TF_E_STALE)
			return rc;
	}
	if ((e = tf_entries_current(s, rel)) && tf_entry_still(s, e, &st, false, gen)) {
		*out = e;
		return TF_OK;
	}
	tf_entry_unref(e);
	if (!(e = tf_entry_make(s, st.kind == TF_ENT_DIR ? &tf_dir_entry_ops : &tf_raw_entry_ops, sizeof(tf_entry),
				rel, &st, gen)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	tf_entries_install(s, e);
	*out = e;
	return TF_OK;
}

/* ---- listings --------------------------------------------------------------------------------- */

typedef struct list_ctx {
	tf_entries *s;
	const char *dir;
	bool hide, plus;
	tf_entry_list_fn fn;
	void *ctx;
} list_ctx;

static int add_listed(void *arg, const char *name, const tf_stat *st)
{
	list_ctx *l = arg;
	char rel[PATH_MAX];
	bool joined;

	if (st->kind == TF_ENT_OTHER)
		return 0;	/* devices: see dir_lookup */
	joined = st->kind == TF_ENT_REG && tf_path_join(rel, sizeof(rel), l->dir, name);
	if (l->hide && joined && tf_catalog_show(l->s->catalog, rel) == TF_SHOW_HIDDEN)
		return 0;
	if (l->fn(l->ctx, name, st, l->plus))
		return 1;
	/* Readdirplus looks every entry up next: start reading their
	 * persisted indexes now, so that those reads overlap instead of
	 * queueing (a cold ls -l of 100 indexed files: 20-29 ms -> 16-21 ms,
	 * contrib/bench-index). */
	if (l->plus && joined)
		tf_catalog_prefetch(l->s->catalog, rel, &st->v);
	return 0;
}

/* The source's entries, with an array's views folder added when views
 * are on. */
static tf_status dir_list(tf_entry *dir, bool plus, tf_entry_list_fn fn, void *ctx, tf_error *err)
{
	tf_entries *s = dir->set;
	const tf_settings *set = tf_catalog_settings(s->catalog);
	list_ctx l = { s, dir->rel, set->hide_unmatched, plus, fn, ctx };
	tf_stat folder = { .kind = TF_ENT_DIR };
	tf_status rc;

	if ((rc = tf_source_list(s->src, dir->rel, plus, add_listed, &l, err)) != TF_OK)
		return rc;
	if (set->views && tf_catalog_is_array(s->catalog, dir->rel) && fn(ctx, TF_VIEWS_DIR, &folder, false))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	return TF_OK;
}

/* A directory shows its present modes and times. */
static void dir_attr(tf_entry *e, tf_shown *out)
{
	tf_stat st;

	if (tf_source_stat(e->set->src, e->rel, &st, NULL) == TF_OK && st.kind == TF_ENT_DIR) {
		pthread_mutex_lock(&e->set->lock);
		e->st = st;
		pthread_mutex_unlock(&e->set->lock);
	}
	pthread_mutex_lock(&e->set->lock);
	out->st = e->st;
	pthread_mutex_unlock(&e->set->lock);
}

static void dir_free(tf_entry *e)
{
	(void)e;
}

const tf_entry_ops tf_dir_entry_ops = {
	.name = "directory",
	.lookup = dir_lookup,
	.list = dir_list,
	.attr = dir_attr,
	.free = dir_free,
};
