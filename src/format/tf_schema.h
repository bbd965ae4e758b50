/*
 * tf_schema.h - a TileDB array schema: the payload of the schema's
 * generic tile (FORMAT.md §7), every format version from 1 on.
 *
 * What tilefs needs from it: each attribute's and dimension's datatype,
 * cell_val_num, nullability and pipeline; the coords, offsets and validity
 * pipelines; dense or sparse, capacity and tile extents (cells per tile).
 * A parsed schema is plain read-only data.
 *
 * What TileDB never writes is refused (TF_E_CORRUPT), so that every reader
 * may divide by an extent and size buffers by a cell: a parsed schema has
 *   - dimensions of one value per cell, or var-sized; a fixed-size one has
 *     a domain of its type's two values, lower <= upper (reals finite), and
 *     any tile extent is positive (reals: finite);
 *   - attributes of at least one value per cell; a fixed-size cell is at
 *     most TF_CELL_BYTES_MAX bytes and, from format 6 on (which stores the
 *     fill value), exactly its fill value's size: the stored bytes hold one
 *     such cell.
 */
#ifndef TF_SCHEMA_H
#define TF_SCHEMA_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util/tf_bytes.h"
#include "format/tf_pipeline.h"
#include "util/tf_status.h"

typedef struct tf_field {
	char *name;
	tf_datatype type;
	uint32_t cell_val_num;		/* TF_CELL_VAR for var-sized */
	bool nullable;
	tf_pipeline *filters;		/* as stored; see tf_schema_dim_filters */
	/* dimensions only */
	uint8_t domain[16];		/* lower ‖ upper bound, fixed-size dims */
	bool has_extent;
	uint8_t extent[8];		/* tile extent, sizeof(type) bytes */
	/* attributes only: the fill value a read gives for cells no fragment
	 * wrote (as stored from format 6 on, else TileDB's default for the
	 * type), its validity (format >= 7), the enumeration (format >= 20) */
	uint8_t *fill;
	uint64_t fill_size;
	bool fill_valid;
	char *enumeration;		/* NULL: none */
} tf_field;

/* An enumeration the schema names: its name and file under
 * __schema/__enumerations/ (format >= 20). */
typedef struct tf_enum_ref {
	char *name, *path;
} tf_enum_ref;

typedef struct tf_schema {
	uint32_t version;		/* as stored (UINT32_MAX: an experimental build) */
	uint32_t layout_version;	/* the version whose layout parsed it */
	bool dense, allows_dups;
	uint8_t tile_order, cell_order;
	uint64_t capacity;
	tf_pipeline *coords, *offsets, *validity;
	size_t nattrs, ndims;
	tf_field *attrs, *dims;
	size_t nenums;			/* enumerations named (format >= 20) */
	tf_enum_ref *enums;		/* nenums of them */
} tf_schema;

/* The largest fixed-size cell: TileDB never splits a cell between chunks,
 * and no chunk decodes to more. */
#define TF_CELL_BYTES_MAX TF_MAX_CHUNK_BYTES

/* Parse a schema payload (the decoded generic tile). */
tf_status tf_schema_parse(tf_span payload, tf_schema **out, tf_error *err);
void tf_schema_free(tf_schema *s);

/* The pipeline of a dimension's tiles: its own, or the coords pipeline when
 * it has none (§7.4, dimension.cc). */
const tf_pipeline *tf_schema_dim_filters(const tf_schema *s, const tf_field *dim);
/* Cells in a dense tile: the product of the tile extents; 0 if unknown. */
uint64_t tf_schema_dense_tile_cells(const tf_schema *s);
/* A dimension's tile extent in cells (integer and date/time dimensions;
 * 0 for a real or var-sized one, or one without an extent). */
uint64_t tf_schema_dim_extent(const tf_field *d);
/* Bytes of one fixed-size cell of a field (cell_val_num values of its
 * type; a dimension's one value); 0 if var-sized. */
uint64_t tf_field_cell_bytes(const tf_field *f);
/* Whether two schemas lay cells out in space tiles alike: the same
 * dimensions (names, types, domains, extents), tile and cell order.  If
 * not, why[n] says the first difference. */
bool tf_schema_same_tiling(const tf_schema *a, const tf_schema *b, char *why, size_t n);
/* An attribute by name, or NULL. */
const tf_field *tf_schema_attr(const tf_schema *s, const char *name);
/* The file (under __schema/__enumerations/) of enumeration `name`, or NULL. */
const char *tf_schema_enum_path(const tf_schema *s, const char *name);
/* A readable description: domain, dimensions, attributes, pipelines. */
void tf_schema_print(const tf_schema *s, FILE *out);

/* Largest format version whose layouts this reader knows. */
#define TF_FORMAT_VERSION_MAX 23

#endif
