/*
 * tf_merge_warm.c - first windows in flight: the cells under joining
 * fragments' positions read ahead on several threads (tf_fanout).
 */
#include "views/tf_merge_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/tf_fanout.h"

/*
 * First windows in flight.  From an object store a fragment's first tile
 * costs a round trip or two (its chunk headers, its data), and fragments
 * joining the merge at once were started one after another: the first
 * record of a view of 100 overlapping fragments took 7 s at 20 ms of round
 * trip.  So, reading from a source that keeps requests in flight
 * (tf_source_in_flight), the cell under each joining fragment's position is
 * read first on that many threads (tf_fanout), every field the merge
 * looks at (not the lazy ones, read for the cells given only): its
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
			if (!it->spec[k].lazy && tf_snapshot_col(it->s, it->slots[wc->slot].frag, it->spec[k].kind, it->spec[k].name, &c,
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
void merge_warm_up(tf_sparse *it, const uint32_t *batch, size_t n)
{
	warm_cell *cells;
	size_t m = 0;

	if (warm_threads(it) <= 1 || n <= 1 || !(cells = calloc(n, sizeof(*cells))))
		return;
	for (size_t i = 0; i < n; i++) {
		merge_slot *sl = &it->slots[batch[i]];
		uint64_t cap = frag_of(it, sl)->schema->capacity;
		if (cap && sl->pos < sl->total && sl->warmed <= sl->pos / cap) {	/* not warmed already */
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
void merge_warm_ahead(tf_sparse *it, merge_slot *me, uint64_t tile)
{
	warm_cell *cells;
	size_t m = 0;

	if (warm_threads(it) <= 1 || !it->nheap || !(cells = calloc(it->nheap + 1, sizeof(*cells))))
		return;
	cells[m++] = (warm_cell){ (uint32_t)(me - it->slots), tile, 0 };
	me->warmed = tile + 1;
	for (size_t i = 0; i < it->nheap; i++) {
		merge_slot *sl = &it->slots[it->heap[i]];
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
