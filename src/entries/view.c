/*
 * view.c - an array's @views folder and what is in it (tf_view.h): each
 * entry shows the array's state it was looked up in (the catalog's current
 * views), so one open never mixes two states.  Owner and modes are those of
 * what the entry is made of (tf_catalog_views_perm, tf_perm_show), so the
 * kernel lets in no user the source would refuse; times are the array
 * root's; the size, once known (a CSV is sized by its first open).
 */
#include "config.h"

#include "entry_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct view_entry {
	tf_entry e;
	tf_views *views;	/* the array state shown */
	tf_catalog_hold *hold;	/* keeps the array the state reads */
	char *vrel;		/* path in the views folder, "" for the folder */
	char *arr;		/* the array's root */
	tf_view_stat vst;	/* under the lock */
} view_entry;

typedef struct view_reader {
	tf_entry_reader r;
	tf_view *w;
} view_reader;

/* What a view entry shows as a stored file would: read-only, sized if
 * known (a CSV not yet formatted to its end is served as size 0), times of
 * the array's root (parent); owner and modes are view_access's (until
 * then, root's alone). */
static tf_stat view_stat(const tf_stat *parent, const tf_view_stat *vst)
{
	tf_stat st = *parent;

	st.kind = vst->dir ? TF_ENT_DIR : TF_ENT_REG;
	st.mode = 0;
	st.nlink = vst->dir ? 2 : 1;
	st.v.size = vst->size_known ? vst->size : 0;
	st.v.ino = 0;
	return st;
}

