/*
 * tf_merge.c - the sparse global-order merge (see tf_merge.h for the TileDB
 * rules followed): its fragments' slots, the heaps, the windows of the
 * slots, deletes, and the merged cells and runs.  The other parts: windows of
 * cells (tf_merge_cells.c), dense resolution (tf_merge_dense.c), the order
 * (tf_merge_order.c), first windows in flight (tf_merge_warm.c).
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
#include "views/tf_merge_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* Outputs the merge never looks at (no dimension, no condition's field,
 * not t or dt) are read only for the windows whose cells are given
 * (tf_cellbuf_complete): 100 fragments writing the same cells had every
 * fragment's attribute tile fetched for the newest one's cells. */
static void mark_lazy(tf_sparse *it, size_t ndel)
{
	for (size_t i = 0; i < it->nout; i++) {
		size_t k = it->out_idx[i];
		bool used = k < it->ndims || k == it->f_ts || k == it->f_dt;

		for (size_t d = 0; d < ndel && !used; d++)
			for (size_t j = 0; j < tf_cond_nfields(tf_snapshot_delete(it->s, d)->cond) && !used; j++)
				used = it->cond_idx[d][j] == k;
		it->spec[k].lazy = !used;
	}
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
	mark_lazy(it, ndel);
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
		merge_slot *sl = &it->slots[it->nslots];
		size_t frag = tf_snapshot_visible(it->s, k);
		const tf_snap_frag *f = tf_snapshot_frag(it->s, frag);

		if ((rc = tf_snapshot_load(it->s, frag, err)) != TF_OK)
			return rc;
		if (f->dense)
			return tf_err(err, TF_E_UNSUPPORTED, "fragment %s of a sparse array is dense", f->name);
		/* Its coordinates are compared as the newest schema's dimensions. */
		if ((rc = merge_same_tiling(it->schema, f, err)) != TF_OK)
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
	it->charged = (nv + 1) * (sizeof(merge_slot) + 3 * sizeof(uint32_t));
	tf_cache_charge(it->cache, (ptrdiff_t)it->charged);
	return rc;
}

tf_status tf_row_init(tf_row *r, size_t nfields, tf_error *err)
{
	memset(r, 0, sizeof(*r));
	tf_buf_init(&r->bytes, TF_TILE_BYTES_LIMIT);
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
	tf_buf_init(&it->key, TF_TILE_BYTES_LIMIT);
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

static void deactivate(tf_sparse *it, merge_slot *sl)
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

/* ---- the order of two cells (the rest: tf_merge_order.c) ---------------------------------- */

/* Global order of cell ca of slot a's window and cell cb of b's
 * (global_order_compare, HilbertCmp): <0 if a's comes first.  The sort
 * keys first: space tiles, or the Hilbert value; they are the whole
 * order where it->fast (the merge's every step compares cells). */
static inline int cmp_coords_at(const tf_sparse *it, const merge_slot *a, uint64_t ca, const merge_slot *b, uint64_t cb)
{
	const uint64_t *ka = keys_of(it, a, ca), *kb = keys_of(it, b, cb);
	size_t nk = it->hilbert ? 1 : it->fast ? 2 * it->ndims : it->ndims;

	for (size_t k = 0; k < nk; k++)
		if (ka[k] != kb[k])
			return ka[k] < kb[k] ? -1 : 1;
	return it->fast ? 0 : merge_cmp_values(it, a, ca, b, cb);
}

/* The same of the slots' next cells. */
static int cmp_coords(const tf_sparse *it, const merge_slot *a, const merge_slot *b)
{
	return cmp_coords_at(it, a, cell_of(a), b, cell_of(b));
}

/* The merge order of two slots' current cells: coordinates, then (no
 * duplicates) the newer cell first, then the later fragment (GlobalCmp
 * with use_timestamps / strict_ordering). */
static int cmp_slots(const tf_sparse *it, const merge_slot *a, const merge_slot *b)
{
	int r = cmp_coords(it, a, b);
	uint64_t ta, tb;

	if (r)
		return r;
	if (!it->dups) {
		ta = merge_cell_timestamp(it, a, cell_of(a)), tb = merge_cell_timestamp(it, b, cell_of(b));
		if (ta != tb)
			return ta > tb ? -1 : 1;
	}
	return a > b ? -1 : a < b ? 1 : 0;	/* slots are in read order */
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
static size_t allowance(const tf_sparse *it, const merge_slot *sl)
{
	size_t mine = sl->buf->loaded ? sl->buf->len : 0, others = it->held - mine;
	size_t even = it->share / (it->nactive ? it->nactive : 1), left = it->share > others ? it->share - others : 0;

	even = even < WINDOW_MAX ? even : WINDOW_MAX;
	return even < left ? even : left;
}

/* A window from the slot's position, of `bytes` at most. */
static tf_status slot_fetch(tf_sparse *it, merge_slot *sl, size_t bytes, tf_workspace *ws, tf_error *err)
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
	return merge_compute_keys(it, sl, err);
}

/* Load the window holding the slot's position (if not held). */
static tf_status slot_load(tf_sparse *it, merge_slot *sl, tf_workspace *ws, tf_error *err)
{
	uint64_t cap = frag_of(it, sl)->schema->capacity;

	if (tf_cellbuf_has(sl->buf, sl->frag, sl->pos / cap, sl->pos % cap))
		return TF_OK;
	if (sl->pos % cap == 0 && sl->warmed <= sl->pos / cap)
		merge_warm_ahead(it, sl, sl->pos / cap);
	return slot_fetch(it, sl, allowance(it, sl), ws, err);
}

/* Move to the next cell a read at the snapshot's time sees (cells newer
 * than it, in fragments that straddle it, are skipped); a slot at its end
 * leaves the merge. */
static tf_status slot_settle(tf_sparse *it, merge_slot *sl, tf_workspace *ws, tf_error *err)
{
	tf_status rc;

	for (; sl->pos < sl->total; sl->pos++) {
		if ((rc = slot_load(it, sl, ws, err)) != TF_OK || (rc = check_cancel(it, err)) != TF_OK)
			return rc;
		if (!sl->time_filter || merge_cell_timestamp(it, sl, cell_of(sl)) <= tf_snapshot_time(it->s))
			return TF_OK;
	}
	sl->done = true;
	deactivate(it, sl);
	return TF_OK;
}

/* Slot s joins the merge (counted in nactive), its window not loaded. */
static tf_status join(tf_sparse *it, size_t s, tf_error *err)
{
	merge_slot *sl = &it->slots[s];
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
	merge_slot *sl = &it->slots[s];
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
		merge_slot *sl = &it->slots[it->heap[i]];
		if (sl->buf->loaded && sl->buf->len > 2 * even)
			rc = slot_fetch(it, sl, even, ws, err);
	}
	return rc;
}

