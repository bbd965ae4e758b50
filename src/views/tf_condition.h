/*
 * tf_condition.h - delete conditions (__commits/NAME.del): the stored tree
 * and its value for one cell.
 *
 * TileDB stores a delete's condition NEGATED: the tree says which cells to
 * KEEP (corpus/extra README; deletes_and_updates/serialization.cc):
 *   node  = u8 type (0 expression, 1 value)
 *   value = u8 op (LT LE GT GE EQ NE IN NOT_IN), u32 + field name,
 *           u64 + value bytes, and for IN / NOT_IN u64 + u64 offsets of the
 *           members within the value bytes
 *   expr  = u8 combination (AND, OR, NOT), u64 n, n nodes
 * A value node compares the cell's value with TileDB's rules
 * (query_condition.cc, BinaryCmpNullChecks): numbers as their type, strings
 * and blobs bytewise (a shorter prefix first); a null cell satisfies only
 * NE of a non-null value and EQ of a null (empty) value; IN / NOT_IN match
 * the cell's bytes; a field the cell's fragment does not have fails.
 * A parsed condition is read-only data, safe to share.
 */
#ifndef TF_CONDITION_H
#define TF_CONDITION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/tf_bytes.h"
#include "util/tf_datatype.h"
#include "util/tf_status.h"

typedef struct tf_cond tf_cond;

tf_status tf_cond_parse(tf_span payload, tf_cond **out, tf_error *err);
void tf_cond_free(tf_cond *c);

/* The fields the condition names, each once, indexed 0..n-1. */
size_t tf_cond_nfields(const tf_cond *c);
const char *tf_cond_field(const tf_cond *c, size_t i);

/* One field's value in the cell being tested. */
typedef struct tf_cond_value {
	tf_datatype type;
	bool var;		/* var-sized: compared as bytes if a string type */
	bool absent;		/* the cell's fragment has no such field */
	bool null;
	const uint8_t *p;
	size_t n;
} tf_cond_value;

/* Whether the cell is KEPT; values[i] is field i's value. */
bool tf_cond_keeps(const tf_cond *c, const tf_cond_value *values);

#endif
