/*
 * tf_cells.h - cells as text (CSV) and as NumPy arrays: the text rules of
 * the array views (tilefs(1), "Views").
 *
 * CSV (RFC 4180): fields separated by ',', records ended by "\n"; a field
 * is quoted ("...", inner '"' doubled) when it holds ',', '"', CR or LF, or
 * is empty but not null.  Per value:
 *   - integers in decimal; BOOL as 0/1;
 *   - FLOAT32/64 in the shortest form that parses back to the same value
 *     ("%.Ng" for the smallest N that round-trips), nan, inf, -inf;
 *   - CHAR, STRING_ASCII, STRING_UTF8 as their bytes; STRING_UTF16/UCS2
 *     and UTF32/UCS4 converted to UTF-8;
 *   - BLOB, GEOM_WKB and ANY as lower-case hex; GEOM_WKT as text;
 *   - DATETIME_* in ISO 8601 UTC at the unit's precision, as NumPy's
 *     datetime_as_string(..., timezone='UTC') writes them (2019-04-14,
 *     2019-04-14T13Z, 2019-04-14T13:45:10.123Z; the year as "%04d" of the
 *     signed year: 0042, -221, 10183); TIME_* as [-]HH[:MM[:SS[.fff...]]]
 *     at the unit's precision (hours may exceed 23); INT64_MIN in either is
 *     NaT, as in NumPy;
 *   - a cell of several values (cell_val_num > 1, or var-sized numbers)
 *     is one field, values separated by single spaces; strings and blobs
 *     are one value whatever their length;
 *   - a null cell is an empty field, an empty (not null) cell is "";
 *   - an attribute with an enumeration shows the enumeration's value at
 *     the cell's index, in the enumeration's type; an index with no value
 *     gives an empty field (as pandas shows NaN).
 * Nothing here keeps state: every function is thread-safe.
 */
#ifndef TF_CELLS_H
#define TF_CELLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/tf_bytes.h"
#include "util/tf_datatype.h"
#include "util/tf_status.h"

/* An enumeration's values (__schema/__enumerations/ payload, FORMAT
 * corpus/extra README): u32 version, u32+name, u32+path, u8 type, u32
 * cell_val_num, u8 ordered, u64 size + data, var: u64 size + u64 offsets. */
typedef struct tf_enum tf_enum;
tf_status tf_enum_parse(tf_span payload, tf_enum **out, tf_error *err);
void tf_enum_free(tf_enum *e);
size_t tf_enum_count(const tf_enum *e);

/* How a field's cells become text. */
typedef struct tf_cellfmt {
	tf_datatype type;
	uint32_t cell_val_num;		/* TF_CELL_VAR for var-sized */
	const tf_enum *enumeration;	/* NULL: none */
} tf_cellfmt;

/* An enumeration's values' type (enumeration NULL), and the value at a
 * cell's index (f->enumeration set): false if the index has none. */
tf_cellfmt tf_enum_valfmt(const tf_enum *e);
bool tf_enum_value(const tf_cellfmt *f, const uint8_t *p, size_t n, const uint8_t **v, size_t *vn);
/* Append UTF-16/UCS-2 (w 2) or UTF-32/UCS-4 (w 4) little-endian code
 * units as UTF-8, as cells.csv shows them. */
tf_status tf_utf8_append_wide(tf_buf *out, const uint8_t *p, size_t n, unsigned w, tf_error *err);

/* Append the CSV field of one cell of n bytes at p (a fixed cell is
 * cell_val_num values); valid = false: a null cell (nothing appended). */
tf_status tf_cell_format(tf_buf *out, const tf_cellfmt *f, const uint8_t *p, size_t n, bool valid,
			 tf_error *err);
/* Append text as one CSV field, quoted where RFC 4180 needs it. */
tf_status tf_csv_text(tf_buf *out, const void *p, size_t n, tf_error *err);

/* Shortest round-trip decimal forms; buf holds at least 32 bytes.  Return
 * the length written (no terminator needed by callers, one is written). */
size_t tf_fmt_f64(char *buf, double v);
size_t tf_fmt_f32(char *buf, float v);
/* A DATETIME_* or TIME_* value as text (buf of at least 48 bytes). */
size_t tf_fmt_datetime(char *buf, tf_datatype t, int64_t v);

/*
 * NumPy: the dtype descr of a fixed-size field ("<i4", "|S8", "<M8[ms]",
 * ...) into buf; *inner receives the size of an extra last axis (1: none)
 * for cells of several numbers.  False if the type has no NumPy form.
 */
bool tf_npy_dtype(tf_datatype t, uint32_t cell_val_num, char *buf, size_t n, uint32_t *inner);
/* The shape as NumPy prints it: "(100, 60)", "(1024,)", into buf[n] (cut
 * short if it does not fit); returns the length it needs.  Any shape of up
 * to 65 axes (a view's: 64 dimensions and cells of several numbers) fits
 * TF_NPY_SHAPE_MAX bytes. */
#define TF_NPY_SHAPE_MAX 1536
size_t tf_npy_shape_text(const uint64_t *shape, size_t ndim, char *buf, size_t n);
/* A NumPy format 1.0 header (magic, version, length, dict, padding to 64
 * bytes, '\n') for C-order data of dtype descr and shape. */
tf_status tf_npy_header(const char *descr, const uint64_t *shape, size_t ndim, tf_buf *out,
			tf_error *err);

#endif