/* Slot s, about to join alone, warmed with the waiting slots whose
 * corner is the same as its own: they join right after it (its first cell
 * is at or past their corner), and a merge of fragments writing the same
 * cells read its first one's tile alone, a round trip before the others.
 * They stay waiting; it->batch is scratch here. */
static void warm_tied(tf_sparse *it, size_t s)
{
	size_t n = 0;

	it->batch[n++] = (uint32_t)s;
	while (it->npend && merge_same_corner(it, s, it->pend[0]))
		it->batch[n++] = (uint32_t)pop(it, it->pend, &it->npend, merge_pend_less);
	for (size_t i = 1; i < n; i++)
		push(it, it->pend, &it->npend, it->batch[i], merge_pend_less);
	merge_warm_up(it, it->batch, n);
}

/* Every waiting slot whose corner the merge has reached joins it, all at
 * once (their windows sized for all of them).  With the heap empty the
 * first waiting slot joins alone, with a one-cell window, to say where the
 * merge starts (warm_tied). */
static tf_status admit(tf_sparse *it, tf_workspace *ws, tf_error *err)
{
	size_t n = 0;
	tf_status rc = TF_OK;

	while (rc == TF_OK && it->npend && !it->nheap) {
		size_t s = pop(it, it->pend, &it->npend, merge_pend_less);
		warm_tied(it, s);
		if ((rc = join(it, s, err)) == TF_OK && (rc = slot_fetch(it, &it->slots[s], 1, ws, err)) == TF_OK)
			rc = start(it, s, ws, err);
	}
	while (rc == TF_OK && it->npend && it->nheap && merge_corner_reached(it, it->pend[0], &it->slots[it->heap[0]])) {
		size_t s = pop(it, it->pend, &it->npend, merge_pend_less);
		it->batch[n++] = (uint32_t)s;
		rc = join(it, s, err);
	}
	if (rc == TF_OK && n)
		rc = rebalance(it, n, ws, err);
	if (rc == TF_OK)
		merge_warm_up(it, it->batch, n);
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
		merge_slot *sl = &it->slots[i];

		sl->pos = state ? state[i] : 0;
		sl->warmed = 0;
		if (sl->pos > sl->total)
			return tf_err(err, TF_E_INVAL, "cursor past the end of fragment %s", frag_of(it, sl)->name);
		sl->done = sl->pos == sl->total;
		if (sl->done)
			continue;
		/* Hilbert order does not follow the domain's corners: those
		 * join now, all at once. */
		if (!it->hilbert && frag_of(it, sl)->corner)
			push(it, it->pend, &it->npend, i, merge_pend_less);
		else if ((rc = join(it, i, err)) == TF_OK)
			it->batch[n++] = i;
	}
	if (rc == TF_OK)
		merge_warm_up(it, it->batch, n);
	for (size_t i = 0; i < n && rc == TF_OK; i++)
		rc = start(it, it->batch[i], ws, err);
	return rc;
}

