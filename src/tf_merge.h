/*
 * tf_merge.h - the cells a TileDB read returns, from the fragments of a
 * snapshot: dense arrays cell by cell in row-major order over the
 * non-empty domain, sparse arrays merged in global order.
 *
 * Dense (dense_reader.cc): the non-empty domain is the box covering every
 * visible fragment's; each cell comes from the newest fragment whose
 * non-empty domain holds it (later in read order wins), or is the fill
 * value.  A dense fragment stores whole space tiles in tile order, cells in
 * cell order (FORMAT-NOTES, corpus README); tf_dense_runs maps a range of
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

#include "tf_snapshot.h"

/* A field to read: what tf_snapshot_col takes, and its fill value. */
typedef struct tf_fieldspec {
	tf_col_kind kind;
	const char *name;
	const tf_field *field;		/* the newest schema's field (NULL: specials) */
} tf_fieldspec;

/* ---- one tile's cells of some fields ---------------------------------------------------- */

typedef struct tf_cellbuf_field {
	const tf_col *col;
	bool missing, var;		/* of col, kept at hand */
	unsigned cell_size;
	tf_buf data;			/* fixed values, or var bytes */
	uint64_t *starts;		/* var: ncells + 1 */
	uint8_t *valid;			/* nullable: ncells */
	bool nullable;			/* else every cell is valid (no byte each) */
} tf_cellbuf_field;

typedef struct tf_cellbuf {
	size_t frag;			/* snapshot fragment index */
	uint64_t tile, ncells;
	bool loaded;
	size_t nfields;
	const tf_fieldspec *spec;
	tf_cellbuf_field *f;
} tf_cellbuf;

tf_status tf_cellbuf_init(tf_cellbuf *b, const tf_fieldspec *spec, size_t nfields, tf_error *err);
void tf_cellbuf_free(tf_cellbuf *b);
/* Load every field of tile `tile` (of ncells cells) of fragment frag. */
tf_status tf_cellbuf_load(tf_cellbuf *b, tf_snapshot *s, tf_workspace *ws, size_t frag,
			  uint64_t tile, uint64_t ncells, tf_error *err);
/* Field i of cell c: bytes and validity (the fill value where missing). */
void tf_cellbuf_get(const tf_cellbuf *b, size_t i, uint64_t c, const uint8_t **p, size_t *n,
		    bool *valid);

/* Cells of tile t of a visible or listed fragment. */
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

/* Merge the visible fragments, giving `out` fields of each cell (the
 * dimensions are always read; conditions and timestamps as needed).
 * TF_E_UNSUPPORTED unless the array is sparse. */
tf_status tf_sparse_open(tf_snapshot *s, const tf_fieldspec *out, size_t nout, tf_sparse **it,
			 tf_error *err);
void tf_sparse_free(tf_sparse *it);
/* Where the merge stands: one cursor per merged fragment. */
size_t tf_sparse_state_len(const tf_sparse *it);
void tf_sparse_get_state(const tf_sparse *it, uint64_t *state);
/* Resume from a state (NULL: the beginning). */
tf_status tf_sparse_seek(tf_sparse *it, tf_workspace *ws, const uint64_t *state, tf_error *err);

/* The next cell: its output fields copied out.  *end at the end. */
typedef struct tf_row {
	size_t nfields;
	tf_buf bytes;
	size_t *off, *len;
	bool *valid;
} tf_row;
tf_status tf_sparse_next(tf_sparse *it, tf_workspace *ws, tf_row *row, bool *end, tf_error *err);
tf_status tf_row_init(tf_row *r, size_t nfields, tf_error *err);
void tf_row_free(tf_row *r);

/* Hilbert order (hilbert.h, hilbert_order.cc): a coordinate of dimension
 * d mapped to `bits` bits (bits = 63 / dimensions), and the index of n
 * mapped coordinates (x is overwritten). */
uint64_t tf_hilbert_coord(const tf_field *d, const uint8_t *p, size_t n, int bits);
uint64_t tf_hilbert_index(uint64_t *x, size_t n, int bits);

#endif
