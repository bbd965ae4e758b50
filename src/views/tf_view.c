/*
 * tf_view.c - array views: cells.csv (whole array and per fragment),
 * <attr>.raw and <attr>.npy, as ranged byte streams.
 */
#include "config.h"

#include "views/tf_view.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "views/tf_arrow.h"
#include "views/tf_cells.h"
#include "cache/tf_index.h"
#include "views/tf_merge.h"
#include "views/tf_snapshot.h"

/* CSV text per indexed block: a block ends at the first record past it, so
 * it fits a piece of twice this, 64 KiB: a cache slot (tf_cache), as decoded
 * units are.  Pieces of 256 KiB came from malloc while units came from the
 * slabs, and each kept its high water: a full pass over 300 fragments grew
 * the daemon to the budget twice over. */
#define BLOCK_TARGET ((size_t)32 << 10)
#define DENSE_BATCH 1024			/* dense cells gathered at once */
#define CANCEL_ROWS 1024			/* rows formatted between cancel checks */
#define INDEX_MIN ((size_t)4 << 10)		/* a CSV's index may hold budget / 64, this at least */
#define WINDOW_PART 8				/* a fragment's window: budget / 8, */
#define WINDOW_MAX ((size_t)64 << 10)		/* 64 KiB at most (a cache slot: tf_merge.c) */
#define SIZE_CELLS_MAX ((uint64_t)1 << 32)	/* a CSV of more cells is not sized at open */
#define IDLE_FRAG_CSVS 64			/* fragments' CSV states kept when closed */
#define CSV_NAME "cells.csv"
#define ARROW_NAME "cells.arrow"
#define ARROW_BATCH_MIN ((size_t)64 << 10)	/* a batch's bytes: budget / 8, at least this */
#define COLUMNAR_MAX 130			/* columns a dense cells.arrow takes a column at a time */
/* Bumped whenever the text rules change (tf_cells.c, this file): sizes
 * remembered of older text are then stale. */
#define CSV_TEXT_VERSION 1
#define CLAIM_UNASKED UINT64_MAX		/* remembered sizes: not asked the store yet */
#define CLAIM_NONE (UINT64_MAX - 1)		/* it had none (or one found wrong) */
#define FRAGMENTS "fragments"

typedef enum { CSV_ARRAY_DENSE, CSV_ARRAY_SPARSE, CSV_FRAG_DENSE, CSV_FRAG_SPARSE } csv_kind;

typedef struct column {
	tf_fieldspec spec;
	tf_cellfmt fmt;
} column;

/* Cells of one field gathered for a batch of dense cells. */
typedef struct gathered {
	tf_buf data;
	uint64_t *starts;	/* var: n + 1 */
	uint8_t *valid;
	size_t cap;		/* cells starts/valid hold */
} gathered;

/* What formatting needs between calls: iterators and scratch.  Between
 * requests (prod_end) it holds no scratch and no pinned window: the
 * iterators' windows are cache entries the cache may take back. */
typedef struct producer {
	tf_sparse *it;		/* sparse array */
	uint64_t at;		/* the extender's: the text offset it stands at */
	bool warm;		/* ...if this is set (then it needs no state) */
	tf_row row;
	tf_cellbuf buf;		/* per fragment */
	gathered *g;		/* dense array: one per attribute */
	tf_run *runs;
	size_t nruns, runcap;
	const tf_cancel *cancel;	/* this request's */
	size_t rows;		/* formatted: the cancel is asked every CANCEL_ROWS */
	bool ready;
	tf_arrow_batch *batch;	/* cells.arrow: the record batch being built, */
	tf_arrow_cell *cells;	/* the row's cells, */
	uint8_t (*small)[8];	/* and copies of the small ones (coordinates) */
	uint8_t *coords;	/* columnar: DENSE_BATCH coordinates per dimension */
	tf_arrow_span *spans;	/* c->spans: a run's columns, */
	size_t *fidx;		/* and the window's field of each (tf_sparse_field) */
} producer;

/*
 * A CSV's index: entries (text offset, merge state) from which formatting
 * can start, the first at 0 and the last at the frontier (all the text
 * formatted so far ends there).  The text between two entries, a segment,
 * is served in pieces of up to 2 x target bytes, each a cache entry keyed
 * by the index's level and where it starts; a piece missing is formatted
 * again from its segment's entry.  States are stored as varints.
 *
 * Bounded: when the index holds more than `limit` bytes (a 64th of the
 * budget, 4 KiB at least), every other entry goes (the first and the
 * frontier stay) and the level goes up: the pieces of the old segments are
 * left to drift out of the cache.  A dense CSV's entry costs ~21 bytes, so
 * a 64 MiB cache indexes 6 GB of text before thinning once; a read deep in
 * a thinned stretch formats at most the segment before it, 2^level blocks.
 * An endless CSV (a dense box of 2^62 cells) grew its index by 0.4 MB per
 * GB read before, without bound.
 */
typedef struct csv {
	tf_views *v;		/* owner (not a reference) */
	csv_kind kind;
	size_t frag;		/* per-fragment views */
	const tf_schema *schema;
	column *cols;
	size_t ncols, ndims;
	tf_fieldspec *specs;	/* what is read: per kind, see csv_new */
	size_t nspecs;
	tf_buf header;
	size_t S;		/* u64s in a state */
	size_t target;		/* text per block: BLOCK_TARGET, less in a small cache */
	size_t piece;		/* text per cache entry: 2 x target */
	uint64_t owner;		/* cache owner of the formatted pieces */
	pthread_mutex_t lock;	/* guards the index */
	uint64_t *off;		/* nent entries' text offsets (after the header) */
	size_t *sat;		/* nent + 1: where each entry's state starts in st */
	uint8_t *st;		/* the states, varints back to back */
	size_t nent, ecap, stcap;
	unsigned level;		/* times thinned */
	size_t limit;		/* bytes the index may hold */
	size_t charged;		/* its memory, charged to the cache's budget */
	bool complete;
	/* A size remembered from an earlier mount (tf_views_set_store), the
	 * file's size until the text proves it (reaching it, or failing to). */
	bool claimed, proved;
	uint64_t claim;
	uint64_t final;		/* its size, remembered from an earlier state (or UINT64_MAX) */
	int users;		/* open views (under the owner's lock) */
	struct csv *idle_prev, *idle_next;	/* a fragment's, idle: on the owner's idle list */
	/* cells.arrow (arrow set): the same cells as record batches; the
	 * header is the file's head, and once complete the tail follows the
	 * last block (tf_arrow.h) */
	bool arrow;
	bool columnar;		/* a dense array's cells given column by column */
	bool spans;		/* a sparse array's runs of cells so too (tf_arrow_put_span) */
	tf_arrow *ar;
	tf_arrow_block *blocks;	/* every batch written, for the footer */
	size_t nblocks, bcap;
	tf_buf tail;
	tf_buf block;		/* the extender's (under ext) */
	size_t scratch;		/* what it and its batch hold, while views have the state open */
	pthread_mutex_t ext;	/* one thread extends the index at a time */
	producer prod;		/* the extender's (under ext) */
} csv;

typedef struct matrix {
	const tf_field *attr;
	char name[300];		/* "<attr>" */
	char dtype[40];
	uint64_t shape[65];
	size_t nshape;
	unsigned cs;		/* bytes per cell (at most TF_CELL_BYTES_MAX) */
	uint64_t raw;		/* bytes of the cells, when sized */
	bool sized;		/* the .npy (header and cells) fits an off_t:
				 * else both views show size 0 and do not open */
	tf_buf npy;		/* the .npy header */
} matrix;

struct tf_views {
	atomic_int refs;
	tf_snapshot *s;
	/* Dense arrays: resolved on first need (it reads every fragment's
	 * metadata; looking the views folder up, or a sparse array's, must
	 * not), under dense_lock, then fixed. */
	pthread_mutex_t dense_lock;
	atomic_bool dense_tried;
	tf_dense *dense;	/* dense arrays whose fragments are all dense */
	tf_error dense_err;
	matrix *mats;
	size_t nmats;
	pthread_mutex_t lock;	/* guards the CSV states below */
	csv *array_csv;
	csv **frag_csv;		/* per snapshot fragment; made on first need */
	/* CSV sizes remembered across mounts (under lock): the store, the
	 * array's identity there, the state's key (made on first need) */
	tf_index *store;
	char *store_id;
	bool state_made, persist;
	tf_version state;
	uint64_t array_claim;	/* CLAIM_* or the size */
	uint64_t *frag_claim;	/* per fragment, made on first need */
	uint64_t array_arrow_claim;	/* the same of cells.arrow */
	uint64_t *frag_arrow_claim;
	uint64_t *frag_size;	/* per fragment: its CSV's size once known, or UINT64_MAX */
	csv *array_arrow;	/* the same as cells.arrow */
	csv **frag_arrow;
	uint64_t *frag_arrow_size;
	csv *idle_head, *idle_tail;	/* fragments' CSV states no view has open, oldest first */
	size_t nidle;
};

typedef enum { V_CSV, V_RAW, V_NPY } view_kind;

struct tf_view {
	tf_views *v;
	view_kind kind;
	csv *c;
	const matrix *m;
	bool kept;	/* tf_view_set_kept */
};

static tf_dense *views_dense(tf_views *v);
static void remember(csv *c, uint64_t size);

