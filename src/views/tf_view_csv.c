/*
 * tf_view_csv.c - CSV states (cells.csv and cells.arrow, of the array and of
 * each fragment): made on first open, shared by every open, kept idle a
 * while when closed, sized.
 */
#include "config.h"

#include "views/tf_view_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CSV states ------------------------------------------------------------------------------- */

void view_csv_free(csv *c)
{
	if (!c)
		return;
	/* Its pieces stay in the cache under an owner no one asks for again:
	 * they drift to the cold end of the LRU and go first. */
	view_prod_free(c, &c->prod);
	if (c->charged)
		tf_cache_charge(tf_snapshot_cache(c->v->s), -(ptrdiff_t)c->charged);
	tf_buf_free(&c->header);
	tf_buf_free(&c->tail);
	tf_buf_free(&c->block);
	free(c->blocks);
	tf_arrow_free(c->ar);
	free(c->cols);
	free(c->specs);
	free(c->off);
	free(c->sat);
	free(c->st);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->ext);
	free(c);
}

static tf_status add_column(csv *c, tf_col_kind kind, const tf_field *f, const tf_schema *sc, tf_error *err)
{
	column *col = &c->cols[c->ncols];
	tf_status rc = TF_OK;

	col->spec = (tf_fieldspec){ kind, f->name, f };
	col->fmt = (tf_cellfmt){ f->type, kind == TF_COL_DIM && f->cell_val_num != TF_CELL_VAR ? 1 : f->cell_val_num,
				 NULL };
	if (kind == TF_COL_ATTR || kind == TF_COL_OWN_ATTR)
		rc = tf_snapshot_enum(c->v->s, sc, f, &col->fmt.enumeration, err);
	c->ncols++;
	return rc;
}

/* cells.arrow's columns: the CSV's, an enumeration's values in its
 * values' type (nullable: an index without a value is null). */
static tf_status arrow_schema(csv *c, tf_error *err)
{
	size_t budget = tf_cache_budget(tf_snapshot_cache(c->v->s));
	tf_arrow_limits lim = { TF_ARROW_CELLS, budget / 8, TF_ARROW_VAR_MAX };
	tf_arrow_col *ac = calloc(c->ncols + 1, sizeof(*ac));
	tf_status rc;

	if (!ac)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	lim.max_bytes = lim.max_bytes < ARROW_BATCH_MIN ? ARROW_BATCH_MIN
		      : lim.max_bytes > TF_ARROW_BYTES ? TF_ARROW_BYTES : lim.max_bytes;
	for (size_t i = 0; i < c->ncols; i++) {
		const column *col = &c->cols[i];
		tf_cellfmt f = col->fmt.enumeration ? tf_enum_valfmt(col->fmt.enumeration) : col->fmt;

		ac[i] = (tf_arrow_col){ col->spec.name, f.type, f.cell_val_num,
					i >= c->ndims && (col->spec.field->nullable || col->fmt.enumeration) };
	}
	rc = tf_arrow_new(ac, c->ncols, &lim, &c->ar, err);
	c->columnar = rc == TF_OK && c->kind == CSV_ARRAY_DENSE && tf_arrow_columnar(c->ar) && c->ndims <= 64 &&
		      c->ncols <= COLUMNAR_MAX;
	c->spans = rc == TF_OK && c->kind == CSV_ARRAY_SPARSE && tf_arrow_spannable(c->ar);
	for (size_t i = 0; i < c->ncols; i++) {
		c->columnar &= !c->cols[i].fmt.enumeration;
		c->spans &= !c->cols[i].fmt.enumeration;
	}
	free(ac);
	return rc;
}