tf_status tf_view_entry_lookup(tf_entries *s, const char *rel, const char *arr, const char *vrel,
			       const tf_stat *parent, tf_entry **out, tf_error *err)
{
	tf_catalog_hold *hold;
	tf_view_stat vst;
	tf_views *v;
	tf_entry *e;
	view_entry *ve;
	tf_stat st;

	if (!s->cache)
		return tf_err(err, TF_E_INVAL, "%s: no cache to read through (tf_entries_set_cache)", rel);
	if (tf_catalog_views(s->catalog, arr, s->cache, &v, &hold, err) != TF_OK)
		return err ? (err->code = TF_E_IO) : TF_E_IO;	/* the array's state could not be read */
	if (tf_views_stat(v, vrel, &vst, NULL) != TF_OK) {
		tf_catalog_views_put(s->catalog, v, hold);
		return TF_E_NOTFOUND;
	}
	st = view_stat(parent, &vst);
	if ((e = tf_entries_current(s, rel)) && e->ops == &tf_view_entry_ops && ((view_entry *)e)->views == v) {
		ve = (view_entry *)e;
		tf_catalog_views_put(s->catalog, v, hold);	/* it has its own */
		pthread_mutex_lock(&s->lock);
		ve->vst = vst;
		st.mode = e->st.mode, st.uid = e->st.uid, st.gid = e->st.gid;	/* view_access's */
		e->st = st;
		pthread_mutex_unlock(&s->lock);
		*out = e;
		return TF_OK;
	}
	tf_entry_unref(e);
	if (!(e = tf_entry_make(s, &tf_view_entry_ops, sizeof(view_entry), rel, &st, tf_catalog_gen(s->catalog)))) {
		tf_catalog_views_put(s->catalog, v, hold);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	ve = (view_entry *)e;
	ve->views = v, ve->hold = hold, ve->vst = vst;
	e->keyed = tf_views_keyed(v);
	ve->vrel = strdup(vrel);
	ve->arr = strdup(arr);
	tf_entries_install(s, e);
	*out = e;
	return TF_OK;
}

static tf_status view_lookup(tf_entry *dir, const char *name, const tf_stat *known, tf_entry **out, tf_error *err)
{
	view_entry *d = (view_entry *)dir;
	char vrel[PATH_MAX], rel[PATH_MAX];
	tf_stat parent;

	(void)known;
	if (!d->vrel || !d->arr || !tf_path_join(vrel, sizeof(vrel), d->vrel[0] ? d->vrel : ".", name) ||
	    !tf_path_join(rel, sizeof(rel), dir->rel, name))
		return tf_err(err, TF_E_INVAL, "%s/%s: name too long", dir->rel, name);
	pthread_mutex_lock(&dir->set->lock);
	parent = dir->st;
	pthread_mutex_unlock(&dir->set->lock);
	return tf_view_entry_lookup(dir->set, rel, d->arr, vrel, &parent, out, err);
}

typedef struct list_ctx {
	tf_entry_list_fn fn;
	void *ctx;
} list_ctx;

static int add_listed(void *arg, const char *name, const tf_view_stat *vst)
{
	list_ctx *l = arg;
	tf_stat st = { .kind = vst->dir ? TF_ENT_DIR : TF_ENT_REG };

	return l->fn(l->ctx, name, &st, false);
}

/* Nothing is decoded to list views. */
static tf_status view_list(tf_entry *dir, bool plus, tf_entry_list_fn fn, void *ctx, tf_error *err)
{
	view_entry *d = (view_entry *)dir;
	list_ctx l = { fn, ctx };

	(void)plus;
	return tf_views_list(d->views, d->vrel ? d->vrel : "", add_listed, &l, err);
}

/* Who may read what ve is made of (an empty p closed: root alone). */
static void view_perm(view_entry *ve, tf_perm *p)
{
	if (!ve->vrel || tf_catalog_views_perm(ve->e.set->catalog, ve->hold, ve->views, ve->vrel, p, NULL) != TF_OK)
		tf_perm_close(p);
}

/* The owner, group and mode of ve: those of what it is made of.  A source
 * without modes: the owner of the array's root (as shown at lookup) and
 * every class.  Then its size, once known. */
static void view_attr(tf_entry *e, tf_shown *out)
{
	view_entry *ve = (view_entry *)e;
	tf_perm p = TF_PERM_INIT;
	uint32_t uid, gid;
	unsigned classes;
	tf_view_stat vst;
	bool unsized;

	view_perm(ve, &p);
	tf_perm_show(&p, &uid, &gid, &classes);
	pthread_mutex_lock(&e->set->lock);
	if (p.n || p.closed)
		e->st.uid = uid, e->st.gid = gid;
	e->st.mode = tf_perm_mode(classes, ve->vst.dir);
	unsized = !ve->vst.dir && !ve->vst.size_known;
	pthread_mutex_unlock(&e->set->lock);
	tf_perm_clear(&p);
	/* A view's size is known once it was formatted to its end. */
	if (unsized && tf_views_stat(ve->views, ve->vrel ? ve->vrel : "", &vst, NULL) == TF_OK) {
		pthread_mutex_lock(&e->set->lock);
		ve->vst = vst;
		e->st.v.size = vst.size_known ? vst.size : 0;
		pthread_mutex_unlock(&e->set->lock);
	}
	pthread_mutex_lock(&e->set->lock);
	out->st = e->st;
	out->unsized = !ve->vst.dir && !ve->vst.size_known;
	pthread_mutex_unlock(&e->set->lock);
}

static bool view_inputs(tf_entry *e, tf_perm *p)
{
	tf_perm_clear(p);
	view_perm((view_entry *)e, p);
	return true;
}

static char *view_getxattr(tf_entry *e, const char *name)
{
	view_entry *ve = (view_entry *)e;
	char buf[1024];
	size_t len;

	if (!ve->vrel || tf_views_getxattr(ve->views, ve->vrel, name, buf, sizeof(buf) - 1, &len, NULL) != TF_OK)
		return NULL;
	buf[len] = '\0';
	return strdup(buf);
}

static size_t view_listxattr(tf_entry *e, char *buf, size_t n)
{
	view_entry *ve = (view_entry *)e;
	size_t len;

	if (!ve->vrel || tf_views_listxattr(ve->views, ve->vrel, buf, n, &len, NULL) != TF_OK)
		return 0;
	return len;
}

/* ---- the reader ----------------------------------------------------------------------------- */

static tf_status view_pin(tf_entry_reader *r, tf_pin_scratch *s, uint64_t off, size_t len, const tf_cancel *cancel,
			  tf_error *err)
{
	size_t got;
	tf_status rc;

	if (!tf_pin_scratch_grow(s, len))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	rc = tf_view_read_cancellable(((view_reader *)r)->w, s->ws, off, len, s->buf, &got, cancel, err);
	if (rc == TF_E_INTR)
		return rc;
	if (rc != TF_OK)
		return err ? (err->code = TF_E_IO) : TF_E_IO;
	tf_pin_scratch_one_slice(s, got);
	return TF_OK;
}


static void view_close(tf_entry_reader *r)
{
	tf_view_close(((view_reader *)r)->w);
	free(r);
}

static const tf_entry_reader_ops view_reader_ops = { view_pin, view_close };

/* The size is known now: true if ve showed another (the kernel may hold a
 * size of 0, or a remembered size found wrong). */
static bool set_size(view_entry *ve, uint64_t size)
{
	bool was;

	pthread_mutex_lock(&ve->e.set->lock);
	was = ve->vst.size_known && ve->vst.size == size;
	ve->vst.size_known = true;
	ve->vst.size = size;
	ve->e.st.v.size = size;
	pthread_mutex_unlock(&ve->e.set->lock);
	return !was;
}

/*
 * A view shows its true size from its open on: a CSV not yet formatted to
 * its end is formatted now (counted, indexed, not kept), the caller
 * waiting.  A caller gone (killed) stops the pass (TF_E_INTR); the next
 * open goes on from where it stopped.
 */
static tf_status size_view(view_entry *ve, tf_view *w, tf_pin_scratch *s, const tf_cancel *cancel, bool *sized,
			   bool *resized, tf_error *err)
{
	uint64_t size;
	tf_status rc;

	if ((*sized = tf_view_size(w, &size))) {
		*resized = set_size(ve, size);
		return TF_OK;
	}
	rc = tf_view_size_now(w, s->ws, cancel, &size, sized, err);
	if (rc == TF_E_INTR)
		return rc;
	if (rc != TF_OK) {
		tf_entry_set_error(&ve->e, err ? err->msg : "cannot be sized", false);
		return err ? (err->code = TF_E_IO) : TF_E_IO;
	}
	if (*sized)
		*resized = set_size(ve, size);
	return TF_OK;
}

/* A view shows the array's state it was looked up in: one that changed
 * since is TF_E_STALE (looked up again, the new state opens). */
static tf_status view_open(tf_entry *e, tf_pin_scratch *s, const tf_cancel *cancel, unsigned flags, tf_entry_reader **out,
			   tf_open_how *how, tf_error *err)
{
	view_entry *ve = (view_entry *)e;
	tf_catalog_hold *hold;
	tf_views *now;
	view_reader *r;
	bool same, sized = false;
	tf_status rc;

	(void)flags;
	if (e->kind != TF_ENT_REG || !ve->vrel || !ve->arr)
		return tf_err(err, TF_E_INVAL, "%s: not a file", e->rel);
	if (tf_catalog_views(e->set->catalog, ve->arr, e->set->cache, &now, &hold, err) != TF_OK)
		return err ? (err->code = TF_E_IO) : TF_E_IO;
	same = now == ve->views;
	tf_catalog_views_put(e->set->catalog, now, hold);
	if (!same)
		return TF_E_STALE;
	if (!(r = calloc(1, sizeof(*r))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if (tf_view_open(ve->views, ve->vrel, &r->w, err) != TF_OK) {
		free(r);
		return err ? (err->code = TF_E_IO) : TF_E_IO;
	}
	if ((rc = size_view(ve, r->w, s, cancel, &sized, &how->resized, err)) != TF_OK) {
		tf_view_close(r->w);
		free(r);
		return rc;
	}
	/* Read through the page cache (mmap works) once its size is known;
	 * an endless CSV (more than 2^32 records) is read to its end as /proc
	 * files are, past the size 0 its attributes show. */
	how->direct = !sized;
	tf_view_set_kept(r->w, sized);
	r->r = (tf_entry_reader){ &view_reader_ops, tf_entry_ref(e) };
	*out = &r->r;
	return TF_OK;
}

static void view_free(tf_entry *e)
{
	view_entry *ve = (view_entry *)e;

	tf_catalog_views_put(e->set->catalog, ve->views, ve->hold);
	free(ve->vrel);
	free(ve->arr);
}

const tf_entry_ops tf_view_entry_ops = {
	.name = "view",
	.lookup = view_lookup,
	.list = view_list,
	.attr = view_attr,
	.inputs = view_inputs,
	.getxattr = view_getxattr,
	.listxattr = view_listxattr,
	.open = view_open,
	.free = view_free,
};
