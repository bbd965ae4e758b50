/*
 * tf_merge.c - dense cell resolution and the sparse global-order merge
 * (see tf_merge.h for the TileDB rules followed).
 *
 * Memory of the sparse merge.  A global-order merge needs, for every
 * fragment it merges, that fragment's next cell; TileDB's reader keeps a
 * whole tile per fragment, and so did this merge: 300 fragments of tiles of
 * a million cells (capacity 1,000,000, ~134,000 cells of d, a, s each) held
 * 300 decoded tiles, 1.88 GB of RSS under a 64 MiB cache, and kept them when
 * idle.  Now:
 *
 *  - A fragment joins the merge only when the merge reaches the lower
 *    corner of its non-empty domain (a lower bound of its cells in global
 *    order, tile and cell orders alike; not for Hilbert order), and leaves
 *    it, freeing its window, when its last cell is merged.  Fragments
 *    written one after another (time series, appends: the usual case, and
 *    200,000 one-cell fragments) are merged a few at a time.
 *
 *  - A fragment in the merge holds a window of consecutive cells of one
 *    tile (tf_cellbuf), copied out of the decoded units into a cache entry
 *    of its own: the windows are charged to the budget like decoded bytes,
 *    pinned only while a request runs, evictable (and read again) between
 *    requests, so an idle merge holds nothing the cache cannot take back.
 *
 *  - The windows of one merge share WINDOW_SHARE of the budget (an eighth),
 *    split evenly between the fragments in the merge: with a 64 MiB cache,
 *    8 MiB, so 300 overlapping fragments get ~28 KiB each, ~600 cells of
 *    (d: 8, a: 4, s: 8 + ~10, validity 2, sort keys 16 bytes).  One window of
 *    every fragment in the merge must be held (one cell at least, whatever
 *    the budget): that floor is the merge's irreducible cost.  Why an
 *    eighth: the rest of the budget holds the decoded units the windows are
 *    copied from (one per field per fragment: 300 x 4 x 64 KiB = 75 MB in
 *    that example, more than the whole budget, so some are decoded again
 *    for later windows: ~12 times for d, the price of a bounded merge of
 *    300 interleaved fragments), the CSV blocks, and other readers.  Each
 *    merge is one reader's request, so a few run at once (one per FUSE
 *    thread at most): four take half of the budget.
 *
 *  - A window takes as many cells as fit its share, never more than the
 *    rest of its tile nor 64 KiB (a cache slot, as decoded units are: a
 *    merge of few fragments refills a 64 KiB window every ~1,600 cells, a
 *    few microseconds, and malloc'd windows of megabytes kept their high
 *    water beside the slabs); a fragment whose share is smaller than one
 *    cell gets one cell.  When fragments join, windows already loaded keep their size
 *    until used up; a new one gets no more than what the share leaves, so
 *    the total stays within the share (plus one cell per fragment).
 */
#include "views/tf_merge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/tf_array.h"
#include "util/tf_fanout.h"

#define TILE_BYTES_LIMIT ((size_t)4 << 30)
#define WINDOW_SHARE 8			/* the merge's windows: budget / 8 */
#define WINDOW_MIN ((size_t)64 << 10)	/* ...but this much in a tiny cache */
#define WINDOW_MAX ((size_t)64 << 10)	/* a window, at most: a cache slot */
#define CANCEL_EVERY 4096		/* cells looked at between checks */

#define ALIGN8(x) (((x) + 7) & ~(uint64_t)7)

/* ---- tiles --------------------------------------------------------------------------------- */

