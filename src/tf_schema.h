/*
 * tf_schema.h - a TileDB array schema: the payload of the schema's
 * generic tile (FORMAT-NOTES §7), every format version from 1 on.
 *
 * What tilefs needs from it: each attribute's and dimension's datatype,
 * cell_val_num, nullability and pipeline; the coords, offsets and validity
 * pipelines; dense or sparse, capacity and tile extents (cells per tile).
 * A parsed schema is plain read-only data.
 */
#ifndef TF_SCHEMA_H
#define TF_SCHEMA_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tf_bytes.h"
#include "tf_pipeline.h"
#include "tf_status.h"

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

/* Parse a schema payload (the decoded generic tile). */
tf_status tf_schema_parse(tf_span payload, tf_schema **out, tf_error *err);
void tf_schema_free(tf_schema *s);

/* The pipeline of a dimension's tiles: its own, or the coords pipeline when
 * it has none (§7.4, dimension.cc). */
const tf_pipeline *tf_schema_dim_filters(const tf_schema *s, const tf_field *dim);
/* Cells in a dense tile: the product of the tile extents; 0 if unknown. */
uint64_t tf_schema_dense_tile_cells(const tf_schema *s);
/* An attribute by name, or NULL. */
const tf_field *tf_schema_attr(const tf_schema *s, const char *name);
/* The file (under __schema/__enumerations/) of enumeration `name`, or NULL. */
const char *tf_schema_enum_path(const tf_schema *s, const char *name);
/* A readable description: domain, dimensions, attributes, pipelines. */
void tf_schema_print(const tf_schema *s, FILE *out);

/* Largest format version whose layouts this reader knows. */
#define TF_FORMAT_VERSION_MAX 23

#endif
