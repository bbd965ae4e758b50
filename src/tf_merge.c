/*
 * tf_merge.c - dense cell resolution and the sparse global-order merge
 * (see tf_merge.h for the TileDB rules followed).
 */
#include "tf_merge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TILE_BYTES_LIMIT ((size_t)4 << 30)

/* ---- tile buffers -------------------------------------------------------------------------- */

uint64_t tf_frag_tile_cells(const tf_snap_frag *f, uint64_t t)
{
	return f->dense ? tf_schema_dense_tile_cells(f->schema) : tf_fragment_tile_cells(f->fr, t, f->ntiles);
}

tf_status tf_frag_sparse_cells(const tf_snap_frag *f, uint64_t *total, tf_error *err)
{
	uint64_t cap = f->schema->capacity, last;

	*total = 0;
	if (!f->ntiles)
		return TF_OK;
	last = tf_frag_tile_cells(f, f->ntiles - 1);
	/* Every tile but the last holds `capacity` cells (§5.4). */
	if (cap == 0 || last > cap || f->ntiles - 1 > (UINT64_MAX - last) / cap)
		return tf_err(err, TF_E_CORRUPT, "fragment %s: %llu tiles of %llu cells", f->name,
			      (unsigned long long)f->ntiles, (unsigned long long)cap);
	*total = (f->ntiles - 1) * cap + last;
	return TF_OK;
}

