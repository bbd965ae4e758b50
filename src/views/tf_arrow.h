/*
 * tf_arrow.h - cells as an Apache Arrow IPC file (the "file" format:
 * format version 5, little-endian, uncompressed): a small writer of the
 * framing and of the flatbuffers tables Arrow's Schema.fbs, Message.fbs and
 * File.fbs describe, nothing more.
 *
 * The file is
 *   "ARROW1\0\0", the Schema message      tf_arrow_file_head
 *   RecordBatch messages                  tf_arrow_put_row / tf_arrow_flush
 *   end-of-stream marker, Footer (the schema again and where each batch
 *   lies), its length (int32), "ARROW1"   tf_arrow_file_tail
 * every message encapsulated: 0xFFFFFFFF, int32 metadata length, the
 * Message flatbuffer padded to 8 bytes, then the body, whose buffers are
 * each padded to 8 bytes.
 *
 * Columns and their Arrow types (one column per TileDB field):
 *   INT8..UINT64             Int(bits, signed)
 *   FLOAT32/64               FloatingPoint(SINGLE/DOUBLE)
 *   BOOL                     Bool (a bitmap; a stored byte not 0 is true)
 *   DATETIME_SEC/MS/US/NS    Timestamp(unit, "UTC")
 *   other DATETIME_*, TIME_* Int(64, signed): Arrow has no such units
 *   CHAR, STRING_ASCII/UTF8,
 *   GEOM_WKT                 Utf8 (the stored bytes; one value per cell)
 *   STRING_UTF16/32, UCS2/4  Utf8 (converted, as cells.csv does)
 *   BLOB, GEOM_WKB, ANY      Binary (one value per cell)
 * A number cell of several values is a FixedSizeList(n) of the number
 * type, of var-sized values a List, its values not nullable, named "item".
 * Every field carries custom metadata "tiledb.datatype" (TileDB's name of
 * its type, "datetime_day").  Nullable columns have a validity bitmap in
 * every batch (null_count exact).
 *
 * Bounds.  A batch is closed when it holds max_cells rows or its buffers
 * max_bytes (checked before each row: a batch overshoots by one row at
 * most), or before a row would take a var-sized column's data (or a list's
 * values) past max_var bytes: so 32-bit offsets (Utf8, Binary, List) always
 * suffice and no batch needs the Large types.  One value past max_var
 * alone is refused (TF_E_UNSUPPORTED, the rows before it written out): it
 * would not fit a batch of bounded memory anyway.
 *
 * Not thread-safe per object; a schema (tf_arrow) is read-only once made
 * and may be shared by batches on many threads.
 */
#ifndef TF_ARROW_H
#define TF_ARROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/tf_bytes.h"
#include "util/tf_datatype.h"
#include "util/tf_status.h"

#define TF_ARROW_CELLS 65536u			/* rows per batch, by default */
#define TF_ARROW_BYTES ((size_t)8 << 20)	/* a batch's buffers, by default */
#define TF_ARROW_VAR_MAX ((uint64_t)INT32_MAX)	/* 32-bit offsets */

typedef struct tf_arrow_col {
	const char *name;
	tf_datatype type;
	uint32_t cell_val_num;	/* TF_CELL_VAR for var-sized */
	bool nullable;
} tf_arrow_col;

typedef struct tf_arrow_limits {
	uint32_t max_cells;
	size_t max_bytes;
	uint64_t max_var;	/* at most TF_ARROW_VAR_MAX; tests set less */
} tf_arrow_limits;

/* The schema: columns copied (names too).  lim NULL: the defaults. */
typedef struct tf_arrow tf_arrow;
tf_status tf_arrow_new(const tf_arrow_col *cols, size_t ncols, const tf_arrow_limits *lim, tf_arrow **out,
		       tf_error *err);
void tf_arrow_free(tf_arrow *a);

/* Append the file's head (magic, schema message) to out. */
tf_status tf_arrow_file_head(const tf_arrow *a, tf_buf *out, tf_error *err);

/* Where a record batch lies in the file (File.fbs Block). */
typedef struct tf_arrow_block {
	uint64_t offset;	/* of its message, from the file's start */
	uint32_t meta;		/* prefix and padded metadata */
	uint64_t body;
} tf_arrow_block;

