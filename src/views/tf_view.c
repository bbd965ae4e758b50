/*
 * tf_view.c - the array views' tree: the views of one array state, their
 * paths (cells.csv, cells.arrow, <attr>.raw/.npy, fragments/F/), their
 * stat, listing and extended attributes, and open views read through the
 * streams (tf_view_csv.c, tf_view_index.c, tf_view_matrix.c).
 */
#include "config.h"

#include "views/tf_view_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the views of one array state ------------------------------------------------------------ */

tf_status tf_views_open(tf_array *a, tf_cache *cache, tf_views **out, tf_error *err)
{
	tf_views *v = calloc(1, sizeof(*v));
	tf_status rc;

	if (!v)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	atomic_init(&v->refs, 1);
	atomic_init(&v->dense_tried, false);
	v->array_claim = v->array_arrow_claim = CLAIM_UNASKED;
	pthread_mutex_init(&v->lock, NULL);
	pthread_mutex_init(&v->dense_lock, NULL);
	/* Fragment metadata the array keeps: within a 16th of the budget. */
	tf_array_set_idle_limit(a, tf_cache_budget(cache) / 16);
	if ((rc = tf_snapshot_open(a, cache, &v->s, err)) != TF_OK) {
		tf_views_unref(v);
		return rc;
	}
	*out = v;
	return TF_OK;
}

tf_views *tf_views_ref(tf_views *v)
{
	atomic_fetch_add(&v->refs, 1);
	return v;
}

void tf_views_unref(tf_views *v)
{
	if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
		return;
	view_csv_free(v->array_csv);
	view_csv_free(v->array_arrow);
	for (size_t i = 0; (v->frag_csv || v->frag_arrow) && i < tf_snapshot_nfrags(v->s); i++) {
		if (v->frag_csv)
			view_csv_free(v->frag_csv[i]);
		if (v->frag_arrow)
			view_csv_free(v->frag_arrow[i]);
	}
	free(v->frag_arrow);
	for (size_t i = 0; i < v->nmats; i++)
		tf_buf_free(&v->mats[i].npy);
	free(v->mats);
	free(v->frag_csv);
	free(v->frag_claim);
	free(v->frag_arrow_claim);
	free(v->store_id);
	free(v->frag_size);
	free(v->frag_arrow_size);
	tf_dense_free(v->dense);
	tf_snapshot_unref(v->s);
	pthread_mutex_destroy(&v->lock);
	pthread_mutex_destroy(&v->dense_lock);
	free(v);
}

void tf_views_set_store(tf_views *v, tf_index *store, const char *array_id)
{
	char *id = malloc(strlen(array_id) + 6);

	if (!id)
		return;
	sprintf(id, "view:%s", array_id);
	pthread_mutex_lock(&v->lock);
	if (!v->store) {
		v->store = store;
		v->store_id = id;
		id = NULL;
	}
	pthread_mutex_unlock(&v->lock);
	free(id);
}

bool tf_views_current(tf_views *v)
{
	return tf_snapshot_current(v->s);
}

bool tf_views_keyed(const tf_views *v)
{
	tf_array *a = tf_snapshot_array(v->s);

	return tf_array_key(a) && tf_array_schema_encrypted(a, tf_snapshot_schema(v->s));
}

/* ---- paths ----------------------------------------------------------------------------------------- */

typedef enum { P_ROOT, P_CSV, P_RAW, P_NPY, P_FRAGDIR, P_FRAG, P_FRAGCSV, P_ARROW, P_FRAGARROW } path_kind;

typedef struct vpath {
	path_kind kind;
	size_t frag;		/* P_FRAG, P_FRAGCSV */
	const matrix *m;	/* P_RAW, P_NPY */
} vpath;

static bool ends_with(const char *s, const char *suffix, size_t *stem)
{
	size_t n = strlen(s), m = strlen(suffix);

	*stem = n >= m ? n - m : 0;
	return n > m && !strcmp(s + n - m, suffix);
}

