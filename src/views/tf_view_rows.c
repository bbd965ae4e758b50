/*
 * tf_view_rows.c - CSV text from cells: formatting a row, gathering dense
 * cells, and the producers that make one block of CSV (or Arrow) text from a
 * state, whole array or one fragment, dense or sparse.
 */
#include "config.h"

#include "views/tf_view_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

tf_status view_make_header(csv *c, tf_error *err)
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

tf_status view_prod_init(csv *c, producer *p, const tf_cancel *cancel, tf_error *err)
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

void view_prod_free(csv *c, producer *p)
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
tf_status view_prod_begin(csv *c, producer *p, tf_workspace *ws, const tf_cancel *cancel, tf_error *err)
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
void view_prod_end(csv *c, producer *p)
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

const tf_snap_frag *view_csv_frag(const csv *c)
{
	return tf_snapshot_frag(c->v->s, c->frag);
}

/* The window holding cell `cell` of tile `tile` of the CSV's fragment: the
 * cells from there on, as many as WINDOW_MAX holds (a WINDOW_PART of a
 * small budget). */
static tf_status load_window(csv *c, producer *p, uint64_t tile, uint64_t cell, tf_workspace *ws, tf_error *err)
{
	const tf_snap_frag *f = view_csv_frag(c);
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

/* The rest of a row from the window: columns from `from` on are its fields
 * (the window's field j - from) of cell `cell`; then the row's end. */
static inline tf_status put_window_cell(csv *c, producer *p, tf_buf *text, size_t from, uint64_t cell, tf_error *err)
{
	tf_status rc = TF_OK;

	for (size_t j = from; j < c->ncols && rc == TF_OK; j++) {
		const uint8_t *v;
		size_t n;
		bool valid;

		tf_cellbuf_get(&p->buf, j - from, cell, &v, &n, &valid);
		rc = emit(c, p, text, j, v, n, valid, err);
	}
	return rc == TF_OK ? emit_end(c, p, text, err) : rc;
}

/* One sparse fragment: its cells in storage order from position in[0]. */
static tf_status produce_frag_sparse(csv *c, producer *p, tf_workspace *ws, const uint64_t *in,
				     tf_buf *text, uint64_t *out, bool *end, tf_error *err)
{
	const tf_snap_frag *f = view_csv_frag(c);
	uint64_t pos = in[0], total, cap = f->schema->capacity;
	tf_status rc = tf_frag_sparse_cells(f, &total, err);

	while (rc == TF_OK && !block_full(c, p, text) && pos < total && (rc = row_done(p, err)) == TF_OK) {
		uint64_t tile = pos / cap, cell = pos % cap;

		if ((rc = load_window(c, p, tile, cell, ws, err)) != TF_OK)
			break;
		rc = put_window_cell(c, p, text, 0, cell, err);
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
	const tf_snap_frag *f = view_csv_frag(c);
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
		if (rc == TF_OK)
			rc = put_window_cell(c, p, text, c->ndims, cell, err);
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
tf_status view_produce(csv *c, producer *p, tf_workspace *ws, const uint64_t *in, tf_buf *text,
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
