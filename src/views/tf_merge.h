/*
 * tf_merge.h - the cells a TileDB read returns, from the fragments of a
 * snapshot: dense arrays cell by cell in row-major order over the
 * non-empty domain, sparse arrays merged in global order.
 *
 * Dense (dense_reader.cc): the non-empty domain is the box covering every
 * visible fragment's; each cell comes from the newest fragment whose
 * non-empty domain holds it (later in read order wins), or is the fill
 * value.  A dense fragment stores whole space tiles in tile order, cells in
 * cell order (FORMAT.md §5.4, §14); tf_dense_runs maps a range of
 * output cells to runs of stored cells.
 *
 * Sparse (sparse_global_order_reader.cc, comparators.h): every visible
 * fragment's cells, in global order: space tiles in tile order then cell
 * order (dimensions without a tile extent, and string dimensions, only by
 * cell order; strings bytewise, a shorter prefix first), or Hilbert order
 * (Hilbert value, then the coordinates row-major).  Equal coordinates:
 *   - duplicates allowed: all cells, the newest fragment's first, each
 *     fragment's in storage order;
 *   - no duplicates: only the newest cell (the greatest cell timestamp -
 *     t.tdb, else the fragment's start - then the later fragment).
 * Then deletes: a cell whose delete timestamp (dt.tdb) is at or before the
 * snapshot time is gone, and each delete condition with a timestamp at or
 * after the fragment's start removes the cells it matches that are not
 * newer than it (reader_base.cc generate_timestamped_conditions); for no
 * duplicates this happens after choosing the newest cell, so an older
 * version never reappears.
 */
#ifndef TF_MERGE_H
#define TF_MERGE_H

#include <stdbool.h>
#include <stdint.h>

#include "views/tf_snapshot.h"

/* A field to read: what tf_snapshot_col takes, and its fill value. */
typedef struct tf_fieldspec {
	tf_col_kind kind;
	const char *name;
	const tf_field *field;		/* the newest schema's field (NULL: specials) */
	bool lazy;			/* a window reads it only when asked (tf_cellbuf_complete) */
} tf_fieldspec;

/* ---- a window of one tile's cells, held in the cache --------------------------------------- */

/*
 * Some consecutive cells of one tile of one fragment, every field wanted,
 * copied out of the decoded units into one cache entry of their own (so
 * charged to the budget like any decoded bytes).  The window is pinned
 * while its holder reads it; parked between requests it is an ordinary
 * entry the cache may evict, and resuming reads it again, identically, if
 * it was.  A load takes as many cells as fit the bytes it is given (one at
 * least): a tile of a million cells is read a window at a time.
 */
/* Bytes a window's cells, a row or a key may take, at most. */
#define TF_TILE_BYTES_LIMIT ((size_t)4 << 30)

typedef struct tf_cellbuf_field {
	bool missing, var;		/* of the column, kept at hand */
	unsigned cell_size;
	bool nullable;			/* else every cell is valid (no byte each) */
	size_t valid_at, data_at, starts_at;	/* where its parts lie in the window */
	uint64_t vlen;			/* var bytes of the window's cells */
	bool lazy;			/* read by tf_cellbuf_complete (fixed-size fields only) */
	const uint8_t *valid, *data;	/* while pinned (valid: nullable only) */
	const uint64_t *starts;		/* var: ncells + 1, from 0 */
} tf_cellbuf_field;

typedef struct tf_cellbuf {
	tf_cache *cache;
	uint64_t owner, seq;		/* the window's cache key is (owner, seq) */
	tf_cache_entry *e;		/* pinned, or NULL (parked, or none) */
	uint32_t len;			/* bytes of the window */
	size_t frag;			/* snapshot fragment index */
	uint64_t tile, first, ncells;	/* cells [first, first + ncells) of the tile */
	uint64_t base;			/* the holder's, as it likes */
	bool loaded;
	bool pending;			/* its lazy fields not read yet */
	size_t nfields, extra_size;	/* extra: bytes per cell left to the holder */
	uint8_t *extra;			/* while pinned: ncells * extra_size, 8-aligned */
	const tf_fieldspec *spec;
	tf_cellbuf_field *f;
	uint64_t *scratch;		/* var offsets, to size a window */
	size_t scap;
} tf_cellbuf;

