/*
 * tf_view_int.h - what the files of the array views share: their limits, the
 * CSV state (csv), the matrices, the views of one array state (tf_views) and
 * one open view (tf_view).  Included by tf_view.c (the tree and its paths),
 * tf_view_rows.c (CSV text from cells), tf_view_index.c (reading a CSV at
 * any offset), tf_view_csv.c (CSV states) and tf_view_matrix.c (.raw, .npy);
 * nothing else includes it.  Functions one file defines for the others are
 * view_-named.
 */
#ifndef TF_VIEW_INT_H
#define TF_VIEW_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "views/tf_view.h"
#include "views/tf_arrow.h"
#include "views/tf_cells.h"
#include "cache/tf_index.h"
#include "views/tf_merge.h"
#include "views/tf_snapshot.h"

/* CSV text per indexed block: a block ends at the first record past it, so
 * it fits a piece of twice this, 64 KiB: a cache slot (tf_cache), as decoded
 * units are.  Pieces of 256 KiB came from malloc while units came from the
 * slabs, and each kept its high water: a full pass over 300 fragments grew
 * the daemon to the budget twice over. */
#define BLOCK_TARGET ((size_t)32 << 10)
#define DENSE_BATCH 1024			/* dense cells gathered at once */
#define CANCEL_ROWS 1024			/* rows formatted between cancel checks */
#define INDEX_MIN ((size_t)4 << 10)		/* a CSV's index may hold budget / 64, this at least */
#define WINDOW_PART 8				/* a fragment's window: budget / 8, */
#define WINDOW_MAX ((size_t)64 << 10)		/* 64 KiB at most (a cache slot: tf_merge.c) */
#define SIZE_CELLS_MAX ((uint64_t)1 << 32)	/* a CSV of more cells is not sized at open */
#define IDLE_FRAG_CSVS 64			/* fragments' CSV states kept when closed */
#define CSV_NAME "cells.csv"
#define ARROW_NAME "cells.arrow"
#define ARROW_BATCH_MIN ((size_t)64 << 10)	/* a batch's bytes: budget / 8, at least this */
#define COLUMNAR_MAX 130			/* columns a dense cells.arrow takes a column at a time */
/* Bumped whenever the text rules change (tf_cells.c, this file): sizes
 * remembered of older text are then stale. */
#define CSV_TEXT_VERSION 1
#define CLAIM_UNASKED UINT64_MAX		/* remembered sizes: not asked the store yet */
#define CLAIM_NONE (UINT64_MAX - 1)		/* it had none (or one found wrong) */
#define FRAGMENTS "fragments"

typedef enum { CSV_ARRAY_DENSE, CSV_ARRAY_SPARSE, CSV_FRAG_DENSE, CSV_FRAG_SPARSE } csv_kind;

typedef struct column {
	tf_fieldspec spec;
	tf_cellfmt fmt;
} column;

/* Cells of one field gathered for a batch of dense cells. */
typedef struct gathered {
	tf_buf data;
	uint64_t *starts;	/* var: n + 1 */
	uint8_t *valid;
	size_t cap;		/* cells starts/valid hold */
} gathered;

/* What formatting needs between calls: iterators and scratch.  Between
 * requests (view_prod_end) it holds no scratch and no pinned window: the
 * iterators' windows are cache entries the cache may take back. */
typedef struct producer {
	tf_sparse *it;		/* sparse array */
	uint64_t at;		/* the extender's: the text offset it stands at */
	bool warm;		/* ...if this is set (then it needs no state) */
	tf_row row;
	tf_cellbuf buf;		/* per fragment */
	gathered *g;		/* dense array: one per attribute */
	tf_run *runs;
	size_t nruns, runcap;
	const tf_cancel *cancel;	/* this request's */
	size_t rows;		/* formatted: the cancel is asked every CANCEL_ROWS */
	bool ready;
	tf_arrow_batch *batch;	/* cells.arrow: the record batch being built, */
	tf_arrow_cell *cells;	/* the row's cells, */
	uint8_t (*small)[8];	/* and copies of the small ones (coordinates) */
	uint8_t *coords;	/* columnar: DENSE_BATCH coordinates per dimension */
	tf_arrow_span *spans;	/* c->spans: a run's columns, */
	size_t *fidx;		/* and the window's field of each (tf_sparse_field) */
} producer;