tf_status tf_cellbuf_init(tf_cellbuf *b, const tf_fieldspec *spec, size_t nfields, tf_error *err)
{
	memset(b, 0, sizeof(*b));
	b->spec = spec;
	b->nfields = nfields;
	if (nfields && !(b->f = calloc(nfields, sizeof(*b->f))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (size_t i = 0; i < nfields; i++)
		tf_buf_init(&b->f[i].data, TILE_BYTES_LIMIT);
	return TF_OK;
}

void tf_cellbuf_free(tf_cellbuf *b)
{
	for (size_t i = 0; b->f && i < b->nfields; i++) {
		tf_buf_free(&b->f[i].data);
		free(b->f[i].starts);
		free(b->f[i].valid);
	}
	free(b->f);
	memset(b, 0, sizeof(*b));
}

/* A var field's cells, VAR_BATCH at a time: the offsets of a tile folded
 * into its string data (§4.7) are counted by fragment metadata alone, so
 * room for them is made only as they decode (the first batch decodes the
 * whole tile, or fails, before the second is made room for). */
#define VAR_BATCH ((uint64_t)1 << 16)

static tf_status load_var(tf_cellbuf_field *bf, const tf_col *col, tf_workspace *ws, uint64_t tile,
			  uint64_t n, tf_error *err)
{
	tf_status rc = TF_OK;

	for (uint64_t at = 0; rc == TF_OK && (at < n || at == 0); at += VAR_BATCH) {
		uint64_t k = n - at < VAR_BATCH ? n - at : VAR_BATCH;
		uint64_t *starts = realloc(bf->starts, (at + k + 1) * sizeof(*starts));

		if (!starts)
			return tf_err(err, TF_E_NOMEM, "out of memory");
		bf->starts = starts;
		/* Each batch's first start is the last one's end: data.len. */
		rc = tf_col_var_cells(col, ws, tile, at, k, bf->starts + at, &bf->data, err);
	}
	return rc;
}

static tf_status load_field(tf_cellbuf_field *bf, const tf_col *col, tf_workspace *ws, uint64_t tile,
			    uint64_t n, tf_error *err)
{
	uint64_t bytes;
	uint8_t *valid;
	tf_status rc;

	bf->col = col;
	bf->missing = tf_col_missing(col);
	bf->var = tf_col_var(col);
	bf->cell_size = tf_col_cell_size(col);
	bf->data.len = 0;
	if (bf->missing)
		return TF_OK;
	/* The cells the schema or footer claims must be in the tile, as its
	 * stored chunk headers say, before a byte is allocated for them. */
	if ((rc = tf_col_check_cells(col, tile, 0, n, err)) != TF_OK)
		return rc;
	if (n > TILE_BYTES_LIMIT / 8)
		return tf_err(err, TF_E_CORRUPT, "a tile of %llu cells", (unsigned long long)n);
	/* Validity bytes only where stored: a byte per claimed cell, set,
	 * would be memory touched for cells no decode has proven yet (a
	 * folded offsets tile's count comes from fragment metadata alone). */
	bf->nullable = tf_col_nullable(col);
	if (bf->nullable) {
		if (!(valid = realloc(bf->valid, n ? n : 1)))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		bf->valid = valid;
		if ((rc = tf_col_validity(col, ws, tile, 0, n, bf->valid, err)) != TF_OK)
			return rc;
	}
	if (tf_col_var(col))
		return load_var(bf, col, ws, tile, n, err);
	if (!tf_u64_mul(n, tf_col_cell_size(col), &bytes) || bytes > TILE_BYTES_LIMIT)
		return tf_err(err, TF_E_CORRUPT, "a tile of %llu cells of %u bytes", (unsigned long long)n,
			      tf_col_cell_size(col));
	if ((rc = tf_buf_reserve(&bf->data, (size_t)bytes, err)) != TF_OK)
		return rc;
	bf->data.len = (size_t)bytes;
	return tf_col_fixed(col, ws, tile, 0, n, bf->data.p, err);
}

tf_status tf_cellbuf_load(tf_cellbuf *b, tf_snapshot *s, tf_workspace *ws, size_t frag,
			  uint64_t tile, uint64_t ncells, tf_error *err)
{
	tf_status rc = TF_OK;

	b->loaded = false;
	for (size_t i = 0; i < b->nfields && rc == TF_OK; i++) {
		const tf_col *col;
		if ((rc = tf_snapshot_col(s, frag, b->spec[i].kind, b->spec[i].name, &col, err)) == TF_OK)
			rc = load_field(&b->f[i], col, ws, tile, ncells, err);
	}
	if (rc != TF_OK)
		return rc;
	b->frag = frag, b->tile = tile, b->ncells = ncells;
	b->loaded = true;
	return TF_OK;
}

void tf_cellbuf_get(const tf_cellbuf *b, size_t i, uint64_t c, const uint8_t **p, size_t *n,
		    bool *valid)
{
	const tf_cellbuf_field *bf = &b->f[i];
	const tf_field *fd = b->spec[i].field;

	if (bf->missing) {	/* added by schema evolution: the fill value */
		*p = fd ? fd->fill : NULL;
		*n = fd ? (size_t)fd->fill_size : 0;
		*valid = !fd || !fd->nullable || fd->fill_valid;
		return;
	}
	*valid = !bf->nullable || bf->valid[c] != 0;
	if (bf->var) {
		*p = bf->data.p + bf->starts[c];
		*n = (size_t)(bf->starts[c + 1] - bf->starts[c]);
	} else {
		*n = bf->cell_size;
		*p = bf->data.p + (size_t)c * *n;
	}
}

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
static tf_status same_tiling(const tf_schema *newest, const tf_snap_frag *f, tf_error *err)
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
		for (size_t i = 0; i < d->ndims; i++) {
			if (k == 0 || f->lo[i] < d->lo[i])
				d->lo[i] = f->lo[i];
			if (k == 0 || f->hi[i] > hi[i])
				hi[i] = f->hi[i];
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
		if (!f->fr) {
			if (err)
				*err = f->error;
			tf_dense_free(d);
			return f->error.code ? f->error.code : TF_E_CORRUPT;
		}
		if (!f->dense) {
			tf_dense_free(d);
			return tf_err(err, TF_E_UNSUPPORTED, "fragment %s of a dense array is sparse", f->name);
		}
		if ((rc = same_tiling(sc, f, err)) != TF_OK) {
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
		t = t * f->tn[i] + (tc - f->tlo[i]);
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
		bool in = true;

		for (size_t i = 0; i < L && in; i++)
			in = x[i] >= f->lo[i] && x[i] <= f->hi[i];
		for (size_t j = 0; in && j < n; j++) {
			uint64_t *sg = &seg[3 * j], lo, hi;

			if (sg[2] != SIZE_MAX || f->hi[L] < sg[0] || f->lo[L] > sg[1])
				continue;
			lo = f->lo[L] > sg[0] ? f->lo[L] : sg[0];
			hi = f->hi[L] < sg[1] ? f->hi[L] : sg[1];
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

/* ---- sparse ------------------------------------------------------------------------------------ */

typedef struct slot {
	size_t frag;		/* snapshot index */
	size_t order;		/* position in read order: later is newer */
	const tf_snap_frag *f;
	uint64_t total, cap, pos;
	bool done, time_filter;
	tf_cellbuf buf;
	uint64_t *hilbert;	/* Hilbert values of the loaded tile's cells */
	size_t hcap;
	uint64_t *tiles;	/* space tile of each cell along each dimension
				 * (ndims per cell; 0 where tile order skips it) */
	size_t tcap;
} slot;

struct tf_sparse {
	tf_snapshot *s;
	const tf_schema *schema;
	size_t ndims;
	tf_fieldspec *spec;	/* dimensions first, then outputs, conditions, t, dt */
	size_t nspec;
	size_t *out_idx, nout;
	size_t f_ts, f_dt;	/* SIZE_MAX: not read */
	size_t **cond_idx;	/* per delete, per condition field: spec index or SIZE_MAX */
	tf_cond_value *cvals;	/* scratch for one condition */
	slot *slots;
	size_t nslots;
	size_t *heap, nheap;
	bool dups, hilbert;
	int hbits;
	tf_buf key;		/* the current group's coordinates */
	size_t *keyoff, *keylen;
};

static size_t add_spec(tf_sparse *it, tf_col_kind kind, const char *name, const tf_field *field)
{
	for (size_t i = 0; i < it->nspec; i++)
		if (it->spec[i].kind == kind && !strcmp(it->spec[i].name, name))
			return i;
	it->spec[it->nspec] = (tf_fieldspec){ kind, name, field };
	return it->nspec++;
}

static const tf_field *latest_field(const tf_schema *sc, const char *name, tf_col_kind *kind)
{
	for (size_t d = 0; d < sc->ndims; d++)
		if (!strcmp(sc->dims[d].name, name)) {
			*kind = TF_COL_DIM;
			return &sc->dims[d];
		}
	*kind = TF_COL_ATTR;
	return tf_schema_attr(sc, name);
}

/* Fields: dimensions, outputs, the fields delete conditions test, t, dt. */
static tf_status build_specs(tf_sparse *it, const tf_fieldspec *out, size_t nout, tf_error *err)
{
	size_t ndel = tf_snapshot_ndeletes(it->s), max = it->ndims + nout + 2;

	for (size_t k = 0; k < ndel; k++)
		max += tf_cond_nfields(tf_snapshot_delete(it->s, k)->cond);
	if (!(it->spec = calloc(max, sizeof(*it->spec))) || !(it->out_idx = calloc(nout + 1, sizeof(size_t))) ||
	    !(it->cond_idx = calloc(ndel + 1, sizeof(size_t *))) || !(it->cvals = calloc(max, sizeof(*it->cvals))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (size_t d = 0; d < it->ndims; d++)
		add_spec(it, TF_COL_DIM, it->schema->dims[d].name, &it->schema->dims[d]);
	for (size_t i = 0; i < nout; i++)
		it->out_idx[i] = add_spec(it, out[i].kind, out[i].name, out[i].field);
	it->nout = nout;
	for (size_t k = 0; k < ndel; k++) {
		const tf_cond *c = tf_snapshot_delete(it->s, k)->cond;
		if (!(it->cond_idx[k] = calloc(tf_cond_nfields(c) + 1, sizeof(size_t))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		for (size_t j = 0; j < tf_cond_nfields(c); j++) {
			tf_col_kind kind;
			const tf_field *fd = latest_field(it->schema, tf_cond_field(c, j), &kind);
			it->cond_idx[k][j] = fd ? add_spec(it, kind, fd->name, fd) : SIZE_MAX;
		}
	}
	it->f_ts = add_spec(it, TF_COL_TIMESTAMPS, "__timestamps", NULL);
	it->f_dt = add_spec(it, TF_COL_DELETE_TS, "__delete_timestamps", NULL);
	return TF_OK;
}

static tf_status add_slots(tf_sparse *it, tf_error *err)
{
	size_t nv = tf_snapshot_nvisible(it->s);
	tf_status rc = TF_OK;

	if (!(it->slots = calloc(nv + 1, sizeof(*it->slots))) || !(it->heap = calloc(nv + 1, sizeof(size_t))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (size_t k = 0; k < nv && rc == TF_OK; k++) {
		slot *sl = &it->slots[it->nslots];
		const tf_snap_frag *f = tf_snapshot_frag(it->s, tf_snapshot_visible(it->s, k));

		if (!f->fr) {
			if (err)
				*err = f->error;
			return f->error.code ? f->error.code : TF_E_CORRUPT;
		}
		if (f->dense)
			return tf_err(err, TF_E_UNSUPPORTED, "fragment %s of a sparse array is dense", f->name);
		/* Its coordinates are compared as the newest schema's dimensions. */
		if ((rc = same_tiling(it->schema, f, err)) != TF_OK)
			return rc;
		sl->frag = tf_snapshot_visible(it->s, k);
		sl->order = k;
		sl->f = f;
		sl->cap = f->schema->capacity;
		if ((rc = tf_frag_sparse_cells(f, &sl->total, err)) != TF_OK)
			return rc;
		sl->time_filter = f->has_ts && f->t2 > tf_snapshot_time(it->s);
		rc = tf_cellbuf_init(&sl->buf, it->spec, it->nspec, err);
		it->nslots++;
	}
	return rc;
}

tf_status tf_row_init(tf_row *r, size_t nfields, tf_error *err)
{
	memset(r, 0, sizeof(*r));
	tf_buf_init(&r->bytes, TILE_BYTES_LIMIT);
	r->nfields = nfields;
	if (!(r->off = calloc(nfields + 1, sizeof(size_t))) || !(r->len = calloc(nfields + 1, sizeof(size_t))) ||
	    !(r->valid = calloc(nfields + 1, sizeof(bool))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	return TF_OK;
}

void tf_row_free(tf_row *r)
{
	tf_buf_free(&r->bytes);
	free(r->off);
	free(r->len);
	free(r->valid);
	memset(r, 0, sizeof(*r));
}

tf_status tf_sparse_open(tf_snapshot *s, const tf_fieldspec *out, size_t nout, tf_sparse **itp,
			 tf_error *err)
{
	const tf_schema *sc = tf_snapshot_schema(s);
	tf_sparse *it;
	tf_status rc;

	if (sc->dense)
		return tf_err(err, TF_E_UNSUPPORTED, "not a sparse array");
	if (!(it = calloc(1, sizeof(*it))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	it->s = s, it->schema = sc, it->ndims = sc->ndims;
	it->dups = sc->allows_dups;
	it->hilbert = sc->cell_order == 4;	/* HILBERT */
	it->hbits = (int)(63 / (sc->ndims ? sc->ndims : 1));
	tf_buf_init(&it->key, TILE_BYTES_LIMIT);
	if ((rc = build_specs(it, out, nout, err)) == TF_OK && (rc = add_slots(it, err)) == TF_OK &&
	    (!(it->keyoff = calloc(it->ndims + 1, sizeof(size_t))) || !(it->keylen = calloc(it->ndims + 1, sizeof(size_t)))))
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	if (rc != TF_OK) {
		tf_sparse_free(it);
		return rc;
	}
	*itp = it;
	return TF_OK;
}

void tf_sparse_free(tf_sparse *it)
{
	if (!it)
		return;
	for (size_t i = 0; i < it->nslots; i++) {
		tf_cellbuf_free(&it->slots[i].buf);
		free(it->slots[i].hilbert);
		free(it->slots[i].tiles);
	}
	for (size_t k = 0; it->cond_idx && k < tf_snapshot_ndeletes(it->s); k++)
		free(it->cond_idx[k]);
	free(it->cond_idx);
	free(it->cvals);
	free(it->slots);
	free(it->heap);
	free(it->spec);
	free(it->out_idx);
	free(it->keyoff);
	free(it->keylen);
	tf_buf_free(&it->key);
	free(it);
}

size_t tf_sparse_state_len(const tf_sparse *it) { return it->nslots; }

void tf_sparse_get_state(const tf_sparse *it, uint64_t *state)
{
	for (size_t i = 0; i < it->nslots; i++)
		state[i] = it->slots[i].pos;
}

/* ---- coordinates ---------------------------------------------------------------------------- */

static int64_t as_signed(uint64_t u, unsigned size)
{
	return size == 8 ? (int64_t)u : (int64_t)(u << (64 - 8 * size)) >> (64 - 8 * size);
}

/* Typed comparison of two values of a fixed-size dimension. */
static int cmp_fixed(tf_datatype t, const uint8_t *a, const uint8_t *b)
{
	unsigned size = tf_datatype_size(t);
	uint64_t ua = tf_le_n(a, size), ub = tf_le_n(b, size);

	if (t == TF_DT_FLOAT32 || t == TF_DT_FLOAT64) {
		double da, db;
		float fa, fb;
		if (size == 4)
			memcpy(&fa, a, 4), memcpy(&fb, b, 4), da = fa, db = fb;
		else
			memcpy(&da, a, 8), memcpy(&db, b, 8);
		return (da > db) - (da < db);
	}
	if (tf_datatype_is_signed(t) || tf_datatype_is_datetime(t)) {
		int64_t sa = as_signed(ua, size), sb = as_signed(ub, size);
		return (sa > sb) - (sa < sb);
	}
	return (ua > ub) - (ua < ub);
}

/* Strings: bytewise, a shorter prefix first (std::string_view). */
static int cmp_var(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
	int r = memcmp(a, b, na < nb ? na : nb);

	return r ? (r > 0) - (r < 0) : (na > nb) - (na < nb);
}

/* The space tile of a value along dimension d (Dimension::tile_idx):
 * integers (v - low) / extent in the type's unsigned width; reals
 * (v - low) / extent in the type's precision, truncated. */
static uint64_t tile_index(const tf_field *d, const uint8_t *v)
{
	unsigned size = tf_datatype_size(d->type);
	uint64_t mask = size == 8 ? UINT64_MAX : (((uint64_t)1 << (8 * size)) - 1);

	/* A coordinate outside the domain (or NaN) gives a quotient no tile
	 * index holds: clamped, as is any past 2^64. */
	if (d->type == TF_DT_FLOAT32) {
		float fv, lo, ext;
		memcpy(&fv, v, 4), memcpy(&lo, d->domain, 4), memcpy(&ext, d->extent, 4);
		return tf_u64_of_real((double)((fv - lo) / ext));
	}
	if (d->type == TF_DT_FLOAT64) {
		double dv, lo, ext;
		memcpy(&dv, v, 8), memcpy(&lo, d->domain, 8), memcpy(&ext, d->extent, 8);
		return tf_u64_of_real((dv - lo) / ext);
	}
	return ((tf_le_n(v, size) - tf_le_n(d->domain, size)) & mask) / (tf_le_n(d->extent, size) & mask ? tf_le_n(d->extent, size) & mask : 1);
}

static void dim_value(const slot *sl, size_t d, uint64_t c, const uint8_t **p, size_t *n)
{
	bool valid;

	tf_cellbuf_get(&sl->buf, d, c, p, n, &valid);
}

static uint64_t cell_of(const slot *sl)
{
	return sl->pos - sl->buf.tile * sl->cap;
}

/* Global order of two cells' coordinates (global_order_compare,
 * HilbertCmp): <0 if a comes first. */
static int cmp_coords(const tf_sparse *it, const slot *a, const slot *b)
{
	uint64_t ca = cell_of(a), cb = cell_of(b);
	bool trow = it->schema->tile_order != 1, crow = it->schema->cell_order != 1 || it->hilbert;
	size_t n = it->ndims;
	const uint8_t *pa, *pb;
	size_t na, nb;
	int r;

	if (it->hilbert && a->hilbert[ca] != b->hilbert[cb])
		return a->hilbert[ca] < b->hilbert[cb] ? -1 : 1;
	for (size_t k = 0; !it->hilbert && k < n; k++) {
		size_t d = trow ? k : n - 1 - k;
		uint64_t ta = a->tiles[ca * n + d], tb = b->tiles[cb * n + d];

		if (ta != tb)
			return ta < tb ? -1 : 1;
	}
	for (size_t k = 0; k < n; k++) {
		size_t d = crow ? k : n - 1 - k;
		const tf_field *fd = &it->schema->dims[d];

		dim_value(a, d, ca, &pa, &na), dim_value(b, d, cb, &pb, &nb);
		r = fd->cell_val_num == TF_CELL_VAR ? cmp_var(pa, na, pb, nb) : cmp_fixed(fd->type, pa, pb);
		if (r)
			return r;
	}
	return 0;
}

static uint64_t cell_timestamp(const tf_sparse *it, const slot *sl, uint64_t c)
{
	const uint8_t *p;
	size_t n;
	bool valid;

	if (!sl->f->has_ts)
		return sl->f->t1;	/* timestamp_range().first */
	tf_cellbuf_get(&sl->buf, it->f_ts, c, &p, &n, &valid);
	return n == 8 ? tf_le64(p) : sl->f->t1;
}

/* The merge order of two slots' current cells: coordinates, then (no
 * duplicates) the newer cell first, then the later fragment (GlobalCmp
 * with use_timestamps / strict_ordering). */
static int cmp_slots(const tf_sparse *it, const slot *a, const slot *b)
{
	int r = cmp_coords(it, a, b);
	uint64_t ta, tb;

	if (r)
		return r;
	if (!it->dups) {
		ta = cell_timestamp(it, a, cell_of(a)), tb = cell_timestamp(it, b, cell_of(b));
		if (ta != tb)
			return ta > tb ? -1 : 1;
	}
	return a->order > b->order ? -1 : a->order < b->order ? 1 : 0;
}

/* ---- Hilbert values (hilbert_order.cc, Dimension::map_to_uint64) ----------------------------- */

/* A coordinate mapped to [0, 2^bits): reals and integers by their place in
 * the domain, strings by their first 8 bytes (each byte sign-extended, as
 * TileDB ORs a char into a uint64). */
uint64_t tf_hilbert_coord(const tf_field *d, const uint8_t *p, size_t n, int bits)
{
	uint64_t max = ((uint64_t)1 << bits) - 1, ret = 0;
	unsigned size = tf_datatype_size(d->type);
	double v, lo, hi, q;

	if (d->cell_val_num == TF_CELL_VAR) {
		for (size_t i = 0; i < 8; i++) {
			ret <<= 8;
			if (i < n)
				ret |= (uint64_t)(int64_t)(int8_t)p[i];
		}
		return ret >> (64 - bits);
	}
	if (d->type == TF_DT_FLOAT32 || d->type == TF_DT_FLOAT64) {
		float f;
		if (size == 4) {
			memcpy(&f, p, 4), v = f;
			memcpy(&f, d->domain, 4), lo = f;
			memcpy(&f, d->domain + 4, 4), hi = f;
		} else {
			memcpy(&v, p, 8), memcpy(&lo, d->domain, 8), memcpy(&hi, d->domain + 8, 8);
		}
	} else if (tf_datatype_is_signed(d->type) || tf_datatype_is_datetime(d->type)) {
		v = (double)as_signed(tf_le_n(p, size), size);
		lo = (double)as_signed(tf_le_n(d->domain, size), size);
		hi = (double)as_signed(tf_le_n(d->domain + size, size), size);
	} else {
		v = (double)tf_le_n(p, size), lo = (double)tf_le_n(d->domain, size);
		hi = (double)tf_le_n(d->domain + size, size);
	}
	q = (v - lo) / (hi - lo) * (double)max;
	return q > 0 && q < 18446744073709551616.0 ? (uint64_t)q : 0;
}

/* Coordinates (bits each) to the Hilbert index, after J. Skilling,
 * "Programming the Hilbert curve" (2004): axes to transpose, then the
 * transpose's bits interleaved, dimension 0 most significant per level. */
uint64_t tf_hilbert_index(uint64_t *x, size_t n, int bits)
{
	uint64_t m = (uint64_t)1 << (bits - 1), t = 0, h = 0;

	for (uint64_t q = m; q > 1; q >>= 1) {	/* inverse undo */
		uint64_t p = q - 1;
		for (size_t i = 0; i < n; i++) {
			if (x[i] & q) {
				x[0] ^= p;
			} else {
				uint64_t s = (x[0] ^ x[i]) & p;
				x[0] ^= s, x[i] ^= s;
			}
		}
	}
	for (size_t i = 1; i < n; i++)	/* Gray encode */
		x[i] ^= x[i - 1];
	for (uint64_t q = m; q > 1; q >>= 1)
		if (x[n - 1] & q)
			t ^= q - 1;
	for (size_t i = 0; i < n; i++)
		x[i] ^= t;
	for (int b = bits - 1; b >= 0; b--)
		for (size_t i = 0; i < n; i++)
			h = h << 1 | (x[i] >> b & 1);
	return h;
}

static tf_status compute_hilbert(const tf_sparse *it, slot *sl, tf_error *err)
{
	uint64_t x[16];
	const uint8_t *p;
	size_t n;

	if (it->ndims > 16)
		return tf_err(err, TF_E_UNSUPPORTED, "Hilbert order over %zu dimensions", it->ndims);
	if (sl->hcap < sl->buf.ncells) {
		uint64_t *v = realloc(sl->hilbert, sl->buf.ncells * sizeof(uint64_t));
		if (!v)
			return tf_err(err, TF_E_NOMEM, "out of memory");
		sl->hilbert = v;
		sl->hcap = sl->buf.ncells;
	}
	for (uint64_t c = 0; c < sl->buf.ncells; c++) {
		for (size_t d = 0; d < it->ndims; d++) {
			dim_value(sl, d, c, &p, &n);
			x[d] = tf_hilbert_coord(&it->schema->dims[d], p, n, it->hbits);
		}
		sl->hilbert[c] = tf_hilbert_index(x, it->ndims, it->hbits);
	}
	return TF_OK;
}

/* ---- slots and the heap ----------------------------------------------------------------------- */

/* The space tile of each loaded cell along each dimension that tile
 * order compares (those with an extent, not var-sized), 0 elsewhere. */
static tf_status compute_tiles(const tf_sparse *it, slot *sl, tf_error *err)
{
	size_t n = it->ndims;
	const uint8_t *p;
	size_t len;

	if (sl->buf.ncells > SIZE_MAX / sizeof(uint64_t) / (n ? n : 1))
		return tf_err(err, TF_E_NOMEM, "a tile of %llu cells", (unsigned long long)sl->buf.ncells);
	if (sl->tcap < sl->buf.ncells * n) {
		uint64_t *v = realloc(sl->tiles, sl->buf.ncells * n * sizeof(uint64_t));
		if (!v)
			return tf_err(err, TF_E_NOMEM, "out of memory");
		sl->tiles = v;
		sl->tcap = sl->buf.ncells * n;
	}
	for (size_t d = 0; d < n; d++) {
		const tf_field *fd = &it->schema->dims[d];
		bool skip = fd->cell_val_num == TF_CELL_VAR || !fd->has_extent;

		for (uint64_t c = 0; c < sl->buf.ncells; c++) {
			if (!skip)
				dim_value(sl, d, c, &p, &len);
			sl->tiles[c * n + d] = skip ? 0 : tile_index(fd, p);
		}
	}
	return TF_OK;
}

/* Load the tile of the slot's position (if not loaded). */
static tf_status slot_load(tf_sparse *it, slot *sl, tf_workspace *ws, tf_error *err)
{
	uint64_t tile = sl->pos / sl->cap;
	tf_status rc;

	if (sl->buf.loaded && sl->buf.tile == tile)
		return TF_OK;
	if ((rc = tf_cellbuf_load(&sl->buf, it->s, ws, sl->frag, tile, tf_frag_tile_cells(sl->f, tile), err)) != TF_OK)
		return rc;
	return it->hilbert ? compute_hilbert(it, sl, err) : compute_tiles(it, sl, err);
}

/* Move to the next cell a read at the snapshot's time sees (cells newer
 * than it, in fragments that straddle it, are skipped). */
static tf_status slot_settle(tf_sparse *it, slot *sl, tf_workspace *ws, tf_error *err)
{
	tf_status rc;

	for (; sl->pos < sl->total; sl->pos++) {
		if ((rc = slot_load(it, sl, ws, err)) != TF_OK)
			return rc;
		if (!sl->time_filter || cell_timestamp(it, sl, cell_of(sl)) <= tf_snapshot_time(it->s))
			return TF_OK;
	}
	sl->done = true;
	return TF_OK;
}

static bool heap_less(const tf_sparse *it, size_t a, size_t b)
{
	return cmp_slots(it, &it->slots[a], &it->slots[b]) < 0;
}

static void heap_push(tf_sparse *it, size_t s)
{
	size_t i = it->nheap++;

	it->heap[i] = s;
	while (i > 0 && heap_less(it, it->heap[i], it->heap[(i - 1) / 2])) {
		size_t p = (i - 1) / 2, t = it->heap[p];
		it->heap[p] = it->heap[i], it->heap[i] = t, i = p;
	}
}

static size_t heap_pop(tf_sparse *it)
{
	size_t top = it->heap[0], i = 0;

	it->heap[0] = it->heap[--it->nheap];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i, t;
		if (l < it->nheap && heap_less(it, it->heap[l], it->heap[m]))
			m = l;
		if (r < it->nheap && heap_less(it, it->heap[r], it->heap[m]))
			m = r;
		if (m == i)
			break;
		t = it->heap[m], it->heap[m] = it->heap[i], it->heap[i] = t, i = m;
	}
	return top;
}

tf_status tf_sparse_seek(tf_sparse *it, tf_workspace *ws, const uint64_t *state, tf_error *err)
{
	tf_status rc = TF_OK;

	it->nheap = 0;
	for (size_t i = 0; i < it->nslots && rc == TF_OK; i++) {
		slot *sl = &it->slots[i];

		sl->pos = state ? state[i] : 0;
		sl->done = false;
		if (sl->pos > sl->total)
			return tf_err(err, TF_E_INVAL, "cursor past the end of fragment %s", sl->f->name);
		if ((rc = slot_settle(it, sl, ws, err)) == TF_OK && !sl->done)
			heap_push(it, i);
	}
	return rc;
}

static tf_status slot_advance(tf_sparse *it, size_t s, tf_workspace *ws, tf_error *err)
{
	slot *sl = &it->slots[s];
	tf_status rc;

	sl->pos++;
	if ((rc = slot_settle(it, sl, ws, err)) == TF_OK && !sl->done)
		heap_push(it, s);
	return rc;
}

/* ---- deletes ------------------------------------------------------------------------------------ */

/* Whether a read at the snapshot's time no longer sees the slot's cell. */
static bool cell_deleted(tf_sparse *it, const slot *sl)
{
	uint64_t c = cell_of(sl), ts = cell_timestamp(it, sl, c);
	const uint8_t *p;
	size_t n;
	bool valid;

	if (sl->f->has_dm) {	/* dt.tdb: deleted at that time (UINT64_MAX: never) */
		tf_cellbuf_get(&sl->buf, it->f_dt, c, &p, &n, &valid);
		if (n == 8 && tf_le64(p) <= tf_snapshot_time(it->s))
			return true;
	}
	for (size_t k = 0; k < tf_snapshot_ndeletes(it->s); k++) {
		const tf_snap_delete *d = tf_snapshot_delete(it->s, k);

		if (d->t < sl->f->t1)
			continue;	/* older than the fragment */
		for (size_t j = 0; j < tf_cond_nfields(d->cond); j++) {
			tf_cond_value *v = &it->cvals[j];
			size_t i = it->cond_idx[k][j];

			memset(v, 0, sizeof(*v));
			v->absent = i == SIZE_MAX || tf_col_missing(sl->buf.f[i].col);
			if (v->absent)
				continue;
			tf_cellbuf_get(&sl->buf, i, c, &v->p, &v->n, &valid);
			v->null = !valid;
			v->type = it->spec[i].field->type;
			v->var = it->spec[i].field->cell_val_num == TF_CELL_VAR;
		}
		if (!tf_cond_keeps(d->cond, it->cvals) && (!sl->f->has_ts || d->t > sl->f->t2 || ts <= d->t))
			return true;
	}
	return false;
}

/* ---- the merge ----------------------------------------------------------------------------------- */

static tf_status copy_row(const tf_sparse *it, const slot *sl, tf_row *row, tf_error *err)
{
	uint64_t c = cell_of(sl);
	tf_status rc = TF_OK;

	row->bytes.len = 0;
	for (size_t i = 0; i < it->nout && rc == TF_OK; i++) {
		const uint8_t *p;
		size_t n;

		tf_cellbuf_get(&sl->buf, it->out_idx[i], c, &p, &n, &row->valid[i]);
		row->off[i] = row->bytes.len;
		row->len[i] = n;
		rc = tf_buf_append(&row->bytes, p ? p : (const uint8_t *)"", n, err);
	}
	return rc;
}

static tf_status copy_key(tf_sparse *it, const slot *sl, tf_error *err)
{
	const uint8_t *p;
	size_t n;
	tf_status rc = TF_OK;

	it->key.len = 0;
	for (size_t d = 0; d < it->ndims && rc == TF_OK; d++) {
		dim_value(sl, d, cell_of(sl), &p, &n);
		it->keyoff[d] = it->key.len, it->keylen[d] = n;
		rc = tf_buf_append(&it->key, p, n, err);
	}
	return rc;
}

static bool same_as_key(const tf_sparse *it, const slot *sl)
{
	const uint8_t *p;
	size_t n;

	for (size_t d = 0; d < it->ndims; d++) {
		const tf_field *fd = &it->schema->dims[d];
		const uint8_t *k = it->key.p + it->keyoff[d];

		dim_value(sl, d, cell_of(sl), &p, &n);
		if (fd->cell_val_num == TF_CELL_VAR ? cmp_var(p, n, k, it->keylen[d]) != 0
						     : cmp_fixed(fd->type, p, k) != 0)
			return false;
	}
	return true;
}

/* No duplicates: of the cells at one coordinate, the newest (greatest
 * timestamp, first in storage order among equals, else the later
 * fragment); deletes apply to it alone. */
static tf_status next_unique(tf_sparse *it, tf_workspace *ws, tf_row *row, bool *emitted, tf_error *err)
{
	size_t s = heap_pop(it), best_order;
	uint64_t best_ts;
	bool best_deleted;
	tf_status rc;

	best_ts = cell_timestamp(it, &it->slots[s], cell_of(&it->slots[s]));
	best_order = it->slots[s].order;
	best_deleted = cell_deleted(it, &it->slots[s]);
	if ((rc = copy_row(it, &it->slots[s], row, err)) != TF_OK || (rc = copy_key(it, &it->slots[s], err)) != TF_OK ||
	    (rc = slot_advance(it, s, ws, err)) != TF_OK)
		return rc;
	while (it->nheap && same_as_key(it, &it->slots[it->heap[0]])) {
		slot *sl = &it->slots[heap_pop(it)];
		uint64_t ts = cell_timestamp(it, sl, cell_of(sl));

		if (ts > best_ts || (ts == best_ts && sl->order > best_order)) {
			best_ts = ts, best_order = sl->order;
			best_deleted = cell_deleted(it, sl);
			if ((rc = copy_row(it, sl, row, err)) != TF_OK)
				return rc;
		}
		if ((rc = slot_advance(it, (size_t)(sl - it->slots), ws, err)) != TF_OK)
			return rc;
	}
	*emitted = !best_deleted;
	return TF_OK;
}

tf_status tf_sparse_next(tf_sparse *it, tf_workspace *ws, tf_row *row, bool *end, tf_error *err)
{
	bool emitted = false;
	tf_status rc = TF_OK;

	while (rc == TF_OK && !emitted && it->nheap) {
		if (!it->dups) {
			rc = next_unique(it, ws, row, &emitted, err);
			continue;
		}
		/* Duplicates: every cell, in merge order, unless deleted. */
		size_t s = heap_pop(it);
		emitted = !cell_deleted(it, &it->slots[s]);
		if (emitted)
			rc = copy_row(it, &it->slots[s], row, err);
		if (rc == TF_OK)
			rc = slot_advance(it, s, ws, err);
	}
	*end = !emitted;
	return rc;
}