tf_status tf_cellbuf_init(tf_cellbuf *b, tf_cache *cache, const tf_fieldspec *spec, size_t nfields,
			  size_t extra_size, tf_error *err);
void tf_cellbuf_free(tf_cellbuf *b);
/* Load cells from cell `first` of tile `tile` of fragment frag (loaded),
 * at most max_cells and as many as fit max_bytes (one at least), in place
 * of the window held; it comes back pinned. */
tf_status tf_cellbuf_load(tf_cellbuf *b, tf_snapshot *s, tf_workspace *ws, size_t frag, uint64_t tile,
			  uint64_t first, uint64_t max_cells, size_t max_bytes, tf_error *err);
/* The window's lazy fields (spec[i].lazy, fixed-size: their room is kept
 * at the load) read, if not yet: a merge reads the coordinates of every
 * fragment's window and the other fields only of windows whose cells it
 * gives (from an object store, a round trip per fragment's attribute tile
 * saved where newer fragments supersede older ones' cells). */
tf_status tf_cellbuf_complete(tf_cellbuf *b, tf_snapshot *s, tf_workspace *ws, tf_error *err);
/* Whether the window holds cell `cell` of tile `tile` of fragment frag. */
bool tf_cellbuf_has(const tf_cellbuf *b, size_t frag, uint64_t tile, uint64_t cell);
/* Unpin the window: the cache may evict it.  Resume pins it again, read
 * anew if it was evicted (*reread: the extra bytes are gone too). */
void tf_cellbuf_park(tf_cellbuf *b);
tf_status tf_cellbuf_resume(tf_cellbuf *b, tf_snapshot *s, tf_workspace *ws, bool *reread, tf_error *err);
/* Pin the window again if the cache still has it (nothing else): true if
 * it did (or it is pinned, or there is none to pin). */
bool tf_cellbuf_retake(tf_cellbuf *b);
/* Field i of cell c of the tile (held by the pinned window): bytes and
 * validity (the fill value where missing). */
void tf_cellbuf_get(const tf_cellbuf *b, size_t i, uint64_t c, const uint8_t **p, size_t *n,
		    bool *valid);

/* Cells of tile t of a fragment (loaded). */
uint64_t tf_frag_tile_cells(const tf_snap_frag *f, uint64_t t);
/* All cells of a sparse fragment (TF_E_CORRUPT if its counts overflow). */
tf_status tf_frag_sparse_cells(const tf_snap_frag *f, uint64_t *total, tf_error *err);

/* ---- dense ------------------------------------------------------------------------------- */

typedef struct tf_dense tf_dense;

/* A run of output cells: n cells of tile `tile` of fragment `frag` from
 * cell `cell`, `stride` apart; frag == SIZE_MAX: n fill cells. */
typedef struct tf_run {
	size_t frag;
	uint64_t tile, cell, n, stride;
} tf_run;

/* TF_E_UNSUPPORTED unless the array is dense with dense fragments. */
tf_status tf_dense_open(tf_snapshot *s, tf_dense **out, tf_error *err);
void tf_dense_free(tf_dense *d);
uint64_t tf_dense_ncells(const tf_dense *d);
size_t tf_dense_ndims(const tf_dense *d);
const uint64_t *tf_dense_shape(const tf_dense *d);
/* Dimension dim's value at output cell c, in the dimension's type. */
void tf_dense_coord(const tf_dense *d, uint64_t c, size_t dim, uint8_t *out);
/* The box's first offsets (from the domain start), and output cell c's. */
const uint64_t *tf_dense_lo(const tf_dense *d);
void tf_dense_offsets(const tf_dense *d, uint64_t c, uint64_t *x);
/* Runs covering output cells [c0, c0 + n), in order, into *runs (grown;
 * *nruns set). */