static tf_status slot_advance(tf_sparse *it, size_t s, tf_workspace *ws, tf_error *err)
{
	merge_slot *sl = &it->slots[s];
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
		merge_slot *sl = &it->slots[i];

		if (!sl->active)
			continue;
		if ((rc = tf_cellbuf_resume(sl->buf, it->s, ws, &reread, err)) == TF_OK && reread)
			rc = merge_compute_keys(it, sl, err);
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
static bool cell_deleted_at(tf_sparse *it, const merge_slot *sl, uint64_t c)
{
	const tf_snap_frag *f = frag_of(it, sl);
	uint64_t ts = merge_cell_timestamp(it, sl, c);
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

static bool cell_deleted(tf_sparse *it, const merge_slot *sl)
{
	return cell_deleted_at(it, sl, cell_of(sl));
}

/* ---- the merge ----------------------------------------------------------------------------------- */

static tf_status copy_row(const tf_sparse *it, const merge_slot *sl, tf_row *row, tf_error *err)
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

/* The slot's current cell given: its window's lazy fields read, then copied. */
static tf_status emit_row(tf_sparse *it, merge_slot *sl, tf_workspace *ws, tf_row *row, tf_error *err)
{
	tf_status rc = tf_cellbuf_complete(sl->buf, it->s, ws, err);

	return rc == TF_OK ? copy_row(it, sl, row, err) : rc;
}

static tf_status copy_key(tf_sparse *it, const merge_slot *sl, tf_error *err)
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

static bool same_as_key(const tf_sparse *it, const merge_slot *sl)
{
	const uint8_t *p;
	size_t n;

	for (size_t d = 0; d < it->ndims; d++) {
		const tf_field *fd = &it->schema->dims[d];
		const uint8_t *k = it->key.p + it->keyoff[d];

		dim_value(sl, d, cell_of(sl), &p, &n);
		if (fd->cell_val_num == TF_CELL_VAR ? merge_cmp_var(p, n, k, it->keylen[d]) != 0
						     : merge_cmp_fixed(fd->type, p, k) != 0)
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

	best_ts = merge_cell_timestamp(it, &it->slots[s], cell_of(&it->slots[s]));
	best_order = s;
	best_deleted = cell_deleted(it, &it->slots[s]);
	if ((rc = emit_row(it, &it->slots[s], ws, row, err)) != TF_OK || (rc = copy_key(it, &it->slots[s], err)) != TF_OK ||
	    (rc = slot_advance(it, s, ws, err)) != TF_OK)
		return rc;
	while (it->nheap && same_as_key(it, &it->slots[it->heap[0]])) {
		merge_slot *sl = &it->slots[heap_pop(it)];
		uint64_t ts = merge_cell_timestamp(it, sl, cell_of(sl));

		if (ts > best_ts || (ts == best_ts && (size_t)(sl - it->slots) > best_order)) {
			best_ts = ts, best_order = (size_t)(sl - it->slots);
			best_deleted = cell_deleted(it, sl);
			if ((rc = emit_row(it, sl, ws, row, err)) != TF_OK)
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
	merge_slot *sl;
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
		rc = emit_row(it, &it->slots[s], ws, row, err);
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
static uint64_t run_length(tf_sparse *it, const merge_slot *sl)
{
	const merge_slot *other = NULL;
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
		if (n && it->npend && merge_corner_reached_at(it, it->pend[0], sl, k))
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
		merge_slot *sl = &it->slots[it->heap[0]];
		uint64_t n = run_length(it, sl);

		if (n && (rc = tf_cellbuf_complete(sl->buf, it->s, ws, err)) != TF_OK)
			break;
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