/*
 * A CSV's index: entries (text offset, merge state) from which formatting
 * can start, the first at 0 and the last at the frontier (all the text
 * formatted so far ends there).  The text between two entries, a segment,
 * is served in pieces of up to 2 x target bytes, each a cache entry keyed
 * by the index's level and where it starts; a piece missing is formatted
 * again from its segment's entry.  States are stored as varints.
 *
 * Bounded: when the index holds more than `limit` bytes (a 64th of the
 * budget, 4 KiB at least), every other entry goes (the first and the
 * frontier stay) and the level goes up: the pieces of the old segments are
 * left to drift out of the cache.  A dense CSV's entry costs ~21 bytes, so
 * a 64 MiB cache indexes 6 GB of text before thinning once; a read deep in
 * a thinned stretch formats at most the segment before it, 2^level blocks.
 * An endless CSV (a dense box of 2^62 cells) grew its index by 0.4 MB per
 * GB read before, without bound.
 */
typedef struct csv {
	tf_views *v;		/* owner (not a reference) */
	csv_kind kind;
	size_t frag;		/* per-fragment views */
	const tf_schema *schema;
	column *cols;
	size_t ncols, ndims;
	tf_fieldspec *specs;	/* what is read: per kind, see csv_new */
	size_t nspecs;
	tf_buf header;
	size_t S;		/* u64s in a state */
	size_t target;		/* text per block: BLOCK_TARGET, less in a small cache */
	size_t piece;		/* text per cache entry: 2 x target */
	uint64_t owner;		/* cache owner of the formatted pieces */
	pthread_mutex_t lock;	/* guards the index */
	uint64_t *off;		/* nent entries' text offsets (after the header) */
	size_t *sat;		/* nent + 1: where each entry's state starts in st */
	uint8_t *st;		/* the states, varints back to back */
	size_t nent, ecap, stcap;
	unsigned level;		/* times thinned */
	size_t limit;		/* bytes the index may hold */
	size_t charged;		/* its memory, charged to the cache's budget */
	bool complete;
	/* A size remembered from an earlier mount (tf_views_set_store), the
	 * file's size until the text proves it (reaching it, or failing to). */
	bool claimed, proved;
	uint64_t claim;
	uint64_t final;		/* its size, remembered from an earlier state (or UINT64_MAX) */
	int users;		/* open views (under the owner's lock) */
	struct csv *idle_prev, *idle_next;	/* a fragment's, idle: on the owner's idle list */
	/* cells.arrow (arrow set): the same cells as record batches; the
	 * header is the file's head, and once complete the tail follows the
	 * last block (tf_arrow.h) */
	bool arrow;
	bool columnar;		/* a dense array's cells given column by column */
	bool spans;		/* a sparse array's runs of cells so too (tf_arrow_put_span) */
	tf_arrow *ar;
	tf_arrow_block *blocks;	/* every batch written, for the footer */
	size_t nblocks, bcap;
	tf_buf tail;
	tf_buf block;		/* the extender's (under ext) */
	size_t scratch;		/* what it and its batch hold, while views have the state open */
	pthread_mutex_t ext;	/* one thread extends the index at a time */
	producer prod;		/* the extender's (under ext) */
} csv;

typedef struct matrix {
	const tf_field *attr;
	char name[300];		/* "<attr>" */
	char dtype[40];
	uint64_t shape[65];
	size_t nshape;
	unsigned cs;		/* bytes per cell (at most TF_CELL_BYTES_MAX) */
	uint64_t raw;		/* bytes of the cells, when sized */
	bool sized;		/* the .npy (header and cells) fits an off_t:
				 * else both views show size 0 and do not open */
	tf_buf npy;		/* the .npy header */
} matrix;