tf_status tf_dense_runs(const tf_dense *d, uint64_t c0, uint64_t n, tf_run **runs, size_t *nruns,
			size_t *cap, tf_error *err);

/* ---- sparse ----------------------------------------------------------------------------- */

typedef struct tf_sparse tf_sparse;

/*
 * Merge the visible fragments, giving `out` fields of each cell (the
 * dimensions are always read; conditions and timestamps as needed).
 * TF_E_UNSUPPORTED unless the array is sparse.  Reads every visible
 * fragment's metadata (cancellable).
 *
 * Memory: fragments join the merge when it reaches the lower corner of
 * their non-empty domain (fragments written one after another are merged
 * a few at a time, whatever their number), and each fragment merged holds
 * one window of cells (tf_cellbuf), their bytes together a share of the
 * cache's budget (tf_merge.c says how much, and why).
 */
tf_status tf_sparse_open(tf_snapshot *s, const tf_fieldspec *out, size_t nout, const tf_cancel *cancel,
			 tf_sparse **it, tf_error *err);
void tf_sparse_free(tf_sparse *it);
/* Where the merge stands: one cursor per merged fragment. */
size_t tf_sparse_state_len(const tf_sparse *it);
void tf_sparse_get_state(const tf_sparse *it, uint64_t *state);
/* Resume from a state (NULL: the beginning); pins what it loads. */
tf_status tf_sparse_seek(tf_sparse *it, tf_workspace *ws, const uint64_t *state, tf_error *err);
/* Between requests: unpin every window (the cache may evict them), and
 * pin them again before the next tf_sparse_next (read anew if evicted). */
void tf_sparse_park(tf_sparse *it);
tf_status tf_sparse_resume(tf_sparse *it, tf_workspace *ws, const tf_cancel *cancel, tf_error *err);
/* Bytes of the windows held now, for tests. */
size_t tf_sparse_held(const tf_sparse *it);

/* The next cell: its output fields copied out.  *end at the end. */
typedef struct tf_row {
	size_t nfields;
	tf_buf bytes;
	size_t *off, *len;
	bool *valid;
} tf_row;
tf_status tf_sparse_next(tf_sparse *it, tf_workspace *ws, tf_row *row, bool *end, tf_error *err);
tf_status tf_row_init(tf_row *r, size_t nfields, tf_error *err);

/*
 * The next cells as a run where it can: n consecutive cells of one
 * fragment's window (buf, pinned until the next call into the merge;
 * output field i is its field tf_sparse_field(it, i), read with
 * tf_cellbuf_get or its pointers), each the merge's next output cell and
 * alone at its coordinates, so that a reader copies them a column at a
 * time; else (buf NULL, n 1) one cell copied into row, as tf_sparse_next
 * gives it.  Then tf_sparse_took may say that only the first k cells of
 * the run were used: the next call gives the others again.  The same
 * cells, in the same order, as tf_sparse_next; either may follow the
 * other.
 */
typedef struct tf_sparse_run {
	const tf_cellbuf *buf;
	uint64_t first, n;	/* cells [first, first + n) of the window's tile */
} tf_sparse_run;
tf_status tf_sparse_next_run(tf_sparse *it, tf_workspace *ws, tf_row *row, tf_sparse_run *run, bool *end,
			     tf_error *err);
void tf_sparse_took(tf_sparse *it, uint64_t k);
size_t tf_sparse_field(const tf_sparse *it, size_t i);
void tf_row_free(tf_row *r);

/* Hilbert order (hilbert.h, hilbert_order.cc): a coordinate of dimension
 * d mapped to `bits` bits (bits = 63 / dimensions), and the index of n
 * mapped coordinates (x is overwritten). */
uint64_t tf_hilbert_coord(const tf_field *d, const uint8_t *p, size_t n, int bits);
uint64_t tf_hilbert_index(uint64_t *x, size_t n, int bits);

#endif