/* Columns: dimensions then attributes (A.df[:]'s order); what is read. */
static tf_status csv_columns(csv *c, tf_error *err)
{
	const tf_schema *sc = c->schema;
	/* A fragment's own view reads its attributes as it wrote them. */
	tf_col_kind attr = c->kind == CSV_FRAG_DENSE || c->kind == CSV_FRAG_SPARSE ? TF_COL_OWN_ATTR : TF_COL_ATTR;
	tf_status rc = TF_OK;

	if (!(c->cols = calloc(sc->ndims + sc->nattrs + 1, sizeof(*c->cols))) ||
	    !(c->specs = calloc(sc->ndims + sc->nattrs + 1, sizeof(*c->specs))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	c->ndims = sc->ndims;
	for (size_t d = 0; d < sc->ndims && rc == TF_OK; d++)
		rc = add_column(c, TF_COL_DIM, &sc->dims[d], sc, err);
	for (size_t a = 0; a < sc->nattrs && rc == TF_OK; a++)
		rc = add_column(c, attr, &sc->attrs[a], sc, err);
	/* Dense cells compute their coordinates; sparse ones read them. */
	for (size_t i = c->kind == CSV_FRAG_DENSE || c->kind == CSV_ARRAY_DENSE ? c->ndims : 0; i < c->ncols; i++)
		c->specs[c->nspecs++] = c->cols[i].spec;
	if (rc == TF_OK && c->arrow)
		rc = arrow_schema(c, err);
	return rc == TF_OK ? view_make_header(c, err) : rc;
}

static tf_status csv_new(tf_views *v, csv_kind kind, size_t frag, bool arrow, csv **out, tf_error *err)
{
	csv *c = calloc(1, sizeof(*c));
	tf_status rc;

	if (!c)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	c->v = v, c->kind = kind, c->frag = frag, c->arrow = arrow;
	c->final = frag != SIZE_MAX && v->frag_size ? (arrow ? v->frag_arrow_size : v->frag_size)[frag] : UINT64_MAX;
	tf_buf_init(&c->tail, SIZE_MAX);
	tf_buf_init(&c->block, (size_t)4 << 30);
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->ext, NULL);
	tf_buf_init(&c->header, (size_t)1 << 20);
	c->schema = kind == CSV_FRAG_DENSE || kind == CSV_FRAG_SPARSE ? tf_snapshot_frag(v->s, frag)->schema
								      : tf_snapshot_schema(v->s);
	c->S = kind == CSV_ARRAY_SPARSE && tf_snapshot_nvisible(v->s) ? tf_snapshot_nvisible(v->s) : 1;
	{	/* pieces live in the cache: a few must fit beside decoded chunks */
		size_t budget = tf_cache_budget(tf_snapshot_cache(v->s));
		c->target = budget / 8 < BLOCK_TARGET ? budget / 8 : BLOCK_TARGET;
		if (c->target < 1024)
			c->target = 1024;
		c->piece = 2 * c->target;
		c->limit = budget / 64 > INDEX_MIN ? budget / 64 : INDEX_MIN;
	}
	if ((rc = csv_columns(c, err)) == TF_OK) {
		uint64_t *zero = calloc(c->S + 1, sizeof(uint64_t));
		rc = zero ? view_append_entry(c, 0, zero, err) : tf_err(err, TF_E_NOMEM, "out of memory");
		free(zero);
		c->owner = tf_cache_owner(tf_snapshot_cache(v->s));
	}
	if (rc != TF_OK) {
		view_csv_free(c);
		return rc;
	}
	*out = c;
	return TF_OK;
}

/* The per-fragment tables, CSV and Arrow (v->lock held). */
static tf_status frag_tables(tf_views *v, tf_error *err)
{
	size_t n = tf_snapshot_nfrags(v->s) + 1;

	v->frag_csv = calloc(n, sizeof(csv *));
	v->frag_arrow = calloc(n, sizeof(csv *));
	v->frag_size = malloc(n * sizeof(uint64_t));
	v->frag_arrow_size = malloc(n * sizeof(uint64_t));
	if (!v->frag_csv || !v->frag_size || !v->frag_arrow || !v->frag_arrow_size) {
		free(v->frag_csv), free(v->frag_size), free(v->frag_arrow), free(v->frag_arrow_size);
		v->frag_csv = NULL, v->frag_size = NULL, v->frag_arrow = NULL, v->frag_arrow_size = NULL;
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		v->frag_size[i] = v->frag_arrow_size[i] = UINT64_MAX;
	return TF_OK;
}

static void idle_remove(tf_views *v, csv *c)
{
	*(c->idle_prev ? &c->idle_prev->idle_next : &v->idle_head) = c->idle_next;
	*(c->idle_next ? &c->idle_next->idle_prev : &v->idle_tail) = c->idle_prev;
	c->idle_prev = c->idle_next = NULL;
	v->nidle--;
}

/* The CSV (or cells.arrow) state of the array (frag == SIZE_MAX) or of one
 * fragment, made on need; a fragment's may be let go when no view has it
 * open (view_put_csv). */
tf_status view_get_csv(tf_views *v, size_t frag, bool arrow, csv **out, tf_error *err)
{
	const tf_snap_frag *f = frag == SIZE_MAX ? NULL : tf_snapshot_frag(v->s, frag);
	csv **slot;
	csv_kind kind;
	tf_status rc = TF_OK;

	if (f && (rc = tf_snapshot_load(v->s, frag, err)) != TF_OK)
		return rc;
	if (!f && tf_snapshot_schema(v->s)->dense && !view_dense(v)) {
		if (err)
			*err = v->dense_err;
		return v->dense_err.code ? v->dense_err.code : TF_E_UNSUPPORTED;
	}
	kind = f ? (f->dense ? CSV_FRAG_DENSE : CSV_FRAG_SPARSE)
		 : (tf_snapshot_schema(v->s)->dense ? CSV_ARRAY_DENSE : CSV_ARRAY_SPARSE);
	pthread_mutex_lock(&v->lock);
	if (f && !v->frag_csv && (rc = frag_tables(v, err)) != TF_OK) {
		pthread_mutex_unlock(&v->lock);
		return rc;
	}
	slot = f ? &(arrow ? v->frag_arrow : v->frag_csv)[frag] : arrow ? &v->array_arrow : &v->array_csv;
	if (!*slot)
		rc = csv_new(v, kind, frag, arrow, slot, err);
	else if ((*slot)->users == 0 && f)
		idle_remove(v, *slot);
	if (rc == TF_OK)
		(*slot)->users++;
	*out = *slot;
	pthread_mutex_unlock(&v->lock);
	if (rc == TF_OK) {
		uint64_t claim;
		bool claimed = view_remembered(v, f ? frag : SIZE_MAX, arrow, &claim);

		pthread_mutex_lock(&(*out)->lock);
		if (claimed && !(*out)->claimed && !(*out)->complete && (*out)->final == UINT64_MAX &&
		    claim >= (*out)->header.len)
			(*out)->claimed = true, (*out)->claim = claim;
		pthread_mutex_unlock(&(*out)->lock);
	}
	return rc;
}

/* cells.arrow's state no view has open keeps no buffers: its extender's
 * block and batch (megabytes, kept between the requests of its readers:
 * fresh pages each time cost more than writing them) go.  Under ext (a
 * reader coming meanwhile grows them again), never under v->lock: the
 * extender takes v->lock under ext (remember). */
static void arrow_release(csv *c)
{
	if (!c->arrow)
		return;
	pthread_mutex_lock(&c->ext);
	tf_buf_free(&c->block);
	if (c->prod.batch)
		tf_arrow_batch_release(c->prod.batch);
	pthread_mutex_lock(&c->lock);
	c->scratch = 0;
	view_index_charge(c);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->ext);
}

/* Its size if its text bears it out: formatted to its end, or a
 * remembered size a read proved. */
static bool csv_proved_size(csv *c, uint64_t *size)
{
	bool known;

	pthread_mutex_lock(&c->lock);
	known = c->complete || (c->claimed && c->proved);
	*size = c->complete ? c->header.len + view_frontier(c) + c->tail.len : c->claim;
	pthread_mutex_unlock(&c->lock);
	if (!known && c->final != UINT64_MAX)
		*size = c->final, known = true;
	return known;
}

/* The oldest idle fragment state leaves the views, its size (when its
 * text bore it out) remembered in 8 bytes (v->lock held); the caller
 * frees it. */
csv *view_evict_idle(tf_views *v)
{
	csv *c = v->idle_head;
	uint64_t size;

	idle_remove(v, c);
	if (csv_proved_size(c, &size))
		(c->arrow ? v->frag_arrow_size : v->frag_size)[c->frag] = size;
	(c->arrow ? v->frag_arrow : v->frag_csv)[c->frag] = NULL;
	return c;
}

/* A view of it closed.  A fragment's CSV state no view has open waits on
 * the idle list; beyond IDLE_FRAG_CSVS the oldest goes, its size (when
 * known) remembered in 8 bytes: a state costs ~11 KB (columns, header,
 * index, the producer's cursors), and reading every fragments/F/cells.csv
 * of 2,000 fragments kept 22 MB outside the budget for the mount's life. */
void view_put_csv(tf_views *v, csv *c)
{
	csv *gone = NULL;
	bool last;

	pthread_mutex_lock(&v->lock);
	last = c->users == 1;
	pthread_mutex_unlock(&v->lock);
	if (last)	/* while our hold keeps c; not under v->lock (see arrow_release) */
		arrow_release(c);
	pthread_mutex_lock(&v->lock);
	if (--c->users == 0 && c->frag != SIZE_MAX) {
		c->idle_prev = v->idle_tail, c->idle_next = NULL;
		*(v->idle_tail ? &v->idle_tail->idle_next : &v->idle_head) = c;
		v->idle_tail = c;
		v->nidle++;
		if (v->nidle > IDLE_FRAG_CSVS)
			gone = view_evict_idle(v);
	}
	pthread_mutex_unlock(&v->lock);
	view_csv_free(gone);
}

/* Known once formatted to its end, or remembered (until found wrong). */
bool view_csv_size(csv *c, uint64_t *size)
{
	bool known;

	pthread_mutex_lock(&c->lock);
	known = c->complete || c->claimed;
	*size = c->complete ? c->header.len + view_frontier(c) + c->tail.len : c->claimed ? c->claim : 0;
	pthread_mutex_unlock(&c->lock);
	if (!known && c->final != UINT64_MAX)
		*size = c->final, known = true;
	return known;
}

/* At least as many cells as the CSV has records: a dense array's box, a
 * fragment's tiles, the sum of the visible fragments' cells (before
 * duplicates and deletes go).  Sparse arrays read every visible
 * fragment's metadata (the merge needs it anyway). */
tf_status view_csv_cells_bound(csv *c, const tf_cancel *cancel, uint64_t *n, tf_error *err)
{
	tf_snapshot *s = c->v->s;
	const tf_snap_frag *f;
	uint64_t total = 0, k;
	tf_status rc = TF_OK;

	switch (c->kind) {
	case CSV_ARRAY_DENSE:
		total = tf_dense_ncells(c->v->dense);
		break;
	case CSV_FRAG_DENSE:
		f = view_csv_frag(c);
		k = tf_schema_dense_tile_cells(f->schema);
		total = k && f->ntiles <= UINT64_MAX / k ? f->ntiles * k : UINT64_MAX;
		break;
	case CSV_FRAG_SPARSE:
		rc = tf_frag_sparse_cells(view_csv_frag(c), &total, err);
		break;
	default:
		if ((rc = tf_snapshot_load_visible(s, cancel, err)) != TF_OK)
			break;
		for (size_t i = 0; i < tf_snapshot_nvisible(s) && rc == TF_OK; i++)
			if ((rc = tf_frag_sparse_cells(tf_snapshot_frag(s, tf_snapshot_visible(s, i)), &k, err)) ==
			    TF_OK)
				total = tf_u64_add_sat(total, k);
		break;
	}
	*n = total;
	return rc;
}

/* Format the CSV to its end, block by block as reads do (one block at a
 * time under ext: readers go on meanwhile), keeping its index only. */
tf_status view_csv_complete(csv *c, tf_workspace *ws, const tf_cancel *cancel, tf_error *err)
{
	tf_status rc = TF_OK;
	bool done;

	for (;;) {
		pthread_mutex_lock(&c->lock);
		done = c->complete;
		pthread_mutex_unlock(&c->lock);
		if (done || rc != TF_OK)
			return rc;
		if (tf_cancelled(cancel))
			return tf_err(err, TF_E_INTR, "interrupted");
		pthread_mutex_lock(&c->ext);
		pthread_mutex_lock(&c->lock);
		done = c->complete;
		pthread_mutex_unlock(&c->lock);
		if (!done)
			rc = view_extend_one(c, ws, cancel, false, err);
		pthread_mutex_unlock(&c->ext);
	}
}