/* ---- formatting rows ------------------------------------------------------------------------ */

static tf_status put_field(tf_buf *text, const column *col, size_t i, const uint8_t *p, size_t n,
			   bool valid, tf_error *err)
{
	tf_status rc = i ? tf_buf_put_u8(text, ',', err) : TF_OK;

	return rc == TF_OK ? tf_cell_format(text, &col->fmt, p ? p : (const uint8_t *)"", n, valid, err) : rc;
}

/* A cell of the row being formatted: CSV text, or kept for the batch. */
static tf_status emit(csv *c, producer *p, tf_buf *text, size_t j, const uint8_t *v, size_t n, bool valid,
		      tf_error *err)
{
	const column *col = &c->cols[j];

	if (!c->arrow)
		return put_field(text, col, j, v, n, valid, err);
	if (valid && col->fmt.enumeration)
		valid = tf_enum_value(&col->fmt, v, n, &v, &n);
	if (valid && n <= 8) {	/* a coordinate's buffer is reused for the next */
		memcpy(p->small[j], v, n);
		v = p->small[j];
	}
	p->cells[j] = (tf_arrow_cell){ v, n, valid };
	return TF_OK;
}

static tf_status emit_end(csv *c, producer *p, tf_buf *text, tf_error *err)
{
	return c->arrow ? tf_arrow_put_row(p->batch, p->cells, text, err) : tf_buf_put_u8(text, '\n', err);
}

/* Whether the block is done: its text, or its record batch, full. */
static bool block_full(const csv *c, const producer *p, const tf_buf *text)
{
	return c->arrow ? tf_arrow_batch_full(p->batch) : text->len >= c->target;
}

static tf_status make_header(csv *c, tf_error *err)
{
	tf_status rc = TF_OK;

	if (c->arrow)
		return tf_arrow_file_head(c->ar, &c->header, err);

	for (size_t i = 0; i < c->ncols && rc == TF_OK; i++) {
		if (i)
			rc = tf_buf_put_u8(&c->header, ',', err);
		if (rc == TF_OK)
			rc = tf_csv_text(&c->header, c->cols[i].spec.name, strlen(c->cols[i].spec.name), err);
	}
	return rc == TF_OK ? tf_buf_put_u8(&c->header, '\n', err) : rc;
}

/* ---- dense cells: runs of fragments' tiles, or fill --------------------------------------------- */

static tf_status gathered_reserve(gathered *g, uint64_t n, tf_error *err)
{
	if (g->cap < n + 1) {
		uint64_t *s = realloc(g->starts, (n + 1) * sizeof(*s));
		uint8_t *v = s ? realloc(g->valid, n + 1) : NULL;
		if (s)
			g->starts = s;
		if (!v)
			return tf_err(err, TF_E_NOMEM, "out of memory");
		g->valid = v;
		g->cap = (size_t)n + 1;
	}
	g->data.len = 0;
	return TF_OK;
}

static tf_status fill_cells(const tf_field *f, uint64_t n, gathered *g, uint64_t k, tf_error *err)
{
	tf_status rc = TF_OK;

	for (uint64_t i = 0; i < n && rc == TF_OK; i++) {
		g->starts[k + i] = g->data.len;
		g->valid[k + i] = !f->nullable || f->fill_valid;
		rc = tf_buf_append(&g->data, f->fill, (size_t)f->fill_size, err);
	}
	g->starts[k + n] = g->data.len;
	return rc;
}

/* Cells of one run of attribute f into g at cell k. */
static tf_status gather_run(tf_snapshot *s, const tf_field *f, tf_workspace *ws, const tf_run *r,
			    gathered *g, uint64_t k, tf_error *err)
{
	const tf_col *col;
	uint64_t step = r->stride == 1 ? r->n : 1;
	bool once = r->stride == 1;	/* row-major: read forward (tf_col_fixed) */
	uint8_t *at;
	tf_status rc;

	if (r->frag == SIZE_MAX)
		return fill_cells(f, r->n, g, k, err);
	if ((rc = tf_snapshot_col(s, r->frag, TF_COL_ATTR, f->name, &col, err)) != TF_OK)
		return rc;
	if (tf_col_missing(col))
		return fill_cells(f, r->n, g, k, err);
	/* Along the last dimension cells are adjacent in row-major cell order;
	 * in column-major order each is a run of its own. */
	for (uint64_t i = 0; i < r->n && rc == TF_OK; i += step) {
		uint64_t cell = r->cell + i * r->stride;

		/* The tile holds them (its chunk headers say) before room is made. */
		if ((rc = tf_col_check_cells(col, r->tile, cell, step, err)) != TF_OK ||
		    (rc = tf_col_validity(col, ws, r->tile, cell, step, g->valid + k + i, once, err)) != TF_OK)
			break;
		if (tf_col_var(col)) {
			rc = tf_col_var_cells(col, ws, r->tile, cell, step, g->starts + k + i, &g->data, once, err);
		} else if ((rc = tf_buf_grow(&g->data, tf_size_mul(tf_size_of_u64(step), tf_col_cell_size(col)), &at,
					     err)) == TF_OK) {
			for (uint64_t j = 0; j < step; j++)
				g->starts[k + i + j] = g->data.len + j * tf_col_cell_size(col);
			rc = tf_col_fixed(col, ws, r->tile, cell, step, at, once, err);
			g->data.len += (size_t)step * tf_col_cell_size(col);
		}
	}
	g->starts[k + r->n] = g->data.len;
	return rc;
}

static tf_status gather(tf_snapshot *s, const tf_field *f, tf_workspace *ws, const tf_run *runs,
			size_t nruns, uint64_t n, gathered *g, tf_error *err)
{
	uint64_t k = 0;
	tf_status rc = gathered_reserve(g, n, err);

	for (size_t r = 0; r < nruns && rc == TF_OK; r++) {
		rc = gather_run(s, f, ws, &runs[r], g, k, err);
		k += runs[r].n;
	}
	return rc;
}

/* ---- producers: one block of CSV text from a state ------------------------------------------- */