static tf_status parse_path(tf_views *v, const char *rel, vpath *p, tf_error *err)
{
	const char *slash;
	size_t stem;
	char name[512];

	memset(p, 0, sizeof(*p));
	if (!*rel || !strcmp(rel, "."))
		return p->kind = P_ROOT, TF_OK;
	if (!strcmp(rel, CSV_NAME))
		return p->kind = P_CSV, TF_OK;
	if (!strcmp(rel, ARROW_NAME))
		return p->kind = P_ARROW, TF_OK;
	if (!strcmp(rel, FRAGMENTS))
		return p->kind = P_FRAGDIR, TF_OK;
	if (!strncmp(rel, FRAGMENTS "/", sizeof(FRAGMENTS))) {
		rel += sizeof(FRAGMENTS);
		slash = strchr(rel, '/');
		snprintf(name, sizeof(name), "%.*s", slash ? (int)(slash - rel) : (int)strlen(rel), rel);
		p->frag = tf_snapshot_find(v->s, name);
		if (p->frag != SIZE_MAX && !slash)
			return p->kind = P_FRAG, TF_OK;
		if (p->frag != SIZE_MAX && !strcmp(slash + 1, CSV_NAME))
			return p->kind = P_FRAGCSV, TF_OK;
		if (p->frag != SIZE_MAX && !strcmp(slash + 1, ARROW_NAME))
			return p->kind = P_FRAGARROW, TF_OK;
	} else if (ends_with(rel, ".raw", &stem) || ends_with(rel, ".npy", &stem)) {
		view_dense(v);
		for (size_t i = 0; i < v->nmats; i++)
			if (strlen(v->mats[i].name) == stem && !strncmp(v->mats[i].name, rel, stem)) {
				p->m = &v->mats[i];
				return p->kind = rel[stem + 1] == 'r' ? P_RAW : P_NPY, TF_OK;
			}
	}
	return tf_err(err, TF_E_INVAL, "%s/%s: no such view", TF_VIEWS_DIR, rel);
}

static void stat_of(tf_views *v, const vpath *p, tf_view_stat *st)
{
	memset(st, 0, sizeof(*st));
	st->size_known = true;
	switch (p->kind) {
	case P_ROOT: case P_FRAGDIR: case P_FRAG:
		st->dir = true;
		break;
	case P_RAW:
		st->size = view_raw_size(p->m);
		break;
	case P_NPY:
		st->size = view_npy_size(p->m);
		break;
	default: {	/* a CSV: known once formatted to its end */
		csv *c;
		bool arrow = p->kind == P_ARROW || p->kind == P_FRAGARROW, whole = p->kind == P_CSV || p->kind == P_ARROW;
		pthread_mutex_lock(&v->lock);	/* held: an idle fragment's state may go */
		c = whole ? (arrow ? v->array_arrow : v->array_csv)
		  : v->frag_csv ? (arrow ? v->frag_arrow : v->frag_csv)[p->frag] : NULL;
		st->size_known = c ? view_csv_size(c, &st->size)
				   : !whole && v->frag_size && (arrow ? v->frag_arrow_size : v->frag_size)[p->frag] != UINT64_MAX;
		if (!c && st->size_known)
			st->size = (arrow ? v->frag_arrow_size : v->frag_size)[p->frag];
		pthread_mutex_unlock(&v->lock);
		if (!st->size_known && !c)
			st->size_known = view_remembered(v, whole ? SIZE_MAX : p->frag, arrow, &st->size);
		if (!st->size_known)
			st->size = 0;
	}
	}
}

tf_status tf_views_stat(tf_views *v, const char *rel, tf_view_stat *st, tf_error *err)
{
	vpath p;
	tf_status rc = parse_path(v, rel, &p, err);

	if (rc == TF_OK)
		stat_of(v, &p, st);
	return rc;
}

tf_status tf_views_reads(tf_views *v, const char *rel, tf_view_reads *what, char *frag, size_t n,
			 tf_error *err)
{
	vpath p;
	tf_status rc = parse_path(v, rel, &p, err);

	if (n)
		*frag = '\0';
	if (rc != TF_OK)
		return rc;
	*what = p.kind == P_ROOT || p.kind == P_FRAGDIR ? TF_VIEW_READS_NONE
	      : p.kind == P_FRAG || p.kind == P_FRAGCSV || p.kind == P_FRAGARROW ? TF_VIEW_READS_ONE
	      : TF_VIEW_READS_VISIBLE;
	if (*what == TF_VIEW_READS_ONE && !tf_snapshot_frag_dir(v->s, p.frag, frag, n))
		return tf_err(err, TF_E_INVAL, "%s: name too long", rel);
	return TF_OK;
}

void tf_views_shrink(tf_views *v)
{
	csv *gone = NULL;

	pthread_mutex_lock(&v->lock);
	while (v->idle_head) {
		csv *c = view_evict_idle(v);

		c->idle_next = gone;	/* a list of its own now */
		gone = c;
	}
	pthread_mutex_unlock(&v->lock);
	while (gone) {
		csv *next = gone->idle_next;

		view_csv_free(gone);
		gone = next;
	}
	tf_snapshot_shrink(v->s);
}

