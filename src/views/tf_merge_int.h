/*
 * tf_merge_int.h - what the files of the sparse merge share: its limits, a
 * fragment of the merge (merge_slot), the merge's state (struct tf_sparse)
 * and the small accessors of a slot's window.  Included by tf_merge.c (the
 * merge), tf_merge_order.c (the global order), tf_merge_warm.c (first
 * windows in flight) and tf_merge_dense.c (merge_same_tiling: dense and
 * sparse both ask it); nothing else includes it (tf_merge_cells.c, below
 * them all, needs only tf_merge.h).  Functions one file defines for the
 * others are merge_-named.
 */
#ifndef TF_MERGE_INT_H
#define TF_MERGE_INT_H

#include "views/tf_merge.h"
#include "format/tf_array.h"

#define WINDOW_SHARE 8			/* the merge's windows: budget / 8 */
#define WINDOW_MIN ((size_t)64 << 10)	/* ...but this much in a tiny cache */
#define WINDOW_MAX ((size_t)64 << 10)	/* a window, at most: a cache merge_slot */
#define CANCEL_EVERY 4096		/* cells looked at between checks */

/* A fragment of the merge.  Its order is its index in the slots (read
 * order: later is newer). */
typedef struct merge_slot {
	uint64_t total, pos;	/* its cells, and the next one to merge */
	tf_cellbuf *buf;	/* its window, while in the merge (active); its
				 * base: the position of its tile's first cell */
	uint32_t frag;		/* snapshot index */
	bool done, active, time_filter;
	bool may_delete;	/* dt.tdb, or a delete condition as new as it */
	uint64_t warmed;	/* 1 + the last tile merge_warm_ahead read for it (0: none) */
} merge_slot;

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
	merge_slot *slots;
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
static inline const tf_snap_frag *frag_of(const tf_sparse *it, const merge_slot *sl)
{
	return tf_snapshot_frag(it->s, sl->frag);
}

static inline void dim_value(const merge_slot *sl, size_t d, uint64_t c, const uint8_t **p, size_t *n)
{
	bool valid;

	tf_cellbuf_get(sl->buf, d, c, p, n, &valid);
}

/* The slot's next cell: its number in its tile. */
static inline uint64_t cell_of(const merge_slot *sl)
{
	return sl->pos - sl->buf->base;
}

/* The sort keys of cell c of the slot's window: its Hilbert value, or its
 * space tile along each dimension in the order tile order compares them
 * (0 where it skips one), then (it->fast) its coordinates in the order
 * cell order compares them, each as a uint64 of the same order. */
static inline const uint64_t *keys_of(const tf_sparse *it, const merge_slot *sl, uint64_t c)
{
	return (const uint64_t *)(const void *)sl->buf->extra + (c - sl->buf->first) * (it->extra / 8);
}

/* tf_merge_dense.c */
tf_status merge_same_tiling(const tf_schema *newest, const tf_snap_frag *f, tf_error *err);

/* tf_merge_order.c */
int merge_cmp_fixed(tf_datatype t, const uint8_t *a, const uint8_t *b);
int merge_cmp_var(const uint8_t *a, size_t na, const uint8_t *b, size_t nb);
int merge_cmp_values(const tf_sparse *it, const merge_slot *a, uint64_t ca, const merge_slot *b, uint64_t cb);
uint64_t merge_cell_timestamp(const tf_sparse *it, const merge_slot *sl, uint64_t c);
tf_status merge_compute_keys(const tf_sparse *it, merge_slot *sl, tf_error *err);
bool merge_corner_reached_at(tf_sparse *it, size_t w, const merge_slot *a, uint64_t c);
bool merge_corner_reached(tf_sparse *it, size_t w, const merge_slot *a);
bool merge_pend_less(tf_sparse *it, size_t a, size_t b);
/* Whether waiting slots a and b have the same corner. */
bool merge_same_corner(tf_sparse *it, size_t a, size_t b);

/* tf_merge_warm.c */
void merge_warm_up(tf_sparse *it, const uint32_t *batch, size_t n);
void merge_warm_ahead(tf_sparse *it, merge_slot *me, uint64_t tile);

#endif
