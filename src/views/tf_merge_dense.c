/*
 * tf_merge_dense.c - dense cell resolution: the dense array's domain and
 * which fragment holds each cell, as runs (tf_dense; rules in tf_merge.h).
 */
#include "views/tf_merge_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- dense ------------------------------------------------------------------------------------- */

struct tf_dense {
	tf_snapshot *s;
	const tf_schema *schema;
	size_t ndims;
	uint64_t *lo, *shape, *ext;	/* the box, as offsets from the domain start */
	uint64_t ncells;
	size_t *frags, nfrags;		/* visible, newest last */
};

/*
 * A fragment is read with the schema it was written with, and merged on
 * the grid of the newest one: the two must lay cells out alike (schema
 * evolution never changes dimensions, domains, extents or orders; a
 * schema that does is not one TileDB wrote).
 */
tf_status merge_same_tiling(const tf_schema *newest, const tf_snap_frag *f, tf_error *err)
{
	char why[300];

	if (f->schema == newest || tf_schema_same_tiling(newest, f->schema, why, sizeof(why)))
		return TF_OK;
	return tf_err(err, TF_E_CORRUPT, "fragment %s: its schema tiles the array otherwise than the newest "
		      "schema: %s", f->name, why);
}

static tf_status dense_box(tf_dense *d, tf_error *err)
{
	uint64_t *hi = calloc(d->ndims, sizeof(uint64_t));

	if (!hi)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (size_t k = 0; k < d->nfrags; k++) {
		const tf_snap_frag *f = tf_snapshot_frag(d->s, d->frags[k]);
		const uint64_t *flo = tf_frag_lo(f), *fhi = tf_frag_hi(f);
		for (size_t i = 0; i < d->ndims; i++) {
			if (k == 0 || flo[i] < d->lo[i])
				d->lo[i] = flo[i];
			if (k == 0 || fhi[i] > hi[i])
				hi[i] = fhi[i];
		}
	}
	d->ncells = d->nfrags ? 1 : 0;
	for (size_t i = 0; i < d->ndims; i++) {
		d->shape[i] = d->nfrags ? hi[i] - d->lo[i] + 1 : 0;
		d->ext[i] = tf_schema_dim_extent(&d->schema->dims[i]);
		if (d->nfrags && d->ext[i] == 0) {	/* each fragment's was checked: the same */
			free(hi);
			return tf_err(err, TF_E_CORRUPT, "dimension %s: no tile extent", d->schema->dims[i].name);
		}
		if (d->shape[i] == 0 && d->nfrags) {
			free(hi);
			return tf_err(err, TF_E_UNSUPPORTED, "a dimension of 2^64 cells");
		}
		if (d->nfrags && d->ncells > UINT64_MAX / d->shape[i]) {
			free(hi);
			return tf_err(err, TF_E_UNSUPPORTED, "more than 2^64 cells");
		}
		d->ncells *= d->shape[i];
	}
	free(hi);
	return TF_OK;
}