size_t tf_views_csv_states(tf_views *v)
{
	size_t n = 0;

	pthread_mutex_lock(&v->lock);
	n = v->array_csv != NULL;
	n += v->array_arrow != NULL;
	for (size_t i = 0; v->frag_csv && i < tf_snapshot_nfrags(v->s); i++)
		n += (v->frag_csv[i] != NULL) + (v->frag_arrow[i] != NULL);
	pthread_mutex_unlock(&v->lock);
	return n;
}

size_t tf_views_nvisible(const tf_views *v)
{
	return tf_snapshot_nvisible(v->s);
}

bool tf_views_visible_dir(const tf_views *v, size_t k, char *buf, size_t n)
{
	return tf_snapshot_frag_dir(v->s, tf_snapshot_visible(v->s, k), buf, n);
}

static int list_one(tf_views *v, const vpath *p, const char *name, tf_views_list_fn fn, void *ctx)
{
	tf_view_stat st;

	stat_of(v, p, &st);
	return fn(ctx, name, &st);
}

tf_status tf_views_list(tf_views *v, const char *rel, tf_views_list_fn fn, void *ctx, tf_error *err)
{
	vpath p, e;
	char name[320];
	tf_status rc = parse_path(v, rel, &p, err);

	if (rc != TF_OK)
		return rc;
	memset(&e, 0, sizeof(e));
	if (p.kind == P_ROOT) {
		view_dense(v);	/* its matrices are listed */
		e.kind = P_CSV;
		if (list_one(v, &e, CSV_NAME, fn, ctx))
			return TF_OK;
		e.kind = P_FRAGDIR;
		if (list_one(v, &e, FRAGMENTS, fn, ctx))
			return TF_OK;
		for (size_t i = 0; i < v->nmats; i++) {
			e.m = &v->mats[i];
			e.kind = P_RAW;
			snprintf(name, sizeof(name), "%s.raw", v->mats[i].name);
			if (list_one(v, &e, name, fn, ctx))
				return TF_OK;
			e.kind = P_NPY;
			snprintf(name, sizeof(name), "%s.npy", v->mats[i].name);
			if (list_one(v, &e, name, fn, ctx))
				return TF_OK;
		}
		e.kind = P_ARROW;	/* last: the listing's first entries came first */
		if (list_one(v, &e, ARROW_NAME, fn, ctx))
			return TF_OK;
	} else if (p.kind == P_FRAGDIR) {
		e.kind = P_FRAG;
		for (size_t i = 0; i < tf_snapshot_nfrags(v->s); i++)
			if (list_one(v, &e, tf_snapshot_frag(v->s, i)->name, fn, ctx))
				return TF_OK;
	} else if (p.kind == P_FRAG) {
		e.kind = P_FRAGCSV, e.frag = p.frag;
		if (list_one(v, &e, CSV_NAME, fn, ctx))
			return TF_OK;
		e.kind = P_FRAGARROW;
		list_one(v, &e, ARROW_NAME, fn, ctx);
	} else {
		return tf_err(err, TF_E_INVAL, "%s/%s: not a directory", TF_VIEWS_DIR, rel);
	}
	return TF_OK;
}

/* ---- extended attributes ----------------------------------------------------------------------- */

#define XA_SHAPE "user.tilefs.shape"
#define XA_DTYPE "user.tilefs.dtype"

tf_status tf_views_listxattr(tf_views *v, const char *rel, char *buf, size_t n, size_t *len,
			     tf_error *err)
{
	static const char names[] = XA_SHAPE "\0" XA_DTYPE;
	vpath p;
	tf_status rc = parse_path(v, rel, &p, err);

	*len = 0;
	if (rc != TF_OK || (p.kind != P_RAW && p.kind != P_NPY))
		return rc;
	*len = sizeof(names);
	if (buf && n < sizeof(names))
		return tf_err(err, TF_E_NOMEM, "buffer of %zu bytes for %zu", n, sizeof(names));
	if (buf)
		memcpy(buf, names, sizeof(names));
	return TF_OK;
}

tf_status tf_views_getxattr(tf_views *v, const char *rel, const char *name, char *buf, size_t n,
			    size_t *len, tf_error *err)
{
	char value[TF_NPY_SHAPE_MAX];
	vpath p;
	tf_status rc = parse_path(v, rel, &p, err);

	*len = 0;
	if (rc != TF_OK)
		return rc;
	if ((p.kind != P_RAW && p.kind != P_NPY) || (strcmp(name, XA_SHAPE) && strcmp(name, XA_DTYPE)))
		return tf_err(err, TF_E_INVAL, "no attribute %s", name);
	if (!strcmp(name, XA_SHAPE))
		tf_npy_shape_text(p.m->shape, p.m->nshape, value, sizeof(value));
	else
		snprintf(value, sizeof(value), "%s", p.m->dtype);
	*len = strlen(value);
	if (buf && n < *len)
		return tf_err(err, TF_E_NOMEM, "buffer of %zu bytes for %zu", n, *len);
	if (buf)
		memcpy(buf, value, *len);
	return TF_OK;
}