static tf_status prod_init(csv *c, producer *p, const tf_cancel *cancel, tf_error *err)
{
	size_t nattrs = c->ncols - c->ndims;
	tf_status rc = TF_OK;

	memset(p, 0, sizeof(*p));
	if (c->arrow) {
		if (!(p->cells = calloc(c->ncols + 1, sizeof(*p->cells))) ||
		    !(p->small = calloc(c->ncols + 1, sizeof(*p->small))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		if ((rc = tf_arrow_batch_new(c->ar, &p->batch, err)) != TF_OK)
			return rc;
		if (c->columnar && !(p->coords = malloc(c->ndims * DENSE_BATCH * 8 + 1)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		if (c->spans && !(p->spans = calloc(c->ncols + 1, sizeof(*p->spans))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	switch (c->kind) {
	case CSV_ARRAY_DENSE:
		if (!(p->g = calloc(nattrs + 1, sizeof(*p->g))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		for (size_t i = 0; i < nattrs; i++)
			tf_buf_init(&p->g[i].data, (size_t)4 << 30);
		break;
	case CSV_ARRAY_SPARSE:
		if ((rc = tf_sparse_open(c->v->s, c->specs, c->nspecs, cancel, &p->it, err)) == TF_OK)
			rc = tf_row_init(&p->row, c->nspecs, err);
		if (rc == TF_OK && c->spans && !(p->fidx = calloc(c->ncols + 1, sizeof(*p->fidx))))
			rc = tf_err(err, TF_E_NOMEM, "out of memory");
		for (size_t j = 0; rc == TF_OK && p->fidx && j < c->ncols; j++)
			p->fidx[j] = tf_sparse_field(p->it, j);
		break;
	default:
		rc = tf_cellbuf_init(&p->buf, tf_snapshot_cache(c->v->s), c->specs, c->nspecs, 0, err);
		break;
	}
	p->ready = rc == TF_OK;
	return rc;
}

static void prod_free(csv *c, producer *p)
{
	for (size_t i = 0; p->g && i < c->ncols - c->ndims; i++) {
		tf_buf_free(&p->g[i].data);
		free(p->g[i].starts);
		free(p->g[i].valid);
	}
	free(p->g);
	free(p->runs);
	tf_sparse_free(p->it);
	tf_row_free(&p->row);
	tf_cellbuf_free(&p->buf);
	tf_arrow_batch_free(p->batch);
	free(p->cells);
	free(p->small);
	free(p->coords);
	free(p->spans);
	free(p->fidx);
	memset(p, 0, sizeof(*p));
}

/* Before a request's formatting: its windows pinned again (read anew if
 * the cache took them back). */
static tf_status prod_begin(csv *c, producer *p, tf_workspace *ws, const tf_cancel *cancel, tf_error *err)
{
	bool reread;

	p->cancel = cancel;
	if (p->it)
		return tf_sparse_resume(p->it, ws, cancel, err);
	if (c->kind == CSV_FRAG_DENSE || c->kind == CSV_FRAG_SPARSE)
		return tf_cellbuf_resume(&p->buf, c->v->s, ws, &reread, err);
	return TF_OK;
}

/* After it: windows unpinned, scratch freed (an idle CSV keeps nothing
 * but its index and its iterators' positions). */
static void prod_end(csv *c, producer *p)
{
	if (p->it)
		tf_sparse_park(p->it);
	if (c->kind == CSV_FRAG_DENSE || c->kind == CSV_FRAG_SPARSE)
		tf_cellbuf_park(&p->buf);
	for (size_t i = 0; p->g && i < c->ncols - c->ndims; i++) {
		tf_buf_free(&p->g[i].data);
		free(p->g[i].starts);
		free(p->g[i].valid);
		p->g[i].starts = NULL, p->g[i].valid = NULL, p->g[i].cap = 0;
	}
	free(p->runs);
	p->runs = NULL, p->nruns = p->runcap = 0;
	tf_buf_free(&p->row.bytes);
	p->cancel = NULL;
}

/* Asked every CANCEL_ROWS rows: whether the reader went away. */
static tf_status rows_done(producer *p, uint64_t n, tf_error *err)
{
	uint64_t was = p->rows;

	p->rows += n;
	if (p->rows / CANCEL_ROWS != was / CANCEL_ROWS && tf_cancelled(p->cancel))
		return tf_err(err, TF_E_INTR, "interrupted");
	return TF_OK;
}

static tf_status row_done(producer *p, tf_error *err)
{
	return rows_done(p, 1, err);
}

/* cells.arrow of a dense array (c->columnar): n cells from offsets x,
 * their coordinates computed a column at a time, the attributes' gathered
 * cells given as they are. */
static tf_status put_dense_columns(csv *c, producer *p, uint64_t *x, uint64_t n, tf_error *err)
{
	const tf_dense *d = c->v->dense;
	const uint64_t *lo = tf_dense_lo(d), *shape = tf_dense_shape(d);
	const uint8_t *data[COLUMNAR_MAX], *valid[COLUMNAR_MAX];
	unsigned size[64];
	uint64_t base[64];

	for (size_t j = 0; j < c->ndims; j++) {
		const tf_field *dim = c->cols[j].spec.field;
		size[j] = tf_datatype_size(dim->type);
		base[j] = tf_le_n(dim->domain, size[j]);
		data[j] = p->coords + j * DENSE_BATCH * 8;
		valid[j] = NULL;
	}
	for (uint64_t i = 0; i < n; i++) {
		for (size_t j = 0; j < c->ndims; j++)
			tf_put_le_n(p->coords + j * DENSE_BATCH * 8 + i * size[j], size[j], base[j] + x[j]);
		for (size_t j = c->ndims; j-- > 0;) {	/* the next cell, row-major */
			if (++x[j] < lo[j] + shape[j])
				break;
			x[j] = lo[j];
		}
	}
	for (size_t j = c->ndims; j < c->ncols; j++) {
		const gathered *g = &p->g[j - c->ndims];
		const tf_field *f = c->cols[j].spec.field;
		uint64_t cs = (uint64_t)tf_datatype_size(f->type) * f->cell_val_num;

		if (g->data.len != n * cs)	/* a fill value of another size */
			return tf_err(err, TF_E_CORRUPT, "%s: %zu bytes for %llu cells of %llu", f->name, g->data.len,
				      (unsigned long long)n, (unsigned long long)cs);
		data[j] = g->data.p ? g->data.p : (const uint8_t *)"";
		valid[j] = c->cols[j].spec.field->nullable ? g->valid : NULL;
	}
	return tf_arrow_put_rows(p->batch, (size_t)n, data, valid, err);
}

/* Dense array: output cells from state[0], DENSE_BATCH at a time. */
static tf_status produce_dense(csv *c, producer *p, tf_workspace *ws, const uint64_t *in, tf_buf *text,
			       uint64_t *out, bool *end, tf_error *err)
{
	const tf_dense *d = c->v->dense;
	const uint64_t *lo = tf_dense_lo(d), *shape = tf_dense_shape(d);
	uint64_t cell = in[0], total = tf_dense_ncells(d), x[64];
	uint8_t coord[8];
	tf_status rc = c->ndims <= 64 ? TF_OK : tf_err(err, TF_E_UNSUPPORTED, "%zu dimensions", c->ndims);

	while (rc == TF_OK && !block_full(c, p, text) && cell < total && (rc = row_done(p, err)) == TF_OK) {
		uint64_t n = total - cell < DENSE_BATCH ? total - cell : DENSE_BATCH;

		rc = tf_dense_runs(d, cell, n, &p->runs, &p->nruns, &p->runcap, err);
		for (size_t j = c->ndims; j < c->ncols && rc == TF_OK; j++)
			rc = gather(c->v->s, c->cols[j].spec.field, ws, p->runs, p->nruns, n, &p->g[j - c->ndims], err);
		if (rc == TF_OK && n)
			tf_dense_offsets(d, cell, x);
		if (rc == TF_OK && c->columnar) {
			rc = put_dense_columns(c, p, x, n, err);
			cell += n;
			continue;
		}
		for (uint64_t i = 0; i < n && rc == TF_OK; i++) {
			for (size_t j = 0; j < c->ndims && rc == TF_OK; j++) {
				const tf_field *dim = c->cols[j].spec.field;
				unsigned size = tf_datatype_size(dim->type);

				tf_put_le_n(coord, size, tf_le_n(dim->domain, size) + x[j]);
				rc = emit(c, p, text, j, coord, size, true, err);
			}
			for (size_t j = c->ndims; j-- > 0;) {	/* the next cell, row-major */
				if (++x[j] < lo[j] + shape[j])
					break;
				x[j] = lo[j];
			}
			for (size_t j = c->ndims; j < c->ncols && rc == TF_OK; j++) {
				const gathered *g = &p->g[j - c->ndims];
				rc = emit(c, p, text, j, g->data.p + g->starts[i],
					       (size_t)(g->starts[i + 1] - g->starts[i]), g->valid[i], err);
			}
			if (rc == TF_OK)
				rc = emit_end(c, p, text, err);
		}
		cell += n;
	}
	out[0] = cell;
	*end = cell >= total;
	return rc;
}

/* Whether the run's window holds every field (none added since it was
 * written, whose cells are the fill value). */
static bool run_whole(const csv *c, const producer *p, const tf_sparse_run *run)
{
	for (size_t j = 0; j < c->ncols; j++)
		if (run->buf->f[p->fidx[j]].missing)
			return false;
	return true;
}

/* cells.arrow: the run's cells a column at a time, as many as the batch
 * takes. */
static tf_status put_span(csv *c, producer *p, const tf_sparse_run *run, tf_buf *text, uint64_t *took,
			  tf_error *err)
{
	uint64_t o = run->first - run->buf->first;
	size_t taken;
	tf_status rc;

	for (size_t j = 0; j < c->ncols; j++) {
		const tf_cellbuf_field *bf = &run->buf->f[p->fidx[j]];

		p->spans[j] = (tf_arrow_span){ bf->var ? bf->data : bf->data + o * bf->cell_size,
					       bf->var ? bf->starts + o : NULL, bf->valid ? bf->valid + o : NULL,
					       bf->cell_size };
	}
	rc = tf_arrow_put_span(p->batch, (size_t)run->n, p->spans, text, &taken, err);
	*took = taken;
	return rc;
}

/* A run of the merge: its cells row by row, or (cells.arrow of columns
 * that take them) as spans; the merge is told how many the block took. */
static tf_status put_run(csv *c, producer *p, const tf_sparse_run *run, tf_buf *text, tf_error *err)
{
	uint64_t k = 0;
	tf_status rc = TF_OK;

	if (c->spans && run_whole(c, p, run)) {
		rc = put_span(c, p, run, text, &k, err);
	} else {
		while (rc == TF_OK && k < run->n && (!k || !block_full(c, p, text))) {
			for (size_t j = 0; j < c->ncols && rc == TF_OK; j++) {
				const uint8_t *v;
				size_t n;
				bool valid;

				tf_cellbuf_get(run->buf, tf_sparse_field(p->it, j), run->first + k, &v, &n, &valid);
				rc = emit(c, p, text, j, v, n, valid, err);
			}
			if (rc == TF_OK && (rc = emit_end(c, p, text, err)) == TF_OK)
				k++;
		}
	}
	tf_sparse_took(p->it, k);
	return rc == TF_OK ? rows_done(p, k, err) : rc;
}

/* Sparse array: the merge from the cursors in `in`, or (in NULL) from
 * where it stands. */
static tf_status produce_sparse(csv *c, producer *p, tf_workspace *ws, const uint64_t *in, tf_buf *text,
				uint64_t *out, bool *end, tf_error *err)
{
	bool done = false;
	tf_status rc = in ? tf_sparse_seek(p->it, ws, in, err) : TF_OK;
	tf_sparse_run run;

	while (rc == TF_OK && !block_full(c, p, text)) {
		if ((rc = tf_sparse_next_run(p->it, ws, &p->row, &run, &done, err)) != TF_OK || done)
			break;
		if (run.buf) {
			rc = put_run(c, p, &run, text, err);
			continue;
		}
		if ((rc = row_done(p, err)) != TF_OK)
			break;
		for (size_t j = 0; j < c->ncols && rc == TF_OK; j++)
			rc = emit(c, p, text, j, p->row.bytes.p + p->row.off[j], p->row.len[j],
				       p->row.valid[j], err);
		if (rc == TF_OK)
			rc = emit_end(c, p, text, err);
	}
	if (rc != TF_OK)
		return rc;
	tf_sparse_get_state(p->it, out);
	*end = done;
	return TF_OK;
}

static const tf_snap_frag *csv_frag(const csv *c)
{
	return tf_snapshot_frag(c->v->s, c->frag);
}

/* The window holding cell `cell` of tile `tile` of the CSV's fragment: the
 * cells from there on, as many as WINDOW_MAX holds (a WINDOW_PART of a
 * small budget). */
static tf_status load_window(csv *c, producer *p, uint64_t tile, uint64_t cell, tf_workspace *ws, tf_error *err)
{
	const tf_snap_frag *f = csv_frag(c);
	uint64_t tc = tf_frag_tile_cells(f, tile);
	size_t bytes = tf_cache_budget(tf_snapshot_cache(c->v->s)) / WINDOW_PART;

	bytes = bytes < WINDOW_MAX ? bytes : WINDOW_MAX;

	if (tf_cellbuf_has(&p->buf, c->frag, tile, cell))
		return TF_OK;
	if (cell >= tc)
		return tf_err(err, TF_E_CORRUPT, "fragment %s: cell %llu of a tile of %llu", f->name,
			      (unsigned long long)cell, (unsigned long long)tc);
	return tf_cellbuf_load(&p->buf, c->v->s, ws, c->frag, tile, cell, tc - cell, bytes, err);
}

/* One sparse fragment: its cells in storage order from position in[0]. */
static tf_status produce_frag_sparse(csv *c, producer *p, tf_workspace *ws, const uint64_t *in,
				     tf_buf *text, uint64_t *out, bool *end, tf_error *err)
{
	const tf_snap_frag *f = csv_frag(c);
	uint64_t pos = in[0], total, cap = f->schema->capacity;
	tf_status rc = tf_frag_sparse_cells(f, &total, err);

	while (rc == TF_OK && !block_full(c, p, text) && pos < total && (rc = row_done(p, err)) == TF_OK) {
		uint64_t tile = pos / cap, cell = pos % cap;

		if ((rc = load_window(c, p, tile, cell, ws, err)) != TF_OK)
			break;
		for (size_t j = 0; j < c->ncols && rc == TF_OK; j++) {
			const uint8_t *v;
			size_t n;
			bool valid;

			tf_cellbuf_get(&p->buf, j, cell, &v, &n, &valid);
			rc = emit(c, p, text, j, v, n, valid, err);
		}
		if (rc == TF_OK)
			rc = emit_end(c, p, text, err);
		pos++;
	}
	out[0] = pos;
	*end = pos >= total;
	return rc;
}

static uint64_t dim_extent(const tf_field *d)
{
	return tf_le_n(d->extent, tf_datatype_size(d->type));
}

/* Tile `tile` of a dense fragment (tile order over the tiles covering its
 * non-empty domain): per dimension its first offset from the domain start
 * (base) and the part of the non-empty domain inside it, [a, b] relative. */
static void tile_box(const csv *c, const tf_snap_frag *f, uint64_t tile, uint64_t *base, uint64_t *a,
		     uint64_t *b)
{
	bool trow = c->schema->tile_order != 1;
	size_t n = c->ndims;

	for (size_t k = 0; k < n; k++) {
		size_t i = trow ? n - 1 - k : k;
		uint64_t ext = dim_extent(&c->schema->dims[i]), last;
		uint64_t lo = tf_frag_lo(f)[i], hi = tf_frag_hi(f)[i], tn = tf_frag_tn(f)[i];

		base[i] = (tf_frag_tlo(f)[i] + tile % tn) * ext;	/* at most hi: no overflow */
		tile /= tn;
		last = tf_u64_add_sat(base[i], ext - 1);	/* a tile past 2^64 - 1 ends there */
		a[i] = (lo > base[i] ? lo : base[i]) - base[i];
		b[i] = (hi < last ? hi : last) - base[i];
	}
}

/* The first cell at or after `cell` (cell order) whose offsets o lie in
 * [a, b] of every dimension; false if none in the tile.  Padding cells are
 * skipped without visiting them (a tile may be huge and the domain thin). */
static bool next_in_box(const csv *c, uint64_t cell, const uint64_t *a, const uint64_t *b, uint64_t *o,
			uint64_t *out)
{
	bool crow = c->schema->cell_order != 1;
	size_t n = c->ndims, d, e;
	uint64_t v = 0;

	for (size_t k = 0; k < n; k++) {	/* fastest dimension first */
		d = crow ? n - 1 - k : k;
		o[d] = cell % dim_extent(&c->schema->dims[d]);
		cell /= dim_extent(&c->schema->dims[d]);
	}
	for (size_t k = 0; k < n; k++) {	/* slowest first */
		d = crow ? k : n - 1 - k;
		if (o[d] >= a[d] && o[d] <= b[d])
			continue;
		if (o[d] > b[d]) {	/* carry into a slower dimension */
			size_t j = k;
			for (; j > 0; j--) {
				e = crow ? j - 1 : n - j;
				if (o[e] < b[e]) {
					o[e]++;
					break;
				}
			}
			if (j == 0)
				return false;
			k = j - 1;
		}
		for (size_t m = k; m < n; m++) {	/* this and faster ones from their start */
			e = crow ? m : n - 1 - m;
			if (m > k || o[e] < a[e])
				o[e] = a[e];
		}
		break;
	}
	for (size_t k = 0; k < n; k++) {
		d = crow ? k : n - 1 - k;
		v = v * dim_extent(&c->schema->dims[d]) + o[d];
	}
	*out = v;
	return true;
}

/* One dense fragment: the cells of its non-empty domain in storage order. */
static tf_status produce_frag_dense(csv *c, producer *p, tf_workspace *ws, const uint64_t *in,
				    tf_buf *text, uint64_t *out, bool *end, tf_error *err)
{
	const tf_snap_frag *f = csv_frag(c);
	uint64_t tc = tf_schema_dense_tile_cells(f->schema), pos = in[0], base[64], a[64], b[64], o[64];
	uint64_t total = tc && f->ntiles <= UINT64_MAX / tc ? f->ntiles * tc : 0;
	tf_status rc = c->ndims <= 64 && total ? TF_OK : tf_err(err, TF_E_UNSUPPORTED, "fragment %s: tiles",
								   f->name);

	while (rc == TF_OK && !block_full(c, p, text) && pos < total && (rc = row_done(p, err)) == TF_OK) {
		uint64_t tile = pos / tc, cell;

		tile_box(c, f, tile, base, a, b);
		if (!next_in_box(c, pos % tc, a, b, o, &cell)) {
			pos = (tile + 1) * tc;
			continue;
		}
		pos = tile * tc + cell;
		if ((rc = load_window(c, p, tile, cell, ws, err)) != TF_OK)
			break;
		for (size_t j = 0; j < c->ndims && rc == TF_OK; j++) {
			const tf_field *d = &c->schema->dims[j];
			unsigned size = tf_datatype_size(d->type);
			uint8_t v[8];

			tf_put_le_n(v, size, tf_le_n(d->domain, size) + base[j] + o[j]);
			rc = emit(c, p, text, j, v, size, true, err);
		}
		for (size_t j = c->ndims; j < c->ncols && rc == TF_OK; j++) {
			const uint8_t *v;
			size_t n;
			bool valid;

			tf_cellbuf_get(&p->buf, j - c->ndims, cell, &v, &n, &valid);
			rc = emit(c, p, text, j, v, n, valid, err);
		}
		if (rc == TF_OK)
			rc = emit_end(c, p, text, err);
		pos++;
	}
	out[0] = pos;
	*end = pos >= total;
	return rc;
}


static tf_status produce_rows(csv *c, producer *p, tf_workspace *ws, const uint64_t *in, tf_buf *text,
			      uint64_t *out, bool *end, tf_error *err)
{
	switch (c->kind) {
	case CSV_ARRAY_DENSE:
		return produce_dense(c, p, ws, in, text, out, end, err);
	case CSV_ARRAY_SPARSE:
		return produce_sparse(c, p, ws, in, text, out, end, err);
	case CSV_FRAG_DENSE:
		return produce_frag_dense(c, p, ws, in, text, out, end, err);
	default:
		return produce_frag_sparse(c, p, ws, in, text, out, end, err);
	}
}

/* One block: CSV text, or the record batch(es) of cells.arrow, whose
 * messages' places the batch keeps for the extender (tf_arrow_take_blocks). */
static tf_status produce(csv *c, producer *p, tf_workspace *ws, const uint64_t *in, tf_buf *text,
			 uint64_t *out, bool *end, tf_error *err)
{
	tf_status rc;

	if (c->arrow)
		tf_arrow_batch_clear(p->batch);
	rc = produce_rows(c, p, ws, in, text, out, end, err);
	if (rc == TF_OK && c->arrow)
		rc = tf_arrow_flush(p->batch, text, err);
	return rc;
}

/* ---- the index ------------------------------------------------------------------------------- */

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Entry i's state into state[S] (lock held). */
static void entry_state(const csv *c, size_t i, uint64_t *state)
{
	const uint8_t *p = c->st + c->sat[i];

	for (size_t k = 0; k < c->S; k++) {
		uint64_t v = 0;
		for (unsigned shift = 0;; shift += 7) {
			uint8_t b = *p++;
			v |= (uint64_t)(b & 0x7f) << shift;
			if (!(b & 0x80) || shift >= 63)
				break;
		}
		state[k] = v;
	}
}

static size_t index_bytes(const csv *c)
{
	return c->nent * (sizeof(uint64_t) + sizeof(size_t)) + c->sat[c->nent];
}

/* Every other entry goes, the first and the last stay (lock held). */
static void thin(csv *c)
{
	size_t k = 0, at = 0;

	for (size_t i = 0; i < c->nent; i++) {
		size_t from = c->sat[i], len = c->sat[i + 1] - from;

		if (i % 2 && i + 1 < c->nent)
			continue;
		memmove(c->st + at, c->st + from, len);
		c->off[k] = c->off[i];
		c->sat[k] = at;
		at += len;
		k++;
	}
	c->nent = k;
	c->sat[k] = at;
	c->level++;
}

/* The index's memory charged to the cache (lock held). */
static void index_charge(csv *c)
{
	size_t now = c->ecap * (sizeof(uint64_t) + sizeof(size_t)) + c->stcap + c->bcap * sizeof(tf_arrow_block) +
		     c->tail.cap + c->scratch;

	if (now != c->charged)
		tf_cache_charge(tf_snapshot_cache(c->v->s), (ptrdiff_t)now - (ptrdiff_t)c->charged);
	c->charged = now;
}

/* Append an entry at text offset `at` with state `state` (lock held). */
static tf_status append_entry(csv *c, uint64_t at, const uint64_t *state, tf_error *err)
{
	size_t need;

	if (c->nent + 2 > c->ecap) {
		size_t cap = c->ecap ? 2 * c->ecap : 64;
		uint64_t *off = realloc(c->off, cap * sizeof(*off));
		size_t *sat = off ? realloc(c->sat, cap * sizeof(*sat)) : NULL;

		if (off)
			c->off = off;
		if (!sat)
			return tf_err(err, TF_E_NOMEM, "out of memory");
		c->sat = sat;
		c->ecap = cap;
	}
	if (c->nent == 0)
		c->sat[0] = 0;
	need = c->sat[c->nent] + 10 * c->S;
	if (need > c->stcap) {
		size_t cap = need + need / 4;	/* not doubled: one state can be 2 MB */
		uint8_t *st;

		if (!(st = realloc(c->st, cap)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		c->st = st;
		c->stcap = cap;
	}
	c->off[c->nent] = at;
	c->sat[c->nent + 1] = c->sat[c->nent];
	for (size_t k = 0; k < c->S; k++)
		c->sat[c->nent + 1] += put_varint(c->st + c->sat[c->nent + 1], state[k]);
	c->nent++;
	while (index_bytes(c) > c->limit && c->nent > 2)
		thin(c);
	index_charge(c);
	return TF_OK;
}

/* The text formatted so far ends here (lock held). */
static uint64_t frontier(const csv *c)
{
	return c->off[c->nent - 1];
}

/* A piece: text [at, at + len) of the segment starting at entry `from`. */
typedef struct piece_src {
	csv *c;
	unsigned level;
	uint64_t seg, seg_end;	/* the segment's text */
	uint64_t at;
	uint32_t len;
	const tf_cancel *cancel;
} piece_src;

static uint64_t piece_key(unsigned level, uint64_t at)
{
	return (uint64_t)level << 56 | at;
}

/* Offer a piece met on the way (not waited for: a claim another thread
 * holds may wait on ours). */
static void offer_piece(csv *c, unsigned level, uint64_t at, const uint8_t *p, uint32_t len)
{
	tf_cache *cache = tf_snapshot_cache(c->v->s);
	tf_cache_entry *e;
	tf_cache_state st;
	uint8_t *dst;

	if (tf_cache_acquire(cache, c->owner, piece_key(level, at), len, &e, &st, NULL) != TF_OK)
		return;
	if (st == TF_CACHE_CLAIMED) {
		if ((dst = tf_cache_fill_buffer(cache, e)))
			memcpy(dst, p, len);
		tf_cache_publish(cache, e, dst ? TF_OK : TF_E_NOMEM, NULL);
	}
	tf_cache_release(cache, e, false);
}

/* The last entry at or before text offset pos (lock held). */
static size_t entry_before(const csv *c, uint64_t pos)
{
	size_t lo = 0, hi = c->nent;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		*(c->off[mid] <= pos ? &lo : &hi) = mid;
	}
	return lo;
}

/* Cache loader: format the segment again, block by block, from the entry
 * before it (its own, unless the index was thinned since), up to the piece
 * wanted; the segment's pieces before it are offered to the cache on the
 * way (a thinned segment read in order formats once). */
static tf_status load_piece(void *ctx, uint64_t index, uint8_t *dst, tf_workspace *ws, tf_error *err)
{
	piece_src *b = ctx;
	csv *c = b->c;
	uint64_t *in = malloc(2 * (c->S + 1) * sizeof(uint64_t)), *out = in ? in + c->S + 1 : NULL;
	uint64_t pos = 0, want_end = b->at + b->len;
	tf_buf text = TF_BUF_INIT((size_t)4 << 30), part = TF_BUF_INIT((size_t)4 << 30);
	producer p = { 0 };
	bool end = false, filled = false;
	tf_status rc = in ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");

	(void)index;
	if (rc == TF_OK) {
		pthread_mutex_lock(&c->lock);
		size_t j = entry_before(c, b->seg);
		pos = c->off[j];
		entry_state(c, j, in);
		pthread_mutex_unlock(&c->lock);
		rc = prod_init(c, &p, b->cancel, err);
	}
	if (rc == TF_OK)
		rc = prod_begin(c, &p, ws, b->cancel, err);
	while (rc == TF_OK && pos < want_end && !end) {
		text.len = 0;
		if ((rc = produce(c, &p, ws, in, &text, out, &end, err)) != TF_OK)
			break;
		/* Text of this block inside pieces: cut and placed. */
		for (size_t k = pos < b->seg ? (size_t)(b->seg - pos < text.len ? b->seg - pos : text.len) : 0;
		     k < text.len && rc == TF_OK;) {
			uint64_t at = pos + k, pstart = b->seg + (at - b->seg) / c->piece * c->piece;
			uint64_t pend = pstart + c->piece < b->seg_end ? pstart + c->piece : b->seg_end;
			size_t take = (size_t)(pend - at) < text.len - k ? (size_t)(pend - at) : text.len - k;

			if (at >= b->seg_end)
				break;
			rc = tf_buf_append(&part, text.p + k, take, err);
			k += take;
			if (rc == TF_OK && at + take == pend) {	/* a piece complete */
				if (pstart == b->at && part.len == b->len)
					memcpy(dst, part.p, b->len), filled = true;
				else if (pstart != b->at)
					offer_piece(c, b->level, pstart, part.p, (uint32_t)part.len);
				part.len = 0;
			}
		}
		pos += text.len;
		memcpy(in, out, c->S * sizeof(uint64_t));
	}
	if (rc == TF_OK && !filled)
		rc = tf_err(err, TF_E_STALE, "text at %llu formats to other bytes than before (the array "
			    "changed under the view?)", (unsigned long long)b->at);
	prod_end(c, &p);
	prod_free(c, &p);
	tf_buf_free(&text);
	tf_buf_free(&part);
	free(in);
	return rc;
}

/* The record batches of the block formatted at text offset `start`, for
 * the footer (ext and lock held). */
static tf_status add_blocks(csv *c, uint64_t start, tf_error *err)
{
	size_t n;
	const tf_arrow_block *b = c->prod.batch ? tf_arrow_take_blocks(c->prod.batch, &n) : NULL;

	for (size_t i = 0; b && i < n; i++) {
		if (c->nblocks == c->bcap) {
			size_t cap = c->bcap ? 2 * c->bcap : 16;
			tf_arrow_block *nb = realloc(c->blocks, cap * sizeof(*nb));
			if (!nb)
				return tf_err(err, TF_E_NOMEM, "out of memory");
			c->blocks = nb, c->bcap = cap;
		}
		c->blocks[c->nblocks] = b[i];
		c->blocks[c->nblocks++].offset += c->header.len + start;
	}
	return TF_OK;
}

/* Format the next block at the frontier and index it (ext held).  Its
 * text goes to the cache as the pieces of the new segment, if offer: a
 * sizing pass counts the text and keeps only the index (its pieces would
 * evict the decoded tiles it is reading, and the reader starts from the
 * beginning anyway). */
static tf_status extend_one(csv *c, tf_workspace *ws, const tf_cancel *cancel, bool offer, tf_error *err)
{
	uint64_t *in = NULL, *out = malloc((c->S + 1) * sizeof(uint64_t)), start;
	tf_buf local = TF_BUF_INIT((size_t)4 << 30);
	/* An Arrow block (megabytes) keeps its buffer: fresh pages each time
	 * cost more than writing them (the kernel zeroes them). */
	tf_buf *text = c->arrow ? &c->block : &local;
	unsigned level;
	bool end = false, warm;
	tf_status rc = out ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");

	text->len = 0;
	pthread_mutex_lock(&c->lock);
	start = frontier(c);
	level = c->level;
	/* A merge standing at the frontier goes on from there: no state to
	 * decode (200,000 cursors for 200,000 fragments). */
	warm = c->kind == CSV_ARRAY_SPARSE && c->prod.ready && c->prod.warm && c->prod.at == start;
	if (rc == TF_OK && !warm && !(in = malloc((c->S + 1) * sizeof(uint64_t))))
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	if (in)
		entry_state(c, c->nent - 1, in);
	pthread_mutex_unlock(&c->lock);
	if (rc == TF_OK && !c->prod.ready)
		rc = prod_init(c, &c->prod, cancel, err);
	if (rc == TF_OK && (rc = prod_begin(c, &c->prod, ws, cancel, err)) == TF_OK)
		rc = produce(c, &c->prod, ws, in, text, out, &end, err);
	if (c->prod.ready) {
		c->prod.warm = rc == TF_OK;
		c->prod.at = start + text->len;
		prod_end(c, &c->prod);
	}
	pthread_mutex_lock(&c->lock);
	if (rc == TF_OK && c->arrow)
		rc = add_blocks(c, start, err);
	if (rc == TF_OK && text->len) {	/* the index first: the pieces' keys depend on its level */
		rc = append_entry(c, start + text->len, out, err);
		level = c->level;
	}
	if (rc == TF_OK && (end || !text->len) && c->arrow)
		rc = tf_arrow_file_tail(c->ar, c->blocks, c->nblocks, &c->tail, err);
	if (rc == TF_OK && (end || !text->len))
		c->complete = true;
	if (c->arrow)
		index_charge(c);
	pthread_mutex_unlock(&c->lock);
	if (rc == TF_OK && (end || !text->len))
		remember(c, c->header.len + start + text->len + c->tail.len);
	for (size_t k = 0; rc == TF_OK && offer && k < text->len; k += c->piece) {
		size_t n = text->len - k < c->piece ? text->len - k : c->piece;
		offer_piece(c, level, start + k, text->p + k, (uint32_t)n);
	}
	if (rc == TF_OK && (end || !text->len))
		prod_free(c, &c->prod);	/* its windows are needed no more */
	if (!c->arrow || rc != TF_OK || end || !text->len)
		tf_buf_free(text);
	text->len = 0;
	if (c->arrow) {	/* what the extender keeps, charged */
		size_t held = c->block.cap + (c->prod.batch ? tf_arrow_batch_held(c->prod.batch) : 0);
		pthread_mutex_lock(&c->lock);
		c->scratch = held;
		index_charge(c);
		pthread_mutex_unlock(&c->lock);
	}
	free(in);
	free(out);
	return rc;
}

/* The piece holding text offset pos, extending the index as needed;
 * *eof if pos is past the end. */
static tf_status find_piece(csv *c, tf_workspace *ws, uint64_t pos, const tf_cancel *cancel, piece_src *ps,
			    bool *eof, tf_error *err)
{
	tf_status rc = TF_OK;

	*eof = false;
	for (;;) {
		pthread_mutex_lock(&c->lock);
		if (pos < frontier(c)) {
			size_t lo = 0, hi = c->nent - 1;
			while (hi - lo > 1) {
				size_t mid = lo + (hi - lo) / 2;
				*(c->off[mid] <= pos ? &lo : &hi) = mid;
			}
			ps->c = c;
			ps->level = c->level;
			ps->seg = c->off[lo];
			ps->seg_end = c->off[lo + 1];
			ps->at = ps->seg + (pos - ps->seg) / c->piece * c->piece;
			ps->len = (uint32_t)(ps->seg_end - ps->at < c->piece ? ps->seg_end - ps->at : c->piece);
			ps->cancel = cancel;
			pthread_mutex_unlock(&c->lock);
			return TF_OK;
		}
		*eof = c->complete;
		pthread_mutex_unlock(&c->lock);
		if (*eof || rc != TF_OK)
			return rc;
		if (tf_cancelled(cancel))
			return tf_err(err, TF_E_INTR, "interrupted");
		pthread_mutex_lock(&c->ext);
		pthread_mutex_lock(&c->lock);
		bool more = pos >= frontier(c) && !c->complete;
		pthread_mutex_unlock(&c->lock);
		if (more)
			rc = extend_one(c, ws, cancel, true, err);
		pthread_mutex_unlock(&c->ext);
		if (rc != TF_OK)
			return rc;
	}
}

/* ---- sizes remembered across mounts ---------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return (h ^ 0xff) * 1099511628211ull;	/* a name's end counts */
}

/*
 * The key of this state's CSVs (v->lock held), made once: the names in
 * the array's directories (the snapshot's fingerprint), the fragments a
 * read sees and the delete conditions, in order, and the text rules'
 * version.  None (false) when the text depends on when it is read: a
 * fragment or delete whose time is past the snapshot's (cells filtered by
 * their timestamps).
 */
static bool views_state(tf_views *v)
{
	tf_snapshot *s = v->s;
	uint64_t now = tf_snapshot_time(s), h = 1469598103934665603ull;
	bool ok = true;

	if (v->state_made)
		return v->persist;
	for (size_t k = 0; k < tf_snapshot_nvisible(s); k++) {
		const tf_snap_frag *f = tf_snapshot_frag(s, tf_snapshot_visible(s, k));
		ok = ok && f->t2 <= now;
		h = fnv(h, f->name);
	}
	for (size_t i = 0; i < tf_snapshot_ndeletes(s); i++) {
		ok = ok && tf_snapshot_delete(s, i)->t <= now;
		h = fnv(h, tf_snapshot_delete(s, i)->marker);
	}
	memset(&v->state, 0, sizeof(v->state));
	v->state.size = tf_snapshot_fingerprint(s);
	v->state.mtime_ns = (int64_t)h;
	v->state.ctime_ns = CSV_TEXT_VERSION;
	v->state.ino = tf_snapshot_nvisible(s);
	v->state.dev = tf_snapshot_ndeletes(s);
	v->persist = ok;
	v->state_made = true;
	return ok;
}

/* The store's key of the CSV of frag (SIZE_MAX: the array's), v->lock
 * held; false if its size is not to be remembered. */
static bool csv_key(tf_views *v, size_t frag, bool arrow, tf_index_key *k)
{
	const char *file = arrow ? ARROW_NAME : CSV_NAME;
	int n;

	if (!v->store || !views_state(v))
		return false;
	memset(k, 0, sizeof(*k));
	k->v = v->state;
	n = frag == SIZE_MAX ? snprintf(k->id, sizeof(k->id), "%s/%s", v->store_id, file)
			     : snprintf(k->id, sizeof(k->id), "%s/" FRAGMENTS "/%s/%s", v->store_id,
					tf_snapshot_frag(v->s, frag)->name, file);
	return n > 0 && (size_t)n < sizeof(k->id);
}

/* The slot of frag's remembered size (v->lock held; NULL: no memory). */
static uint64_t *claim_slot(tf_views *v, size_t frag, bool arrow)
{
	size_t n = tf_snapshot_nfrags(v->s);
	uint64_t **fc = arrow ? &v->frag_arrow_claim : &v->frag_claim;

	if (frag == SIZE_MAX)
		return arrow ? &v->array_arrow_claim : &v->array_claim;
	if (!*fc && (*fc = malloc((n + 1) * sizeof(uint64_t))))
		for (size_t i = 0; i <= n; i++)
			(*fc)[i] = CLAIM_UNASKED;
	return *fc ? &(*fc)[frag] : NULL;
}

/* The size the store remembers for frag's CSV in this state (the store is
 * asked once per state and CSV). */
static bool remembered(tf_views *v, size_t frag, bool arrow, uint64_t *size)
{
	tf_index_key k;
	uint64_t *slot, got = CLAIM_NONE;
	bool keyed;

	pthread_mutex_lock(&v->lock);
	slot = v->store ? claim_slot(v, frag, arrow) : NULL;
	if (slot && *slot == CLAIM_UNASKED) {
		keyed = csv_key(v, frag, arrow, &k);
		pthread_mutex_unlock(&v->lock);
		if (keyed) {
			tf_buf payload = TF_BUF_INIT(4096);	/* the whole entry is read into it */

			if (tf_index_get(v->store, &k, &payload, NULL) == TF_OK && payload.len == 8 &&
			    tf_le64(payload.p) <= (uint64_t)INT64_MAX)
				got = tf_le64(payload.p);
			tf_buf_free(&payload);
		}
		pthread_mutex_lock(&v->lock);
		if (*slot == CLAIM_UNASKED)
			*slot = got;
	}
	got = slot ? *slot : CLAIM_NONE;
	pthread_mutex_unlock(&v->lock);
	*size = got;
	return got < CLAIM_NONE;
}

static size_t csv_frag_index(const csv *c)
{
	return c->kind == CSV_FRAG_DENSE || c->kind == CSV_FRAG_SPARSE ? c->frag : SIZE_MAX;
}

/* c's size, now known, for the next mount. */
static void remember(csv *c, uint64_t size)
{
	tf_views *v = c->v;
	tf_index_key k;
	uint64_t *slot;
	uint8_t b[8];
	bool put = false;

	pthread_mutex_lock(&v->lock);
	if (csv_key(v, csv_frag_index(c), c->arrow, &k)) {
		slot = claim_slot(v, csv_frag_index(c), c->arrow);
		put = !slot || *slot != size;
		if (slot)
			*slot = size;
	}
	pthread_mutex_unlock(&v->lock);
	if (put) {
		tf_put_le64(b, size);
		tf_index_put(v->store, &k, b, sizeof(b));
	}
}

/* A remembered size the text does not bear out: rejected from the store. */
static void forget(csv *c, const char *why)
{
	tf_views *v = c->v;
	tf_index_key k;
	uint64_t *slot;
	bool keyed;

	pthread_mutex_lock(&v->lock);
	keyed = csv_key(v, csv_frag_index(c), c->arrow, &k);
	if ((slot = claim_slot(v, csv_frag_index(c), c->arrow)))
		*slot = CLAIM_NONE;
	pthread_mutex_unlock(&v->lock);
	if (keyed)
		tf_index_reject(v->store, &k, why);
}

/*
 * A read that reached a remembered size, or ended before it: the text must
 * end exactly there (formatted up to it, and a byte past it asked for),
 * else the size was wrong (a stale or forged entry): the entry goes, the
 * read fails (EIO), and the CSV shows its true size from then on.
 */
static tf_status prove_claim(csv *c, tf_workspace *ws, uint64_t read_end, bool short_read, const tf_cancel *cancel,
			     tf_error *err)
{
	uint64_t claim, end = 0;
	piece_src ps;
	bool eof = false, ok;
	tf_status rc = TF_OK;
	char why[200];

	pthread_mutex_lock(&c->lock);
	claim = c->claim;
	ok = !c->claimed || c->proved || (!short_read && read_end < claim);
	pthread_mutex_unlock(&c->lock);
	if (ok)
		return TF_OK;
	if (claim >= c->header.len && (rc = find_piece(c, ws, claim - c->header.len, cancel, &ps, &eof, err)) != TF_OK)
		return rc;
	pthread_mutex_lock(&c->lock);
	end = c->header.len + frontier(c) + c->tail.len;
	ok = eof && c->complete && end == claim;
	if (ok)
		c->proved = true;
	else
		c->claimed = false;
	pthread_mutex_unlock(&c->lock);
	if (ok)
		return TF_OK;
	snprintf(why, sizeof(why), "a %s of %llu%s bytes, not the %llu remembered", c->arrow ? ARROW_NAME : "CSV",
		 (unsigned long long)end,
		 eof ? "" : " or more", (unsigned long long)claim);
	forget(c, why);
	return tf_err(err, TF_E_CORRUPT, "%s: %s (index entry removed)", tf_array_dir(tf_snapshot_array(c->v->s)),
		      why);
}

static tf_status csv_read(csv *c, tf_workspace *ws, uint64_t off, size_t len, uint8_t *dst, size_t *got,
			  bool kept, const tf_cancel *cancel, tf_error *err)
{
	tf_cache *cache = tf_snapshot_cache(c->v->s);
	piece_src ps = { 0 };
	size_t done = 0;
	bool eof = false;
	tf_status rc = TF_OK;

	if (off < c->header.len) {
		done = c->header.len - off < len ? (size_t)(c->header.len - off) : len;
		memcpy(dst, c->header.p + off, done);
	}
	while (rc == TF_OK && done < len) {
		uint64_t pos = off + done - c->header.len;
		tf_cache_source cs = { &ps, load_piece };
		tf_cache_entry *e;
		size_t n;

		if ((rc = find_piece(c, ws, pos, cancel, &ps, &eof, err)) != TF_OK || eof)
			break;
		rc = tf_cache_get(cache, c->owner, piece_key(ps.level, ps.at), ps.len, &cs, ws, &e, err);
		if (rc == TF_E_INTR && !tf_cancelled(cancel)) {
			rc = TF_OK;	/* the reader formatting it went away, not ours: again */
			continue;
		}
		if (rc != TF_OK)
			break;
		n = ps.at + ps.len - pos < len - done ? (size_t)(ps.at + ps.len - pos) : len - done;
		memcpy(dst + done, tf_cache_data(e) + (pos - ps.at), n);
		done += n;
		/* "Done" when read whole by a reader that keeps it (a page
		 * cache): else a piece costs formatting its block again.  Not
		 * when read to its end only: concurrent requests (the kernel's
		 * readahead) read a piece's start after its end, and the done
		 * list had let it go (cells.arrow formatted ~4% of its batches
		 * twice).  The kernel's 1 MiB requests leave 1 piece in 16. */
		tf_cache_release(cache, e, kept && pos == ps.at && n == ps.len);
	}
	if (rc == TF_OK && eof && c->arrow && done < len) {	/* the tail after the last block */
		pthread_mutex_lock(&c->lock);
		uint64_t at = off + done - c->header.len - frontier(c);
		if (at < c->tail.len) {
			size_t n = c->tail.len - at < len - done ? (size_t)(c->tail.len - at) : len - done;
			memcpy(dst + done, c->tail.p + at, n);
			done += n;
		}
		pthread_mutex_unlock(&c->lock);
	}
	*got = done;
	/* A read reaching a remembered size, or ending before it. */
	if (rc == TF_OK)
		rc = prove_claim(c, ws, off + done, done < len, cancel, err);
	return rc;
}

/* ---- CSV states ------------------------------------------------------------------------------- */

static void csv_free(csv *c)
{
	if (!c)
		return;
	/* Its pieces stay in the cache under an owner no one asks for again:
	 * they drift to the cold end of the LRU and go first. */
	prod_free(c, &c->prod);
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
	return rc == TF_OK ? make_header(c, err) : rc;
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
		rc = zero ? append_entry(c, 0, zero, err) : tf_err(err, TF_E_NOMEM, "out of memory");
		free(zero);
		c->owner = tf_cache_owner(tf_snapshot_cache(v->s));
	}
	if (rc != TF_OK) {
		csv_free(c);
		return rc;
	}
	*out = c;
	return TF_OK;
}

static bool csv_size(csv *c, uint64_t *size);

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
 * open (put_csv). */
static tf_status get_csv(tf_views *v, size_t frag, bool arrow, csv **out, tf_error *err)
{
	const tf_snap_frag *f = frag == SIZE_MAX ? NULL : tf_snapshot_frag(v->s, frag);
	csv **slot;
	csv_kind kind;
	tf_status rc = TF_OK;

	if (f && (rc = tf_snapshot_load(v->s, frag, err)) != TF_OK)
		return rc;
	if (!f && tf_snapshot_schema(v->s)->dense && !views_dense(v)) {
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
		bool claimed = remembered(v, f ? frag : SIZE_MAX, arrow, &claim);

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
	index_charge(c);
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
	*size = c->complete ? c->header.len + frontier(c) + c->tail.len : c->claim;
	pthread_mutex_unlock(&c->lock);
	if (!known && c->final != UINT64_MAX)
		*size = c->final, known = true;
	return known;
}

/* The oldest idle fragment state leaves the views, its size (when its
 * text bore it out) remembered in 8 bytes (v->lock held); the caller
 * frees it. */
static csv *evict_idle(tf_views *v)
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
static void put_csv(tf_views *v, csv *c)
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
			gone = evict_idle(v);
	}
	pthread_mutex_unlock(&v->lock);
	csv_free(gone);
}

/* Known once formatted to its end, or remembered (until found wrong). */
static bool csv_size(csv *c, uint64_t *size)
{
	bool known;

	pthread_mutex_lock(&c->lock);
	known = c->complete || c->claimed;
	*size = c->complete ? c->header.len + frontier(c) + c->tail.len : c->claimed ? c->claim : 0;
	pthread_mutex_unlock(&c->lock);
	if (!known && c->final != UINT64_MAX)
		*size = c->final, known = true;
	return known;
}

/* At least as many cells as the CSV has records: a dense array's box, a
 * fragment's tiles, the sum of the visible fragments' cells (before
 * duplicates and deletes go).  Sparse arrays read every visible
 * fragment's metadata (the merge needs it anyway). */
static tf_status csv_cells_bound(csv *c, const tf_cancel *cancel, uint64_t *n, tf_error *err)
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
		f = csv_frag(c);
		k = tf_schema_dense_tile_cells(f->schema);
		total = k && f->ntiles <= UINT64_MAX / k ? f->ntiles * k : UINT64_MAX;
		break;
	case CSV_FRAG_SPARSE:
		rc = tf_frag_sparse_cells(csv_frag(c), &total, err);
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
static tf_status csv_complete(csv *c, tf_workspace *ws, const tf_cancel *cancel, tf_error *err)
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
			rc = extend_one(c, ws, cancel, false, err);
		pthread_mutex_unlock(&c->ext);
	}
}

/* ---- matrices (.raw, .npy) ------------------------------------------------------------------------ */

static bool plain_name(const char *s)
{
	return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..") && strlen(s) < 250;
}

static tf_status add_matrices(tf_views *v, tf_error *err)
{
	const tf_schema *sc = tf_snapshot_schema(v->s);
	tf_status rc = TF_OK;

	if (!v->dense || tf_dense_ndims(v->dense) > 64)
		return TF_OK;
	if (!(v->mats = calloc(sc->nattrs + 1, sizeof(*v->mats))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (size_t a = 0; a < sc->nattrs && rc == TF_OK; a++) {
		const tf_field *f = &sc->attrs[a];
		matrix *m = &v->mats[v->nmats];
		uint32_t inner;

		if (f->cell_val_num == TF_CELL_VAR || f->nullable || !plain_name(f->name) ||
		    !tf_npy_dtype(f->type, f->cell_val_num, m->dtype, sizeof(m->dtype), &inner))
			continue;
		m->attr = f;
		snprintf(m->name, sizeof(m->name), "%s", f->name);
		m->cs = (unsigned)tf_field_cell_bytes(f);	/* a parsed schema's: 1 .. TF_CELL_BYTES_MAX */
		m->nshape = tf_dense_ndims(v->dense);
		memcpy(m->shape, tf_dense_shape(v->dense), m->nshape * sizeof(uint64_t));
		if (inner > 1)
			m->shape[m->nshape++] = inner;
		tf_buf_init(&m->npy, 1 << 16);
		rc = tf_npy_header(m->dtype, m->shape, m->nshape, &m->npy, err);
		m->sized = tf_u64_mul(tf_dense_ncells(v->dense), m->cs, &m->raw) &&
			   m->raw <= (uint64_t)INT64_MAX - m->npy.len;
		v->nmats++;
	}
	return rc;
}

/* The bytes of a matrix's cells; 0 for one too large to show. */
static uint64_t raw_size(const matrix *m)
{
	return m->sized ? m->raw : 0;
}

static uint64_t npy_size(const matrix *m)
{
	return m->sized ? m->npy.len + m->raw : 0;
}

/* n fixed-size, non-nullable cells of attribute f, run by run, into dst. */
static tf_status gather_fixed(tf_snapshot *s, const tf_field *f, unsigned cs, tf_workspace *ws,
			      const tf_run *runs, size_t nruns, uint8_t *dst, tf_error *err)
{
	tf_pinset ps;
	tf_status rc = TF_OK;

	/* A row of output takes a short piece of each tile it crosses, and the
	 * next row the piece after it: the chunks stay held for the read. */
	tf_pinset_init(&ps, tf_snapshot_cache(s));
	for (size_t r = 0; r < nruns && rc == TF_OK; r++) {
		const tf_run *run = &runs[r];
		const tf_col *col = NULL;

		if (run->frag != SIZE_MAX && (rc = tf_snapshot_col(s, run->frag, TF_COL_ATTR, f->name, &col, err)) != TF_OK)
			break;
		if (!col || tf_col_missing(col)) {
			for (uint64_t i = 0; i < run->n; i++)
				memcpy(dst + i * cs, f->fill, cs);
		} else if (tf_col_cell_size(col) != cs) {
			rc = tf_err(err, TF_E_CORRUPT, "%s: cells of %u bytes, not %u", f->name, tf_col_cell_size(col), cs);
		} else if (run->stride == 1) {
			rc = tf_col_fixed_pinned(col, ws, run->tile, run->cell, run->n, dst, &ps, err);
		} else {
			for (uint64_t i = 0; i < run->n && rc == TF_OK; i++)
				rc = tf_col_fixed_pinned(col, ws, run->tile, run->cell + i * run->stride, 1, dst + i * cs,
							 &ps, err);
		}
		dst += run->n * cs;
	}
	tf_pinset_release(&ps);
	return rc;
}

/* Bytes [off, off + len) of the raw matrix: whole cells straight into
 * dst, a partial first or last cell through a bounce buffer. */
static tf_status raw_read(tf_views *v, const matrix *m, tf_workspace *ws, uint64_t off, size_t len,
			  uint8_t *dst, size_t *got, tf_error *err)
{
	uint64_t size = raw_size(m), c0, c1;
	uint8_t *tmp = NULL;
	tf_run *runs = NULL;
	size_t nruns = 0, cap = 0;
	tf_status rc;

	*got = 0;
	if (off >= size || len == 0)
		return TF_OK;
	if (len > size - off)
		len = (size_t)(size - off);
	if (m->attr->fill_size != m->cs)
		return tf_err(err, TF_E_CORRUPT, "%s: fill value of %llu bytes for cells of %u", m->name,
			      (unsigned long long)m->attr->fill_size, m->cs);
	c0 = off / m->cs, c1 = (off + len + m->cs - 1) / m->cs;
	if ((off % m->cs || len % m->cs) && !(tmp = malloc((size_t)((c1 - c0) * m->cs))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	rc = tf_dense_runs(v->dense, c0, c1 - c0, &runs, &nruns, &cap, err);
	if (rc == TF_OK)
		rc = gather_fixed(v->s, m->attr, m->cs, ws, runs, nruns, tmp ? tmp : dst, err);
	if (rc == TF_OK && tmp)
		memcpy(dst, tmp + (off - c0 * m->cs), len);
	if (rc == TF_OK)
		*got = len;
	free(tmp);
	free(runs);
	return rc;
}

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

/* A dense array's resolution and matrices, made on first need (every
 * fragment's metadata is read).  A dense array that cannot be resolved
 * still lists its CSV views; opening the array's CSV reports why. */
static tf_dense *views_dense(tf_views *v)
{
	if (atomic_load(&v->dense_tried))
		return v->dense;
	pthread_mutex_lock(&v->dense_lock);
	if (!atomic_load(&v->dense_tried)) {
		if (tf_snapshot_schema(v->s)->dense && tf_dense_open(v->s, &v->dense, &v->dense_err) != TF_OK) {
			tf_err_prefix(&v->dense_err, "%s", tf_array_dir(tf_snapshot_array(v->s)));
			v->dense = NULL;
		}
		tf_error e;
		if (add_matrices(v, &e) != TF_OK) {
			for (size_t i = 0; i < v->nmats; i++)
				tf_buf_free(&v->mats[i].npy);
			free(v->mats);
			v->mats = NULL, v->nmats = 0;
		}
		atomic_store(&v->dense_tried, true);
	}
	pthread_mutex_unlock(&v->dense_lock);
	return v->dense;
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
	csv_free(v->array_csv);
	csv_free(v->array_arrow);
	for (size_t i = 0; (v->frag_csv || v->frag_arrow) && i < tf_snapshot_nfrags(v->s); i++) {
		if (v->frag_csv)
			csv_free(v->frag_csv[i]);
		if (v->frag_arrow)
			csv_free(v->frag_arrow[i]);
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
		views_dense(v);
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
		st->size = raw_size(p->m);
		break;
	case P_NPY:
		st->size = npy_size(p->m);
		break;
	default: {	/* a CSV: known once formatted to its end */
		csv *c;
		bool arrow = p->kind == P_ARROW || p->kind == P_FRAGARROW, whole = p->kind == P_CSV || p->kind == P_ARROW;
		pthread_mutex_lock(&v->lock);	/* held: an idle fragment's state may go */
		c = whole ? (arrow ? v->array_arrow : v->array_csv)
		  : v->frag_csv ? (arrow ? v->frag_arrow : v->frag_csv)[p->frag] : NULL;
		st->size_known = c ? csv_size(c, &st->size)
				   : !whole && v->frag_size && (arrow ? v->frag_arrow_size : v->frag_size)[p->frag] != UINT64_MAX;
		if (!c && st->size_known)
			st->size = (arrow ? v->frag_arrow_size : v->frag_size)[p->frag];
		pthread_mutex_unlock(&v->lock);
		if (!st->size_known && !c)
			st->size_known = remembered(v, whole ? SIZE_MAX : p->frag, arrow, &st->size);
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
		csv *c = evict_idle(v);

		c->idle_next = gone;	/* a list of its own now */
		gone = c;
	}
	pthread_mutex_unlock(&v->lock);
	while (gone) {
		csv *next = gone->idle_next;

		csv_free(gone);
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
		views_dense(v);	/* its matrices are listed */
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
	if (w->kind == V_CSV && (rc = get_csv(v, p.kind == P_CSV || p.kind == P_ARROW ? SIZE_MAX : p.frag,
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
			put_csv(w->v, w->c);
		tf_views_unref(w->v);
		free(w);
	}
}

bool tf_view_size(tf_view *w, uint64_t *size)
{
	switch (w->kind) {
	case V_RAW:
		*size = raw_size(w->m);
		return true;
	case V_NPY:
		*size = npy_size(w->m);
		return true;
	default:
		return csv_size(w->c, size);
	}
}

tf_status tf_view_size_now(tf_view *w, tf_workspace *ws, const tf_cancel *cancel, uint64_t *size, bool *known,
			   tf_error *err)
{
	uint64_t cells;
	tf_status rc;

	if ((*known = tf_view_size(w, size)) || w->kind != V_CSV)
		return TF_OK;
	if ((rc = csv_cells_bound(w->c, cancel, &cells, err)) != TF_OK)
		return rc;
	if (cells > SIZE_CELLS_MAX)
		return TF_OK;	/* an endless box: read as /proc files are */
	if ((rc = csv_complete(w->c, ws, cancel, err)) != TF_OK)
		return rc;
	*known = csv_size(w->c, size);
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
		return csv_read(w->c, ws, off, len, dst, got, w->kept, cancel, err);
	case V_RAW:
		return raw_read(w->v, w->m, ws, off, len, dst, got, err);
	default:
		if (off < w->m->npy.len) {
			head = w->m->npy.len - off < len ? (size_t)(w->m->npy.len - off) : len;
			memcpy(dst, w->m->npy.p + off, head);
		}
		rc = raw_read(w->v, w->m, ws, off + head - w->m->npy.len, len - head, dst + head, &n, err);
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
		n = index_bytes(w->c);
		pthread_mutex_unlock(&w->c->lock);
	}
	return n;
}