struct tf_views {
	atomic_int refs;
	tf_snapshot *s;
	/* Dense arrays: resolved on first need (it reads every fragment's
	 * metadata; looking the views folder up, or a sparse array's, must
	 * not), under dense_lock, then fixed. */
	pthread_mutex_t dense_lock;
	atomic_bool dense_tried;
	tf_dense *dense;	/* dense arrays whose fragments are all dense */
	tf_error dense_err;
	matrix *mats;
	size_t nmats;
	pthread_mutex_t lock;	/* guards the CSV states below */
	csv *array_csv;
	csv **frag_csv;		/* per snapshot fragment; made on first need */
	/* CSV sizes remembered across mounts (under lock): the store, the
	 * array's identity there, the state's key (made on first need) */
	tf_index *store;
	char *store_id;
	bool state_made, persist;
	tf_version state;
	uint64_t array_claim;	/* CLAIM_* or the size */
	uint64_t *frag_claim;	/* per fragment, made on first need */
	uint64_t array_arrow_claim;	/* the same of cells.arrow */
	uint64_t *frag_arrow_claim;
	uint64_t *frag_size;	/* per fragment: its CSV's size once known, or UINT64_MAX */
	csv *array_arrow;	/* the same as cells.arrow */
	csv **frag_arrow;
	uint64_t *frag_arrow_size;
	csv *idle_head, *idle_tail;	/* fragments' CSV states no view has open, oldest first */
	size_t nidle;
};

typedef enum { V_CSV, V_RAW, V_NPY } view_kind;

struct tf_view {
	tf_views *v;
	view_kind kind;
	csv *c;
	const matrix *m;
	bool kept;	/* tf_view_set_kept */
};

/* tf_view_rows.c */
tf_status view_make_header(csv *c, tf_error *err);
tf_status view_prod_init(csv *c, producer *p, const tf_cancel *cancel, tf_error *err);
void view_prod_free(csv *c, producer *p);
tf_status view_prod_begin(csv *c, producer *p, tf_workspace *ws, const tf_cancel *cancel, tf_error *err);
void view_prod_end(csv *c, producer *p);
const tf_snap_frag *view_csv_frag(const csv *c);
tf_status view_produce(csv *c, producer *p, tf_workspace *ws, const uint64_t *in, tf_buf *text,
		       uint64_t *out, bool *end, tf_error *err);

/* tf_view_index.c */
size_t view_index_bytes(const csv *c);
void view_index_charge(csv *c);
tf_status view_append_entry(csv *c, uint64_t at, const uint64_t *state, tf_error *err);
uint64_t view_frontier(const csv *c);
tf_status view_extend_one(csv *c, tf_workspace *ws, const tf_cancel *cancel, bool offer, tf_error *err);
bool view_remembered(tf_views *v, size_t frag, bool arrow, uint64_t *size);
tf_status view_csv_read(csv *c, tf_workspace *ws, uint64_t off, size_t len, uint8_t *dst, size_t *got,
			bool kept, const tf_cancel *cancel, tf_error *err);

/* tf_view_csv.c */
void view_csv_free(csv *c);
tf_status view_get_csv(tf_views *v, size_t frag, bool arrow, csv **out, tf_error *err);
csv *view_evict_idle(tf_views *v);
void view_put_csv(tf_views *v, csv *c);
bool view_csv_size(csv *c, uint64_t *size);
tf_status view_csv_cells_bound(csv *c, const tf_cancel *cancel, uint64_t *n, tf_error *err);
tf_status view_csv_complete(csv *c, tf_workspace *ws, const tf_cancel *cancel, tf_error *err);

/* tf_view_matrix.c */
uint64_t view_raw_size(const matrix *m);
uint64_t view_npy_size(const matrix *m);
tf_status view_raw_read(tf_views *v, const matrix *m, tf_workspace *ws, uint64_t off, size_t len,
			uint8_t *dst, size_t *got, tf_error *err);
tf_dense *view_dense(tf_views *v);

#endif