/* ---- open views --------------------------------------------------------------------------------- */

tf_status tf_view_open(tf_views *v, const char *rel, tf_view **out, tf_error *err)
{
	tf_view *w;
	vpath p;
	tf_status rc = parse_path(v, rel, &p, err);

	if (rc != TF_OK)
		return rc;
	if (p.kind == P_ROOT || p.kind == P_FRAGDIR || p.kind == P_FRAG)
		return tf_err(err, TF_E_INVAL, "%s/%s is a directory", TF_VIEWS_DIR, rel);
	if ((p.kind == P_RAW || p.kind == P_NPY) && !p.m->sized)
		return tf_err(err, TF_E_UNSUPPORTED, "%s/%s/%s: %llu cells of %u bytes, more than a file can "
			      "hold (2^63 - 1 bytes)", tf_array_dir(tf_snapshot_array(v->s)), TF_VIEWS_DIR, rel,
			      (unsigned long long)tf_dense_ncells(v->dense), p.m->cs);
	if (!(w = calloc(1, sizeof(*w))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	w->kind = p.kind == P_RAW ? V_RAW : p.kind == P_NPY ? V_NPY : V_CSV;
	w->m = p.m;
	if (w->kind == V_CSV && (rc = view_get_csv(v, p.kind == P_CSV || p.kind == P_ARROW ? SIZE_MAX : p.frag,
					      p.kind == P_ARROW || p.kind == P_FRAGARROW, &w->c, err)) != TF_OK) {
		free(w);
		return rc;
	}
	w->v = tf_views_ref(v);
	*out = w;
	return TF_OK;
}

void tf_view_close(tf_view *w)
{
	if (w) {
		if (w->c)
			view_put_csv(w->v, w->c);
		tf_views_unref(w->v);
		free(w);
	}
}

bool tf_view_size(tf_view *w, uint64_t *size)
{
	switch (w->kind) {
	case V_RAW:
		*size = view_raw_size(w->m);
		return true;
	case V_NPY:
		*size = view_npy_size(w->m);
		return true;
	default:
		return view_csv_size(w->c, size);
	}
}

tf_status tf_view_size_now(tf_view *w, tf_workspace *ws, const tf_cancel *cancel, uint64_t *size, bool *known,
			   tf_error *err)
{
	uint64_t cells;
	tf_status rc;

	if ((*known = tf_view_size(w, size)) || w->kind != V_CSV)
		return TF_OK;
	if ((rc = view_csv_cells_bound(w->c, cancel, &cells, err)) != TF_OK)
		return rc;
	if (cells > SIZE_CELLS_MAX)
		return TF_OK;	/* an endless box: read as /proc files are */
	if ((rc = view_csv_complete(w->c, ws, cancel, err)) != TF_OK)
		return rc;
	*known = view_csv_size(w->c, size);
	return TF_OK;
}

tf_status tf_view_read_cancellable(tf_view *w, tf_workspace *ws, uint64_t off, size_t len, uint8_t *dst,
				   size_t *got, const tf_cancel *cancel, tf_error *err)
{
	size_t head = 0, n = 0;
	tf_status rc;

	*got = 0;
	switch (w->kind) {
	case V_CSV:
		return view_csv_read(w->c, ws, off, len, dst, got, w->kept, cancel, err);
	case V_RAW:
		return view_raw_read(w->v, w->m, ws, off, len, dst, got, err);
	default:
		if (off < w->m->npy.len) {
			head = w->m->npy.len - off < len ? (size_t)(w->m->npy.len - off) : len;
			memcpy(dst, w->m->npy.p + off, head);
		}
		rc = view_raw_read(w->v, w->m, ws, off + head - w->m->npy.len, len - head, dst + head, &n, err);
		*got = head + n;
		return rc;
	}
}

tf_status tf_view_read(tf_view *w, tf_workspace *ws, uint64_t off, size_t len, uint8_t *dst,
		       size_t *got, tf_error *err)
{
	return tf_view_read_cancellable(w, ws, off, len, dst, got, NULL, err);
}

void tf_view_set_kept(tf_view *w, bool kept)
{
	w->kept = kept;
}

size_t tf_view_index_bytes(tf_view *w)
{
	size_t n = 0;

	if (w->kind == V_CSV) {
		pthread_mutex_lock(&w->c->lock);
		n = view_index_bytes(w->c);
		pthread_mutex_unlock(&w->c->lock);
	}
	return n;
}