/* Append the file's tail (end of stream, footer listing the n blocks,
 * footer length, magic) to out. */
tf_status tf_arrow_file_tail(const tf_arrow *a, const tf_arrow_block *blocks, size_t n, tf_buf *out,
			     tf_error *err);

/* ---- a record batch being built ------------------------------------------------------------ */

typedef struct tf_arrow_batch tf_arrow_batch;
tf_status tf_arrow_batch_new(const tf_arrow *a, tf_arrow_batch **out, tf_error *err);
void tf_arrow_batch_free(tf_arrow_batch *b);

/* One cell of a row: n bytes at p, as TileDB stores it (a fixed cell is
 * cell_val_num values); valid false: null (p unread). */
typedef struct tf_arrow_cell {
	const uint8_t *p;
	size_t n;
	bool valid;
} tf_arrow_cell;

/*
 * Add a row (one cell per column).  If the row would take a var-sized
 * column past max_var, the batch held is written to out first (as
 * tf_arrow_flush) and the row starts the next.  A cell whose size does not
 * match its column's is TF_E_CORRUPT; the batch is as before the row.
 */
tf_status tf_arrow_put_row(tf_arrow_batch *b, const tf_arrow_cell *row, tf_buf *out, tf_error *err);
/* Drop the rows held and the blocks not taken (after a failure). */
void tf_arrow_batch_clear(tf_arrow_batch *b);
/* Give back the buffers of an empty batch (between requests: an idle view
 * keeps none); it grows them again when next given rows. */
void tf_arrow_batch_release(tf_arrow_batch *b);
/* Bytes its buffers hold now. */
size_t tf_arrow_batch_held(const tf_arrow_batch *b);
/*
 * Whether a has no var-sized column, and then n rows at once, column by
 * column: data[i] holds column i's n cells back to back, valid[i] (NULL:
 * all valid; else a byte per cell, 0 for null) their validity.  A dense
 * array's cells go so, without the cost of a call per cell.  On failure
 * the batch is emptied.
 */
bool tf_arrow_columnar(const tf_arrow *a);
tf_status tf_arrow_put_rows(tf_arrow_batch *b, size_t n, const uint8_t *const *data, const uint8_t *const *valid,
			    tf_error *err);
/*
 * Whether every column of a takes spans: numbers of fixed size and bytes
 * not converted (no Bool, List, UTF-16/32); then tf_arrow_put_span adds
 * rows from n cells per column at once: column i's data holds n cells of
 * `size` bytes back to back (fixed), or its cells' bytes, cell k from
 * starts[k] to starts[k + 1] (var); valid (NULL: all valid) a byte per
 * cell, 0 for null.  It adds rows as tf_arrow_put_row one at a time
 * while the batch is not full (tf_arrow_batch_full, asked before each
 * row), the same bytes: *taken says how many (0 if it is full).  A cell
 * size other than its column's is TF_E_CORRUPT, nothing added; on another
 * failure the batch is emptied.
 */
typedef struct tf_arrow_span {
	const uint8_t *data;
	const uint64_t *starts;
	const uint8_t *valid;
	size_t size;
} tf_arrow_span;
bool tf_arrow_spannable(const tf_arrow *a);
tf_status tf_arrow_put_span(tf_arrow_batch *b, size_t n, const tf_arrow_span *cols, tf_buf *out, size_t *taken,
			    tf_error *err);
/* Whether the batch is full (max_cells rows, or max_bytes). */
bool tf_arrow_batch_full(const tf_arrow_batch *b);
uint32_t tf_arrow_batch_rows(const tf_arrow_batch *b);
/* Append the batch's RecordBatch message to out (nothing if it is empty)
 * and start an empty one. */
tf_status tf_arrow_flush(tf_arrow_batch *b, tf_buf *out, tf_error *err);
/*
 * The messages written since the last call, as blocks whose offset is
 * where each starts in its out buffer (plus nothing: the caller adds where
 * that buffer lies in the file); *n of them, valid until the next call.
 */
const tf_arrow_block *tf_arrow_take_blocks(tf_arrow_batch *b, size_t *n);

#endif
