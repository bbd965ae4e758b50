/*
 * tf_datatype.h - TileDB datatypes: on-disk ids, names, sizes, classes.
 * Values and sizes: FORMAT.md §1.3 (tiledb/sm/enums/datatype.h).
 */
#ifndef TF_DATATYPE_H
#define TF_DATATYPE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum tf_datatype {
	TF_DT_INT32 = 0, TF_DT_INT64 = 1, TF_DT_FLOAT32 = 2, TF_DT_FLOAT64 = 3,
	TF_DT_CHAR = 4, TF_DT_INT8 = 5, TF_DT_UINT8 = 6, TF_DT_INT16 = 7,
	TF_DT_UINT16 = 8, TF_DT_UINT32 = 9, TF_DT_UINT64 = 10,
	TF_DT_STRING_ASCII = 11, TF_DT_STRING_UTF8 = 12, TF_DT_STRING_UTF16 = 13,
	TF_DT_STRING_UTF32 = 14, TF_DT_STRING_UCS2 = 15, TF_DT_STRING_UCS4 = 16,
	TF_DT_ANY = 17,
	TF_DT_DATETIME_YEAR = 18,	/* ... through DATETIME_AS = 30 */
	TF_DT_DATETIME_AS = 30,
	TF_DT_TIME_HR = 31,		/* ... through TIME_AS = 39 */
	TF_DT_TIME_AS = 39,
	TF_DT_BLOB = 40, TF_DT_BOOL = 41, TF_DT_GEOM_WKB = 42, TF_DT_GEOM_WKT = 43,
	TF_DT_COUNT = 44
} tf_datatype;

/* cell_val_num value that marks a var-sized field. */
#define TF_CELL_VAR 0xFFFFFFFFu

bool tf_datatype_valid(unsigned v);
/* Element size in bytes (1, 2, 4 or 8); 0 for an invalid id. */
unsigned tf_datatype_size(tf_datatype t);
/* Lower-case TileDB name ("int32", "string_ascii", "datetime_ms", ...). */
const char *tf_datatype_name(tf_datatype t);
/* Parse a name, case-insensitively; false if unknown. */
bool tf_datatype_parse(const char *name, tf_datatype *out);

bool tf_datatype_is_integer(tf_datatype t);	/* BOOL, INT8..UINT64 */
bool tf_datatype_is_signed(tf_datatype t);	/* INT8/16/32/64 */
bool tf_datatype_is_datetime(tf_datatype t);	/* DATETIME_* and TIME_* */
bool tf_datatype_is_real(tf_datatype t);	/* FLOAT32/64 */
bool tf_datatype_is_var_string(tf_datatype t);	/* STRING_ASCII, STRING_UTF8 */

#endif