tf_status tf_dense_open(tf_snapshot *s, tf_dense **out, tf_error *err)
{
	const tf_schema *sc = tf_snapshot_schema(s);
	tf_dense *d;
	tf_status rc;

	if (!sc->dense)
		return tf_err(err, TF_E_UNSUPPORTED, "not a dense array");
	if (!(d = calloc(1, sizeof(*d))) || !(d->lo = calloc(3 * sc->ndims, sizeof(uint64_t))) ||
	    !(d->frags = malloc((tf_snapshot_nvisible(s) + 1) * sizeof(size_t)))) {
		tf_dense_free(d);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	d->s = s, d->schema = sc, d->ndims = sc->ndims;
	d->shape = d->lo + d->ndims, d->ext = d->shape + d->ndims;
	for (size_t k = 0; k < tf_snapshot_nvisible(s); k++) {
		const tf_snap_frag *f = tf_snapshot_frag(s, tf_snapshot_visible(s, k));
		if ((rc = tf_snapshot_load(s, tf_snapshot_visible(s, k), err)) != TF_OK) {
			tf_dense_free(d);
			return rc;
		}
		if (!f->dense) {
			tf_dense_free(d);
			return tf_err(err, TF_E_UNSUPPORTED, "fragment %s of a dense array is sparse", f->name);
		}
		if ((rc = merge_same_tiling(sc, f, err)) != TF_OK) {
			tf_dense_free(d);
			return rc;
		}
		d->frags[d->nfrags++] = tf_snapshot_visible(s, k);
	}
	if ((rc = dense_box(d, err)) != TF_OK) {
		tf_dense_free(d);
		return rc;
	}
	*out = d;
	return TF_OK;
}

void tf_dense_free(tf_dense *d)
{
	if (!d)
		return;
	free(d->lo);
	free(d->frags);
	free(d);
}

uint64_t tf_dense_ncells(const tf_dense *d) { return d->ncells; }
size_t tf_dense_ndims(const tf_dense *d) { return d->ndims; }
const uint64_t *tf_dense_shape(const tf_dense *d) { return d->shape; }

const uint64_t *tf_dense_lo(const tf_dense *d) { return d->lo; }

void tf_dense_offsets(const tf_dense *d, uint64_t c, uint64_t *x)
{
	for (size_t i = d->ndims; i-- > 0;) {
		x[i] = d->lo[i] + c % d->shape[i];
		c /= d->shape[i];
	}
}

/* Offsets (from the domain start) of output cell c along every dimension. */
static void cell_offsets(const tf_dense *d, uint64_t c, uint64_t *x)
{
	for (size_t i = d->ndims; i-- > 0;) {
		x[i] = d->lo[i] + c % d->shape[i];
		c /= d->shape[i];
	}
}

void tf_dense_coord(const tf_dense *d, uint64_t c, size_t dim, uint8_t *out)
{
	const tf_field *f = &d->schema->dims[dim];
	unsigned size = tf_datatype_size(f->type);
	uint64_t x = 0;

	for (size_t i = d->ndims; i-- > dim;) {
		x = d->lo[i] + c % d->shape[i];
		c /= d->shape[i];
	}
	tf_put_le_n(out, size, tf_le_n(f->domain, size) + x);
}

/* Where fragment f stores the cell at offsets x: its tile (in tile order
 * over the tiles covering its non-empty domain) and the cell within the
 * tile (in cell order), and how far the next cell along the last
 * dimension is. */
static void locate(const tf_dense *d, const tf_snap_frag *f, const uint64_t *x, uint64_t *tile,
		   uint64_t *cell, uint64_t *stride)
{
	bool trow = d->schema->tile_order != 1, crow = d->schema->cell_order != 1;	/* 1: col-major */
	uint64_t t = 0, c = 0, s = 1;
	size_t n = d->ndims;

	for (size_t k = 0; k < n; k++) {
		size_t i = trow ? k : n - 1 - k;
		uint64_t tc = x[i] / d->ext[i];
		t = t * tf_frag_tn(f)[i] + (tc - tf_frag_tlo(f)[i]);
	}
	for (size_t k = 0; k < n; k++) {
		size_t i = crow ? k : n - 1 - k;
		c = c * d->ext[i] + x[i] % d->ext[i];
	}
	for (size_t i = 0; !crow && i + 1 < n; i++)
		s *= d->ext[i];
	*tile = t, *cell = c, *stride = s;
}

static tf_status push_run(tf_run **runs, size_t *nruns, size_t *cap, tf_run r, tf_error *err)
{
	tf_run *v;

	if (*nruns > 0) {	/* extend the previous run when contiguous */
		tf_run *p = &(*runs)[*nruns - 1];
		if (p->frag == r.frag && (r.frag == SIZE_MAX ||
		    (p->tile == r.tile && p->stride == r.stride && p->cell + p->n * p->stride == r.cell))) {
			p->n += r.n;
			return TF_OK;
		}
	}
	if (*nruns == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		if (!(v = realloc(*runs, nc * sizeof(*v))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		*runs = v;
		*cap = nc;
	}
	(*runs)[(*nruns)++] = r;
	return TF_OK;
}

/* Paint [a, b] of the row at offsets x (last one ignored) into seg:
 * (from, to, slot) triples, slots newest first, SIZE_MAX = fill.  seg
 * holds 3 * (2 * nfrags + 1) values. */
static void paint_row(const tf_dense *d, const uint64_t *x, uint64_t a, uint64_t b, uint64_t *seg,
		      size_t *nseg)
{
	size_t L = d->ndims - 1, n = 1;

	seg[0] = a, seg[1] = b, seg[2] = SIZE_MAX;
	for (size_t k = d->nfrags; k-- > 0;) {
		const tf_snap_frag *f = tf_snapshot_frag(d->s, d->frags[k]);
		const uint64_t *flo = tf_frag_lo(f), *fhi = tf_frag_hi(f);
		bool in = true;

		for (size_t i = 0; i < L && in; i++)
			in = x[i] >= flo[i] && x[i] <= fhi[i];
		for (size_t j = 0; in && j < n; j++) {
			uint64_t *sg = &seg[3 * j], lo, hi;

			if (sg[2] != SIZE_MAX || fhi[L] < sg[0] || flo[L] > sg[1])
				continue;
			lo = flo[L] > sg[0] ? flo[L] : sg[0];
			hi = fhi[L] < sg[1] ? fhi[L] : sg[1];
			if (hi < sg[1]) {	/* [hi + 1, end] stays fill */
				memmove(sg + 3, sg, 3 * (n - j) * sizeof(uint64_t));
				n++;
				sg[3] = hi + 1, sg[1] = hi;
			}
			if (lo > sg[0]) {	/* [start, lo - 1] stays fill */
				memmove(sg + 3, sg, 3 * (n - j) * sizeof(uint64_t));
				n++;
				sg[1] = lo - 1, sg[3] = lo;
				sg += 3, j++;
			}
			sg[2] = k;
		}
	}
	*nseg = n;
}

/* Runs of one row segment [from, to] of fragment slot k (or fill). */
static tf_status segment_runs(const tf_dense *d, uint64_t *x, const uint64_t *sg, tf_run **runs,
			      size_t *nruns, size_t *cap, tf_error *err)
{
	size_t L = d->ndims - 1;
	tf_status rc = TF_OK;

	if (sg[2] == SIZE_MAX)
		return push_run(runs, nruns, cap, (tf_run){ SIZE_MAX, 0, 0, sg[1] - sg[0] + 1, 0 }, err);
	for (uint64_t from = sg[0]; rc == TF_OK && from <= sg[1];) {
		const tf_snap_frag *f = tf_snapshot_frag(d->s, d->frags[sg[2]]);
		/* The last cell of from's space tile (one reaching past 2^64 - 1
		 * ends there, rather than wrap to before from). */
		uint64_t tile_end = tf_u64_add_sat(from - from % d->ext[L], d->ext[L] - 1);
		uint64_t to = tile_end < sg[1] ? tile_end : sg[1];
		tf_run r = { d->frags[sg[2]], 0, 0, to - from + 1, 0 };

		x[L] = from;
		locate(d, f, x, &r.tile, &r.cell, &r.stride);
		rc = push_run(runs, nruns, cap, r, err);
		if (to == UINT64_MAX)
			break;
		from = to + 1;
	}
	return rc;
}

tf_status tf_dense_runs(const tf_dense *d, uint64_t c0, uint64_t n, tf_run **runs, size_t *nruns,
			size_t *cap, tf_error *err)
{
	size_t L = d->ndims - 1, nseg;
	uint64_t x[64], row = d->shape[L], *seg;
	tf_status rc = TF_OK;

	*nruns = 0;
	if (d->ndims > 64)
		return tf_err(err, TF_E_UNSUPPORTED, "%zu dimensions", d->ndims);
	if (c0 > d->ncells || n > d->ncells - c0)
		return tf_err(err, TF_E_INVAL, "cells past the end");
	if (!(seg = malloc(3 * (2 * d->nfrags + 1) * sizeof(uint64_t))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	while (rc == TF_OK && n > 0) {
		uint64_t at = c0 % row, take = row - at < n ? row - at : n;

		cell_offsets(d, c0, x);
		paint_row(d, x, x[L], x[L] + take - 1, seg, &nseg);
		for (size_t j = 0; rc == TF_OK && j < nseg; j++)
			rc = segment_runs(d, x, &seg[3 * j], runs, nruns, cap, err);
		c0 += take;
		n -= take;
	}
	free(seg);
	return rc;
}
