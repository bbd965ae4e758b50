/*
 * tf_merge_cells.c - the cells of fragments' tiles, and windows of
 * consecutive cells of one tile (tf_cellbuf) copied out of the decoded units
 * into cache entries of their own (see tf_merge.c for why windows).
 */
#include "views/tf_merge.h"

#include <stdlib.h>
#include <string.h>

#include "format/tf_array.h"

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
			bf->lazy = b->spec[i].lazy && !bf->missing && !bf->var;	/* var: sized by its offsets */
		}
	return cols;
}

/* Whether field i is read at the load (not left to tf_cellbuf_complete). */
static bool eager(const tf_cellbuf *b, size_t i)
{
	return !b->f[i].missing && !b->f[i].lazy;
}

/* Whether the window has lazy fields, left unread by a load. */
static bool any_lazy(const tf_cellbuf *b)
{
	for (size_t i = 0; i < b->nfields; i++)
		if (b->f[i].lazy)
			return true;
	return false;
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
		if (bf->lazy) {	/* its room zeroed until tf_cellbuf_complete reads it */
			if (bf->nullable)
				memset(dst + bf->valid_at, 0, (size_t)ALIGN8(n));
			memset(dst + bf->data_at, 0, (size_t)ALIGN8(n * bf->cell_size));
		}
		if (!eager(b, i))
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
	if (n > TF_TILE_BYTES_LIMIT / 8)
		n = TF_TILE_BYTES_LIMIT / 8;
	for (size_t i = 0; i < b->nfields; i++)
		b->f[i].vlen = 0;
	/* The cells the schema or footer claims must be in the tile, as its
	 * stored chunk headers say, before anything is sized by their number. */
	rc = TF_OK;
	for (size_t i = 0; i < b->nfields && rc == TF_OK; i++)
		if (!b->f[i].lazy)	/* a lazy one's: when it is read */
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
			b->pending = any_lazy(b);
			point(b);
		}
	}
	put_cols(s, cols, b->nfields);
	free(vbase);
	drop_scratch(b);
	return rc;
}

tf_status tf_cellbuf_complete(tf_cellbuf *b, tf_snapshot *s, tf_workspace *ws, tf_error *err)
{
	uint8_t *dst = b->e ? (uint8_t *)(uintptr_t)tf_cache_data(b->e) : NULL;	/* ours alone: (owner, seq) */
	const tf_col *c;
	tf_status rc = TF_OK;

	if (!b->loaded || !b->pending || !dst)
		return TF_OK;
	for (size_t i = 0; i < b->nfields && rc == TF_OK; i++) {
		const tf_cellbuf_field *bf = &b->f[i];
		if (!bf->lazy)
			continue;
		if ((rc = tf_snapshot_col(s, b->frag, b->spec[i].kind, b->spec[i].name, &c, err)) != TF_OK)
			break;
		/* the column as the load saw it: its room was laid out for that */
		if (tf_col_missing(c) || tf_col_var(c) || tf_col_nullable(c) != bf->nullable ||
		    tf_col_cell_size(c) != bf->cell_size)
			rc = tf_err(err, TF_E_STALE, "fragment %s, field %s: changed under a window",
				    tf_snapshot_frag(s, b->frag)->name, b->spec[i].name);
		if (rc == TF_OK)
			rc = tf_col_check_cells(c, b->tile, b->first, b->ncells, err);
		if (rc == TF_OK && bf->nullable)
			rc = tf_col_validity(c, ws, b->tile, b->first, b->ncells, dst + bf->valid_at, true, err);
		if (rc == TF_OK)
			rc = tf_col_fixed(c, ws, b->tile, b->first, b->ncells, dst + bf->data_at, true, err);
		tf_snapshot_col_put(s, c);
	}
	b->pending = rc != TF_OK;
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
		b->pending = any_lazy(b);	/* read again when asked */
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