uint64_t tf_frag_tile_cells(const tf_snap_frag *f, uint64_t t)
{
	if (f->dense)
		return tf_schema_dense_tile_cells(f->schema);
	return t + 1 < f->ntiles || f->last_cells == 0 ? f->schema->capacity : f->last_cells;
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

/* ---- windows --------------------------------------------------------------------------------- */

tf_status tf_cellbuf_init(tf_cellbuf *b, tf_cache *cache, const tf_fieldspec *spec, size_t nfields,
			  size_t extra_size, tf_error *err)
{
	memset(b, 0, sizeof(*b));
	b->cache = cache;
	b->spec = spec;
	b->nfields = nfields;
	b->extra_size = extra_size;
	b->owner = tf_cache_owner(cache);
	if (!(b->f = calloc(nfields + 1, sizeof(*b->f))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	return TF_OK;
}

/* Let the window go: done, it is recycled first (no one asks for it again). */
static void drop_window(tf_cellbuf *b)
{
	if (b->e)
		tf_cache_release(b->cache, b->e, true);
	b->e = NULL;
	b->loaded = false;
}

void tf_cellbuf_free(tf_cellbuf *b)
{
	if (b->cache)
		drop_window(b);
	free(b->f);
	free(b->scratch);
	memset(b, 0, sizeof(*b));
}

static void put_cols(tf_snapshot *s, const tf_col **cols, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tf_snapshot_col_put(s, cols[i]);
	free(cols);
}

/* The columns of every field of fragment frag, held (NULL on failure). */
static const tf_col **get_cols(tf_cellbuf *b, tf_snapshot *s, size_t frag, tf_error *err)
{
	const tf_col **cols = calloc(b->nfields + 1, sizeof(*cols));
	tf_status rc = cols ? TF_OK : tf_err(err, TF_E_NOMEM, "out of memory");

	for (size_t i = 0; i < b->nfields && rc == TF_OK; i++)
		if ((rc = tf_snapshot_col(s, frag, b->spec[i].kind, b->spec[i].name, &cols[i], err)) != TF_OK)
			put_cols(s, cols, i), cols = NULL;
	if (rc == TF_OK)
		for (size_t i = 0; i < b->nfields; i++) {
			tf_cellbuf_field *bf = &b->f[i];
			bf->missing = tf_col_missing(cols[i]);
			bf->var = tf_col_var(cols[i]);
			bf->nullable = tf_col_nullable(cols[i]);
			bf->cell_size = tf_col_cell_size(cols[i]);
		}
	return cols;
}

/* Room in the scratch for the offsets of n cells of every var field. */
static tf_status scratch_for(tf_cellbuf *b, uint64_t n, tf_error *err)
{
	size_t need;
	uint64_t *v;

	if (n >= SIZE_MAX / 8 / (b->nfields + 1) - 1)
		return tf_err(err, TF_E_NOMEM, "a window of %llu cells", (unsigned long long)n);
	need = (size_t)(n + 1) * (b->nfields + 1);
	if (need > b->scap) {
		if (!(v = realloc(b->scratch, need * sizeof(*v))))
			return tf_err(err, TF_E_NOMEM, "out of memory");
		b->scratch = v;
		b->scap = need;
	}
	return TF_OK;
}

/* The scratch only lives through a load: 300 windows kept 10 MB of it. */
static void drop_scratch(tf_cellbuf *b)
{
	free(b->scratch);
	b->scratch = NULL;
	b->scap = 0;
}

static uint64_t *starts_of(tf_cellbuf *b, size_t i, uint64_t n)
{
	return b->scratch + (size_t)(n + 1) * i;
}

/* Bytes of a window of n cells, given each var field's bytes (vlen). */
static uint64_t window_len(const tf_cellbuf *b, uint64_t n)
{
	uint64_t len = 0;

	for (size_t i = 0; i < b->nfields; i++) {
		const tf_cellbuf_field *bf = &b->f[i];
		if (bf->missing)
			continue;
		len += bf->nullable ? ALIGN8(n) : 0;	/* validity bytes only where stored */
		len += bf->var ? (n + 1) * 8 + ALIGN8(bf->vlen) : ALIGN8(n * bf->cell_size);
	}
	return len + ALIGN8(n * b->extra_size);
}

/* Where each part of a window of n cells lies. */
static void lay_out(tf_cellbuf *b, uint64_t n)
{
	size_t at = 0;

	for (size_t i = 0; i < b->nfields; i++) {
		tf_cellbuf_field *bf = &b->f[i];
		if (bf->missing)
			continue;
		bf->valid_at = at;
		at += bf->nullable ? (size_t)ALIGN8(n) : 0;
		if (bf->var) {
			bf->starts_at = at;
			at += (size_t)(n + 1) * 8;
		}
		bf->data_at = at;
		at += (size_t)(bf->var ? ALIGN8(bf->vlen) : ALIGN8(n * bf->cell_size));
	}
}

/* Pointers into the pinned window. */
static void point(tf_cellbuf *b)
{
	const uint8_t *base = tf_cache_data(b->e);

	for (size_t i = 0; i < b->nfields; i++) {
		tf_cellbuf_field *bf = &b->f[i];
		if (bf->missing)
			continue;
		bf->valid = bf->nullable ? base + bf->valid_at : NULL;
		bf->data = base + bf->data_at;
		bf->starts = bf->var ? (const uint64_t *)(const void *)(base + bf->starts_at) : NULL;
	}
	b->extra = (uint8_t *)(uintptr_t)base + (b->len - ALIGN8(b->ncells * b->extra_size));
}

/* The offsets of n cells of every var field (into the scratch) and their
 * bytes (vlen); vbase[i]: where field i's bytes start in its tile. */
static tf_status read_starts(tf_cellbuf *b, const tf_col **cols, tf_workspace *ws, uint64_t tile, uint64_t first,
			     uint64_t n, uint64_t *vbase, tf_error *err)
{
	tf_status rc = scratch_for(b, n, err);

	for (size_t i = 0; i < b->nfields && rc == TF_OK; i++)
		if (!b->f[i].missing && b->f[i].var)
			rc = tf_col_var_starts(cols[i], ws, tile, first, n, starts_of(b, i, n), &vbase[i], true, err);
	return rc;
}

/* The most cells (1..n) whose window fits max_bytes, from the offsets read. */
static uint64_t fitting(tf_cellbuf *b, uint64_t n, size_t max_bytes)
{
	uint64_t lo = 1, hi = n;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;
		for (size_t i = 0; i < b->nfields; i++)
			if (!b->f[i].missing && b->f[i].var)
				b->f[i].vlen = starts_of(b, i, n)[mid];
		if (window_len(b, mid) <= max_bytes)
			lo = mid;
		else
			hi = mid - 1;
	}
	for (size_t i = 0; i < b->nfields; i++)
		if (!b->f[i].missing && b->f[i].var)
			b->f[i].vlen = starts_of(b, i, n)[lo];
	return lo;
}

/* Fill the claimed window's buffer dst: n cells from `first`, the var
 * offsets read into the scratch for nread cells. */
static tf_status fill(tf_cellbuf *b, const tf_col **cols, tf_workspace *ws, uint8_t *dst, uint64_t nread,
		      const uint64_t *vbase, tf_error *err)
{
	uint64_t n = b->ncells;
	tf_status rc = TF_OK;

	for (size_t i = 0; i < b->nfields && rc == TF_OK; i++) {
		const tf_cellbuf_field *bf = &b->f[i];
		if (bf->missing)
			continue;
		if (bf->nullable && (rc = tf_col_validity(cols[i], ws, b->tile, b->first, n, dst + bf->valid_at, true,
							   err)) != TF_OK)
			break;
		if (!bf->var) {
			rc = tf_col_fixed(cols[i], ws, b->tile, b->first, n, dst + bf->data_at, true, err);
			continue;
		}
		memcpy(dst + bf->starts_at, starts_of(b, i, nread), (size_t)(n + 1) * 8);
		rc = tf_col_var_bytes(cols[i], ws, b->tile, vbase[i], bf->vlen, dst + bf->data_at, true, err);
	}
	return rc;
}

/* Claim the window's entry and fill it; it stays pinned. */
static tf_status claim_and_fill(tf_cellbuf *b, const tf_col **cols, tf_workspace *ws, uint64_t nread,
				const uint64_t *vbase, tf_error *err)
{
	tf_cache_state st;
	uint8_t *dst;
	tf_status rc = tf_cache_acquire(b->cache, b->owner, b->seq, b->len, &b->e, &st, err);

	if (rc != TF_OK)
		return rc;
	if (st != TF_CACHE_CLAIMED) {	/* another holder of the key: never, keys are ours */
		rc = tf_cache_wait(b->cache, b->e, err);
		if (rc != TF_OK)
			drop_window(b);
		return rc;
	}
	if (!(dst = tf_cache_fill_buffer(b->cache, b->e)))
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	else
		rc = fill(b, cols, ws, dst, nread, vbase, err);
	tf_cache_publish(b->cache, b->e, rc, err);
	if (rc != TF_OK) {
		tf_cache_release(b->cache, b->e, false);
		b->e = NULL;
		b->loaded = false;
	}
	return rc;
}

tf_status tf_cellbuf_load(tf_cellbuf *b, tf_snapshot *s, tf_workspace *ws, size_t frag, uint64_t tile,
			  uint64_t first, uint64_t max_cells, size_t max_bytes, tf_error *err)
{
	const tf_col **cols;
	uint64_t n, per = b->extra_size, len, *vbase;
	tf_status rc;

	drop_window(b);
	if (!(vbase = calloc(b->nfields + 1, sizeof(*vbase))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if (!(cols = get_cols(b, s, frag, err))) {
		free(vbase);
		return err ? err->code : TF_E_INVAL;
	}
	for (size_t i = 0; i < b->nfields; i++)
		per += b->f[i].missing ? 0 : 1 + (b->f[i].var ? 8 : b->f[i].cell_size);
	/* Fixed parts first: at most max_bytes of them; then as many cells
	 * as fit with their var bytes, read from their offsets. */
	n = max_bytes / (per ? per : 1);
	n = n < 1 ? 1 : n < max_cells ? n : max_cells;
	if (n > TILE_BYTES_LIMIT / 8)
		n = TILE_BYTES_LIMIT / 8;
	for (size_t i = 0; i < b->nfields; i++)
		b->f[i].vlen = 0;
	/* The cells the schema or footer claims must be in the tile, as its
	 * stored chunk headers say, before anything is sized by their number. */
	rc = TF_OK;
	for (size_t i = 0; i < b->nfields && rc == TF_OK; i++)
		rc = tf_col_check_cells(cols[i], tile, first, n, err);
	if (rc == TF_OK && (rc = read_starts(b, cols, ws, tile, first, n, vbase, err)) == TF_OK) {
		b->frag = frag, b->tile = tile, b->first = first;
		b->ncells = fitting(b, n, max_bytes);
		len = window_len(b, b->ncells);
		if (len > UINT32_MAX || len + 4096 > tf_cache_budget(b->cache))
			rc = tf_err(err, TF_E_NOMEM, "fragment %s, tile %llu: cell %llu takes %llu bytes, more than "
				    "the cache holds (raise cache_size)", tf_snapshot_frag(s, frag)->name,
				    (unsigned long long)tile, (unsigned long long)first, (unsigned long long)len);
	}
	if (rc == TF_OK) {
		b->len = (uint32_t)len;
		b->seq++;
		lay_out(b, b->ncells);
		if ((rc = claim_and_fill(b, cols, ws, n, vbase, err)) == TF_OK) {
			b->loaded = true;
			point(b);
		}
	}
	put_cols(s, cols, b->nfields);
	free(vbase);
	drop_scratch(b);
	return rc;
}

bool tf_cellbuf_has(const tf_cellbuf *b, size_t frag, uint64_t tile, uint64_t cell)
{
	return b->loaded && b->frag == frag && b->tile == tile && cell >= b->first && cell - b->first < b->ncells;
}

void tf_cellbuf_park(tf_cellbuf *b)
{
	if (b->e)
		tf_cache_release(b->cache, b->e, false);
	b->e = NULL;
}

/* The same cells again into the claimed entry, to the byte: each var
 * field must have the bytes it had. */
static tf_status refill(tf_cellbuf *b, tf_snapshot *s, tf_workspace *ws, tf_error *err)
{
	uint64_t *vbase = calloc(2 * b->nfields + 1, sizeof(*vbase)), *had = vbase + b->nfields;
	const tf_col **cols = vbase ? get_cols(b, s, b->frag, err) : NULL;
	uint8_t *dst;
	tf_status rc = cols ? TF_OK : vbase ? (err ? err->code : TF_E_INVAL) : tf_err(err, TF_E_NOMEM, "out of memory");

	for (size_t i = 0; rc == TF_OK && i < b->nfields; i++)
		had[i] = b->f[i].vlen;
	if (rc == TF_OK)
		rc = read_starts(b, cols, ws, b->tile, b->first, b->ncells, vbase, err);
	for (size_t i = 0; rc == TF_OK && i < b->nfields; i++)
		if (!b->f[i].missing && b->f[i].var && starts_of(b, i, b->ncells)[b->ncells] != had[i])
			rc = tf_err(err, TF_E_STALE, "fragment %s, tile %llu: cells read again differ",
				    tf_snapshot_frag(s, b->frag)->name, (unsigned long long)b->tile);
	if (rc == TF_OK && !(dst = tf_cache_fill_buffer(b->cache, b->e)))
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	else if (rc == TF_OK)
		rc = fill(b, cols, ws, dst, b->ncells, vbase, err);
	if (cols)
		put_cols(s, cols, b->nfields);
	free(vbase);
	drop_scratch(b);
	return rc;
}

bool tf_cellbuf_retake(tf_cellbuf *b)
{
	if (!b->loaded || b->e)
		return b->e != NULL;
	if ((b->e = tf_cache_lookup(b->cache, b->owner, b->seq)))
		point(b);
	return b->e != NULL;
}

tf_status tf_cellbuf_resume(tf_cellbuf *b, tf_snapshot *s, tf_workspace *ws, bool *reread, tf_error *err)
{
	tf_cache_state st;
	tf_status rc;

	*reread = false;
	if (!b->loaded || b->e || tf_cellbuf_retake(b))
		return TF_OK;
	if ((rc = tf_cache_acquire(b->cache, b->owner, b->seq, b->len, &b->e, &st, err)) != TF_OK) {
		b->e = NULL;
		b->loaded = false;
		return rc;
	}
	if (st != TF_CACHE_CLAIMED) {	/* still there */
		if ((rc = tf_cache_wait(b->cache, b->e, err)) == TF_OK)
			point(b);
		else
			drop_window(b);
		return rc;
	}
	*reread = true;	/* evicted meanwhile */
	rc = refill(b, s, ws, err);
	tf_cache_publish(b->cache, b->e, rc, err);
	if (rc == TF_OK) {
		point(b);
	} else {
		tf_cache_release(b->cache, b->e, false);
		b->e = NULL;
		b->loaded = false;
	}
	return rc;
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
	c -= b->first;
	*valid = !bf->nullable || bf->valid[c] != 0;
	if (bf->var) {
		*p = bf->data + bf->starts[c];
		*n = (size_t)(bf->starts[c + 1] - bf->starts[c]);
	} else {
		*n = bf->cell_size;
		*p = bf->data + (size_t)c * *n;
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

/* ---- sparse ------------------------------------------------------------------------------------ */

/* A fragment of the merge.  Its order is its index in the slots (read
 * order: later is newer). */
typedef struct slot {
	uint64_t total, pos;	/* its cells, and the next one to merge */
	tf_cellbuf *buf;	/* its window, while in the merge (active); its
				 * base: the position of its tile's first cell */
	uint32_t frag;		/* snapshot index */
	bool done, active, time_filter;
	bool may_delete;	/* dt.tdb, or a delete condition as new as it */
	uint64_t warmed;	/* 1 + the last tile warm_ahead read for it (0: none) */
} slot;

struct tf_sparse {
	tf_snapshot *s;
	tf_cache *cache;
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
	uint32_t *heap;		/* active slots, by their next cell */
	uint32_t *pend;		/* waiting slots, by the corner of their domain */
	uint32_t *batch;	/* slots joining at once */
	size_t nheap, npend;
	size_t nactive;		/* slots with a window */
	size_t share, held;	/* the windows' share of the budget; bytes held */
	size_t charged;		/* the slots and heaps, charged to the budget */
	size_t extra;		/* per window cell: its Hilbert value or space tiles */
	bool dups, hilbert;
	bool fast;		/* coordinates compared by their sort keys alone */
	int hbits;
	tf_buf key;		/* the current group's coordinates */
	size_t *keyoff, *keylen;
	/* a lower corner parsed, and the heap's top's (ndims each) */
	const uint8_t **cp;
	size_t *cn;
	uint64_t *ct;
	const tf_cancel *cancel;
	uint64_t ticks;
	/* The slot at the heap's top whose run was given (tf_sparse_next_run):
	 * its position moved past the run, its place in the heap not yet
	 * (SIZE_MAX: none); given: the run's cells. */
	size_t lazy;
	uint64_t given;
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

	if (nv >= UINT32_MAX || tf_snapshot_nfrags(it->s) >= UINT32_MAX)
		return tf_err(err, TF_E_UNSUPPORTED, "%zu fragments", tf_snapshot_nfrags(it->s));
	if (!(it->slots = calloc(nv + 1, sizeof(*it->slots))) || !(it->heap = calloc(nv + 1, sizeof(uint32_t))) ||
	    !(it->pend = calloc(nv + 1, sizeof(uint32_t))) || !(it->batch = calloc(nv + 1, sizeof(uint32_t))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (size_t k = 0; k < nv && rc == TF_OK; k++) {
		slot *sl = &it->slots[it->nslots];
		size_t frag = tf_snapshot_visible(it->s, k);
		const tf_snap_frag *f = tf_snapshot_frag(it->s, frag);

		if ((rc = tf_snapshot_load(it->s, frag, err)) != TF_OK)
			return rc;
		if (f->dense)
			return tf_err(err, TF_E_UNSUPPORTED, "fragment %s of a sparse array is dense", f->name);
		/* Its coordinates are compared as the newest schema's dimensions. */
		if ((rc = same_tiling(it->schema, f, err)) != TF_OK)
			return rc;
		sl->frag = (uint32_t)frag;
		if ((rc = tf_frag_sparse_cells(f, &sl->total, err)) != TF_OK)
			return rc;
		sl->time_filter = f->has_ts && f->t2 > tf_snapshot_time(it->s);
		sl->may_delete = f->has_dm;
		for (size_t d = 0; d < tf_snapshot_ndeletes(it->s); d++)
			sl->may_delete |= tf_snapshot_delete(it->s, d)->t >= f->t1;
		it->nslots++;
	}
	/* Its cursors are the merge's cost beside the windows: charged. */
	it->charged = (nv + 1) * (sizeof(slot) + 3 * sizeof(uint32_t));
	tf_cache_charge(it->cache, (ptrdiff_t)it->charged);
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

tf_status tf_sparse_open(tf_snapshot *s, const tf_fieldspec *out, size_t nout, const tf_cancel *cancel,
			 tf_sparse **itp, tf_error *err)
{
	const tf_schema *sc = tf_snapshot_schema(s);
	tf_sparse *it;
	tf_status rc;

	if (sc->dense)
		return tf_err(err, TF_E_UNSUPPORTED, "not a sparse array");
	if ((rc = tf_snapshot_load_visible(s, cancel, err)) != TF_OK)
		return rc;
	if (!(it = calloc(1, sizeof(*it))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	it->s = s, it->schema = sc, it->ndims = sc->ndims;
	it->lazy = SIZE_MAX;
	it->cache = tf_snapshot_cache(s);
	it->dups = sc->allows_dups;
	it->hilbert = sc->cell_order == 4;	/* HILBERT */
	it->hbits = (int)(63 / (sc->ndims ? sc->ndims : 1));
	it->fast = !it->hilbert && sc->ndims <= 64;
	for (size_t d = 0; d < sc->ndims; d++)
		it->fast &= sc->dims[d].cell_val_num != TF_CELL_VAR && !tf_datatype_is_real(sc->dims[d].type);
	it->extra = it->hilbert ? 8 : (it->fast ? 16 : 8) * it->ndims;
	it->share = tf_cache_budget(it->cache) / WINDOW_SHARE;
	if (it->share < WINDOW_MIN)
		it->share = WINDOW_MIN;
	tf_buf_init(&it->key, TILE_BYTES_LIMIT);
	if ((rc = build_specs(it, out, nout, err)) == TF_OK && (rc = add_slots(it, err)) == TF_OK &&
	    (!(it->keyoff = calloc(it->ndims + 1, sizeof(size_t))) || !(it->keylen = calloc(it->ndims + 1, sizeof(size_t))) ||
	     !(it->cp = calloc(it->ndims + 1, sizeof(*it->cp))) || !(it->cn = calloc(it->ndims + 1, sizeof(size_t))) ||
	     !(it->ct = calloc(it->ndims + 1, sizeof(uint64_t)))))
		rc = tf_err(err, TF_E_NOMEM, "out of memory");
	if (rc != TF_OK) {
		tf_sparse_free(it);
		return rc;
	}
	*itp = it;
	return TF_OK;
}

static void deactivate(tf_sparse *it, slot *sl)
{
	if (!sl->active)
		return;
	it->held -= sl->buf->loaded ? sl->buf->len : 0;
	tf_cellbuf_free(sl->buf);
	free(sl->buf);
	sl->buf = NULL;
	sl->active = false;
	it->nactive--;
}

void tf_sparse_free(tf_sparse *it)
{
	if (!it)
		return;
	for (size_t i = 0; i < it->nslots; i++)
		deactivate(it, &it->slots[i]);
	if (it->charged)
		tf_cache_charge(it->cache, -(ptrdiff_t)it->charged);
	for (size_t k = 0; it->cond_idx && k < tf_snapshot_ndeletes(it->s); k++)
		free(it->cond_idx[k]);
	free(it->cond_idx);
	free(it->cvals);
	free(it->slots);
	free(it->heap);
	free(it->pend);
	free(it->batch);
	free(it->spec);
	free(it->out_idx);
	free(it->keyoff);
	free(it->keylen);
	free((void *)it->cp);
	free(it->cn);
	free(it->ct);
	tf_buf_free(&it->key);
	free(it);
}

size_t tf_sparse_state_len(const tf_sparse *it) { return it->nslots; }
size_t tf_sparse_held(const tf_sparse *it) { return it->held; }

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

static const tf_snap_frag *frag_of(const tf_sparse *it, const slot *sl)
{
	return tf_snapshot_frag(it->s, sl->frag);
}

static void dim_value(const slot *sl, size_t d, uint64_t c, const uint8_t **p, size_t *n)
{
	bool valid;

	tf_cellbuf_get(sl->buf, d, c, p, n, &valid);
}

/* The slot's next cell: its number in its tile. */
static uint64_t cell_of(const slot *sl)
{
	return sl->pos - sl->buf->base;
}

/* The sort keys of cell c of the slot's window: its Hilbert value, or its
 * space tile along each dimension in the order tile order compares them
 * (0 where it skips one), then (it->fast) its coordinates in the order
 * cell order compares them, each as a uint64 of the same order. */
static inline const uint64_t *keys_of(const tf_sparse *it, const slot *sl, uint64_t c)
{
	return (const uint64_t *)(const void *)sl->buf->extra + (c - sl->buf->first) * (it->extra / 8);
}

/* The coordinates compared one by one, after equal sort keys. */
static int cmp_values(const tf_sparse *it, const slot *a, uint64_t ca, const slot *b, uint64_t cb)
{
	bool crow = it->schema->cell_order != 1 || it->hilbert;
	size_t n = it->ndims, na, nb;
	const uint8_t *pa, *pb;
	int r;

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

/* Global order of cell ca of slot a's window and cell cb of b's
 * (global_order_compare, HilbertCmp): <0 if a's comes first.  The sort
 * keys first: space tiles, or the Hilbert value; they are the whole
 * order where it->fast (the merge's every step compares cells). */
static inline int cmp_coords_at(const tf_sparse *it, const slot *a, uint64_t ca, const slot *b, uint64_t cb)
{
	const uint64_t *ka = keys_of(it, a, ca), *kb = keys_of(it, b, cb);
	size_t nk = it->hilbert ? 1 : it->fast ? 2 * it->ndims : it->ndims;

	for (size_t k = 0; k < nk; k++)
		if (ka[k] != kb[k])
			return ka[k] < kb[k] ? -1 : 1;
	return it->fast ? 0 : cmp_values(it, a, ca, b, cb);
}

/* The same of the slots' next cells. */
static int cmp_coords(const tf_sparse *it, const slot *a, const slot *b)
{
	return cmp_coords_at(it, a, cell_of(a), b, cell_of(b));
}

static uint64_t cell_timestamp(const tf_sparse *it, const slot *sl, uint64_t c)
{
	const tf_snap_frag *f = frag_of(it, sl);
	const uint8_t *p;
	size_t n;
	bool valid;

	if (!f->has_ts)
		return f->t1;	/* timestamp_range().first */
	tf_cellbuf_get(sl->buf, it->f_ts, c, &p, &n, &valid);
	return n == 8 ? tf_le64(p) : f->t1;
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
	return a > b ? -1 : a < b ? 1 : 0;	/* slots are in read order */
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

/* A fixed-size coordinate that is not a real (it->fast) as a uint64 of
 * the same order as cmp_fixed's: signed ones offset by 2^63. */
static uint64_t ordered_value(const tf_field *fd, const slot *sl, size_t d, uint64_t c)
{
	unsigned size = tf_datatype_size(fd->type);
	const uint8_t *p;
	size_t n;
	uint64_t u;

	dim_value(sl, d, c, &p, &n);
	u = tf_le_n(p, size);
	if (tf_datatype_is_signed(fd->type) || tf_datatype_is_datetime(fd->type))
		u = (uint64_t)as_signed(u, size) ^ ((uint64_t)1 << 63);
	return u;
}

/* compute_keys where it->fast, a dimension at a time: each value read
 * from the window as it lies, its tile's quotient taken only when it
 * leaves the last value's tile (cells come sorted: a window of 1,600
 * cells spans a few tiles). */
static void fast_keys(const tf_sparse *it, slot *sl)
{
	const tf_cellbuf *b = sl->buf;
	bool trow = it->schema->tile_order != 1, crow = it->schema->cell_order != 1;
	size_t nd = it->ndims, nk = 2 * nd;
	uint64_t *keys = (uint64_t *)(void *)b->extra;

	for (size_t d = 0; d < nd; d++) {
		const tf_field *fd = &it->schema->dims[d];
		unsigned size = tf_datatype_size(fd->type);
		uint64_t mask = size == 8 ? UINT64_MAX : (((uint64_t)1 << (8 * size)) - 1);
		uint64_t lo = tf_le_n(fd->domain, size) & mask, ext = tf_le_n(fd->extent, size) & mask;
		uint64_t flip = tf_datatype_is_signed(fd->type) || tf_datatype_is_datetime(fd->type) ? (uint64_t)1 << 63 : 0;
		uint64_t *tk = keys + (trow ? d : nd - 1 - d), *vk = keys + nd + (crow ? d : nd - 1 - d);
		uint64_t qlo = 0, t = 0;	/* the last tile: offsets [qlo, qlo + ext) */
		const uint8_t *p = b->f[d].data;
		bool known = false;

		ext = !fd->has_extent ? 0 : ext ? ext : 1;	/* tile_index's divisor */
		for (uint64_t i = 0; i < b->ncells; i++, p += size, tk += nk, vk += nk) {
			uint64_t u = tf_le_n(p, size), q = (u - lo) & mask;

			*vk = flip ? (uint64_t)as_signed(u, size) ^ flip : u;
			if (!ext) {
				*tk = 0;
				continue;
			}
			if (!known || q - qlo >= ext) {	/* another tile (tile_index's quotient) */
				t = q / ext;
				qlo = t * ext;
				known = true;
			}
			*tk = t;
		}
	}
}

/* The sort keys of every cell of the slot's window (its extra bytes):
 * Hilbert values, or each dimension's space tile where tile order
 * compares it (those with an extent, not var-sized), 0 elsewhere. */
static tf_status compute_keys(const tf_sparse *it, slot *sl, tf_error *err)
{
	const tf_cellbuf *b = sl->buf;
	bool trow = it->schema->tile_order != 1, crow = it->schema->cell_order != 1;
	uint64_t *k = (uint64_t *)(void *)b->extra, x[16];
	size_t nd = it->ndims, n;
	const uint8_t *p;

	if (it->hilbert && nd > 16)
		return tf_err(err, TF_E_UNSUPPORTED, "Hilbert order over %zu dimensions", nd);
	if (it->fast)
		return fast_keys(it, sl), TF_OK;
	for (uint64_t c = b->first; c < b->first + b->ncells; c++) {
		for (size_t j = 0; j < nd; j++) {
			size_t d = it->hilbert || trow ? j : nd - 1 - j;
			const tf_field *fd = &it->schema->dims[d];
			bool skip = !it->hilbert && (fd->cell_val_num == TF_CELL_VAR || !fd->has_extent);

			if (!skip)
				dim_value(sl, d, c, &p, &n);
			if (it->hilbert)
				x[d] = tf_hilbert_coord(fd, p, n, it->hbits);
			else
				*k++ = skip ? 0 : tile_index(fd, p);
		}
		if (it->hilbert)
			*k++ = tf_hilbert_index(x, nd, it->hbits);
		for (size_t j = 0; it->fast && j < nd; j++)
			*k++ = ordered_value(&it->schema->dims[crow ? j : nd - 1 - j], sl, crow ? j : nd - 1 - j, c);
	}
	return TF_OK;
}

/* ---- lower corners ----------------------------------------------------------------------------- */

/* A fragment's corner (tf_snap_frag.corner) parsed into it->cp, cn, ct. */
static void parse_corner(tf_sparse *it, const uint8_t *corner)
{
	size_t at = 0;

	for (size_t d = 0; d < it->ndims; d++) {
		const tf_field *fd = &it->schema->dims[d];
		uint32_t n = tf_le32(corner + at);

		it->cp[d] = corner + at + 4, it->cn[d] = n;
		it->ct[d] = fd->cell_val_num == TF_CELL_VAR || !fd->has_extent ? 0 : tile_index(fd, it->cp[d]);
		at += 4 + (((size_t)n + 3) & ~(size_t)3);
	}
}

/* Global order of a parsed corner and coordinates given by value and
 * space tile per dimension (q, qn, qt): <0 if the corner comes first. */
static int cmp_corner(const tf_sparse *it, const uint8_t *const *q, const size_t *qn, const uint64_t *qt)
{
	bool trow = it->schema->tile_order != 1, crow = it->schema->cell_order != 1;
	size_t n = it->ndims;
	int r;

	for (size_t k = 0; k < n; k++) {
		size_t d = trow ? k : n - 1 - k;
		if (it->ct[d] != qt[d])
			return it->ct[d] < qt[d] ? -1 : 1;
	}
	for (size_t k = 0; k < n; k++) {
		size_t d = crow ? k : n - 1 - k;
		const tf_field *fd = &it->schema->dims[d];

		r = fd->cell_val_num == TF_CELL_VAR ? cmp_var(it->cp[d], it->cn[d], q[d], qn[d])
						    : cmp_fixed(fd->type, it->cp[d], q[d]);
		if (r)
			return r;
	}
	return 0;
}

/* Whether waiting slot w's corner comes at or before cell c of active
 * slot a's window: then w may hold a cell that a's does not precede, and
 * must join before a's cell is merged. */
static bool corner_reached_at(tf_sparse *it, size_t w, const slot *a, uint64_t c)
{
	const uint8_t *q[64];
	size_t qn[64], n = it->ndims;
	uint64_t qt[64];
	const uint64_t *k = keys_of(it, a, c);
	bool trow = it->schema->tile_order != 1;

	if (n > 64)
		return true;
	for (size_t d = 0; d < n; d++) {
		dim_value(a, d, c, &q[d], &qn[d]);
		qt[d] = k[trow ? d : n - 1 - d];	/* keys_of: in tile order */
	}
	parse_corner(it, tf_snapshot_frag(it->s, it->slots[w].frag)->corner);
	return cmp_corner(it, q, qn, qt) <= 0;
}

static bool corner_reached(tf_sparse *it, size_t w, const slot *a)
{
	return corner_reached_at(it, w, a, cell_of(a));
}

/* Order of two waiting slots: by corner, then read order. */
static bool pend_less(tf_sparse *it, size_t a, size_t b)
{
	const uint8_t *q[64];
	size_t qn[64];
	uint64_t qt[64];
	int r;

	if (it->ndims > 64)
		return a < b;
	parse_corner(it, tf_snapshot_frag(it->s, it->slots[b].frag)->corner);
	for (size_t d = 0; d < it->ndims; d++)
		q[d] = it->cp[d], qn[d] = it->cn[d], qt[d] = it->ct[d];
	parse_corner(it, tf_snapshot_frag(it->s, it->slots[a].frag)->corner);
	r = cmp_corner(it, q, qn, qt);
	return r ? r < 0 : a < b;
}

/* ---- the heaps --------------------------------------------------------------------------------- */

static bool heap_less(tf_sparse *it, size_t a, size_t b)
{
	return cmp_slots(it, &it->slots[a], &it->slots[b]) < 0;
}

typedef bool (*less_fn)(tf_sparse *it, size_t a, size_t b);

static void push(tf_sparse *it, uint32_t *h, size_t *n, size_t s, less_fn less)
{
	size_t i = (*n)++;

	h[i] = (uint32_t)s;
	while (i > 0 && less(it, h[i], h[(i - 1) / 2])) {
		size_t p = (i - 1) / 2;
		uint32_t t = h[p];
		h[p] = h[i], h[i] = t, i = p;
	}
}

/* Entry i moved down to its place. */
static void sift_down(tf_sparse *it, uint32_t *h, size_t n, size_t i, less_fn less)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		uint32_t t;
		if (l < n && less(it, h[l], h[m]))
			m = l;
		if (r < n && less(it, h[r], h[m]))
			m = r;
		if (m == i)
			break;
		t = h[m], h[m] = h[i], h[i] = t, i = m;
	}
}

static size_t pop(tf_sparse *it, uint32_t *h, size_t *n, less_fn less)
{
	size_t top = h[0];

	h[0] = h[--*n];
	sift_down(it, h, *n, 0, less);
	return top;
}

static void heap_push(tf_sparse *it, size_t s) { push(it, it->heap, &it->nheap, s, heap_less); }
static size_t heap_pop(tf_sparse *it) { return pop(it, it->heap, &it->nheap, heap_less); }

/* ---- windows of the slots ---------------------------------------------------------------------- */

static tf_status check_cancel(tf_sparse *it, tf_error *err)
{
	if (++it->ticks % CANCEL_EVERY == 0 && tf_cancelled(it->cancel))
		return tf_err(err, TF_E_INTR, "interrupted");
	return TF_OK;
}

/* Bytes the slot's next window may take: an even share of the merge's,
 * no more than what the other windows leave (one cell in any case). */
static size_t allowance(const tf_sparse *it, const slot *sl)
{
	size_t mine = sl->buf->loaded ? sl->buf->len : 0, others = it->held - mine;
	size_t even = it->share / (it->nactive ? it->nactive : 1), left = it->share > others ? it->share - others : 0;

	even = even < WINDOW_MAX ? even : WINDOW_MAX;
	return even < left ? even : left;
}

/* A window from the slot's position, of `bytes` at most. */
static tf_status slot_fetch(tf_sparse *it, slot *sl, size_t bytes, tf_workspace *ws, tf_error *err)
{
	uint64_t cap = frag_of(it, sl)->schema->capacity, tile = sl->pos / cap, cell = sl->pos % cap;
	uint64_t tc = tf_frag_tile_cells(frag_of(it, sl), tile);
	size_t had = sl->buf->loaded ? sl->buf->len : 0;
	tf_status rc;

	if (cell >= tc)
		return tf_err(err, TF_E_CORRUPT, "fragment %s: cell %llu of a tile of %llu", frag_of(it, sl)->name,
			      (unsigned long long)cell, (unsigned long long)tc);
	rc = tf_cellbuf_load(sl->buf, it->s, ws, sl->frag, tile, cell, tc - cell, bytes, err);
	it->held -= had;
	if (rc != TF_OK)
		return rc;
	sl->buf->base = tile * cap;
	it->held += sl->buf->len;
	return compute_keys(it, sl, err);
}

static void warm_ahead(tf_sparse *it, slot *me, uint64_t tile);

/* Load the window holding the slot's position (if not held). */
static tf_status slot_load(tf_sparse *it, slot *sl, tf_workspace *ws, tf_error *err)
{
	uint64_t cap = frag_of(it, sl)->schema->capacity;

	if (tf_cellbuf_has(sl->buf, sl->frag, sl->pos / cap, sl->pos % cap))
		return TF_OK;
	if (sl->pos % cap == 0 && sl->warmed <= sl->pos / cap)
		warm_ahead(it, sl, sl->pos / cap);
	return slot_fetch(it, sl, allowance(it, sl), ws, err);
}

/* Move to the next cell a read at the snapshot's time sees (cells newer
 * than it, in fragments that straddle it, are skipped); a slot at its end
 * leaves the merge. */
static tf_status slot_settle(tf_sparse *it, slot *sl, tf_workspace *ws, tf_error *err)
{
	tf_status rc;

	for (; sl->pos < sl->total; sl->pos++) {
		if ((rc = slot_load(it, sl, ws, err)) != TF_OK || (rc = check_cancel(it, err)) != TF_OK)
			return rc;
		if (!sl->time_filter || cell_timestamp(it, sl, cell_of(sl)) <= tf_snapshot_time(it->s))
			return TF_OK;
	}
	sl->done = true;
	deactivate(it, sl);
	return TF_OK;
}

/*
 * First windows in flight.  From an object store a fragment's first tile
 * costs a round trip or two (its chunk headers, its data), and fragments
 * joining the merge at once were started one after another: the first
 * record of a view of 100 overlapping fragments took 7 s at 20 ms of round
 * trip.  So, reading from a source that keeps requests in flight
 * (tf_source_in_flight), the cell under each joining fragment's position is
 * read first on that many threads (tf_fanout), every field of it: its
 * tile's stored bytes are fetched and its decoded units are in the cache
 * when start() wants them.  The warm-up keeps nothing itself; a failure
 * there is left for start() to meet and report.
 */
#define WARM_VAR_MAX ((uint64_t)64 << 10)	/* a var cell's bytes read ahead, at most */

typedef struct warm_cell {
	uint32_t slot;
	uint64_t tile, cell;
} warm_cell;

typedef struct warm {
	tf_sparse *it;
	const warm_cell *cells;
} warm;

static void warm_col(const tf_col *c, tf_workspace *ws, uint64_t tile, uint64_t cell)
{
	uint64_t starts[2], vbase;
	uint8_t *p, v;

	if (tf_col_missing(c) || tf_col_check_cells(c, tile, cell, 1, NULL) != TF_OK)
		return;
	if (tf_col_var(c)) {
		if (tf_col_var_starts(c, ws, tile, cell, 1, starts, &vbase, false, NULL) == TF_OK &&
		    starts[1] <= WARM_VAR_MAX && (p = malloc(starts[1] ? (size_t)starts[1] : 1))) {
			tf_col_var_bytes(c, ws, tile, vbase, starts[1], p, false, NULL);
			free(p);
		}
	} else if ((p = malloc(tf_col_cell_size(c) ? tf_col_cell_size(c) : 1))) {
		tf_col_fixed(c, ws, tile, cell, 1, p, false, NULL);
		free(p);
	}
	if (tf_col_nullable(c))
		tf_col_validity(c, ws, tile, cell, 1, &v, false, NULL);
}

static bool warm_step(void *ctx, size_t lo, size_t hi, unsigned thread)
{
	warm *w = ctx;
	tf_sparse *it = w->it;
	tf_workspace *ws = tf_workspace_new();

	(void)thread;
	for (size_t i = lo; i < hi && ws; i++) {
		const warm_cell *wc = &w->cells[i];
		const tf_col *c;
		for (size_t k = 0; k < it->nspec; k++)
			if (tf_snapshot_col(it->s, it->slots[wc->slot].frag, it->spec[k].kind, it->spec[k].name, &c,
					    NULL) == TF_OK) {
				warm_col(c, ws, wc->tile, wc->cell);
				tf_snapshot_col_put(it->s, c);
			}
	}
	tf_workspace_free(ws);
	return false;
}

static unsigned warm_threads(const tf_sparse *it)
{
	return tf_source_in_flight(tf_array_source(tf_snapshot_array(it->s)));
}

static void warm_cells(tf_sparse *it, const warm_cell *cells, size_t n)
{
	warm w = { it, cells };
	unsigned threads = warm_threads(it);

	if (threads > 1 && n > 1)
		tf_fanout(n, 1, threads < n ? threads : (unsigned)n, warm_step, &w, NULL);
}

/* Slots [0, n) of batch, about to start, warmed at once. */
static void warm_up(tf_sparse *it, const uint32_t *batch, size_t n)
{
	warm_cell *cells;
	size_t m = 0;

	if (warm_threads(it) <= 1 || n <= 1 || !(cells = calloc(n, sizeof(*cells))))
		return;
	for (size_t i = 0; i < n; i++) {
		slot *sl = &it->slots[batch[i]];
		uint64_t cap = frag_of(it, sl)->schema->capacity;
		if (cap && sl->pos < sl->total) {
			cells[m++] = (warm_cell){ batch[i], sl->pos / cap, sl->pos % cap };
			sl->warmed = sl->pos / cap + 1;
		}
	}
	warm_cells(it, cells, m);
	free(cells);
}

/*
 * The same when a fragment in the merge moves on to its next tile: the
 * fragments beside it whose windows end with the tile before (overlapping
 * fragments run out together, a tile of each after another) have their
 * next tile's first cells read with it, once each (warmed).
 */
static void warm_ahead(tf_sparse *it, slot *me, uint64_t tile)
{
	warm_cell *cells;
	size_t m = 0;

	if (warm_threads(it) <= 1 || !it->nheap || !(cells = calloc(it->nheap + 1, sizeof(*cells))))
		return;
	cells[m++] = (warm_cell){ (uint32_t)(me - it->slots), tile, 0 };
	me->warmed = tile + 1;
	for (size_t i = 0; i < it->nheap; i++) {
		slot *sl = &it->slots[it->heap[i]];
		const tf_snap_frag *f = frag_of(it, sl);
		uint64_t cap = f->schema->capacity, t = cap ? sl->pos / cap : 0;
		if (!cap || sl->warmed > t + 1 || t + 1 >= f->ntiles || !sl->buf->loaded ||
		    sl->buf->first + sl->buf->ncells < tf_frag_tile_cells(f, t))
			continue;	/* not warmed already, and its window ends with its tile */
		cells[m++] = (warm_cell){ it->heap[i], t + 1, 0 };
		sl->warmed = t + 2;
	}
	if (m > 1)
		warm_cells(it, cells, m);
	free(cells);
}

/* Slot s joins the merge (counted in nactive), its window not loaded. */
static tf_status join(tf_sparse *it, size_t s, tf_error *err)
{
	slot *sl = &it->slots[s];
	tf_status rc;

	if (!(sl->buf = calloc(1, sizeof(*sl->buf))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if ((rc = tf_cellbuf_init(sl->buf, it->cache, it->spec, it->nspec, it->extra, err)) != TF_OK) {
		free(sl->buf);
		sl->buf = NULL;
		return rc;
	}
	sl->active = true;
	it->nactive++;
	return TF_OK;
}

/* A joined slot's first window, and its place in the heap. */
static tf_status start(tf_sparse *it, size_t s, tf_workspace *ws, tf_error *err)
{
	slot *sl = &it->slots[s];
	tf_status rc = slot_settle(it, sl, ws, err);

	if (rc == TF_OK && !sl->done)
		heap_push(it, s);
	return rc;
}

/* When fragments join, a window more than twice the even share is read
 * again at that share (from the same cell: the heap's order stands), so
 * that those which had the merge to themselves give room back.  A window
 * is read again only when the fragments in the merge have doubled since it
 * was loaded: a share's worth of bytes per doubling at most. */
static tf_status rebalance(tf_sparse *it, size_t joining, tf_workspace *ws, tf_error *err)
{
	size_t even = it->share / (it->nactive ? it->nactive : 1);

	even = even < WINDOW_MAX ? even : WINDOW_MAX;
	tf_status rc = TF_OK;

	if (it->held + joining * even <= it->share)
		return TF_OK;
	for (size_t i = 0; i < it->nheap && rc == TF_OK; i++) {
		slot *sl = &it->slots[it->heap[i]];
		if (sl->buf->loaded && sl->buf->len > 2 * even)
			rc = slot_fetch(it, sl, even, ws, err);
	}
	return rc;
}

/* Every waiting slot whose corner the merge has reached joins it, all at
 * once (their windows sized for all of them).  With the heap empty the
 * first waiting slot joins alone, with a one-cell window, to say where the
 * merge starts. */
static tf_status admit(tf_sparse *it, tf_workspace *ws, tf_error *err)
{
	size_t n = 0;
	tf_status rc = TF_OK;

	while (rc == TF_OK && it->npend && !it->nheap) {
		size_t s = pop(it, it->pend, &it->npend, pend_less);
		if ((rc = join(it, s, err)) == TF_OK && (rc = slot_fetch(it, &it->slots[s], 1, ws, err)) == TF_OK)
			rc = start(it, s, ws, err);
	}
	while (rc == TF_OK && it->npend && it->nheap && corner_reached(it, it->pend[0], &it->slots[it->heap[0]])) {
		size_t s = pop(it, it->pend, &it->npend, pend_less);
		it->batch[n++] = (uint32_t)s;
		rc = join(it, s, err);
	}
	if (rc == TF_OK && n)
		rc = rebalance(it, n, ws, err);
	if (rc == TF_OK)
		warm_up(it, it->batch, n);
	for (size_t i = 0; i < n && rc == TF_OK; i++)
		rc = start(it, it->batch[i], ws, err);
	return rc;
}

tf_status tf_sparse_seek(tf_sparse *it, tf_workspace *ws, const uint64_t *state, tf_error *err)
{
	size_t n = 0;
	tf_status rc = TF_OK;

	it->nheap = it->npend = 0;
	it->lazy = SIZE_MAX;
	for (size_t i = 0; i < it->nslots; i++)
		deactivate(it, &it->slots[i]);
	for (size_t i = 0; i < it->nslots && rc == TF_OK; i++) {
		slot *sl = &it->slots[i];

		sl->pos = state ? state[i] : 0;
		if (sl->pos > sl->total)
			return tf_err(err, TF_E_INVAL, "cursor past the end of fragment %s", frag_of(it, sl)->name);
		sl->done = sl->pos == sl->total;
		if (sl->done)
			continue;
		/* Hilbert order does not follow the domain's corners: those
		 * join now, all at once. */
		if (!it->hilbert && frag_of(it, sl)->corner)
			push(it, it->pend, &it->npend, i, pend_less);
		else if ((rc = join(it, i, err)) == TF_OK)
			it->batch[n++] = i;
	}
	if (rc == TF_OK)
		warm_up(it, it->batch, n);
	for (size_t i = 0; i < n && rc == TF_OK; i++)
		rc = start(it, it->batch[i], ws, err);
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

void tf_sparse_park(tf_sparse *it)
{
	for (size_t i = 0; i < it->nslots; i++)
		if (it->slots[i].active)
			tf_cellbuf_park(it->slots[i].buf);
	it->cancel = NULL;
}

tf_status tf_sparse_resume(tf_sparse *it, tf_workspace *ws, const tf_cancel *cancel, tf_error *err)
{
	tf_status rc = TF_OK;
	bool reread;

	it->cancel = cancel;
	/* The windows still there first, pinned before any lost one is read
	 * again: reading it evicts what is not pinned (it took all the
	 * others with it, a request after a request). */
	for (size_t i = 0; i < it->nheap; i++)
		tf_cellbuf_retake(it->slots[it->heap[i]].buf);
	for (size_t i = 0; i < it->nslots && rc == TF_OK; i++) {
		slot *sl = &it->slots[i];

		if (!sl->active)
			continue;
		if ((rc = tf_cellbuf_resume(sl->buf, it->s, ws, &reread, err)) == TF_OK && reread)
			rc = compute_keys(it, sl, err);
		/* Lost: load it again (a run's slot: its next cell, which may be
		 * past its end, is settled when merging goes on). */
		if (rc == TF_OK && !sl->buf->loaded && i != it->lazy)
			rc = slot_load(it, sl, ws, err);
	}
	it->held = 0;
	for (size_t i = 0; i < it->nslots; i++)
		if (it->slots[i].active && it->slots[i].buf->loaded)
			it->held += it->slots[i].buf->len;
	return rc;
}

/* ---- deletes ------------------------------------------------------------------------------------ */

/* Whether a read at the snapshot's time no longer sees cell c of the
 * slot's window. */
static bool cell_deleted_at(tf_sparse *it, const slot *sl, uint64_t c)
{
	const tf_snap_frag *f = frag_of(it, sl);
	uint64_t ts = cell_timestamp(it, sl, c);
	const uint8_t *p;
	size_t n;
	bool valid;

	if (f->has_dm) {	/* dt.tdb: deleted at that time (UINT64_MAX: never) */
		tf_cellbuf_get(sl->buf, it->f_dt, c, &p, &n, &valid);
		if (n == 8 && tf_le64(p) <= tf_snapshot_time(it->s))
			return true;
	}
	for (size_t k = 0; k < tf_snapshot_ndeletes(it->s); k++) {
		const tf_snap_delete *d = tf_snapshot_delete(it->s, k);

		if (d->t < f->t1)
			continue;	/* older than the fragment */
		for (size_t j = 0; j < tf_cond_nfields(d->cond); j++) {
			tf_cond_value *v = &it->cvals[j];
			size_t i = it->cond_idx[k][j];

			memset(v, 0, sizeof(*v));
			v->absent = i == SIZE_MAX || sl->buf->f[i].missing;
			if (v->absent)
				continue;
			tf_cellbuf_get(sl->buf, i, c, &v->p, &v->n, &valid);
			v->null = !valid;
			v->type = it->spec[i].field->type;
			v->var = it->spec[i].field->cell_val_num == TF_CELL_VAR;
		}
		if (!tf_cond_keeps(d->cond, it->cvals) && (!f->has_ts || d->t > f->t2 || ts <= d->t))
			return true;
	}
	return false;
}

static bool cell_deleted(tf_sparse *it, const slot *sl)
{
	return cell_deleted_at(it, sl, cell_of(sl));
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

		tf_cellbuf_get(sl->buf, it->out_idx[i], c, &p, &n, &row->valid[i]);
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
	size_t s = heap_pop(it), best_order;	/* order: a slot's index */
	uint64_t best_ts;
	bool best_deleted;
	tf_status rc;

	best_ts = cell_timestamp(it, &it->slots[s], cell_of(&it->slots[s]));
	best_order = s;
	best_deleted = cell_deleted(it, &it->slots[s]);
	if ((rc = copy_row(it, &it->slots[s], row, err)) != TF_OK || (rc = copy_key(it, &it->slots[s], err)) != TF_OK ||
	    (rc = slot_advance(it, s, ws, err)) != TF_OK)
		return rc;
	while (it->nheap && same_as_key(it, &it->slots[it->heap[0]])) {
		slot *sl = &it->slots[heap_pop(it)];
		uint64_t ts = cell_timestamp(it, sl, cell_of(sl));

		if (ts > best_ts || (ts == best_ts && (size_t)(sl - it->slots) > best_order)) {
			best_ts = ts, best_order = (size_t)(sl - it->slots);
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

/* The slot whose run was given takes its place in the heap again, at the
 * cell after what was taken of the run (or leaves the merge). */
static tf_status settle_lazy(tf_sparse *it, tf_workspace *ws, tf_error *err)
{
	slot *sl;
	tf_status rc;

	if (it->lazy == SIZE_MAX)
		return TF_OK;
	sl = &it->slots[it->lazy];
	it->lazy = SIZE_MAX;
	if ((rc = slot_settle(it, sl, ws, err)) != TF_OK)
		return rc;
	if (sl->done)
		heap_pop(it);	/* it is the top */
	else
		sift_down(it, it->heap, it->nheap, 0, heap_less);
	return TF_OK;
}

/* One step of the cell path: the next cell into row (*emitted), or none
 * yet (a deleted cell, a group wholly superseded). */
static tf_status next_cell(tf_sparse *it, tf_workspace *ws, tf_row *row, bool *emitted, tf_error *err)
{
	tf_status rc = TF_OK;
	size_t s;

	if (!it->dups)
		return next_unique(it, ws, row, emitted, err);
	/* Duplicates: every cell, in merge order, unless deleted. */
	s = heap_pop(it);
	*emitted = !cell_deleted(it, &it->slots[s]);
	if (*emitted)
		rc = copy_row(it, &it->slots[s], row, err);
	if (rc == TF_OK)
		rc = slot_advance(it, s, ws, err);
	return rc;
}

tf_status tf_sparse_next(tf_sparse *it, tf_workspace *ws, tf_row *row, bool *end, tf_error *err)
{
	bool emitted = false;
	tf_status rc = settle_lazy(it, ws, err);

	/* A waiting fragment joins before the merge could pass its corner: a
	 * group of equal cells is then whole in the heap. */
	while (rc == TF_OK && !emitted && (rc = admit(it, ws, err)) == TF_OK && it->nheap &&
	       (rc = check_cancel(it, err)) == TF_OK)
		rc = next_cell(it, ws, row, &emitted, err);
	*end = !emitted;
	return rc;
}

/* ---- runs ---------------------------------------------------------------------------------------- */

/*
 * A run: cells of the top slot's window that are the merge's next output
 * cells, one after another, each alone at its coordinates.  Cell c of the
 * window may follow the run when
 *   - it comes before every other merged slot's next cell, its coordinates
 *     strictly less (cells at equal coordinates are left to the cell path,
 *     which orders and deduplicates them);
 *   - no waiting fragment's corner is at or before it (that fragment would
 *     join first: it may hold a cell before or at c's);
 *   - it is not deleted;
 *   - without duplicates: the slot's own next cell is at other coordinates,
 *     known only in the window (the window's last cell, unless it is the
 *     fragment's last, takes the cell path).
 * Slots filtering cells by time take the cell path.  0: the top cell
 * itself is not such a run's first; the cell path takes it.
 */
static uint64_t run_length(tf_sparse *it, const slot *sl)
{
	const slot *other = NULL;
	uint64_t c = cell_of(sl), end = sl->buf->first + sl->buf->ncells, n;

	if (sl->time_filter)
		return 0;
	if (it->nheap > 1)
		other = &it->slots[it->heap[it->nheap > 2 && heap_less(it, it->heap[2], it->heap[1]) ? 2 : 1]];
	for (n = 0; c + n < end; n++) {
		uint64_t k = c + n;

		if (n && other && cmp_coords_at(it, sl, k, other, cell_of(other)) >= 0)
			break;
		if (!n && !it->dups && other && cmp_coords_at(it, sl, k, other, cell_of(other)) == 0)
			break;
		if (n && it->npend && corner_reached_at(it, it->pend[0], sl, k))
			break;
		if (sl->may_delete && cell_deleted_at(it, sl, k))
			break;
		if (!it->dups && (k + 1 < end ? cmp_coords_at(it, sl, k, sl, k + 1) == 0
					       : sl->buf->base + k + 1 < sl->total))
			break;
	}
	return n;
}

size_t tf_sparse_field(const tf_sparse *it, size_t i)
{
	return it->out_idx[i];
}

tf_status tf_sparse_next_run(tf_sparse *it, tf_workspace *ws, tf_row *row, tf_sparse_run *run, bool *end,
			     tf_error *err)
{
	tf_status rc = settle_lazy(it, ws, err);
	bool emitted = false;

	while (rc == TF_OK && !emitted && (rc = admit(it, ws, err)) == TF_OK && it->nheap &&
	       (rc = check_cancel(it, err)) == TF_OK) {
		slot *sl = &it->slots[it->heap[0]];
		uint64_t n = run_length(it, sl);

		if (n) {
			*run = (tf_sparse_run){ sl->buf, cell_of(sl), n };
			it->lazy = it->heap[0];
			it->given = n;
			it->ticks += n - 1;
			sl->pos += n;
			*end = false;
			return TF_OK;
		}
		rc = next_cell(it, ws, row, &emitted, err);
	}
	*run = (tf_sparse_run){ NULL, 0, emitted };
	*end = !emitted;
	return rc;
}

void tf_sparse_took(tf_sparse *it, uint64_t k)
{
	if (it->lazy != SIZE_MAX && k < it->given) {
		it->slots[it->lazy].pos -= it->given - k;
		it->given = k;
	}
}
