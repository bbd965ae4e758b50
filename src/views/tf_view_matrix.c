/*
 * tf_view_matrix.c - a dense array's resolution and its matrices, and the
 * <attr>.raw and <attr>.npy streams read from them.
 */
#include "config.h"

#include "views/tf_view_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
uint64_t view_raw_size(const matrix *m)
{
	return m->sized ? m->raw : 0;
}

uint64_t view_npy_size(const matrix *m)
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
tf_status view_raw_read(tf_views *v, const matrix *m, tf_workspace *ws, uint64_t off, size_t len,
			  uint8_t *dst, size_t *got, tf_error *err)
{
	uint64_t size = view_raw_size(m), c0, c1;
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

/* A dense array's resolution and matrices, made on first need (every
 * fragment's metadata is read).  A dense array that cannot be resolved
 * still lists its CSV views; opening the array's CSV reports why. */
tf_dense *view_dense(tf_views *v)
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
